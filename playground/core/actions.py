"""Action matching: whether a proposed action is one an env lists, fills one of its templates, and its kind.

Envs list admissible actions (`info["admissible_actions"]`), some as templates `verb[...]` that any non-empty
argument fills (`search[...]`), and give each a kind (`info["action_kinds"]`, one of `ACTION_KINDS` of
`playground.core.env`). These functions compare actions to those lists ignoring case and extra spaces, so
env-agnostic plugins and agents judge actions without knowing an env's verbs.
"""

from __future__ import annotations

from typing import Mapping

TEMPLATE_ARGUMENT = "[...]"


def _key(text: str) -> str:
    return " ".join(str(text).split()).lower()


def match_admissible(action: str, admissible) -> str | None:
    """Return the admissible command `action` names, ignoring case and extra spaces, or None.

    An action that fills a template `verb[...]` is returned as written.
    """
    found = {_key(a): a for a in admissible}.get(_key(action))
    if found is not None and not is_template(found):
        return found
    return action if any(fills_template(action, a) for a in admissible if is_template(a)) else None


def is_admissible(action: str, admissible) -> bool:
    """True when `action` is one of `admissible` or fills one of its templates."""
    return match_admissible(action, admissible) is not None


def env_accepts(action: str, admissible, schema_problems, admissible_complete: bool = True) -> bool | None:
    """Whether the env will accept `action`, as far as what it tells the agent says; None where it cannot say.

    False when the env's check (`check_action`) found problems with it; True when it is
    admissible, or when the env's check passed it and there is no complete list to contradict
    it (no list, or a cut: `admissible_complete` False); False when a complete list leaves it
    out; None where the env has neither a complete list nor a check.
    """
    if schema_problems:
        return False
    if admissible is not None and is_admissible(action, admissible):
        return True
    if schema_problems is not None and (admissible is None or not admissible_complete):
        return True
    if admissible is not None and admissible_complete:
        return False
    return None


def is_template(action: str) -> bool:
    """True for a template action such as `search[...]`."""
    return action.endswith(TEMPLATE_ARGUMENT) and len(action) > len(TEMPLATE_ARGUMENT)


def fills_template(action: str, template: str) -> bool:
    """True when `action` is `template`'s verb with a non-empty argument in brackets."""
    verb = _key(template[: -len(TEMPLATE_ARGUMENT)])
    text = " ".join(action.split())
    return (text.lower().startswith(verb + "[") and text.endswith("]")
            and bool(text[len(verb) + 1:-1].strip()) and text[len(verb) + 1:-1].strip() != "...")


def kind_of(action: str, action_kinds: Mapping[str, str]) -> str:
    """The kind the env's `action_kinds` gives `action` (directly or through a template), or ""."""
    for admissible, kind in action_kinds.items():
        if _key(admissible) == _key(action) or (is_template(admissible) and fills_template(action, admissible)):
            return kind
    return ""


COMMAND_VERB_KINDS: dict[str, str] = {
    **dict.fromkeys(("look", "l", "inventory", "i", "examine", "x", "check", "read"), "look"),
    "go": "move",
    **dict.fromkeys(("open", "close", "lock", "unlock"), "access"),
    "take": "take",
    **dict.fromkeys(("eat", "drink"), "consume"),
    **dict.fromkeys(("drop", "put", "insert", "move", "use", "cook", "heat", "cool", "clean", "slice", "chop", "dice",
                     "toggle", "prepare"), "use"),
}


def command_kinds(actions, verbs: Mapping[str, str] = COMMAND_VERB_KINDS, default: str = "other") -> dict[str, str]:
    """Kinds of text-adventure commands by their first word ("go east" -> "move"); `default` for other verbs."""
    return {a: verbs.get(a.strip().lower().split(" ", 1)[0], default) for a in actions}


def fill_template(template: str, argument: str) -> str:
    """`template` with its `...` replaced by `argument` (one line, brackets removed)."""
    clean = " ".join(argument.replace("[", " ").replace("]", " ").split())
    return template[: -len(TEMPLATE_ARGUMENT)] + f"[{clean}]"

