"""The instrument's judge model: a `ChatModel` that answers the plugins' structured role requests from the
failure-injection instrument's own state, at a set accuracy per kind of role (see `playground.core.instrument`).

A role asks as it would ask an LLM (`ask_structured`: messages and a JSON schema titled with the role's name). The
model looks up the answerer a plugin registered for that role, builds the request with the instrument's state
(`InstrumentState`) and replies with the right answer with probability `accuracy(kind)`, else with the answerer's
realistic mistake. Each reply carries its grade (`Completion.graded`: kind, step, whether it was right, the truth
and the answer), which the judge-call report writes into the trace; the role gets the reply's text only.

With a `delegate` (a real model: the embedded SmolLM2, an endpoint) the delegate answers instead and the instrument
only grades its reply against the same truth: so a real model's accuracy per role is measured on the very requests
the curves are drawn from. With a `shadow` model the instrument still answers (and so drives the run), and the
shadow is asked the same requests of the kinds in `shadow_kinds` and graded (`graded["shadow"]`), its replies never
used: a real model's accuracy on the requests a run at a set accuracy produces, for roles a model-driven run rarely
reaches (a need check asked only after a detection). A role no plugin registered an answerer for gets an `LLMError`
(an unusable reply).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from playground.agents.chat import ChatModel, Completion, LLMError
from playground.agents.structured import json_object_in
from playground.core.events import Event, HeaderEvent, ProposalEvent, ResetEvent
from playground.core.instrument import InstrumentJudgeSpec, InstrumentState, JudgeRequest, StepRecord

MODE = "instrument"


class InstrumentJudge:
    """A `ChatModel` answering role requests from an instrument's state (see module docstring).

    `judges` maps role names to their registered `InstrumentJudgeSpec`; `state()` returns the instrument's state
    now; `accuracy(kind)` the probability of a right answer for a kind of role; `rng` draws the coin flips and the
    mistakes (seeded by the instrument per episode, so a run repeats); `delegate` answers instead where given."""

    def __init__(self, judges: Mapping[str, InstrumentJudgeSpec], state: Callable[[], InstrumentState],
                 accuracy: Callable[[str], float], rng: Callable[[], random.Random],
                 delegate: ChatModel | None = None, shadow: ChatModel | None = None,
                 shadow_kinds: frozenset[str] = frozenset()) -> None:
        self.judges, self.state, self.accuracy, self.rng, self.delegate = judges, state, accuracy, rng, delegate
        self.shadow, self.shadow_kinds = shadow, shadow_kinds

    @property
    def reply_format(self) -> str:
        """How replies are constrained (`StructuredReply.mode`): the delegate's where there is one."""
        return str(getattr(self.delegate, "reply_format", "") or "prompt") if self.delegate else MODE

    def complete(self, messages: list[dict], *, choices: list[str] | None = None, max_tokens: int | None = None,
                 json_schema: dict | None = None, stop: list[str] | None = None) -> Completion:
        """Answer one role request (`json_schema` titled with the role); LLMError for a request no answerer knows."""
        role = str((json_schema or {}).get("title", ""))
        spec = self.judges.get(role)
        if spec is None:
            if self.delegate is not None:
                return self.delegate.complete(messages, choices=choices, max_tokens=max_tokens, json_schema=json_schema)
            raise LLMError(f"the failure-injection instrument has no answer for role {role or '(untitled)'!r}: no "
                           f"plugin registered one (register_instrument_judges); roles it answers: "
                           f"{', '.join(sorted(self.judges)) or '(none)'}")
        system = next((m["content"] for m in messages if m.get("role") == "system"), "")
        user = "\n".join(m["content"] for m in messages if m.get("role") == "user")
        state = self.state()
        rng = self.rng()
        key = spec.answer(JudgeRequest(role, system, user, json_schema or {}, state, rng))
        if self.delegate is not None:
            completion = self.delegate.complete(messages, choices=choices, max_tokens=max_tokens,
                                                json_schema=json_schema)
            value = json_object_in(completion.text)
            correct = value is not None and _agrees(key.agrees, value)
            graded = _grade(spec.kind, state, correct, key.truth, value, "model")
            return Completion(completion.text, completion.prompt_tokens, completion.completion_tokens,
                              completion.cached, completion.mode, graded=graded)
        correct = rng.random() < self.accuracy(spec.kind)
        answer = key.correct if correct else key.wrong
        text = json.dumps(dict(answer))
        graded = _grade(spec.kind, state, correct, key.truth, dict(answer), "instrument")
        if self.shadow is not None and spec.kind in self.shadow_kinds:
            graded["shadow"] = self._shadow(messages, max_tokens, json_schema, key.agrees)
        return Completion(text, mode=MODE, graded=graded)

    def _shadow(self, messages: list[dict], max_tokens: int | None, json_schema: dict | None,
                agrees: Callable[[Mapping[str, Any]], bool]) -> dict[str, Any]:
        """Ask the shadow model the same request and grade its reply; its reply is never used."""
        try:
            completion = self.shadow.complete(messages, max_tokens=max_tokens, json_schema=json_schema)  # type: ignore[union-attr]
        except LLMError as exc:
            return {"correct": False, "answer": None, "error": str(exc)[:300]}
        value = json_object_in(completion.text)
        return {"correct": value is not None and _agrees(agrees, value), "answer": value,
                "prompt_tokens": completion.prompt_tokens, "completion_tokens": completion.completion_tokens}


