"""How the failure-injection instrument answers AED's LLM diagnoser (`register_instrument_judges`).

The `noisy` instrument records each failure it injects in the trace (`Proposal.injected`, with `planned`: the
expert's action the failure replaced, a correct action at that step). After the run, `TraceInstrumentJudge`
answers the diagnoser's request about one failed episode from that record (`show_episode` names the episode);
this module says what the answer is. It runs on the instrument's side only: AED's diagnoser code sends the
request it would send to an LLM (`llm_diagnoses`) and never sees the truth.

The truth of one failed episode: the *first* injected step (the failure's onset, the attributed step) and its
planned action (the correction). The right reply names that step as the rendered trace numbers it (`Step N:` of
`render_trace`: the position on the episode's surviving path), the agent as responsible, quotes that step's lines
verbatim (its action, else its result, else one of its valid actions) and gives the planned action as the
correction (null with a reason where the plan was done). A realistic mistake, chosen with the request's coin:

- **wrong step**: a later clean step (no failure injected there), corrected by another valid action there;
- **retry**: the right step, with the failing action itself as the "correction" (for an early finish: a null
  correction saying that finishing was right);
- **not admissible**: the right step, with a paraphrase of the planned action the env does not accept.

A reply is right when it names the step and its correction is the planned action.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from playground.core.instrument import InstrumentJudgeSpec, JudgeAnswer, JudgeRequest, StepRecord
from playground.host_api import TraceInstrumentJudge
from playground.plugins.aed.diagnose import MIN_QUOTE

STEP_LINE = re.compile(r"^Step (\d+): valid actions: ", re.MULTILINE)
ACTION_LINE = re.compile(r"\n  action: (.*)\n  result(?: \(rejected\))?: ")
FINISHED = "\n  the agent declared the task finished"
MAX_QUOTE = 120


@dataclass(frozen=True)
class RenderedStep:
    """One `Step N:` block of the rendered trace: its position, its shown valid actions, its action ("" for a
    finish) and its result, and the block's whole text."""

    position: int
    valid: tuple[str, ...]
    action: str
    result: str
    text: str


def rendered_steps(user: str) -> dict[int, RenderedStep]:
    """The `Step N:` blocks of a trace as `render_trace` writes it (the diagnoser's user message), by position."""
    starts = list(STEP_LINE.finditer(user))
    found: dict[int, RenderedStep] = {}
    for i, match in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(user)
        text = user[match.start():end].rstrip("\n")
        body = user[match.end():end].rstrip("\n")
        line, _, rest = body.partition("\n")
        shown = line.removesuffix(" ...")
        valid = tuple(a for a in shown.split(", ") if a and a != "-")
        acted = ACTION_LINE.match("\n" + rest)
        action, result = (acted.group(1), rest[acted.end() - 1:]) if acted else ("", "")
        found[int(match.group(1))] = RenderedStep(int(match.group(1)), valid, action, result, text)
    return found


def _position(record: StepRecord, steps: tuple[StepRecord, ...], rendered: Mapping[int, RenderedStep]) -> int | None:
    """The rendered position of a step the instrument played: its place among the steps (positions count the
    actions on the surviving path from 0, as the step numbers of a run without rollbacks do), checked against the
    rendered action there; else the first rendered step with that action; None when neither matches."""
    ordinal = next(i for i, s in enumerate(steps) if s is record)
    shown = rendered.get(ordinal)
    if shown is not None and shown.action == ("" if record.finish else record.action):
        return ordinal
    return next((p for p, s in sorted(rendered.items()) if s.action == record.action and not record.finish), None)


def _quotation(shown: RenderedStep, prefer: str | None = None) -> str:
    """A verbatim piece of a rendered step's lines, long enough for `check_record`: its action, else the first
    line of its result, else one of its valid actions (`prefer` first)."""
    result_line = shown.result.strip().split("\n", 1)[0][:MAX_QUOTE].strip()
    valid = sorted(shown.valid, key=lambda a: a != prefer)
    for piece in (shown.action, result_line, *valid):
        if len(piece.strip()) >= MIN_QUOTE and piece in shown.text:
            return piece
    return shown.text.split("\n", 1)[0][:MAX_QUOTE]


def _reply(schema: Mapping[str, Any], step: int, explanation: str, quotation: str, correction: str | None,
           reason: str) -> dict[str, Any]:
    """A reply of the diagnoser's schema (`alternatives` empty where the schema asks for them)."""
    reply: dict[str, Any] = {"step": step, "responsible": "agent", "explanation": explanation[:400],
                             "quotations": [quotation[:300]], "correction": correction,
                             "correction_reason": reason[:300]}
    if "alternatives" in schema.get("properties", {}):
        reply["alternatives"] = []
    return reply


def _paraphrase(action: str) -> str:
    """The planned action as a careless model might put it: the same words with "the" put in after the verb."""
    verb, _, rest = action.partition(" ")
    return f"{verb} the {rest}" if rest and not rest.startswith("the ") else f"{action} now"


