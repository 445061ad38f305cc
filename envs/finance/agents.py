"""Agents for Finance tests: `oracle` (answers the target) and `format-noisy` (breaks the format at set rates).

`format-noisy` is a failure-injection instrument, not a model of any LLM. It knows the
target (from the env's expert plan) and, once per episode and deterministically by seed
and task, picks at most one format failure with the given probabilities:

- `prose` (0.2): words around the answer ("The answer is 5.0.", "The tags are: ...");
- `extra` (0.05): extra fields (a second number; item numbers or values next to the tags);
- `unparseable` (0.1, numbers only): a number the scorer cannot read ("$5", "5%", "~5");
- `wrong_count` (0.1, tags only): one tag too few or one too many;
- `unknown_tag` (0.05, tags only): one tag replaced by a name that is not in the tag list.

Modes that do not apply to a question (e.g. `unknown_tag` for a number) are skipped.
Shown a `format_repair` message, it answers in the right format with probability
`recover` (0.8), else repeats its broken answer. Shown d retrieved demonstrations
(`agent_notes` from `demos-k*`), it multiplies every rate by `demo_factor ** log2(1 + d)`
(`demo_factor` 0.8: d=1 -> 0.8, 4 -> 0.6, 16 -> 0.4), so retrieval budgets make a
measurable, documented difference. Figures it produces test the machinery, never LLMs.
"""

from __future__ import annotations

import math
import random
from typing import Any

from playground.core.payloads import AgentView, Proposal
from playground.envs.finance.demos import count_demos
from playground.envs.finance.format_check import AnswerFormat, expected_format
from playground.host_api import expert_action, parse_options

# failure mode -> the format_precision label a correct detector reports
MODE_LABELS = {
    "prose": "prose_around_answer",
    "extra": "extra_fields",
    "unparseable": "unparseable_number",
    "wrong_count": "wrong_tag_count",
    "unknown_tag": "unknown_tag",
}
NUMBER_MODES = ("prose", "extra", "unparseable")
TAG_MODES = ("prose", "extra", "wrong_count", "unknown_tag")

DEFAULTS: dict[str, Any] = {
    "prose": 0.2,
    "extra": 0.05,
    "unparseable": 0.1,
    "wrong_count": 0.1,
    "unknown_tag": 0.05,
    "recover": 0.8,
    "demo_factor": 0.8,
}


class OracleAgent:
    """Answers the target (the env's expert plan); scores 100% by construction."""

    def __init__(self, **options: Any) -> None:
        parse_options({}, options, "oracle")

    def reset(self, task_id: str, seed: int) -> None:
        """Nothing to forget."""

    def propose(self, view: AgentView) -> Proposal:
        """Answer the first action of the expert plan (the target), or finish when it is empty."""
        action = expert_action(view, "oracle")
        if action is None:
            return Proposal(thought="Answered.", action="", finish=True)
        return Proposal(thought="I know the answer.", action=action)


def break_answer(fmt: AnswerFormat, target: str, mode: str, rng: random.Random) -> str:
    """Return `target` rewritten with the format failure `mode` (see module docstring)."""
    if fmt.kind == "number":
        return _break_number(target, mode, rng)
    return _break_tags(fmt, target, mode, rng)


def _break_number(target: str, mode: str, rng: random.Random) -> str:
    value = float(target)
    if mode == "prose":
        return rng.choice((f"The answer is {target}.", f"Answer: {target}", f"{target} (rounded to two decimals)",
                           f"Based on the formula, the result is approximately {target}"))
    if mode == "extra":
        return rng.choice((f"{target}, {round(value * 1.1, 2)}", f"{target}\n{round(value * 100, 2)}"))
    if mode == "unparseable":
        return rng.choice((f"${target}", f"{target}%", f"~{target}"))
    raise ValueError(f"format-noisy: mode {mode!r} does not apply to a number")


def _break_tags(fmt: AnswerFormat, target: str, mode: str, rng: random.Random) -> str:
    tags = target.split(",")
    if mode == "prose":
        return rng.choice((f"The tags are: {target}", f"{target} (in question order)", f"Sure! {target}"))
    if mode == "extra":
        return ",".join(f"{i}. {tag}" for i, tag in enumerate(tags, 1))
    if mode == "wrong_count":
        return ",".join(tags[:-1]) if len(tags) > 1 and rng.random() < 0.5 else ",".join(tags + [tags[-1]])
    if mode == "unknown_tag":
        position = rng.randrange(len(tags))
        for variant in (tags[position].rstrip("0123456789"), tags[position] + "Total", tags[position] + "Net"):
            if variant and variant.lower() not in fmt.tags:
                break
        else:
            variant = "UnlistedElement"
        tags[position] = variant
        return ",".join(tags)
    raise ValueError(f"format-noisy: mode {mode!r} does not apply to tags")


class FormatNoisyAgent:
    """Answers the target, breaking its format at set rates (see module docstring)."""

    def __init__(self, **options: Any) -> None:
        self.options = parse_options(DEFAULTS, options, "format-noisy")
        for key in (*MODE_LABELS, "recover", "demo_factor"):
            if not 0.0 <= self.options[key] <= 1.0:
                raise ValueError(f"agent 'format-noisy' option {key!r} must be in [0, 1], got {self.options[key]}")
        self.rng = random.Random(0)
        self.mode: str | None = None
        self.broken = ""

    def reset(self, task_id: str, seed: int) -> None:
        """Start a new episode; its failures are fixed by (seed, task)."""
        self.rng = random.Random(f"format-noisy:{seed}:{task_id}")
        self.mode, self.broken = None, ""

    def rates(self, fmt: AnswerFormat, demos: int) -> dict[str, float]:
        """Return the failure rate of each mode that applies to `fmt` after `demos` demonstrations."""
        factor = self.options["demo_factor"] ** math.log2(1 + demos)
        modes = NUMBER_MODES if fmt.kind == "number" else TAG_MODES
        return {mode: self.options[mode] * factor for mode in modes}

    def propose(self, view: AgentView) -> Proposal:
        """Answer the target, broken at the set rates; fix it when a format repair says so (with `recover`)."""
        target = expert_action(view, "format-noisy")
        if target is None:
            return Proposal(thought="Answered.", action="", finish=True)
        fmt = expected_format(view.observation)
        if view.message is not None and view.message.kind == "format_repair" and self.mode is not None:
            if self.rng.random() < self.options["recover"]:
                self.mode = None
                return Proposal(thought="Fixing the format as asked.", action=target)
            return Proposal(thought="I keep my answer.", action=self.broken)
        if view.message is None:  # first proposal of the step: draw at most one failure
            self.mode, draw = None, self.rng.random()
            for mode, rate in self.rates(fmt, count_demos(view.notes)).items():
                if draw < rate:
                    self.mode = mode
                    break
                draw -= rate
        if self.mode is None:
            return Proposal(thought="Answering.", action=target)
        self.broken = break_answer(fmt, target, self.mode, self.rng)
        return Proposal(thought=f"Answering ({self.mode}).", action=self.broken)