def _agrees(agrees: Callable[[Mapping[str, Any]], bool], value: Mapping[str, Any]) -> bool:
    """Whether a delegate's reply is right; a reply of another shape than the role's is wrong."""
    try:
        return bool(agrees(value))
    except (KeyError, TypeError, ValueError, AttributeError):
        return False


def _grade(kind: str, state: InstrumentState, correct: bool, truth: Mapping[str, Any], answer: Any,
           by: str) -> dict[str, Any]:
    return {"kind": kind, "step": state.step, "correct": bool(correct), "truth": dict(truth), "answer": answer,
            "by": by}


# -- roles that read recorded episodes after the run (diagnosers) --------------------------------------------------


def state_from_events(events: Sequence[Event]) -> InstrumentState:
    """The instrument's state at the end of a recorded episode: its proposals (with their `injected` records, which
    the trace keeps for measurement), the last one of each step, the goal. Repairs are not recorded as the live
    instrument keeps them (an offline role does not need them)."""
    goal = next((e.goal for e in events if isinstance(e, ResetEvent)), "")
    proposals = tuple(StepRecord(e.step, e.action, e.finish, (e.injected or {}).get("planned"),
                                 dict(e.injected) if e.injected else None)
                      for e in events if isinstance(e, ProposalEvent))
    last = {p.step: p for p in proposals}
    steps = tuple(last[k] for k in sorted(last))
    return InstrumentState(goal, steps[-1].step if steps else 0, steps[-1] if steps else None, steps, (), proposals)


class TraceInstrumentJudge(InstrumentJudge):
    """The instrument's judge model for roles that read recorded episodes after the run (the methods'
    diagnosers): `show(events)` names the episode the next requests are about, and the answers come from the truth
    its trace recorded (`state_from_events`), right with `accuracy` (one number for every kind, or per kind).
    The role's own code passes the episode's events on (`show`), never reads the truth."""

    def __init__(self, judges: Mapping[str, InstrumentJudgeSpec], accuracy: float | Mapping[str, float],
                 seed: str = "instrument", delegate: ChatModel | None = None) -> None:
        self._state = InstrumentState("", 0, None)
        self._rng = random.Random(seed)
        self.seed = seed
        self.episode = ""  # the id of the episode shown last
        self.grades: dict[str, dict[str, Any]] = {}  # each reply's grade, by the episode it was about (the last one)
        super().__init__(judges, lambda: self._state, self._accuracy_of(accuracy), lambda: self._rng, delegate)

    @staticmethod
    def _accuracy_of(accuracy: float | Mapping[str, float]) -> Callable[[str], float]:
        if isinstance(accuracy, Mapping):
            return lambda kind: float(accuracy.get(kind, 1.0))
        return lambda kind: float(accuracy)

    def show(self, events: Sequence[Event]) -> None:
        """The episode the next requests are about (its trace's events); its coin flips are seeded by it: by its
        harness, task and trial, not its episode id, which holds the run's random id, so a rerun of the same
        study draws the same coins."""
        self._state = state_from_events(events)
        header = next((e for e in events if isinstance(e, HeaderEvent)), None)
        episode = "" if header is None else f"{header.harness}:{header.task_id}:{header.trial or 1}"
        self._rng = random.Random(f"{self.seed}:{episode}")
        self.episode = "" if header is None else str(header.episode_id)

    def complete(self, messages: list[dict], **kwargs: Any) -> Completion:
        """Answer as the instrument does (`InstrumentJudge.complete`), keeping the reply's grade in `grades` under
        the episode shown (instrument side only: the role gets the reply's text)."""
        completion = super().complete(messages, **kwargs)
        if completion.graded is not None:
            self.grades[self.episode] = dict(completion.graded)
        return completion


def show_episode(model: Any, events: Sequence[Event]) -> None:
    """Tell a trace instrument judge which recorded episode the next requests are about (any other model: nothing)."""
    show = getattr(model, "show", None)
    if isinstance(model, TraceInstrumentJudge) and callable(show):
        show(events)
