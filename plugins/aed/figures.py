"""AED's study table columns (`register_figures`), read from the files its stages wrote into a run directory
(`aed/diagnose.json`, `aed/replays.jsonl`, and `aed/instrument.json` when the instrument was the diagnoser): the
grounded yield, the correction against the retry of the original action on matched pairs (pass rates, the paired
difference with its bootstrap interval and sign-flip p), the evidence grades, the search-selected proposal's pass
rate, the share replayed under an oracle continuation, and, for the instrument, the split by whether its reply was
right; each over the cell's own episodes (a run of two harnesses has a row each). A folder with no AED files gives
None everywhere.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from playground.api import Figure
from playground.core.records import EpisodeRecord


def _share(won: list[bool]) -> float:
    return sum(won) / len(won)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def figures_of(folder: Path, records: Sequence[EpisodeRecord]) -> dict[str, Any]:
    """Every AED figure of the cell whose episodes are `records`, from the files in its run directory `folder` ({}
    where it holds no diagnosis): the pairs, replies and grades of those episodes only."""
    files = [folder / "aed" / name for name in ("diagnose.json", "replays.jsonl", "instrument.json")]
    stamp = tuple(path.stat().st_mtime_ns if path.is_file() else 0 for path in files)
    episodes = tuple(sorted((str(r.trace), str(r.episode_id)) for r in records))
    return _figures(str(folder), stamp, episodes) if stamp[0] and episodes else {}


@lru_cache(maxsize=32)
def _figures(folder: str, stamp: tuple[int, ...], episodes: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    from playground.host_api import bootstrap_ci, sign_flip_p
    from playground.plugins.aed.diagnose import read_jsonl_file
    from playground.plugins.aed.replay import GRADES

    root = Path(folder) / "aed"
    episode_of = dict(episodes)  # trace -> episode id, the cell's

    def mine(name: str) -> list[dict]:
        return [r for r in read_jsonl_file(root / name) if r.get("trace") in episode_of]

    kept, produced = mine("diagnoses.jsonl"), len(mine("diagnoses.jsonl")) + len(mine("rejected.jsonl"))
    replays = [r for r in mine("replays.jsonl") if r["treatment_won"] and r["control_won"]]
    pairs = [(_share(r["treatment_won"]), _share(r["control_won"])) for r in replays]
    diffs = [t - c for t, c in pairs]
    low, high = bootstrap_ci(diffs, resamples=10_000, seed=0) if diffs else (None, None)
    searched = any(len(r.get("candidates") or []) > 1 for r in replays)
    values: dict[str, Any] = {
        "aed_grounded_yield": len(kept) / produced if produced else None,
        "aed_pairs_replayed": float(len(replays)),
        "aed_correction_pass_rate": _mean([t for t, _ in pairs]), "aed_retry_pass_rate": _mean([c for _, c in pairs]),
        "aed_difference": _mean(diffs), "aed_difference_ci_low": low, "aed_difference_ci_high": high,
        "aed_difference_p": sign_flip_p(diffs, resamples=10_000, seed=0) if diffs else None,
        "aed_grades": {grade: float(sum(r["grade"] == grade for r in replays)) for grade in GRADES},
        "aed_selected_pass_rate": _mean([_share(r["selected"]["won"]) for r in replays]) if searched else None,
        "aed_oracle_continuation": _mean([float(bool(r.get("oracle"))) for r in replays]),
    }
    if (root / "instrument.json").is_file():
        values.update(_by_reply(json.loads((root / "instrument.json").read_text()), replays, episode_of))
    return values


def _by_reply(graded: dict, replays: list[dict], episode_of: dict[str, str]) -> dict[str, Any]:
    """The instrument as the diagnoser: the share of its replies about the cell's episodes that were right, and the
    correction's and the retry's pass rates over the pairs from right and from wrong replies (each pair by its
    episode's grade)."""
    replies = [grade for episode, grade in graded["episodes"].items() if episode in set(episode_of.values())]
    split: dict[str, list[dict]] = {"right": [], "wrong": []}
    for replay in replays:
        split["right" if graded["episodes"][episode_of[replay["trace"]]]["correct"] else "wrong"].append(replay)
    return {"aed_replies_right": _mean([float(grade["correct"]) for grade in replies]),
            "aed_correction_by_reply": {k: _mean([_share(r["treatment_won"]) for r in v]) for k, v in split.items()},
            "aed_retry_by_reply": {k: _mean([_share(r["control_won"]) for r in v]) for k, v in split.items()},
            "aed_pairs_by_reply": {k: float(len(v)) for k, v in split.items()}}


def _figure(name: str, description: str, share: bool = False) -> Figure:
    def of(folder: Path, records: Sequence[EpisodeRecord]) -> Any:
        return figures_of(folder, records).get(name)

    return Figure(name, description, share=share, of_folder=of)


FIGURES = [
    _figure("aed_grounded_yield", "AED: diagnosis records that passed the checks, of those produced", share=True),
    _figure("aed_pairs_replayed", "AED: pairs replayed (a correction against a retry from the same state)"),
    _figure("aed_correction_pass_rate", "AED: the correction's pass rate (mean over pairs of trials won)", share=True),
    _figure("aed_retry_pass_rate", "AED: the retry's pass rate (the original action again, same state)", share=True),
    _figure("aed_difference", "AED: correction minus retry pass rate, paired over the replayed pairs"),
    _figure("aed_difference_ci_low", "AED: the difference's 95% paired bootstrap interval, low end"),
    _figure("aed_difference_ci_high", "AED: ... high end"),
    _figure("aed_difference_p", "AED: the difference's paired sign-flip p-value"),
    _figure("aed_grades", "AED: replayed pairs by evidence grade (E1: the correction won every trial and the retry "
                          "none; E2: that over two or more trials per arm; none: otherwise)"),
    _figure("aed_selected_pass_rate", "AED: the search-selected proposal's pass rate (several proposals per pair)",
            share=True),
    _figure("aed_oracle_continuation", "AED: the share of pairs replayed under an oracle continuation (an agent "
                                       "following the expert plan finishes the task)", share=True),
    _figure("aed_replies_right", "AED, the instrument as the diagnoser: the share of its replies that were right",
            share=True),
    _figure("aed_correction_by_reply", "AED, the instrument as the diagnoser: the correction's pass rate over the "
                                       "pairs from its right and its wrong replies", share=True),
    _figure("aed_retry_by_reply", "AED, the instrument as the diagnoser: the retry's pass rate, by reply",
            share=True),
    _figure("aed_pairs_by_reply", "AED, the instrument as the diagnoser: pairs replayed, by reply"),
]
