"""One workflow task played under one of DART's harnesses (or `base`), and the figures its study columns read from
the trace (`plugins/dart/figures.py`): what the tests ask of DART, the ablations and the baselines."""

from __future__ import annotations

from typing import Any

from playground.plugins.dart import sidecar
from playground.plugins.dart.figures import episode_figures
from playground.plugins.dart.variants import ABLATIONS, BASELINES
from playground.testing import play

HARNESSES: dict[str, Any] = {
    "base": None,
    "dart": lambda: sidecar.Dart({}),
    **{name: (lambda params=params: sidecar.Dart(params)) for name, params, _ in ABLATIONS},
    **{name: (lambda cls=cls: getattr(sidecar, cls)({})) for name, cls, _ in BASELINES},
}


def play_harness(provider: Any, task_set: str, task: str, harness: str, agent: Any, max_steps: int = 80,
                 seed: int = 0) -> dict[str, Any]:
    """Play `task` under `harness` as a run would (the harness's sidecar, the env's ground truth in the trace);
    return `episode_figures` of its trace with `won` (the env's grade: the final state valid)."""
    make = HARNESSES[harness]
    played = play(provider.make(task_set, expert=True), agent, plugins=[make()] if make else [], task=task,
                  max_steps=max_steps, params={"max_rollbacks": 10}, harness=harness, seed=seed)
    return {**episode_figures(played.trace), "won": played.result.won}
