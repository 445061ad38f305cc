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
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from playground.agents.base import AgentConfigError, parse_options
from playground.agents.chat import ChatModel, LLMError
from playground.agents.http_model import HTTPChatModel
from playground.agents.local_model import LocalChatModel
from playground.agents.response_cache import OFF_WORDS, default_cache_dir
from playground.core.actions import is_admissible, is_template
from playground.core.payloads import AgentView, Proposal
from playground.processes import cores_per_process

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

    @property
    def model_file(self) -> str | None:
        """The model's weights file, when the model runs from one (a run's lock.json records its SHA-256)."""
        path = getattr(self.model, "path", None)
        return str(path) if path is not None else None

    def reset(self, task_id: str, seed: int) -> None:
        pass

    def propose(self, view: AgentView) -> Proposal:
        messages = render_prompt(view, self.window, self.max_obs_chars, self.history)
        if self.constrained and view.admissible_actions:
            return self._propose_constrained(view, messages, view.admissible_actions)
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

    def _propose_constrained(self, view: AgentView, messages: list[dict], admissible: tuple[str, ...]) -> Proposal:
        """Decode the action over the admissible actions, after a free-text thought when `think` is on."""
        # only a message that restricts the agent narrows decoding; offered actions are otherwise suggestions
        message = view.message
        offered = [a for a in (message.actions if message is not None and message.restrict else ())
                   if is_admissible(a, admissible)]
        thought, prompt_tokens, completion_tokens = "", 0, 0
        if self.think:
            first = self.model.complete(messages, max_tokens=THOUGHT_MAX_TOKENS, stop=["\n"])
            thought = read_thought(first.text)
            prompt_tokens, completion_tokens = first.prompt_tokens, first.completion_tokens
            if thought:
                messages = messages + [{"role": "assistant", "content": f"Thought: {thought}"},
                                       {"role": "user", "content": ACTION_REQUEST}]
        reply = self.model.complete(messages, choices=offered or list(admissible))
        return Proposal(thought, reply.text.strip(), False, prompt_tokens + reply.prompt_tokens,
                        completion_tokens + reply.completion_tokens, prompt=tuple(messages))


HTTP_DEFAULTS: dict[str, Any] = {
    "base_url": "", "model": "", "api_key_env": "OPENAI_API_KEY", "temperature": 0.0, "seed": 0,
    "max_tokens": 256, "timeout": 60.0, "retries": 4, "cache_dir": "", "window": 5, "max_obs_chars": 800,
    "history": "blocks",
}
LOCAL_DEFAULTS: dict[str, Any] = {
    "gguf": "", "temperature": 0.0, "seed": 0, "max_tokens": 64, "threads": "auto", "n_ctx": 8192,
    "constrained": False, "think": False, "cache_dir": "", "contexts": 4,
    "window": 5, "max_obs_chars": 600, "history": "blocks",
}


def _cache_dir(option: str) -> Path | None:
    """The response cache's folder from an agent's `cache_dir` option: "" the shared one (unless
    `$PLAYGROUND_RESPONSE_CACHE` turns it off), "off" none, else that folder."""
    if option.strip().lower() in OFF_WORDS:
        return None
    return Path(option).expanduser() if option else default_cache_dir()


def local_threads(option: Any) -> int:
    """The llama.cpp threads from the `local` agent's `threads` option: a count of at least 1, or "auto": this
    process's share of the usable cores (all of them alone; one each for two workers on 2 cores), which is what
    measured fastest (docs/results.md, "Threads: chosen by measurement")."""
    text = str(option).strip().lower()
    if text == "auto":
        return cores_per_process()
    try:
        threads = int(text)
    except ValueError:
        threads = 0
    if threads < 1:
        raise AgentConfigError(f"agent 'local' option 'threads' expects 'auto' or a whole number of at least 1, "
                               f"got {option!r}")
    return threads


def make_llm_agent(**options: Any) -> LLMAgent:
    """Build the `llm` agent: an OpenAI-compatible endpoint given by base_url and model."""
    o = parse_options(HTTP_DEFAULTS, options, "llm")
    if not o["base_url"] or not o["model"]:
        raise ValueError("agent 'llm' needs --llm-base-url (e.g. http://127.0.0.1:8000/v1) and --model")
    model = HTTPChatModel(o["base_url"], o["model"], os.environ.get(o["api_key_env"]) or None, o["temperature"],
                          o["seed"], o["max_tokens"], o["timeout"], o["retries"], cache_dir=_cache_dir(o["cache_dir"]))
    return LLMAgent(model, o["window"], o["max_obs_chars"], history=o["history"])


def make_local_agent(**options: Any) -> LLMAgent:
    """Build the `local` agent: a GGUF model run by llama.cpp (SmolLM2-135M by default)."""
    o = parse_options(LOCAL_DEFAULTS, options, "local")
    try:
        model = LocalChatModel(o["gguf"] or None, o["temperature"], o["seed"], o["max_tokens"],
                               n_ctx=o["n_ctx"], threads=local_threads(o["threads"]),
                               cache_dir=_cache_dir(o["cache_dir"]), contexts=o["contexts"])
    except LLMError as exc:
        raise ValueError(f"agent 'local': {exc}") from None
    return LLMAgent(model, o["window"], o["max_obs_chars"], constrained=o["constrained"], history=o["history"],
                    think=o["think"])
