"""The LLM agent: a ReAct-style prompt over any chat model → (thought, action).

Each turn the model sees the goal, the last few steps, the current observation, the
admissible actions when the env lists them, any standing notes from the harness, and
the intervention message when there is one. It must answer `Thought: ...` then
`Action: ...`. A reply that does not parse is re-asked once; if it still does not parse,
its first line goes to the env as the action, so the failure is visible to the harness
as an invalid action instead of crashing the run. `Action: finish` declares the task done.

With `constrained=True` (models that support it), decoding is limited to the admissible
actions, or to the actions an intervention message offers when the message restricts the
agent to them (`InterventionMessage.restrict`); actions a message merely suggests leave
decoding over the admissible actions. A template such as `search[...]` admits any
one-line argument.

Constrained decoding writes only the action, so the proposal has no thought. With `think=True` the agent
reasons first: one unconstrained call asks for the thought (its first line, at most `THOUGHT_MAX_TOKENS`
tokens, stopped at the newline), then the constrained call decodes the action with that thought in its
prompt. Two calls rather than one grammar `Thought: ...\nAction: <choice>`: the OpenAI protocol has no field
for a grammar, so only plain calls work with every model. The proposal's tokens are both calls' (docs/models.md,
"Reasoning before a constrained action").

A model that cannot constrain a reply to `choices` (`constrains_choices = False`: an HTTP endpoint) is asked for a
JSON schema instead (`action_schema`): a free one-line thought, then the action as an enum of the choices, in one
call (with `think`, the action alone). The endpoint lowers the request's `response_format` once per client where the
server refuses it (`HTTPChatModel.reply_format`). Such a model cannot write a template's argument under an enum, so
a step whose choices include a template, or that has no list, is played unconstrained, and the agent says so once.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from playground.agents.base import AgentConfigError, parse_options
from playground.agents.chat import ChatModel, LLMError, grammar_schema
from playground.agents.http_model import HTTPChatModel
from playground.agents.local_model import LocalChatModel
from playground.agents.response_cache import OFF_WORDS, default_cache_dir
from playground.agents.structured import json_object_in
from playground.core.actions import is_admissible, is_template
from playground.core.payloads import AgentView, Proposal
from playground.processes import threads_by_contention

SYSTEM_PROMPT = (
    "You are an agent acting in a text environment to reach a goal. Each turn, answer in exactly this format:\n"
    "Thought: <one short sentence about what to do next>\n"
    "Action: <exactly one action>\n"
    "Use an action from the list of valid actions when one is given. "
    "Write `Action: finish` only when the goal is reached."
)
FORMAT_REMINDER = ("Your reply did not follow the format. Answer with two lines only:\n"
                   "Thought: <one short sentence>\nAction: <exactly one action>")
THOUGHT_MAX_TOKENS = 48  # a one-sentence thought before a constrained action
SCHEMA_SYSTEM_PROMPT = (
    "You are an agent acting in a text environment to reach a goal. Each turn, answer with one JSON object only:\n"
    '{"thought": "<one short sentence about what to do next>", "action": "<exactly one of the valid actions>"}'
)
THOUGHT_MAX_CHARS = 200  # the thought of a reply asked for by `action_schema`: one line of plain characters
TEMPLATE_NOTE = ("a step's actions include a template (verb[...]), which an enum cannot admit: such steps are "
                 "decoded unconstrained")
NO_LIST_NOTE = "the env lists no admissible actions: steps without a list are decoded unconstrained"
ACTION_REQUEST = "Now the action: exactly one of the valid actions, nothing else."
FINISH_WORDS = {"finish", "finished", "done", "stop"}
ACTION_LINE = re.compile(r"^\s*\**action\s*:\**\s*(.+?)\s*$", re.I | re.M)
THOUGHT_LINE = re.compile(r"^\s*\**thought\s*:\**\s*(.+?)\s*$", re.I | re.M)


HISTORY_SHAPES = ("blocks", "sliding")


def history_start(steps: int, window: int, shape: str = "blocks") -> int:
    """The first step of the history a prompt shows, of `steps` played.

    `sliding`: the last `window` steps, so every step rewrites the history from its first line. `blocks`: from the
    last multiple of `window` that leaves at least `window` steps (so `window` to 2*`window`-1 of them): the start
    moves once every `window` steps, and between moves consecutive prompts share everything up to the newest step,
    which a model server or the embedded model's KV cache then need not evaluate again."""
    if window <= 0:  # no window: every step
        return 0
    if shape == "sliding":
        return max(0, steps - window)
    return (max(0, steps - window) // window) * window


def render_prompt(view: AgentView, window: int, max_chars: int, shape: str = "blocks") -> list[dict]:
    """Return the chat messages for one turn (the history as `history_start` cuts it)."""
    parts = [f"Goal: {view.goal}"]
    if view.history:
        parts.append("Recent steps:")
        for turn in view.history[history_start(len(view.history), window, shape):]:
            parts.append(f"> {turn.action}\n{_clip(turn.observation, max_chars)}")
    parts.append(f"Current observation:\n{_clip(view.observation, max_chars)}")
    if view.admissible_actions is not None:
        parts.append("Valid actions: " + ", ".join(view.admissible_actions))
        templates = [a for a in view.admissible_actions if is_template(a)]
        if templates:
            parts.append("In " + ", ".join(templates) + " replace ... with your own words.")
    for note in view.notes:
        parts.append(note)
    if view.message is not None:
        parts.append(f"Feedback on your last proposal:\n{view.message.text}")
    parts.append("Your reply (Thought, then Action):")
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "\n\n".join(parts)}]


