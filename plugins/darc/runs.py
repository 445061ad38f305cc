"""Reading the finished run directories DARC's commands build on: a diagnosis or an evidence table is made from a run
that `playground run` or a study played, never on a part of its tasks."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from playground.host_api import EpisodeRecord, read_config, records_so_far


class RunNotReady(ValueError):
    """A run directory a DARC command cannot build on: not a run, unfinished, or without the harness it needs."""


def read_run(run_dir: str | Path) -> tuple[dict[str, Any], list[EpisodeRecord]]:
    """(config.json, the episode records) of a run directory (RunDirError when it is not one)."""
    return read_config(Path(run_dir) / "config.json"), records_so_far(run_dir)


def played(config: dict[str, Any]) -> list[str]:
    """The harnesses a run was asked to play (config.json's; a resume may have added some)."""
    return list(config.get("harnesses") or [])


def finished(run_dir: str | Path, config: dict[str, Any], records: Sequence[EpisodeRecord],
             harness: str, command: str) -> list[EpisodeRecord]:
    """The records of `harness`, which must hold an episode of every task the run's config names (RunNotReady
    otherwise: a run that ended with episodes unfinished, stopped or interrupted, or without that harness)."""
    if harness not in played(config):
        raise RunNotReady(f"{run_dir}: the run has no harness {harness!r} (it played: "
                          f"{', '.join(played(config))}); play it there too with --harness {harness}")
    mine = [record for record in records if record.harness == harness]
    recorded = config.get("tasks")
    tasks: list = recorded if isinstance(recorded, list) else []
    have = {record.task_id for record in mine}
    missing = [task for task in tasks if task not in have]
    if missing or not mine:
        hint = " (see unfinished.jsonl there)" if (Path(run_dir) / "unfinished.jsonl").is_file() else ""
        raise RunNotReady(f"{run_dir}: the run is unfinished: {len(missing)} of its {len(tasks)} tasks have no "
                          f"episode under {harness!r}{f' (the first: {missing[0]!r})' if missing else ''}{hint}; "
                          f"rerun the same command that played it to finish it, then {command} again")
    return mine
