"""Error-diagnosis pairs from a run's traces, each checked against the trace before it is kept.

Every episode whose status is not `won` is a failed episode; one with status `error` is an
infrastructure failure (the env, the agent or a plugin broke) and is screened out and
counted, never diagnosed. A diagnoser sees the trace only: the episode status, but no
grade beyond it and no expert plan.

A diagnosis record names the attributed step (a fork point: the position on the
episode's surviving path, see `playground.run.forks`), the action recorded there (or a
finish), an explanation, one or more quotations and one corrected action, or a null
correction with a stated reason. A record is kept only when

- every quotation is an exact substring of a text of the trace (an observation, an
  action, a thought, a detection's evidence, a message, ...), at least `MIN_QUOTE` long;
- the correction is admissible at the attributed step by the admissible actions the
  agent was shown there (recorded in the proposal events; envs that list none, free text
  or code, accept any action) and differs from the attributed action;
- a null correction states its reason.

Otherwise it is rejected and counted by reason (`REJECT_REASONS`).

Producers: `rule` (from the detection events, such as Sentry's, and the invalid actions
the env reported, with the correction the trace itself shows or the admissible action
closest to a rejected one) and `llm` (a chat model asked for JSON, see `llm_diagnoses`; its
prompt shows every observation without the grade text the env prints, through the env
provider's `remove_grade_text`).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Callable

from rapidfuzz import fuzz

from playground.core.actions import is_admissible
from playground.core.events import fields_of
from playground.core.payloads import keep_text
from playground.host_api import (
    CALL_FAILED,
    EpisodeTrace,
    RecordedStep,
    ask_structured,
    load_episode,
    load_records,
    record_trace,
    show_episode,
)

MIN_QUOTE = 4
MAX_PAIRS_PER_EPISODE = 3
CLEARLY_MEANT = 80.0  # rapidfuzz ratio above which a rejected command plainly meant an admissible one
SIMILAR_ENOUGH = 60.0  # ... and the weaker match used when the trace shows no recovery
REJECT_REASONS = ("no_quotation", "quotation_too_short", "quotation_not_in_trace", "step_out_of_range",
                  "correction_not_admissible", "correction_is_the_error", "null_correction_without_reason",
                  "unparseable_reply", "model_error", "bad_record")
SCREEN_REASONS = ("infrastructure_error", "no_trace", "unreadable_trace")


def trace_texts(episode: EpisodeTrace) -> list[str]:
    """Every text of a trace's events (string values at any depth), where quotations must be found."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for event in episode.events:
        walk(fields_of(event))
    return found


def grounded(quotation: str, texts: Iterable[str]) -> bool:
    """True when `quotation` occurs verbatim in one of `texts`."""
    return any(quotation in text for text in texts)


def check_record(record: dict, episode: EpisodeTrace, texts: list[str] | None = None) -> str | None:
    """Why `record` must be rejected (one of REJECT_REASONS), or None when it holds."""
    try:
        position = int(record["step"])
        quotations = [str(q) for q in record.get("quotations") or []]
        correction = record.get("correction")
    except (KeyError, TypeError, ValueError):
        return "bad_record"
    if not isinstance(record.get("explanation"), str) or not record["explanation"].strip():
        return "bad_record"
    if position < 0 or position > len(episode.steps) or (position == len(episode.steps) and episode.tail is None):
        return "step_out_of_range"
    if not quotations:
        return "no_quotation"
    texts = trace_texts(episode) if texts is None else texts
    for quotation in quotations:
        if len(quotation.strip()) < MIN_QUOTE:
            return "quotation_too_short"
        if not grounded(quotation, texts):
            return "quotation_not_in_trace"
    if correction is None:
        return None if str(record.get("correction_reason") or "").strip() else "null_correction_without_reason"
    if not isinstance(correction, str) or not correction.strip():
        return "bad_record"
    at = episode.at(position)
    if at is not None and at.action and correction == at.action:
        return "correction_is_the_error"
    admissible = at.admissible if at is not None else None
    if admissible is not None and not is_admissible(correction, admissible):
        return "correction_not_admissible"
    return None