def parse_reply(text: str, admissible: tuple[str, ...] | None) -> tuple[str, str] | None:
    """Return (thought, action) from a reply, or None when no action can be read."""
    actions = ACTION_LINE.findall(text)
    thought_match = THOUGHT_LINE.search(text)
    thought = thought_match.group(1) if thought_match else ""
    if actions:
        return thought, _unquote(actions[0])
    bare = _unquote(text)
    if admissible and is_admissible(bare, admissible):
        return thought, bare
    return None


def action_schema(actions: Sequence[str], thought: bool = True) -> dict:
    """The JSON schema a constrained agent asks an endpoint for: a free thought (one line of at most
    `THOUGHT_MAX_CHARS` plain characters, written as a `pattern`), then the action, one of `actions`. The thought
    comes first so the model reasons before it picks; `thought=False` asks for the action alone."""
    properties: dict[str, Any] = {}
    if thought:
        properties["thought"] = grammar_schema({"type": "string", "maxLength": THOUGHT_MAX_CHARS})
    properties["action"] = {"type": "string", "enum": list(actions)}
    return {"title": "action", "type": "object", "properties": properties, "required": list(properties),
            "additionalProperties": False}


def parse_schema_reply(text: str, admissible: tuple[str, ...] | None) -> tuple[str, str] | None:
    """(thought, action) from a reply asked for with `action_schema`: its JSON object's fields, else the text read
    as `parse_reply` reads it (a server that constrained nothing may answer in lines); None when no action can be
    read."""
    value = json_object_in(text)
    action = value.get("action") if value is not None else None
    if isinstance(action, str) and action.strip():
        thought = value.get("thought") if value is not None else None
        return (thought.strip()[:300] if isinstance(thought, str) else ""), _unquote(action)
    return parse_reply(text, admissible)


def read_thought(text: str) -> str:
    """The thought in the first line of a reply (`Thought: ...`, or the bare line); "" for an empty line or one
    that already names the action."""
    line = (text.strip().splitlines() or [""])[0]
    if ACTION_LINE.match(line):
        return ""
    match = THOUGHT_LINE.match(line)
    return (match.group(1) if match else _unquote(line))[:300]


def _unquote(text: str) -> str:
    """Strip markdown emphasis, quotes and a trailing full stop around an action."""
    return text.strip().strip("*`'\" ").rstrip(".").strip("*`'\" ")


def _clip(text: str, limit: int) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + " ..."


