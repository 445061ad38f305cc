"""Training views of a diagnosed run, each record validated against a JSON Schema shipped in `schemas/`.

- `diagnosis`: a failed episode's trace in (goal, status, every step's admissible actions,
  action and result) -> the attributed step, explanation, quotations and correction out.
- `actor`: what the agent saw at the attributed step -> the corrected action. Variant
  `before_error`: the recorded prefix only. Variant `after_error`: the prefix plus the
  rejected action and its feedback, kept only when the rejection left the state unchanged
  (the env reported the action invalid, or the next step started from the same
  observation and admissible actions). The failed suffix is never included.
- `adp`: every episode of the run (not errored) as a plain trajectory in the Agent Data
  Protocol's standardized trajectory shape (`schema_version` 1.2.0; the goal and start as
  a user `text_observation`, each command a `message_action` with the thought as
  `description`, each result an environment `text_observation`).

Which proposal of a pair a diagnosis or actor row carries (`proposal`): `first`, the diagnoser's first proposal
(`correction`, the default), or `selected`, the search-selected candidate of its replay (`aed replay`), with that
candidate's grade; an unreplayed pair's selected proposal is its first. `meta.proposal` names it.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

from playground.host_api import (
    EpisodeTrace,
    RunDirError,
    atomic_write_text,
    confined,
    load_episode,
    load_records,
    record_trace,
)
from playground.plugins.aed.diagnose import read_jsonl_file

VIEWS = ("diagnosis", "actor", "adp")
GRADE_ORDER = {"none": 0, "E1": 1, "E2": 2}
# The evidence a pair needs to be exported, by view. An actor row's target is a recovery to train on, so it needs an
# executed passing continuation (the paper's D.1, T.2); a diagnosis row's labels come from the trace itself.
DEFAULT_MIN_GRADE = {"diagnosis": "none", "actor": "E1", "adp": "none"}
PROPOSALS = ("first", "selected")
ADP_VERSION = "1.2.0"


class ExportError(ValueError):
    """An exported record does not match its view's schema."""


@cache
def schema(view: str) -> dict:
    """The JSON Schema of a view, as shipped in the package."""
    text = resources.files("playground.plugins.aed").joinpath("schemas", f"{view}.schema.json").read_text()
    return json.loads(text)


def validate(view: str, record: dict) -> None:
    """Raise ExportError when `record` does not match the schema of `view`."""
    try:
        jsonschema.validate(record, schema(view))
    except jsonschema.ValidationError as exc:
        raise ExportError(f"{view} record {record.get('id')!r}: {exc.message} at {list(exc.absolute_path)}") from None


def chosen_proposal(record: dict, replay: dict | None, proposal: str = "first") -> tuple[dict, str]:
    """(the diagnosis record carrying the chosen proposal as its correction, that proposal's evidence grade).
    `first`: the record as it is, with its replay's grade; `selected`: the search-selected candidate of its replay
    (`replay["selected"]`), its reason saying so where it is not the first. Unreplayed: the record, grade none."""
    if replay is None:
        return record, "none"
    selected = replay.get("selected")
    if proposal == "first" or selected is None or selected["index"] == 0:
        return record, replay["grade"]
    count = len(replay.get("candidates") or [])
    reason = (f"search-selected: candidate {selected['index'] + 1} of {count}, the best replay "
              f"(grade {selected['grade']}, {sum(selected['won'])}/{len(selected['won'])} trials won)")
    return {**record, "correction": selected["action"], "correction_reason": reason}, selected["grade"]


def _replays(run_dir: Path) -> dict[str, dict]:
    return {r["id"]: r for r in read_jsonl_file(run_dir / "aed" / "replays.jsonl")}


def diagnosis_view(episode: EpisodeTrace, record: dict, grade: str, min_grade: str = "none",
                   proposal: str = "first") -> dict:
    """One diagnosis row: the failed episode in, the diagnosis out; `meta` names its grade and the export's bar."""
    steps = [{"step": s.position, "admissible_actions": s.admissible, "action": s.action, "finish": False,
              "observation": s.observation, "valid": s.valid} for s in episode.steps]
    if episode.tail is not None:
        steps.append({"step": episode.tail.position, "admissible_actions": episode.tail.admissible, "action": None,
                      "finish": any(p.finish for p in episode.tail.proposals), "observation": None,
                      "valid": True})
    return {"id": record["id"],
            "input": {"goal": episode.reset.goal, "status": episode.status, "start": episode.reset.observation,
                      "steps": steps},
            "output": {"step": int(record["step"]), "explanation": record["explanation"],
                       "quotations": list(record["quotations"]), "correction": record["correction"],
                       "correction_reason": record.get("correction_reason")},
            "meta": {"trace": record["trace"], "producer": record.get("producer", ""), "grade": grade,
                     "min_grade": min_grade, "proposal": proposal}}


def _state_unchanged(episode: EpisodeTrace, position: int) -> bool:
    step = episode.steps[position]
    if not step.valid:
        return True
    following = episode.at(position + 1) if position + 1 <= len(episode.steps) else None
    return bool(following is not None and step.observation_before == following.observation_before
                and following.admissible == step.admissible)


