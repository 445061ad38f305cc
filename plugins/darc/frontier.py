"""The cost-success frontier of the candidate chains, as a list and as a PNG plot."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from playground.core.errors import PlaygroundError
from playground.plugins.darc.distill import Chain, DistillResult


class PlotUnavailable(PlaygroundError, RuntimeError):
    """Plotting needs matplotlib, which is not installed."""


def pareto_front(result: DistillResult) -> list[Chain]:
    """Return the chains no other chain beats on both success and cost, by increasing cost.

    Among chains with the same success and cost, only the best-ranked one is kept.
    """
    front: list[Chain] = []
    for chain in sorted(result.ranked(), key=lambda c: (c.cost, -c.succ)):
        if not front or chain.succ > front[-1].succ:
            front.append(chain)
    return front


def plot_frontier(result: DistillResult, path_png: str | os.PathLike, title: str | None = None) -> Path:
    """Write a PNG scatter of every candidate's mean cost against its success, with the chosen chain marked."""
    path = Path(path_png)
    figure = new_figure("plotting the frontier")
    axes = figure.add_subplot()
    for length in range(1, result.max_len + 1):
        chains = [c for c in result.candidates if len(c.names) == length]
        if chains:
            axes.scatter([c.cost for c in chains], [c.succ for c in chains], s=14, alpha=0.6,
                         label=f"length {length} ({len(chains)})")
    front = pareto_front(result)
    axes.step([c.cost for c in front], [c.succ for c in front], where="post", color="0.4",
              linewidth=1, label="Pareto front")
    best = result.best
    axes.scatter([best.cost], [best.succ], marker="*", s=220, color="red", edgecolor="black", zorder=3,
                 label=f"chosen: {' > '.join(best.names)} (J={best.J:.3f})")
    if result.lam > 0:
        axes.axvline(result.tau_free, color="0.6", linestyle="--", linewidth=1, label=f"tau_free = {result.tau_free:g}")
    axes.set_xlabel("mean cost per task")
    axes.set_ylabel("success rate")
    axes.set_title(title or f"DARC candidates: {result.search_space} chains, {result.n_tasks} tasks, "
                            f"lambda = {result.lam:g}")
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=8, loc="lower right")
    return save_png(figure, path)


def new_figure(purpose: str) -> Any:
    """A 7x5-inch matplotlib Figure (PlotUnavailable, naming `purpose`, when matplotlib is missing)."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        raise PlotUnavailable(f"{purpose} needs matplotlib: pip install matplotlib") from None
    return Figure(figsize=(7, 5), dpi=120)


def save_png(figure: Any, path: str | os.PathLike) -> Path:
    """Write `figure` to `path` as a PNG, atomically."""
    from playground.host_api import atomic_write

    return atomic_write(path, lambda handle: figure.savefig(handle, format="png"), binary=True)