class LLMAgent:
    """Proposes actions by asking a chat model (see module docstring)."""

    def __init__(self, model: ChatModel, window: int = 5, max_obs_chars: int = 800, constrained: bool = False,
                 history: str = "blocks", think: bool = False) -> None:
        if history not in HISTORY_SHAPES:
            raise ValueError(f"history must be one of {', '.join(HISTORY_SHAPES)}, not {history!r}")
        self.model = model
        self.window, self.max_obs_chars, self.constrained, self.history = window, max_obs_chars, constrained, history
        self.think = think  # constrained: write a free-text thought first (a call of its own)
        # False where the model cannot constrain a reply to `choices` (an endpoint): it is asked for a JSON schema
        self.constrains_choices = bool(getattr(model, "constrains_choices", True))
        self._noted: set[str] = set()

    @property
    def model_file(self) -> str | None:
        """The model's weights file, when the model runs from one (a run's lock.json records its SHA-256)."""
        path = getattr(self.model, "path", None)
        return str(path) if path is not None else None

    @property
    def thread_choice(self) -> dict[str, Any] | None:
        """The compute threads the model runs with and why (a run's lock.json records them), or None (an endpoint)."""
        threads = getattr(self.model, "threads", None)
        if not isinstance(threads, int):
            return None
        return {"count": threads, "reason": str(getattr(self.model, "threads_reason", "given"))}

    def reset(self, task_id: str, seed: int) -> None:
        pass

    def propose(self, view: AgentView) -> Proposal:
        messages = render_prompt(view, self.window, self.max_obs_chars, self.history)
        if self.constrained and view.admissible_actions:
            choices = constrained_choices(view, view.admissible_actions)
            if self.constrains_choices or not any(is_template(choice) for choice in choices):
                return self._propose_constrained(messages, choices)
            self._note(TEMPLATE_NOTE)
        elif self.constrained and not self.constrains_choices:
            self._note(NO_LIST_NOTE)
        reply = self.model.complete(messages)
        prompt_tokens, completion_tokens = reply.prompt_tokens, reply.completion_tokens
        parsed = parse_reply(reply.text, view.admissible_actions)
        if parsed is None:
            retry = self.model.complete(messages + [{"role": "assistant", "content": reply.text},
                                                    {"role": "user", "content": FORMAT_REMINDER}])
            prompt_tokens += retry.prompt_tokens
            completion_tokens += retry.completion_tokens
            parsed = parse_reply(retry.text, view.admissible_actions)
            if parsed is None:
                first_line = (retry.text.strip().splitlines() or [""])[0][:200]
                return Proposal(retry.text.strip()[:500], first_line, False, prompt_tokens, completion_tokens,
                                prompt=tuple(messages))
        thought, action = parsed
        finish = action.lower() in FINISH_WORDS
        return Proposal(thought, "" if finish else action, finish, prompt_tokens, completion_tokens,
                        prompt=tuple(messages))

    def _note(self, note: str) -> None:
        """Say once per agent that a constrained agent decodes some steps unconstrained, and why."""
        if note not in self._noted:
            self._noted.add(note)
            logging.getLogger(__name__).warning("agent with constrained=true: %s", note)

    def _propose_constrained(self, messages: list[dict], choices: list[str]) -> Proposal:
        """Decode the action over `choices`, after a free-text thought when `think` is on."""
        thought, prompt_tokens, completion_tokens = "", 0, 0
        if self.think:
            first = self.model.complete(messages, max_tokens=THOUGHT_MAX_TOKENS, stop=["\n"])
            thought = read_thought(first.text)
            prompt_tokens, completion_tokens = first.prompt_tokens, first.completion_tokens
            if thought:
                messages = messages + [{"role": "assistant", "content": f"Thought: {thought}"},
                                       {"role": "user", "content": ACTION_REQUEST}]
        if not self.constrains_choices:
            return self._propose_by_schema(messages, choices, thought, prompt_tokens, completion_tokens)
        reply = self.model.complete(messages, choices=choices)
        return Proposal(thought, reply.text.strip(), False, prompt_tokens + reply.prompt_tokens,
                        completion_tokens + reply.completion_tokens, prompt=tuple(messages))

    def _propose_by_schema(self, messages: list[dict], choices: list[str], thought: str, prompt_tokens: int,
                           completion_tokens: int) -> Proposal:
        """Ask for `action_schema(choices)`: the thought and the action in one JSON object (the action alone after
        a thought of its own); a reply with no readable action goes to the env as its first line."""
        if not thought:  # the reply writes the thought: the system prompt asks for the object
            messages = [{"role": "system", "content": SCHEMA_SYSTEM_PROMPT}, *messages[1:]]
        reply = self.model.complete(messages, json_schema=action_schema(choices, thought=not thought))
        prompt_tokens += reply.prompt_tokens
        completion_tokens += reply.completion_tokens
        parsed = parse_schema_reply(reply.text, tuple(choices))
        if parsed is None:
            first_line = (reply.text.strip().splitlines() or [""])[0][:200]
            return Proposal(thought or reply.text.strip()[:500], first_line, False, prompt_tokens, completion_tokens,
                            prompt=tuple(messages))
        return Proposal(thought or parsed[0], parsed[1], False, prompt_tokens, completion_tokens,
                        prompt=tuple(messages))