def check_candidates(record: dict, episode: EpisodeTrace, texts: list[str] | None = None) -> None:
    """Keep in `record["candidates"]` only distinct candidates that pass the checks a correction passes (admissible
    at the attributed step, not the attributed action: `check_record`); each one dropped goes to
    `record["candidates_dropped"]` with its reason (`duplicate` for a repeat). The first kept candidate is the
    record's `correction`, which `check_record` has already passed; a null correction keeps none."""
    first = record.get("correction")
    proposed = list(record.get("candidates") or ([] if first is None else [first]))
    record["candidates"] = []
    texts = trace_texts(episode) if texts is None else texts
    dropped = []
    for candidate in proposed:
        if candidate in record["candidates"]:
            reason: str | None = "duplicate"
        elif not isinstance(candidate, str) or first is None:
            reason = "bad_record"
        else:
            reason = check_record({**record, "correction": candidate}, episode, texts)
        if reason is None:
            record["candidates"].append(candidate)
        else:
            dropped.append({"action": candidate, "reason": reason})
    if dropped:
        record["candidates_dropped"] = dropped


def record_id(record: dict) -> str:
    """A short stable id of a diagnosis: its trace, step, producer and correction."""
    key = json.dumps([record.get("trace"), record.get("step"), record.get("producer"), record.get("correction")])
    return hashlib.sha256(key.encode()).hexdigest()[:12]


# --- the rule diagnoser ---------------------------------------------------------------------------------------

def _failure(step: RecordedStep) -> dict | None:
    """The failure the trace shows at a step: detections on the executed proposal, else a rejected action."""
    executed = max((p.attempt for p in step.proposals), default=0)
    detections = [d for d in step.detections if d.attempt == executed]
    if step.action and detections:
        first = detections[0]
        return {"failure_type": first.failure_type, "labels": list(first.labels), "evidence": first.evidence,
                "detector": first.detector}
    if step.action and not step.valid:
        return {"failure_type": "action_validity", "labels": ["invalid_action"], "evidence": "", "detector": ""}
    return None


def _recovery_actions(episode: EpisodeTrace, position: int) -> list[str]:
    """The actions the agent itself took later from the same situation (same observation and admissible
    actions as at `position`), accepted and not flagged, distinct, in the order taken: the trace's own
    corrections."""
    here = episode.steps[position]
    found: list[str] = []
    for later in episode.steps[position + 1:]:
        if _situation(episode, later.position) != _situation(episode, position):
            continue
        if later.valid and later.action != here.action and _failure(later) is None and later.action not in found:
            found.append(later.action)
    return found


def _situation(episode: EpisodeTrace, position: int) -> tuple[str, tuple[str, ...] | None]:
    """What the trace says of the state before action `position`: the last observation of an accepted action
    (a rejected action changes nothing, so its feedback says nothing of the state) and the admissible actions."""
    observation = episode.reset.observation
    for step in reversed(episode.steps[:position]):
        if step.valid:
            observation = step.observation
            break
    admissible = episode.steps[position].admissible if position < len(episode.steps) else None
    return observation, tuple(admissible) if admissible is not None else None


def _close_actions(action: str, admissible: list[str] | None, threshold: float) -> list[str]:
    """The admissible actions at least `threshold` like `action` (rapidfuzz ratio), most alike first (ties: the
    later string first). None when the most alike is `action` itself: an admissible command was not garbled."""
    if not admissible or not action:
        return []
    ranked = sorted(admissible, key=lambda a: (fuzz.ratio(action, a), a), reverse=True)
    if ranked[0] == action:
        return []
    return [a for a in ranked if fuzz.ratio(action, a) >= threshold]


