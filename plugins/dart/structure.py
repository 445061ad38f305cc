"""What a sidecar knows of a workflow: the env's declared structure plus the actions it saw accepted.

`Workflow` reads the declaration an env puts in its reset info (`info["workflow"]`:
instances with their steps, read and write sets, effect policy, whether the interface is
declared). `Timeline` is the current branch's accepted tool calls, rewound with the loop.
Nothing here reads `won`, reward or score.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

REVERSIBLE = ("reversible", "compensable")


@dataclass(frozen=True)
class Declared:
    """One instance as the env declares it."""

    id: str
    steps: tuple[str, ...]
    reads: tuple[str, ...] | None
    writes: tuple[str, ...] | None
    effect: str
    interface: bool

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> Declared:
        reads, writes = record.get("reads"), record.get("writes")
        return cls(str(record["id"]), tuple(record["steps"]), None if reads is None else tuple(reads),
                   None if writes is None else tuple(writes), str(record.get("effect", "irreversible")),
                   bool(record.get("interface", reads is not None and writes is not None)))


class Workflow:
    """The declared instances, in plan order, and which instance step each action is."""

    def __init__(self, declaration: Mapping[str, Any]) -> None:
        self.instances = [Declared.of(r) for r in declaration.get("instances", ())]
        self.by_id = {inst.id: inst for inst in self.instances}
        self.inputs = set(declaration.get("inputs", ()))
        self.by_action = {action: (inst.id, i) for inst in self.instances for i, action in enumerate(inst.steps)}


@dataclass
class Timeline:
    """Accepted tool calls of the current branch: (step, instance id, index of the instance's step)."""

    entries: list[tuple[int, str, int]] = field(default_factory=list)

    def rewind(self, step: int) -> None:
        """Forget what happened at `step` and later (after a rollback to `step`)."""
        self.entries = [e for e in self.entries if e[0] < step]

    def add(self, step: int, instance: str, index: int) -> None:
        self.entries.append((step, instance, index))

    def done(self, instance: str) -> int:
        return sum(1 for _, iid, _ in self.entries if iid == instance)

    def first_step(self, instance: str) -> int | None:
        return next((s for s, iid, _ in self.entries if iid == instance), None)

    def commit_step(self, instance: str, workflow: Workflow) -> int | None:
        """The step after which `instance` had all its steps done, or None."""
        steps = [s for s, iid, _ in self.entries if iid == instance]
        return steps[-1] if len(steps) == len(workflow.by_id[instance].steps) else None

    def committed(self, workflow: Workflow) -> list[str]:
        return [inst.id for inst in workflow.instances if self.commit_step(inst.id, workflow) is not None]

    def begun(self) -> list[str]:
        return list(dict.fromkeys(iid for _, iid, _ in self.entries))

    def in_progress(self, workflow: Workflow) -> bool:
        return any(self.commit_step(iid, workflow) is None for iid in self.begun())

    def since(self, step: int) -> list[str]:
        """Instances with an accepted call at `step` or later (what restoring `step` undoes)."""
        return list(dict.fromkeys(iid for s, iid, _ in self.entries if s >= step))


class Stopwatch:
    """Seconds a sidecar spends in its hooks (its overhead)."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def timed(self, fn: Callable[[], Any]) -> Any:
        started = time.perf_counter()
        try:
            return fn()
        finally:
            self.seconds += time.perf_counter() - started
