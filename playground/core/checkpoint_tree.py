"""The episode's checkpoints as a tree of branches (the loop's: `playground.core.loop` takes, restores and forks
them; see its docstring for ids, branches and retention)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Checkpoint:
    """One checkpoint: its id, step, branch and parent, the env's snapshot and what the agent had seen there."""

    id: str
    step: int
    branch: int
    parent: str | None
    snapshot: Any
    history_len: int
    observation: str
    info: dict


class CheckpointTree:
    """The episode's checkpoints: a tree of branches; `path` is the current branch's lineage."""

    def __init__(self, keep_per_branch: int) -> None:
        self.nodes: dict[str, Checkpoint] = {}
        self.path: list[str] = []
        self.branch = 0
        self.branches = 0
        self.keep = keep_per_branch
        self.root: str | None = None
        self.count = 0

    def add(self, step: int, snapshot: Any, history_len: int, observation: str,
            info: dict) -> tuple[Checkpoint, list[str]]:
        """Keep a new checkpoint at the tip of the current branch; return it and the ids retention dropped."""
        point = Checkpoint(f"c{self.count}", step, self.branch, self.path[-1] if self.path else None, snapshot,
                            history_len, observation, info)
        self.count += 1
        self.nodes[point.id] = point
        self.path.append(point.id)
        self.root = self.root or point.id
        mine = [cid for cid in self.path if self.nodes[cid].branch == self.branch]
        dropped = [cid for cid in mine if cid != self.root][: max(0, len(mine) - self.keep)]
        for cid in dropped:
            self.path.remove(cid)
            del self.nodes[cid]
        return point, dropped

    def steps(self) -> tuple[int, ...]:
        return tuple(self.nodes[cid].step for cid in self.path)

    def at(self, step: int) -> Checkpoint | None:
        for cid in reversed(self.path):
            if self.nodes[cid].step == step:
                return self.nodes[cid]
        return None

    def fork(self, point: Checkpoint) -> int:
        """Make `point` the tip of a new branch (its lineage kept, the old branch untouched); return the branch id."""
        self.path = self.path[: self.path.index(point.id) + 1]
        self.branches += 1
        self.branch = self.branches
        return self.branch
