"""Matched replay: the correction against a fresh retry of the original action, from the same rebuilt state.

For each kept diagnosis with a correction, every trial rebuilds the state before the
attributed step (the fork machinery, `playground.run.forks`: the recorded prefix replayed
and checked observation by observation), sends the correction (treatment) or the
original action again (control: the recorded action, or a finish where the agent
finished), and plays on under the same continuation policy: the same agent with the
same options and, in trial i, the same seed for both arms. The env's own grader decides
(`won`). Both arms of a trial must start from identical observations (checked).

Evidence grade of a pair:
- `E2`: at least two trials per arm, every treatment won and every control did not;
- `E1`: at least one trial per arm, every treatment won and every control did not, but
  fewer than two trials on some arm;
- `none`: not replayed, or the outcomes do not separate the arms.

Search-selected proposals: a diagnosis with several candidate corrections (`aed diagnose --proposals N`) has each
candidate replayed as a treatment arm of its own, in the same trials (same rebuilt state, continuation and seed)
against the same control. Its first candidate is the first proposal (the `treatment` arm); the search-selected
candidate is the one whose replay is best (`select_candidate`): highest grade, then most trials won, ties to the
earliest. The selection uses replay evidence only, that is the env's verdict on each replayed continuation.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playground.core.events import HeaderEvent
from playground.host_api import ForkError, Host, confined, fork, load_episode
from playground.plugins.aed.diagnose import read_jsonl_file, write_jsonl

GRADES = ("none", "E1", "E2")


def evidence_grade(treatment: list[bool], control: list[bool]) -> str:
    """The evidence grade of a pair from the `won` outcomes of its treatment and control trials."""
    if not treatment or not control or not all(treatment) or any(control):
        return "none"
    return "E2" if min(len(treatment), len(control)) >= 2 else "E1"


def select_candidate(candidates: list[dict]) -> int:
    """The index of the search-selected candidate among replayed ones (`{"won": [...], "grade": ...}` each): the
    highest evidence grade, then the largest share of its trials won; ties go to the earliest candidate."""
    def rank(index: int) -> tuple[int, float, int]:
        won = candidates[index]["won"]
        return GRADES.index(candidates[index]["grade"]), sum(won) / len(won) if won else 0.0, -index

    return max(range(len(candidates)), key=rank)


def continuation_of(host: Host, header: HeaderEvent, agent: str | None, agent_options: dict | None) -> dict:
    """The continuation policy of a replay: `agent` with `agent_options`, or (agent None) the agent and options
    the trace `header` names; labelled `run_agent` or `substituted`, and `oracle` when the agent follows the
    env's expert plan."""
    run_agent, run_options = header.agent, dict(header.agent_options)
    if agent is None:
        if not run_agent:
            raise ForkError("the diagnosed trace names no agent to continue with; pass --agent")
        agent, agent_options = run_agent, run_options
    agent_options = dict(agent_options or {})
    try:
        spec = host.agents.get(agent)
    except (KeyError, ValueError) as exc:
        raise ForkError(exc.args[0]) from None
    same = agent == run_agent and agent_options == run_options
    return {"agent": agent, "agent_options": agent_options, "continuation": "run_agent" if same else "substituted",
            "oracle": bool(spec.needs_expert)}