def rule_diagnoses(episode: EpisodeTrace, trace: str, proposals: int = 1) -> list[dict]:
    """Error-diagnosis pairs the trace supports by rule: the onset of each failure streak (at most
    MAX_PAIRS_PER_EPISODE), and a finish that ended a failed episode. With `proposals` > 1 each record also
    lists up to that many distinct candidate corrections (`candidates`, best-ranked first; see
    `rule_candidates`)."""
    records: list[dict] = []
    previous: str | None = None
    for step in episode.steps:
        failure = _failure(step)
        kind = failure["failure_type"] if failure else None
        if failure is not None and kind != previous:
            records.append(_rule_record(episode, trace, step, failure, proposals))
        previous = kind
    tail = episode.tail
    if tail is not None and episode.status == "stopped" and any(p.finish for p in tail.proposals[-1:]):
        thought = tail.proposals[-1].thought
        quotes = [q for q in (thought, tail.observation_before) if len(q.strip()) >= MIN_QUOTE]
        records.append({"trace": trace, "step": tail.position, "attributed_action": None, "attributed_finish": True,
                        "failure_type": "progress", "labels": ["termination_miscalibration"],
                        "explanation": (f"At step {tail.position} the agent declared the task done, but the episode "
                                        "was not won: it stopped too early."),
                        "quotations": quotes[:2], "correction": None,
                        "correction_reason": ("the trace shows no action taken from this state after the finish, "
                                              "so no correction is grounded in it"),
                        "producer": "rule", **({"candidates": []} if proposals > 1 else {})})
    return records[:MAX_PAIRS_PER_EPISODE] if len(records) <= MAX_PAIRS_PER_EPISODE else (
        records[:MAX_PAIRS_PER_EPISODE - 1] + records[-1:])


MEANT = "the admissible action it plainly meant"
LATER = "the agent itself later took this action from the same situation"
CLOSEST = "the admissible action closest to the rejected one"


def rule_candidates(episode: EpisodeTrace, step: RecordedStep, failure: dict) -> list[tuple[str, str]]:
    """The corrections the rule producer considers at a failed step, best-ranked first, each with why: for a
    garbled command the admissible actions it plainly meant (most alike first); then the actions the agent itself
    later took from the same situation; then, for a rejected command, the admissible actions merely close to it.
    Distinct; the first is the rule producer's one correction."""
    garbled = failure["failure_type"] == "action_validity"
    ranked = [(a, MEANT) for a in (_close_actions(step.action, step.admissible, CLEARLY_MEANT) if garbled else [])]
    ranked += [(a, LATER) for a in _recovery_actions(episode, step.position)]
    ranked += [(a, CLOSEST) for a in (_close_actions(step.action, step.admissible, SIMILAR_ENOUGH) if garbled else [])]
    distinct: list[tuple[str, str]] = []
    for action, how in ranked:
        if action not in [a for a, _ in distinct]:
            distinct.append((action, how))
    return distinct


def _rule_record(episode: EpisodeTrace, trace: str, step: RecordedStep, failure: dict, proposals: int = 1) -> dict:
    quotes = [step.action]
    if failure["evidence"]:
        quotes.append(failure["evidence"])
        what = f"{failure['detector'] or 'a detector'} flagged it ({', '.join(failure['labels'])})"
    else:
        quotes.append(step.observation)
        what = "the env rejected it"
    ranked = rule_candidates(episode, step, failure)
    correction, how = ranked[0] if ranked else (None, "")
    record = {"trace": trace, "step": step.position, "attributed_action": step.action, "attributed_finish": False,
              "failure_type": failure["failure_type"], "labels": failure["labels"],
              "explanation": f"At step {step.position} the agent sent {step.action!r}; {what}.",
              "quotations": [q for q in quotes if len(q.strip()) >= MIN_QUOTE], "correction": correction,
              "correction_reason": how if correction is not None else (
                  "no admissible action at this step is grounded in the trace as the right one"),
              "producer": "rule"}
    if proposals > 1:
        record["candidates"] = [a for a, _ in ranked[:proposals]]
    return record


# --- the LLM diagnoser ----------------------------------------------------------------------------------------

LLM_SYSTEM = (
    "You diagnose why an agent failed a task in a text environment. You see the trace of one failed episode. "
    "Name the step whose action caused the failure and who is responsible (the agent, or the environment), explain "
    "why, quote the trace exactly (copy text verbatim), and give one corrected action chosen from that step's valid "
    'actions, or null with a reason. Answer with JSON only: {"step": <int>, "responsible": "agent" or '
    '"environment", "explanation": "...", "quotations": ["..."], "correction": "..." or null, '
    '"correction_reason": "..."}')