def constrained_choices(view: AgentView, admissible: tuple[str, ...]) -> list[str]:
    """What a constrained agent decodes over: the actions an intervention message offers when it restricts the agent
    to them (those admissible), else the admissible actions; offered actions are otherwise suggestions."""
    message = view.message
    offered = [a for a in (message.actions if message is not None and message.restrict else ())
               if is_admissible(a, admissible)]
    return offered or list(admissible)


HTTP_DEFAULTS: dict[str, Any] = {
    "base_url": "", "model": "", "api_key_env": "OPENAI_API_KEY", "temperature": 0.0, "seed": 0,
    "max_tokens": 256, "timeout": 60.0, "retries": 4, "cache_dir": "", "window": 5, "max_obs_chars": 800,
    "history": "blocks", "constrained": False,
}
LOCAL_DEFAULTS: dict[str, Any] = {
    "gguf": "", "temperature": 0.0, "seed": 0, "max_tokens": 64, "threads": "auto", "n_ctx": 8192,
    "constrained": False, "think": False, "cache_dir": "", "contexts": 5,
    "window": 5, "max_obs_chars": 600, "history": "blocks",
}


def _cache_dir(option: str) -> Path | None:
    """The response cache's folder from an agent's `cache_dir` option: "" the shared one (unless
    `$PLAYGROUND_RESPONSE_CACHE` turns it off), "off" none, else that folder."""
    if option.strip().lower() in OFF_WORDS:
        return None
    return Path(option).expanduser() if option else default_cache_dir()


def local_threads(option: Any) -> int:
    """The llama.cpp threads from the `local` agent's `threads` option (see `local_thread_choice`)."""
    return local_thread_choice(option)[0]


def local_thread_choice(option: Any) -> tuple[int, str]:
    """The llama.cpp threads from the `local` agent's `threads` option and why: a count of at least 1 (it wins), or
    "auto": the cores this process can have now, its share of the usable cores less those the machine's load keeps
    busy (`threads_by_contention`; on 2 shared cores under load, 1 thread measured fastest:
    docs/results/machinery.md)."""
    text = str(option).strip().lower()
    if text == "auto":
        threads, why = threads_by_contention()
        return threads, f"auto: {why}"
    try:
        threads = int(text)
    except ValueError:
        threads = 0
    if threads < 1:
        raise AgentConfigError(f"agent 'local' option 'threads' expects 'auto' or a whole number of at least 1, "
                               f"got {option!r}")
    return threads, "given"


def make_llm_agent(**options: Any) -> LLMAgent:
    """Build the `llm` agent: an OpenAI-compatible endpoint given by base_url and model (`constrained=True`: each
    action is asked for by a JSON schema whose action is one of the step's admissible actions)."""
    o = parse_options(HTTP_DEFAULTS, options, "llm")
    if not o["base_url"] or not o["model"]:
        raise ValueError("agent 'llm' needs --llm-base-url (e.g. http://127.0.0.1:8000/v1) and --model")
    model = HTTPChatModel(o["base_url"], o["model"], os.environ.get(o["api_key_env"]) or None, o["temperature"],
                          o["seed"], o["max_tokens"], o["timeout"], o["retries"], cache_dir=_cache_dir(o["cache_dir"]))
    return LLMAgent(model, o["window"], o["max_obs_chars"], constrained=o["constrained"], history=o["history"])


def make_local_agent(**options: Any) -> LLMAgent:
    """Build the `local` agent: a GGUF model run by llama.cpp (SmolLM2-135M by default)."""
    o = parse_options(LOCAL_DEFAULTS, options, "local")
    threads, why = local_thread_choice(o["threads"])
    try:
        model = LocalChatModel(o["gguf"] or None, o["temperature"], o["seed"], o["max_tokens"],
                               n_ctx=o["n_ctx"], threads=threads,
                               cache_dir=_cache_dir(o["cache_dir"]), contexts=o["contexts"])
    except LLMError as exc:
        raise ValueError(f"agent 'local': {exc}") from None
    model.threads_reason = why
    return LLMAgent(model, o["window"], o["max_obs_chars"], constrained=o["constrained"], history=o["history"],
                    think=o["think"])
