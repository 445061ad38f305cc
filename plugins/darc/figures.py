"""DARC's columns in study tables (`register_figures`): the step efficiency of its Table 10 and the solved-by-budget
curve of its Figure 3, from a cell's episode records (`won`, `steps`).

- `success_per_100_steps`: episodes won per 100 env steps spent, all episodes' steps counted, won or not (a
  cascade's steps count every attempt);
- `solved_within`: a column per step budget b in BUDGETS, the share of the cell's episodes won in at most b env
  steps. For budgets below the run's own this is what a run at budget b would have solved, as long as nothing the
  harness does depends on the steps left (none of the shipped interventions reads them). The whole curve, every
  budget, is the chart "Solved episodes against the step budget" of `playground report RUN`.

Env steps and invalid actions per episode are the study table's own `steps` and `invalid` columns.

From what a study's pipeline wrote into its folder (`steps.py`; the same for every cell of that folder):
`darc_chain_length` and `darc_chain_success` (the frozen winner's length and its success on the evidence, from
policy.json), `darc_distinct_winners` (how many distinct chains won the bootstrap's resamples: Table 14's figure)
`darc_diagnosed_admissible` (how many interventions the diagnosis left admissible, from diagnosis.json: 0 for
no mode); with the failure-injection instrument as the diagnoser (instrument.json, its grades: instrument figures)
`darc_diagnoser_right` (per-episode agreement with the injected mode), `darc_family_agrees` (the family's mode
against the injected majority) and `darc_families_resampled` (that over resampled families of 11); and
`darc_agreement` (Table 15: each diagnoser's agreement with the verifier-backed reference, from
agreement.json).
"""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from playground.api import Figure
from playground.core.records import EpisodeRecord

BUDGETS = (5, 10, 20, 30, 40, 50)


def success_per_100_steps(records: Sequence[EpisodeRecord], events: Any = None) -> float | None:
    """Episodes won per 100 env steps (None for a cell that took no step)."""
    steps = sum(record.steps for record in records)
    return 100.0 * sum(record.won for record in records) / steps if steps else None


def solved_within(records: Sequence[EpisodeRecord], events: Any = None) -> dict[str, float | None] | None:
    """{budget: the share of episodes won in at most that many env steps}, for each of BUDGETS."""
    if not records:
        return None
    return {str(b): sum(1 for r in records if r.won and r.steps <= b) / len(records) for b in BUDGETS}


def _written(folder: Path, name: str) -> Any:
    """The JSON file NAME a pipeline step wrote into the folder, or None where none wrote it there."""
    path = folder / name
    return json.loads(path.read_text()) if path.is_file() else None


def _policy(read: str):
    """A figure from the folder's policy.json (None where no pipeline distilled one there)."""
    def of(folder: Path, records: Sequence[EpisodeRecord]) -> float | None:
        policy = _written(folder, "policy.json")
        if policy is None:
            return None
        if read == "length":
            return float(len(policy["chain"]))
        if read == "success":
            return policy.get("succ")
        return float(policy["bootstrap"]["distinct_winners"]) if "bootstrap" in policy else None
    return of


def _admissible(folder: Path, records: Sequence[EpisodeRecord]) -> float | None:
    diagnosis = _written(folder, "diagnosis.json")
    return None if diagnosis is None else float(len(diagnosis.get("admissible_interventions") or []))


FAMILY_SIZE = 11  # failed episodes per resampled family: the failures of a 50-game profile
FAMILY_DRAWS = 2000


@functools.lru_cache(maxsize=32)
def _instrument_grades(path: str, stamp: int) -> dict[str, Any]:
    """instrument.json's grades by episode, read once per version of the file (three figures read them per cell)."""
    return json.loads(Path(path).read_text())["episodes"]