MAX_OBS = 300
MAX_ACTIONS = 40
LLM_ROLE = "aed.diagnoser"  # as its model calls are counted
# The reply's schema. Loose where `check_record` says more (a quotation too short or not in the trace, a step out of
# range, a null correction without a reason are rejected by it, by name); strings bounded so a small model ends.
LLM_SCHEMA: dict[str, Any] = {"type": "object", "properties": {
    "step": {"type": "integer"},
    "responsible": {"enum": ["agent", "environment"]},  # the paper's responsible agent; one agent here, or the env
    "explanation": {"type": "string", "maxLength": 400},
    "quotations": {"type": "array", "items": {"type": "string", "maxLength": MAX_OBS}, "minItems": 1, "maxItems": 3},
    "correction": {"anyOf": [{"type": "string", "maxLength": 200}, {"type": "null"}]},
    "correction_reason": {"type": "string", "maxLength": 300},
}, "required": ["step", "responsible", "explanation", "quotations", "correction", "correction_reason"],
    "additionalProperties": False}


def llm_schema(proposals: int = 1) -> dict:
    """The reply's schema for `proposals` candidate corrections: `LLM_SCHEMA` itself for one; for more, with an
    `alternatives` list of up to proposals - 1 further corrections, best first (the same step, one reply)."""
    if proposals <= 1:
        return LLM_SCHEMA
    alternatives = {"type": "array", "items": {"type": "string", "maxLength": 200}, "maxItems": proposals - 1}
    return {**LLM_SCHEMA, "properties": {**LLM_SCHEMA["properties"], "alternatives": alternatives},
            "required": [*LLM_SCHEMA["required"], "alternatives"]}


def llm_system(proposals: int = 1) -> str:
    """The LLM diagnoser's instructions: `LLM_SYSTEM`, asking for up to proposals - 1 alternatives when more than one
    candidate correction is wanted."""
    if proposals <= 1:
        return LLM_SYSTEM
    return (f"{LLM_SYSTEM} Also list up to {proposals - 1} alternative corrected actions for the same step, chosen "
            'from its valid actions, each different from the correction and from each other, best first: '
            '"alternatives": ["..."] (an empty list when the correction is null).')


def render_trace(episode: EpisodeTrace, remove_grade_text: Callable[[str], str] = keep_text) -> str:
    """The trace as the LLM diagnoser reads it: goal, status, and each step's valid actions, action and result,
    every observation without the grade text its env prints (`remove_grade_text`, the env provider's)."""
    start = remove_grade_text(episode.reset.observation)
    lines = [f"Goal: {episode.reset.goal}", f"Episode status: {episode.status}",
             f"Start: {start[:MAX_OBS]}"]
    for step in [*episode.steps, *([episode.tail] if episode.tail else [])]:
        actions = step.admissible
        shown = ", ".join(actions[:MAX_ACTIONS]) + (" ..." if len(actions) > MAX_ACTIONS else "") if actions else "-"
        if step.action:
            lines.append(f"Step {step.position}: valid actions: {shown}\n  action: {step.action}\n"
                         f"  result{'' if step.valid else ' (rejected)'}: "
                         f"{remove_grade_text(step.observation)[:MAX_OBS]}")
        else:
            lines.append(f"Step {step.position}: valid actions: {shown}\n  the agent declared the task finished")
    return "\n".join(lines)


