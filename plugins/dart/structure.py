"""What a sidecar knows of a workflow: the env's declared structure plus the actions it saw accepted.

`Workflow` reads the declaration an env puts in its reset info (`info["workflow"]`:
instances with their steps, read and write sets, effect policy, whether the interface is
declared, and optionally in-instance commit points and what each step writes and its
effect). An env whose actions are not known at reset (code cells) declares instances as
they run (`StepOutcome.structure`), added with `Workflow.declare`. `Timeline` is the
current branch's accepted tool calls, rewound with the loop. Nothing here reads `won`,
reward or score.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

REVERSIBLE = ("reversible", "compensable")


@dataclass(frozen=True)
class Declared:
    """One instance as the env declares it.

    `commits` are step counts after which the instance's work so far is stable (in-instance
    commit points); `step_writes` and `step_effects` say what each step writes and its effect
    policy. Where the env does not declare them: no commit point inside, the first step
    writes everything, and every step carries the instance's effect (the conservative reading).
    """

    id: str
    steps: tuple[str, ...]
    reads: tuple[str, ...] | None
    writes: tuple[str, ...] | None
    effect: str
    interface: bool
    entity: str | None = None
    commits: tuple[int, ...] = ()
    step_writes: tuple[tuple[str, ...] | None, ...] = ()
    step_effects: tuple[str, ...] = ()
    label: str = ""  # what the env says the instance did (e.g. the calls with an irreversible effect), for reasons

    @classmethod
    def of(cls, record: Mapping[str, Any]) -> Declared:
        reads, writes = record.get("reads"), record.get("writes")
        steps = tuple(record["steps"])
        effect = str(record.get("effect", "irreversible"))
        step_writes = record.get("step_writes") or [writes] + [()] * (len(steps) - 1)
        return cls(str(record["id"]), steps, None if reads is None else tuple(reads),
                   None if writes is None else tuple(writes), effect,
                   bool(record.get("interface", reads is not None and writes is not None)),
                   None if record.get("entity") is None else str(record["entity"]),
                   tuple(int(c) for c in record.get("commits", ()) if 0 < int(c) < len(steps)),
                   tuple(None if w is None else tuple(w) for w in step_writes),
                   tuple(str(e) for e in record.get("step_effects") or [effect] * len(steps)),
                   str(record.get("label") or ""))

    def describe(self) -> str:
        """The id, with the env's label where it gives one: `cell3 [venmo.create_transaction]`."""
        return f"{self.id} [{self.label}]" if self.label else self.id

    def first_write(self, keys: set[str]) -> int:
        """The index of the first step that may write one of `keys` (an undeclared step may write any)."""
        return next((i for i, w in enumerate(self.step_writes) if w is None or set(w) & keys), 0)


class Workflow:
    """The declared instances, in plan order, and which instance step each action is."""

    def __init__(self, declaration: Mapping[str, Any]) -> None:
        self.instances = [Declared.of(r) for r in declaration.get("instances", ())]
        self.by_id = {inst.id: inst for inst in self.instances}
        self.inputs = set(declaration.get("inputs", ()))
        self.by_action = {action: (inst.id, i) for inst in self.instances for i, action in enumerate(inst.steps)}

    def declare(self, records: Any) -> None:
        """Add the instances a step declared; one with a known id replaces it (the same step on a new branch)."""
        for record in records or ():
            inst = Declared.of(record)
            if inst.id in self.by_id:
                self.instances = [inst if old.id == inst.id else old for old in self.instances]
            else:
                self.instances.append(inst)
            self.by_id[inst.id] = inst
            self.by_action.update({action: (inst.id, i) for i, action in enumerate(inst.steps)})


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

    def step_of(self, instance: str, index: int) -> int | None:
        """The step at which `instance`'s `index`-th call ran on this branch, or None."""
        return next((s for s, iid, i in self.entries if iid == instance and i == index), None)

    def stable(self, workflow: Workflow) -> bool:
        """No begun instance is half done, except at one of its declared commit points."""
        for iid in self.begun():
            done, inst = self.done(iid), workflow.by_id[iid]
            if done != len(inst.steps) and done not in inst.commits:
                return False
        return True

    def at(self, step: int) -> tuple[str, int] | None:
        """(instance, index) of the call accepted at `step` on this branch, or None."""
        return next(((iid, i) for s, iid, i in self.entries if s == step), None)

    def since(self, step: int) -> list[str]:
        """Instances with an accepted call at `step` or later (what restoring `step` undoes)."""
        return list(dict.fromkeys(iid for s, iid, _ in self.entries if s >= step))

