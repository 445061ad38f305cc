"""Step efficiency of a run's harnesses (DARC's Table 10) and solved episodes by step budget (its Figure 3).

Both read only a run's episode records: `won`, `steps` and `invalid_actions`. Solved within a
budget b means won in at most b env steps. For budgets below the run's own this is what a
run at budget b would have solved, as long as nothing the harness does depends on the steps
left (none of the shipped interventions reads them).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from playground.host_api import EpisodeRecord, split_by_harness


@dataclass(frozen=True)
class Efficiency:
    """One harness's step figures over a run's episodes."""

    harness: str
    episodes: int
    solved: int
    env_steps: int
    invalid_actions: int
    solved_within: tuple[int, ...]  # solved_within[b - 1]: episodes won in at most b steps

    @property
    def success_rate(self) -> float:
        """Share of episodes won."""
        return self.solved / self.episodes if self.episodes else 0.0

    @property
    def invalid_per_episode(self) -> float:
        """Invalid actions per episode."""
        return self.invalid_actions / self.episodes if self.episodes else 0.0

    @property
    def success_per_100_steps(self) -> float:
        """Episodes won per 100 env steps spent (all episodes' steps, won or not)."""
        return 100.0 * self.solved / self.env_steps if self.env_steps else 0.0

    def to_dict(self) -> dict[str, Any]:
        """The figures as plain values (for --json)."""
        return {"harness": self.harness, "episodes": self.episodes, "solved": self.solved,
                "success_rate": round(self.success_rate, 4), "env_steps": self.env_steps,
                "mean_steps": round(self.env_steps / self.episodes, 3) if self.episodes else 0.0,
                "invalid_actions_per_episode": round(self.invalid_per_episode, 4),
                "success_per_100_steps": round(self.success_per_100_steps, 4),
                "solved_within": list(self.solved_within)}


def _count(record: EpisodeRecord, field: str, where: str) -> int:
    value = getattr(record, field)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{where}: {field!r} must be a whole number of at least 0, got {value!r}")
    return value


def efficiency(records: Iterable[EpisodeRecord], harnesses: Sequence[str] = ()) -> list[Efficiency]:
    """Each harness's figures (those named, in that order, else all in the run's order), budgets 1..longest."""
    by_harness = split_by_harness(records)
    for name in harnesses:
        if name not in by_harness:
            raise ValueError(f"harness {name!r} is not in the run; it has: {', '.join(by_harness)}")
    chosen = list(harnesses) or list(by_harness)
    steps = {name: [_count(r, "steps", f"harness {name}, task {r.task_id!r}") for r in by_harness[name]]
             for name in chosen}
    budget = max((s for values in steps.values() for s in values), default=0)
    rows = []
    for name in chosen:
        won = [r.won for r in by_harness[name]]
        within = tuple(sum(1 for w, s in zip(won, steps[name]) if w and s <= b) for b in range(1, budget + 1))
        invalid = sum(_count(r, "invalid_actions", f"harness {name}, task {r.task_id!r}")
                      for r in by_harness[name])
        rows.append(Efficiency(name, len(won), sum(won), sum(steps[name]), invalid, within))
    return rows


def table(rows: Sequence[Efficiency], budgets: Sequence[int] = ()) -> str:
    """Table 10's shape (episodes, env steps, invalid actions per episode, success per 100 steps), then the
    episodes solved within each of `budgets` steps (Figure 3's curve, sampled)."""
    head = ["harness", "episodes", "success", "env steps", "steps/ep", "invalid/ep", "success/100 steps"]
    head += [f"solved<={b}" for b in budgets]
    lines = [head]
    for r in rows:
        cells = [r.harness, str(r.episodes), f"{r.solved} ({r.success_rate:.0%})", str(r.env_steps),
                 f"{r.env_steps / r.episodes:.2f}" if r.episodes else "-", f"{r.invalid_per_episode:.3f}",
                 f"{r.success_per_100_steps:.2f}"]
        cells += [str(r.solved_within[min(b, len(r.solved_within)) - 1]) if r.solved_within else "0"
                  for b in budgets]
        lines.append(cells)
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    return "\n".join("  ".join([line[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(line[1:], widths[1:])])
                     for line in lines)


def plot_solved_by_budget(rows: Sequence[Efficiency], path_png: str | os.PathLike, title: str | None = None) -> Path:
    """Write a PNG of cumulative solved episodes against the step budget, one line per harness (Figure 3)."""
    from playground.plugins.darc.frontier import new_figure, save_png

    figure = new_figure("plotting solved episodes by budget")
    axes = figure.add_subplot()
    for r in rows:
        budgets = list(range(0, len(r.solved_within) + 1))
        axes.step(budgets, [0, *r.solved_within], where="post", label=f"{r.harness} ({r.solved}/{r.episodes})")
    axes.set_xlabel("step budget (env steps)")
    axes.set_ylabel("episodes solved within the budget")
    axes.set_ylim(0, max((r.episodes for r in rows), default=1) or 1)  # out of all episodes, even when none is won
    axes.set_title(title or "Solved episodes by step budget")
    axes.grid(True, alpha=0.3)
    axes.legend(fontsize=8, loc="lower right")
    return save_png(figure, path_png)