def llm_diagnoses(episode: EpisodeTrace, trace: str, model: Any,
                  remove_grade_text: Callable[[str], str] = keep_text, proposals: int = 1) -> list[dict]:
    """One diagnosis from a chat model, asked for an object of `LLM_SCHEMA` (`ask_structured`); a reply with no
    JSON object or one breaking the schema is a record marked `unparseable_reply`, and a failed model call (an
    endpoint down, a trace longer than the model's context) one marked `model_error`, so both are counted among
    the rejected and the run goes on. The prompt's observations go through `remove_grade_text` (the env
    provider's): no grade text reaches the model. The episode's events are passed on to `show_episode` first, so
    the failure-injection instrument as the model (`TraceInstrumentJudge`) answers about this episode; any other
    model ignores them.

    With `proposals` > 1 the same reply also lists alternatives (`llm_schema`): the record's `candidates` are the
    correction then the alternatives, checked one by one in `diagnose_run` (`check_candidates`)."""
    show_episode(model, episode.events)  # the failure-injection instrument as the model: the episode asked about
    reply = ask_structured(model, LLM_ROLE, llm_system(proposals), render_trace(episode, remove_grade_text),
                           llm_schema(proposals), max_tokens=512)
    if reply.problem == "call_failed":
        return [{"trace": trace, "producer": "llm", "model_error": str(reply.error).removeprefix(f"{CALL_FAILED}: ")}]
    parsed = reply.value
    if parsed is None:  # no JSON object, or one breaking the schema (why: `reply_error`)
        return [{"trace": trace, "producer": "llm", "unparseable": True, "raw": reply.text[:2000],
                 "reply_error": str(reply.error)}]
    step = parsed.get("step")
    at = episode.at(step) if isinstance(step, int) and 0 <= step <= len(episode.steps) else None
    return [{"trace": trace, "step": step, "attributed_action": at.action if at is not None else None,
             "attributed_finish": bool(at is not None and not at.action),
             "failure_type": str(parsed.get("failure_type", "")), "labels": [],
             "responsible": parsed.get("responsible"),
             "explanation": parsed.get("explanation"), "quotations": parsed.get("quotations"),
             "correction": parsed.get("correction"), "correction_reason": parsed.get("correction_reason"),
             "producer": "llm", "prompt_tokens": reply.prompt_tokens, "completion_tokens": reply.completion_tokens,
             **({"candidates": _llm_candidates(parsed, proposals)} if proposals > 1 else {})}]


def _llm_candidates(parsed: dict, proposals: int) -> list:
    """The candidates of a parsed reply: its correction, then its alternatives (none when the correction is null),
    at most `proposals`; not yet checked."""
    correction = parsed.get("correction")
    if correction is None:
        return []
    return [correction, *(parsed.get("alternatives") or [])][:proposals]


# --- a run ----------------------------------------------------------------------------------------------------

def failed_episodes(run_dir: str | Path, counts: Counter) -> Iterator[tuple[str, EpisodeTrace]]:
    """(trace path relative to RUN_DIR, episode) of each failed episode; screened ones are counted in `counts`."""
    run_dir = Path(run_dir)
    for record in load_records(run_dir):
        counts["episodes"] += 1
        if record.status == "won" or record.won:
            counts["won"] += 1
            continue
        if record.status == "error":
            counts["screened:infrastructure_error"] += 1
            continue
        traces = [a.trace for a in record.attempts or []] or [record.trace]
        for relative in traces:
            try:
                if relative is None:  # an attempt naming no trace file (not the episode's first trace)
                    raise FileNotFoundError(f"episode {record.key!r}: an attempt names no trace file")
                episode = load_episode(record_trace(run_dir, record, trace=relative))
            except Exception:  # noqa: BLE001 - a trace that cannot be read is screened out and counted
                counts["screened:unreadable_trace"] += 1
                continue
            if episode.status == "error":
                counts["screened:infrastructure_error"] += 1
                continue
            if episode.status == "won":
                continue
            counts["failed"] += 1
            yield str(relative), episode