def _graded_pairs(folder: Path, records: Sequence[EpisodeRecord]) -> list[tuple[str | None, str | None]] | None:
    """(the diagnoser's mode, the injected mode) per failed episode of the cell the instrument graded, from
    instrument.json (None where the instrument was not the diagnoser); "none" as None."""
    path = folder / "instrument.json"
    if not path.is_file():
        return None
    grades = _instrument_grades(str(path), path.stat().st_mtime_ns)
    mine = [grades[str(r.episode_id)] for r in records if str(r.episode_id) in grades]

    def mode(value: Any) -> str | None:
        return None if value in (None, "none") else str(value)
    return [(mode((g.get("answer") or {}).get("mode")), mode(g["truth"]["mode"])) for g in mine]


def _diagnoser_right(folder: Path, records: Sequence[EpisodeRecord]) -> float | None:
    pairs = _graded_pairs(folder, records)
    return sum(named == truth for named, truth in pairs) / len(pairs) if pairs else None


def _family_agrees(folder: Path, records: Sequence[EpisodeRecord]) -> float | None:
    from playground.plugins.darc.llm_diagnosis import majority  # (the diagnoser's own rule)

    pairs, diagnosis = _graded_pairs(folder, records), _written(folder, "diagnosis.json")
    return float(diagnosis["mode"] == majority([t for _, t in pairs])) if pairs and diagnosis else None


def _families_resampled(folder: Path, records: Sequence[EpisodeRecord]) -> float | None:
    from playground.plugins.darc.llm_diagnosis import majority

    pairs = _graded_pairs(folder, records)
    if not pairs:
        return None
    rng = random.Random(f"families:{folder.name}")
    agree = 0
    for _ in range(FAMILY_DRAWS):
        draw = rng.sample(pairs, min(FAMILY_SIZE, len(pairs)))
        agree += majority([named for named, _ in draw]) == majority([truth for _, truth in draw])
    return agree / FAMILY_DRAWS


def _agreement(folder: Path, records: Sequence[EpisodeRecord]) -> dict[str, float | None] | None:
    agreement = _written(folder, "agreement.json")
    return None if agreement is None else {row["diagnoser"]: row["agreement"] for row in agreement["rows"]}


FIGURES = (
    Figure("success_per_100_steps", "episodes won per 100 env steps spent, won or not (DARC's Table 10)",
           success_per_100_steps),
    Figure("solved_within", "the share of episodes won within each step budget (DARC's Figure 3, sampled; the "
                            "whole curve: `playground report RUN`)", solved_within, share=True),
    Figure("darc_chain_length", "DARC: the length of the chain distilled in this folder (policy.json)",
           of_folder=_policy("length")),
    Figure("darc_chain_success", "DARC: the distilled chain's success on its evidence", of_folder=_policy("success"),
           share=True),
    Figure("darc_distinct_winners", "DARC: distinct chains winning the bootstrap's resamples of the evidence "
                                    "(Table 14)", of_folder=_policy("winners")),
    Figure("darc_diagnosed_admissible", "DARC: interventions the diagnosis in this folder left admissible (0: no "
                                        "mode)", of_folder=_admissible),
    Figure("darc_diagnoser_right", "DARC: the share of the instrument-diagnoser's per-episode replies naming the "
                                   "mode its failures were injected in (instrument.json)", of_folder=_diagnoser_right,
           share=True),
    Figure("darc_family_agrees", "DARC: whether the family's diagnosed mode is the majority of the modes injected "
                                 "in its failed episodes (1: yes)", of_folder=_family_agrees),
    Figure("darc_families_resampled", f"DARC: the share of {FAMILY_DRAWS} families of {FAMILY_SIZE} failed "
                                      "episodes, resampled from this folder's, whose replies' majority is their "
                                      "injected majority", of_folder=_families_resampled, share=True),
    Figure("darc_agreement", "DARC: each diagnoser's agreement with the mode whose admissible interventions fix the "
                             "failed task in the evidence, over the tasks some mode fixes (Table 15)",
           of_folder=_agreement, share=True),
)