def replay_pair(host: Host, run_dir: Path, record: dict, *, agent: str | None, agent_options: dict | None,
                trials: int, seed: int) -> dict:
    """Replay one diagnosis `trials` times per arm; return its replay record (outcomes, grade, lineage, and
    the continuation: by default the diagnosed episode's own agent and options). Every candidate correction of
    the record (`candidates`; else its one correction) is an arm of its own: the first is `treatment`, candidate k
    (k >= 1) arm `candidate` with its index; `candidates` and `selected` report each one's outcome and the best."""
    episode = load_episode(confined(run_dir, record["trace"], what="diagnosed trace"))
    policy = continuation_of(host, episode.header, agent, agent_options)
    agent, agent_options = policy["agent"], policy["agent_options"]
    position = int(record["step"])
    folder = Path("forks") / "aed" / record["id"]
    candidates = list(record.get("candidates") or [record["correction"]])
    arms = [("treatment", 0, candidates[0]), ("control", None, record.get("attributed_action") or None),
            *(("candidate", k, action) for k, action in enumerate(candidates[1:], start=1))]
    won: dict[int, list[bool]] = {k: [] for k in range(len(candidates))}
    control: list[bool] = []
    transcripts: list[dict] = []
    for trial in range(trials):
        starts = set()
        for arm, index, action in arms:
            finish = arm == "control" and action is None
            name = f"candidate{index}.{trial}.jsonl" if arm == "candidate" else f"{arm}.{trial}.jsonl"
            out = confined(run_dir, folder / name, what="replay trace")
            lineage = {"diagnosis": record["id"], "arm": arm, "trial": trial,
                       **({"candidate": index} if arm == "candidate" else {})}
            result = fork(host, episode, position, out, agent=agent, agent_options=agent_options, action=action,
                          seed=seed + trial, finish=finish, lineage=lineage)
            starts.add(result.start_observation)
            (control if index is None else won[index]).append(result.won)
            transcripts.append({"arm": arm, **({"candidate": index} if arm == "candidate" else {}), "trial": trial,
                                "seed": seed + trial, "action": action, "finish": finish, "won": result.won,
                                "status": result.status, "steps": result.steps,
                                "trace": str(out.relative_to(run_dir)), "restored": result.restored})
        if len(starts) != 1:
            raise ForkError(f"diagnosis {record['id']}: the arms of trial {trial} started from different states")
    replayed = [{"index": k, "action": action, "won": won[k], "grade": evidence_grade(won[k], control)}
                for k, action in enumerate(candidates)]
    return {"id": record["id"], "trace": record["trace"], "step": position, "task_id": record.get("task_id"),
            "correction": record["correction"], "original": record.get("attributed_action"),
            **policy, "trials": trials, "seed": seed,
            "treatment_won": won[0], "control_won": control, "grade": replayed[0]["grade"],
            "candidates": replayed, "selected": replayed[select_candidate(replayed)],
            "restored_state_check": all(t["restored"]["observation_equal"] for t in transcripts),
            "same_start": True, "transcripts": transcripts}


def replay_run(host: Host, run_dir: str | Path, *, agent: str | None = None, agent_options: dict | None = None,
               trials: int = 2, seed: int = 0, limit: int | None = None) -> dict:
    """Replay the kept diagnoses with a correction (the first `limit` of them, in the order of
    diagnoses.jsonl, when given) under `agent` (None: each diagnosed episode's own agent and options); write
    RUN_DIR/aed/replays.jsonl after every pair, so an interrupted replay keeps the pairs it finished; return
    counts."""
    run_dir = Path(run_dir)
    records = read_jsonl_file(run_dir / "aed" / "diagnoses.jsonl")
    correctable = [r for r in records if r.get("correction") is not None]
    chosen = correctable if limit is None else correctable[:limit]
    replays: list[dict[str, Any]] = []
    failed: dict[str, str] = {}
    for record in chosen:
        try:
            replays.append(replay_pair(host, run_dir, record, agent=agent, agent_options=agent_options,
                                       trials=trials, seed=seed))
        except ForkError as exc:
            failed[record["id"]] = str(exc)
            continue
        write_jsonl(run_dir / "aed" / "replays.jsonl", replays)
    write_jsonl(run_dir / "aed" / "replays.jsonl", replays)
    grades = {grade: sum(r["grade"] == grade for r in replays) for grade in GRADES}
    return {"pairs": len(records), "with_correction": len(correctable), "not_chosen": len(correctable) - len(chosen),
            "replayed": len(replays), "not_replayable": failed, "grades": grades,
            "oracle_continuation": sum(r["oracle"] for r in replays),
            "candidates_replayed": sum(len(r["candidates"]) for r in replays),
            "selected_not_first": sum(r["selected"]["index"] != 0 for r in replays)}
