"""One workflow task played under one of DART's harnesses (or `base`), and the figures its study columns read from
the trace (`plugins/dart/figures.py`): what the tests ask of DART, the ablations and the baselines."""

from __future__ import annotations

from typing import Any

from playground.plugins.dart.figures import episode_figures
from playground.plugins.dart.sidecar import for_harness
from playground.testing import play


def play_harness(provider: Any, task_set: str, task: str, harness: str, agent: Any, max_steps: int = 80,
                 seed: int = 0) -> dict[str, Any]:
    """Play `task` under `harness` as a run would (the harness's sidecar, the env's ground truth in the trace);
    return `episode_figures` of its trace with `won` (the env's grade: the final state valid)."""
    sidecar = for_harness(harness)
    played = play(provider.make(task_set, expert=True), agent, plugins=[sidecar] if sidecar else [], task=task,
                  max_steps=max_steps, params={"max_rollbacks": 10}, harness=harness, seed=seed)
    return {**episode_figures(played.trace), "won": played.result.won}