def diagnose_run(run_dir: str | Path, producer: str = "rule", model: Any = None,
                 remove_grade_text: Callable[[str], str] = keep_text, proposals: int = 1) -> dict:
    """Diagnose every failed episode of a run; write RUN_DIR/aed/diagnoses.jsonl (kept records),
    rejected.jsonl (with reasons) and diagnose.json (counts); return the counts. `remove_grade_text` (the run's
    env provider's, `EnvProvider.remove_grade_text`) cleans every observation the LLM producer's prompt shows.
    With `proposals` > 1 every record also holds up to that many distinct checked candidate corrections
    (`candidates`, the first being `correction`); with 1 the records are those of a single proposal.

    Both files are rewritten after every episode and `aed/diagnose.partial.json` lists the traces
    done, so a diagnosis stopped part-way (an LLM producer takes minutes) resumes where it stopped
    when run again with the same producer; a finished one is done afresh."""
    run_dir = Path(run_dir)
    out = run_dir / "aed"
    out.mkdir(parents=True, exist_ok=True)
    partial = out / "diagnose.partial.json"
    done: set[str] = set()
    kept: list[dict] = []
    rejected: list[dict] = []
    progress = json.loads(partial.read_text()) if partial.exists() else {}
    if (progress.get("producer"), progress.get("proposals", 1)) == (producer, proposals):
        done = set(progress["traces"])
        kept = [r for r in read_jsonl_file(out / "diagnoses.jsonl") if r.get("trace") in done]
        rejected = [r for r in read_jsonl_file(out / "rejected.jsonl") if r.get("trace") in done]
    counts: Counter = Counter()
    for relative, episode in failed_episodes(run_dir, counts):
        if relative in done:
            continue
        produced = (rule_diagnoses(episode, relative, proposals) if producer == "rule"
                    else llm_diagnoses(episode, relative, model, remove_grade_text, proposals))
        texts = trace_texts(episode)
        for record in produced:
            reason = ("model_error" if "model_error" in record else
                      "unparseable_reply" if record.get("unparseable") else check_record(record, episode, texts))
            record["task_id"] = episode.header.task_id
            record["harness"] = episode.header.harness
            record["status"] = episode.status
            record["id"] = record_id(record)
            if reason is None:
                if proposals > 1:
                    check_candidates(record, episode, texts)
                kept.append(record)
            else:
                rejected.append({**record, "rejected": reason})
        done.add(relative)
        write_jsonl(out / "diagnoses.jsonl", kept)
        write_jsonl(out / "rejected.jsonl", rejected)
        write_json(partial, {"producer": producer, "proposals": proposals, "traces": sorted(done)})
    write_jsonl(out / "diagnoses.jsonl", kept)
    write_jsonl(out / "rejected.jsonl", rejected)
    reasons = Counter(str(r["rejected"]) for r in rejected)
    unusable = reasons.get("unparseable_reply", 0) + reasons.get("model_error", 0)
    total = len(kept) + len(rejected)
    summary = {"producer": producer, "episodes": counts["episodes"], "won": counts["won"], "failed": counts["failed"],
               "screened": {k.split(":", 1)[1]: v for k, v in sorted(counts.items()) if k.startswith("screened:")},
               "pairs": len(kept), "with_correction": sum(r["correction"] is not None for r in kept),
               "rejected": dict(sorted(reasons.items())),
               # the producer's yield: records produced, usable (a reply of the schema; every rule record is),
               # checked (kept by check_record), and with a correction to replay
               "yield": {"produced": total, "usable": total - unusable, "checked": len(kept),
                         "with_correction": sum(r["correction"] is not None for r in kept)},
               # candidate corrections per pair (`--proposals`): kept (checked, distinct) and dropped, by reason
               "proposals": proposals,
               "candidates": {"kept": sum(len(r.get("candidates", [] if r["correction"] is None else [r["correction"]]))
                                          for r in kept),
                              "dropped": dict(sorted(Counter(d["reason"] for r in kept
                                                             for d in r.get("candidates_dropped", [])).items()))}}
    write_json(out / "diagnose.json", summary)
    partial.unlink(missing_ok=True)
    return summary


def write_json(path: Path, value: Any) -> None:
    from playground.host_api import atomic_write_text

    atomic_write_text(path, json.dumps(value, indent=2) + "\n")


def write_jsonl(path: Path, records: Iterable[dict]) -> None:
    from playground.host_api import atomic_write_text

    atomic_write_text(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))


def read_jsonl_file(path: Path) -> list[dict]:
    from playground.host_api import read_jsonl

    return list(read_jsonl(path)) if path.exists() else []