def answer_diagnosis(request: JudgeRequest) -> JudgeAnswer:
    """AED's LLM diagnoser: the first injected step of the episode and its planned action (see module docstring)."""
    state, rng, schema = request.state, request.rng, request.schema
    rendered = rendered_steps(request.user)
    first = next((s for s in state.steps if s.injected is not None), None)
    position = _position(first, state.steps, rendered) if first is not None else None
    if first is None or position is None:  # nothing injected (or not in the trace): the budget ran out
        last = max(rendered, default=0)
        shown = rendered.get(last)
        quote = _quotation(shown) if shown is not None else "Goal"
        reply = _reply(schema, last, "The agent followed its plan; the step budget ran out.", quote, None,
                       "no step departed from the plan, so no action is grounded as the right one")
        others = [a for a in shown.valid if a != shown.action] if shown is not None else []
        wrong = {**reply, "correction": rng.choice(others), "correction_reason": "another valid action"} if others \
            else reply
        return JudgeAnswer(reply, wrong, {"step": None, "correction": None}, lambda r: r.get("correction") is None)
    shown = rendered[position]
    planned = first.planned
    label = str(first.injected.get("label", "failure")).replace("_", " ") if first.injected else "failure"
    did = "declared the task finished" if first.finish else f"sent {first.action!r}"
    explanation = f"At step {position} the agent {did} ({label}); the task needed {planned!r} there."
    correct = _reply(schema, position, explanation, _quotation(shown, planned), planned,
                     "the next action the task needed at that step" if planned is not None else "")
    if planned is None:
        correct["correction_reason"] = "the task's plan was already done at that step; nothing to do instead"
    truth = {"step": position, "correction": planned, "label": first.injected.get("label") if first.injected else None}

    def agrees(reply: Mapping[str, Any]) -> bool:
        return reply.get("step") == position and reply.get("correction") == planned

    return JudgeAnswer(correct, _wrong(request, first, position, rendered), truth, agrees)


def _wrong(request: JudgeRequest, first: StepRecord, position: int, rendered: Mapping[int, RenderedStep]
           ) -> dict[str, Any]:
    """A realistic mistake: a later clean step, a retry of the failing action, or an inadmissible correction."""
    state, rng, schema = request.state, request.rng, request.schema
    shown = rendered[position]
    later = []
    for record in state.steps:
        where = _position(record, state.steps, rendered) if record.injected is None and not record.finish else None
        if where is not None and where > position and len(rendered[where].valid) > 1:
            later.append(where)
    kinds = ["retry", *(["wrong_step"] if later else []), *(["not_admissible"] if first.planned else [])]
    kind = rng.choice(kinds)
    if kind == "wrong_step":
        where = rng.choice(later)
        other = rendered[where]
        correction = rng.choice([a for a in other.valid if a != other.action])
        return _reply(schema, where, f"At step {where} the agent sent {other.action!r}, which led nowhere.",
                      _quotation(other), correction, "another valid action at that step")
    if kind == "not_admissible":
        return _reply(schema, position, f"At step {position} the agent went off its plan.", _quotation(shown),
                      _paraphrase(str(first.planned)), "what the task needed next")
    if first.finish:
        return _reply(schema, position, f"At step {position} the agent finished.", _quotation(shown), None,
                      "finishing was right: the goal looked done")
    return _reply(schema, position, f"At step {position} the agent's action did not go through.",
                  _quotation(shown), first.action, "the action was right; it should be tried again")


class GradedTraceJudge(TraceInstrumentJudge):
    """`TraceInstrumentJudge` that also keeps its grades by episode (`grades`) in a JSON file (`grades_path`),
    written after every reply and read back on start, so a diagnosis resumed part-way keeps the grades of the
    episodes already done. Instrument side only: the diagnoser gets the reply's text as before."""

    def __init__(self, judges: Mapping[str, InstrumentJudgeSpec], accuracy: float, grades_path: str | Path,
                 seed: str = "instrument") -> None:
        super().__init__(judges, accuracy, seed=seed)
        self.grades_path = Path(grades_path)
        saved = json.loads(self.grades_path.read_text()) if self.grades_path.is_file() else {}
        if saved.get("accuracy") == accuracy and saved.get("seed") == seed:
            self.grades.update(saved.get("episodes", {}))
        self.accuracy_set = accuracy

    def complete(self, messages: list[dict], **kwargs: Any) -> Any:
        """Answer as `TraceInstrumentJudge` does, and save the grades."""
        from playground.host_api import atomic_write_text

        completion = super().complete(messages, **kwargs)
        if completion.graded is not None:
            right = sum(bool(g.get("correct")) for g in self.grades.values())
            atomic_write_text(self.grades_path, json.dumps(
                {"accuracy": self.accuracy_set, "seed": self.seed, "graded": len(self.grades), "right": right,
                 "episodes": self.grades}, indent=1) + "\n")
        return completion


def instrument_diagnoser(host: Any, accuracy: float, grades_path: str | Path) -> GradedTraceJudge:
    """The instrument as AED's diagnoser model, right with probability `accuracy`, over the host's registered
    answerers (`register_instrument_judges`); grades kept in `grades_path`."""
    judges = {spec.role: spec for spec in host.instrument_judges}
    return GradedTraceJudge(judges, accuracy, grades_path)
