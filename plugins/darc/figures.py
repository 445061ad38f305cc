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
no mode) and `darc_agreement` (Table 15: each diagnoser's agreement with the verifier-backed reference, from
agreement.json).
"""

from __future__ import annotations

import json
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


def _policy(read: str):
    """A figure from the folder's policy.json (None where no pipeline distilled one there)."""
    def of(folder: Path, records: Sequence[EpisodeRecord]) -> float | None:
        path = folder / "policy.json"
        if not path.is_file():
            return None
        policy = json.loads(path.read_text())
        if read == "length":
            return float(len(policy["chain"]))
        if read == "success":
            return policy.get("succ")
        return float(policy["bootstrap"]["distinct_winners"]) if "bootstrap" in policy else None
    return of


def _admissible(folder: Path, records: Sequence[EpisodeRecord]) -> float | None:
    path = folder / "diagnosis.json"
    return float(len(json.loads(path.read_text()).get("admissible_interventions") or [])) if path.is_file() else None


def _agreement(folder: Path, records: Sequence[EpisodeRecord]) -> dict[str, float | None] | None:
    path = folder / "agreement.json"
    if not path.is_file():
        return None
    return {row["diagnoser"]: row["agreement"] for row in json.loads(path.read_text())["rows"]}


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
    Figure("darc_agreement", "DARC: each diagnoser's agreement with the mode whose admissible interventions fix the "
                             "failed task in the evidence, over the tasks some mode fixes (Table 15)",
           of_folder=_agreement, share=True),
)