def actor_views(episode: EpisodeTrace, record: dict, grade: str, min_grade: str = "E1",
                proposal: str = "first") -> list[dict]:
    """The actor rows of one pair (before the error, and after it where the state was unchanged); `meta` names the
    pair's grade and the export's bar."""
    if record.get("correction") is None:
        return []
    position = int(record["step"])
    at = episode.at(position)
    history = [{"action": s.action, "observation": s.observation, "valid": s.valid} for s in episode.steps[:position]]
    base = {"goal": episode.reset.goal, "history": history,
            "observation": episode.observation_before(position),
            "admissible_actions": at.admissible if at is not None else None,
            "target": {"action": record["correction"]},
            "meta": {"trace": record["trace"], "step": position, "grade": grade, "min_grade": min_grade,
                     "proposal": proposal}}
    views = [{"id": f"{record['id']}:before", "variant": "before_error", "rejected": None, **base}]
    if position < len(episode.steps) and _state_unchanged(episode, position):
        step = episode.steps[position]
        views.append({"id": f"{record['id']}:after", "variant": "after_error",
                      "rejected": {"action": step.action, "feedback": step.observation}, **base})
    return views


def adp_view(episode: EpisodeTrace, trace: str) -> dict:
    content: list[dict[str, Any]] = [{"class_": "text_observation", "source": "user",
                                      "content": f"{episode.reset.goal}\n\n{episode.reset.observation}"}]
    for step in episode.steps:
        content.append({"class_": "message_action", "content": step.action, "description": step.thought})
        content.append({"class_": "text_observation", "source": "environment", "content": step.observation,
                        "reward": step.reward})
    if episode.tail is not None and any(p.finish for p in episode.tail.proposals):
        content.append({"class_": "message_action", "content": "finish",
                        "description": episode.tail.proposals[-1].thought})
    header = episode.header
    return {"schema_version": ADP_VERSION, "id": header.episode_id or trace, "content": content,
            "details": {"env": header.env, "task_id": header.task_id, "status": episode.status,
                        "won": episode.status == "won", "trace": trace, "agent": header.agent,
                        "harness": header.harness}}


def build_view(run_dir: str | Path, view: str, min_grade: str | None = None, proposal: str = "first") -> list[dict]:
    """The records of `view` for a run directory (diagnoses from RUN_DIR/aed/), each validated; only pairs whose
    chosen proposal's replay reached `min_grade` (default: `DEFAULT_MIN_GRADE` of the view, E1 for actor rows).
    `proposal`: `first` (the diagnoser's first proposal) or `selected` (the search-selected one, `chosen_proposal`)."""
    if view not in VIEWS:
        raise ExportError(f"unknown view {view!r}; choose from: {', '.join(VIEWS)}")
    min_grade = DEFAULT_MIN_GRADE[view] if min_grade is None else min_grade
    if min_grade not in GRADE_ORDER:
        raise ExportError(f"unknown evidence grade {min_grade!r}; choose from: {', '.join(GRADE_ORDER)}")
    if proposal not in PROPOSALS:
        raise ExportError(f"unknown proposal {proposal!r}; choose from: {', '.join(PROPOSALS)}")
    run_dir = Path(run_dir)
    records: list[dict] = []
    if view == "adp":
        for played in load_records(run_dir):
            if played.status == "error":
                continue
            traces = [a.trace for a in played.attempts or []] or [played.trace]
            for relative in traces:
                if relative is None:  # an attempt naming no trace file (not the episode's first trace)
                    raise RunDirError(f"{run_dir}: episode {played.key!r} names no trace file")
                records.append(adp_view(load_episode(record_trace(run_dir, played, trace=relative)), relative))
    else:
        replays = _replays(run_dir)
        episodes: dict[str, EpisodeTrace] = {}
        for diagnosed in read_jsonl_file(run_dir / "aed" / "diagnoses.jsonl"):
            record, grade = chosen_proposal(diagnosed, replays.get(diagnosed["id"]), proposal)
            if GRADE_ORDER[grade] < GRADE_ORDER[min_grade]:
                continue
            trace = record["trace"]
            if trace not in episodes:
                episodes[trace] = load_episode(confined(run_dir, trace, what="diagnosed trace"))
            if view == "diagnosis":
                records.append(diagnosis_view(episodes[trace], record, grade, min_grade, proposal))
            else:
                records.extend(actor_views(episodes[trace], record, grade, min_grade, proposal))
    for record in records:
        validate(view, record)
    return records


def below_grade(run_dir: str | Path, view: str, min_grade: str | None = None, proposal: str = "first") -> int:
    """How many pairs (with a correction, for the actor view) `build_view` leaves out for lack of replay evidence."""
    min_grade = DEFAULT_MIN_GRADE[view] if min_grade is None else min_grade
    replays = _replays(Path(run_dir))
    return sum(GRADE_ORDER[chosen_proposal(r, replays.get(r["id"]), proposal)[1]] < GRADE_ORDER[min_grade]
               for r in read_jsonl_file(Path(run_dir) / "aed" / "diagnoses.jsonl")
               if view == "diagnosis" or (view == "actor" and r.get("correction") is not None))


def export(run_dir: str | Path, view: str, out: str | Path, min_grade: str | None = None,
           proposal: str = "first") -> int:
    """Write the validated records of `view` to `out` (JSONL), carrying each pair's `proposal` (first or
    selected); return how many."""
    records = build_view(run_dir, view, min_grade, proposal)
    atomic_write_text(out, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    return len(records)


def read_export(path: str | Path, view: str) -> list[dict]:
    """Read an exported file back, validating every record."""
    records = read_jsonl_file(Path(path))
    for record in records:
        validate(view, record)
    return records
