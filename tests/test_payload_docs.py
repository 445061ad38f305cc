"""docs/payloads.md stays true to the payload classes: every field of every record a hook passes or returns
(docs/plugin-api.md's row "What the hooks pass and return", and the records their fields hold) is listed with its
annotated type, no field that is gone is listed, and every `Decision` effect is listed with the field that sets
it."""

from __future__ import annotations

import dataclasses
import re
import typing
from pathlib import Path

import pytest

import playground.api
from playground.api import EFFECTS, Decision, InterventionMessage

ROOT = Path(__file__).resolve().parent.parent
PAGE = (ROOT / "docs" / "payloads.md").read_text()
API_PAGE = (ROOT / "docs" / "plugin-api.md").read_text()

SECTION = re.compile(r"^## `(\w+)`\n(.*?)(?=^## |\Z)", re.S | re.M)
FIELD = re.compile(r"^- `(\w+)` \(`([^`]*)`\):", re.M)
EFFECT = re.compile(r"^- `(\w+)`, set by `(\w+)`:", re.M)
# a value for each field that sets a Decision's effect, to build a Decision with that field alone
EFFECT_SAMPLES = {"message": InterventionMessage("k", "text"), "action": "look", "rollback_to": 0, "stop": True}


def hook_payload_names() -> list[str]:
    """The names docs/plugin-api.md lists in its row "What the hooks pass and return"."""
    row = re.search(r"^\| What the hooks pass and return \| (.*) \|$", API_PAGE, re.M)
    assert row, "docs/plugin-api.md has no row 'What the hooks pass and return'"
    return re.findall(r"`(\w+)`", row.group(1))


def _classes_in(annotation: typing.Any) -> set[type]:
    """The dataclasses an annotation names, at any depth (`tuple[Turn, ...] | None` gives Turn)."""
    found = {annotation} if dataclasses.is_dataclass(annotation) and isinstance(annotation, type) else set()
    for argument in typing.get_args(annotation):
        found |= _classes_in(argument)
    return found


def documented_classes() -> dict[str, type]:
    """Every payload dataclass the page must list: the listed names that are dataclasses, and every dataclass
    their fields hold, transitively."""
    todo = [getattr(playground.api, name) for name in hook_payload_names()]
    todo = [value for value in todo if dataclasses.is_dataclass(value)]
    classes: dict[str, type] = {}
    while todo:
        cls = todo.pop()
        if cls.__name__ in classes:
            continue
        classes[cls.__name__] = cls
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            todo += sorted(_classes_in(hints[f.name]), key=lambda c: c.__name__)
    return classes


def page_problems(text: str) -> list[str]:
    """Where `text` (docs/payloads.md) and the payload classes disagree; empty when the page is true."""
    problems = []
    sections: dict[str, str] = {}
    for name, body in SECTION.findall(text):
        if name in sections:
            problems.append(f"`{name}` has two sections")
        sections[name] = body
    classes = documented_classes()
    problems += [f"`{name}` has no section" for name in sorted(set(classes) - set(sections))]
    problems += [f"section `{name}`: no such payload (or not one a hook passes)"
                 for name in sorted(set(sections) - set(classes))]
    for name in sorted(set(classes) & set(sections)):
        listed = FIELD.findall(sections[name])
        fields = {f.name: f.type for f in dataclasses.fields(classes[name])}
        names = [field for field, _ in listed]
        problems += [f"`{name}.{field}` is listed twice" for field in sorted({n for n in names if names.count(n) > 1})]
        problems += [f"`{name}.{field}` is missing" for field in fields if field not in names]
        problems += [f"`{name}.{field}` is listed but {name} has no such field" for field in names
                     if field not in fields]
        problems += [f"`{name}.{field}` is listed as `{kind}`, annotated `{fields[field]}`" for field, kind in listed
                     if field in fields and kind != fields[field]]
    effects = EFFECT.findall(sections.get("Decision", ""))
    named = [effect for effect, _ in effects]
    problems += [f"Decision effect {effect!r} is missing" for effect in EFFECTS if effect not in named]
    problems += [f"Decision effect {effect!r} is listed but not in EFFECTS" for effect in named
                 if effect not in EFFECTS]
    for effect, setter in effects:
        if setter not in EFFECT_SAMPLES:
            problems.append(f"Decision effect {effect!r}: set by `{setter}`, which sets no effect")
        elif effect in EFFECTS and (actual := Decision("p", "k", **{setter: EFFECT_SAMPLES[setter]}).effect) != effect:
            problems.append(f"Decision effect {effect!r}: `{setter}` sets {actual!r}")
    return problems


def test_the_payload_page_is_true_to_the_classes():
    assert page_problems(PAGE) == []


def test_the_checker_reads_the_page():
    """The checker sees every payload the hooks pass, the records inside them, and the page's fields and effects
    (so an empty verdict means something)."""
    classes = documented_classes()
    listed = hook_payload_names()
    assert "EFFECTS" in listed and {"StepContext", "Turn", "Decision", "Event", "AttemptView"} <= set(listed)
    assert {name for name in listed if name != "EFFECTS"} <= set(classes)
    assert {"SchemaProblem", "AttemptStep", "InterventionMessage"} <= set(classes)
    sections = dict(SECTION.findall(PAGE))
    assert ("admissible_actions", "tuple[str, ...] | None") in FIELD.findall(sections["StepContext"])
    assert {effect for effect, _ in EFFECT.findall(sections["Decision"])} == set(EFFECTS)
    assert set(EFFECT_SAMPLES) == {"message", "action", "rollback_to", "stop"}


@pytest.mark.parametrize("edit, named", [
    (lambda t: t.replace("- `valid_action` (`bool`): whether the env understood and did the action.\n- `reward`",
                         "- `reward`", 1), "`Turn.valid_action` is missing"),
    (lambda t: t.replace("- `goal` (`str`): the task, in words.\n",
                         "- `goal` (`str`): the task, in words.\n- `plan` (`str`): gone.\n", 1),
     "has no such field"),
    (lambda t: t.replace("- `step` (`int`): the position", "- `step` (`str`): the position", 1),
     "`StepContext.step` is listed as `str`, annotated `int`"),
    (lambda t: t.replace("- `rollback`, set by `rollback_to`:", "- `rewind`, set by `rollback_to`:", 1),
     "'rollback' is missing"),
    (lambda t: t.replace("- `stop`, set by `stop`:", "- `stop`, set by `action`:", 1), "`action` sets 'replace'"),
    (lambda t: t.replace("## `AttemptStep`", "## AttemptStep", 1), "`AttemptStep` has no section"),
    (lambda t: t + "\n## `Outcome`\n\n- `x` (`int`): gone.\n", "section `Outcome`"),
])
def test_a_planted_untruth_makes_the_check_fail(edit, named):
    edited = edit(PAGE)
    assert edited != PAGE
    problems = page_problems(edited)
    assert any(named in problem for problem in problems), problems


def test_the_plugin_guide_links_the_payload_page():
    assert "](payloads.md)" in (ROOT / "docs" / "writing-plugins.md").read_text()
