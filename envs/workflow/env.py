"""The `workflow` env: deterministic finite-state tool workflows with controlled observable failures.

See docs/envs/workflow.md. The local state (the store of records, each instance's
progress, the clock) is what `snapshot()` copies. The *world* outside it is not: the
external effects issued (with the clock and attempt they were issued in), the faults
that have fired (each fires once: a timeout does not recur because a local checkpoint was
restored), and how many restores crossed an irreversible effect. A restore compensates
the compensable effects it crosses; a restore of the initial state (clock 0) starts a new
attempt of the whole task, which supersedes the effects of the abandoned one.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass
from typing import Any

from playground.core.env import EnvInfo, EnvProvider, TextEnv
from playground.core.task_sets import TaskSet
from playground.envs.workflow.domains import DOMAINS, Domain, Fault, Skeleton

TASKS_PER_VARIANT = {"test": range(3), "dev": range(3, 6)}


@dataclass(frozen=True)
class Instance:
    """A subtask instance: a skeleton applied to an entity (the `ordinal`-th time)."""

    skeleton: Skeleton
    entity: str
    ordinal: int = 1

    @property
    def id(self) -> str:
        return f"{self.skeleton.name}:{self.entity}:{self.ordinal}"

    def keys(self, templates: tuple[str, ...]) -> list[str]:
        return [t.format(e=self.entity) for t in templates]

    def action(self, index: int) -> str:
        suffix = f"#{self.ordinal}" if self.ordinal > 1 else ""
        return f"{self.skeleton.steps[index].tool} {self.entity}{suffix}"

    def declared(self) -> dict[str, Any]:
        """The instance as the env declares it (what a sidecar may read)."""
        return {"id": self.id, "skeleton": self.skeleton.name, "entity": self.entity, "ordinal": self.ordinal,
                "steps": [self.action(i) for i in range(len(self.skeleton.steps))],
                "reads": self.keys(self.skeleton.reads) if self.skeleton.interface else None,
                "writes": self.keys(self.skeleton.writes) if self.skeleton.interface else None,
                "effect": self.skeleton.effect, "interface": self.skeleton.interface,
                "commits": list(self.skeleton.commits),
                "step_writes": [self.keys(self.skeleton.step_writes(i)) if self.skeleton.interface else None
                                for i in range(len(self.skeleton.steps))],
                "step_effects": [self.skeleton.step_effect(i) for i in range(len(self.skeleton.steps))]}


def task_ids(domain: Domain, split: str) -> tuple[str, ...]:
    return tuple(f"{domain.name}-{variant}-{n}" for variant in domain.variants for n in TASKS_PER_VARIANT[split])


def parse_task(task: str) -> tuple[Domain, str, int]:
    for name, domain in DOMAINS.items():
        if task.startswith(name + "-"):
            variant, _, n = task[len(name) + 1:].rpartition("-")
            if variant in domain.variants and n.isdigit():
                return domain, variant, int(n)
    raise ValueError(f"workflow: not a workflow task id: {task!r}")


def build(task: str) -> tuple[Domain, list[Instance], list[str], Fault | None, list[str]]:
    """The task's domain, instances in plan order, input keys, fault and entities (all from the task id)."""
    domain, variant, n = parse_task(task)
    entities = random.Random(f"workflow:{domain.name}:{n}").sample(domain.entities, k=2)
    instances = [Instance(s, e) for e in entities for s in domain.skeletons]
    instances += [Instance(s, "all") for s in domain.final]
    inputs = [t.format(e=e) for e in entities for t in domain.inputs]
    return domain, instances, inputs, domain.variants[variant], entities


def task_set(domain: Domain) -> TaskSet:
    return TaskSet(domain.name, domain.description, {split: task_ids(domain, split) for split in TASKS_PER_VARIANT},
                   default_split="test")


class WorkflowEnv(TextEnv):
    """One workflow task (see the module docstring and docs/envs/workflow.md)."""

    can_snapshot = True
    env_name = "workflow"

    def __init__(self, task_set: TaskSet, expert: bool = False) -> None:
        super().__init__(task_set)
        self.expert = expert
        self.state: dict[str, Any] = {}
        self.world: dict[str, Any] = {}

    # -- gymnasium ------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        task = self.task_for_reset(seed, options)
        self.domain, self.instances, inputs, self.fault, self.entities = build(task)
        self.by_action = {inst.action(i): (inst, i) for inst in self.instances for i in range(len(inst.skeleton.steps))}
        self.by_id = {inst.id: inst for inst in self.instances}
        self.state = {"task": task, "clock": 0, "done": {inst.id: 0 for inst in self.instances},
                      "store": {key: [{"by": "input", "partial": False}] for key in inputs}}
        self.world = {"fired": set(), "attempt": 0, "effects": [], "unsafe_restores": 0, "compensations": 0}
        names = ", ".join(f"{inst.id} ({' -> '.join(inst.declared()['steps'])})" for inst in self.instances)
        observation = f"{self._goal()} Instances in order: {names}."
        info: dict[str, Any] = dict(self._info(valid=True))
        info["workflow"] = {"domain": self.domain.name, "instances": [inst.declared() for inst in self.instances],
                            "inputs": sorted(inputs)}
        return observation, info

    def step(self, action: str):
        s = self.state
        failure: dict[str, Any] | None = None
        valid = True
        if action == "status":
            text = self._status()
        elif action not in self.by_action:
            text, valid = "Unknown tool call.", False
        else:
            text, failure = self._call(*self.by_action[action], action)
            valid = failure is None
        s["clock"] += 1
        done = all(s["done"][inst.id] == len(inst.skeleton.steps) for inst in self.instances)
        info = self._info(valid=valid)
        if failure is not None:
            info["failure"] = failure
        won = bool(info["won"])
        return text, 1.0 if won else 0.0, done, False, info

    def _call(self, inst: Instance, index: int, action: str) -> tuple[str, dict[str, Any] | None]:
        s, step = self.state, inst.skeleton.steps[index]
        progress = s["done"][inst.id]
        if progress != index:
            want = "it is done" if progress > index else f"first {inst.action(progress)}"
            return f"{action}: refused, {want}.", {"kind": "contract_violation", "site": action, "rejected": True,
                                                   "message": f"{action} out of order: {want}"}
        if index == 0:
            missing = [k for k in inst.keys(inst.skeleton.reads) if not s["store"].get(k)]
            if missing:
                return (f"{action}: missing input {', '.join(missing)}.",
                        {"kind": "missing_input", "site": action, "rejected": True, "keys": missing,
                         "message": f"{action} needs {', '.join(missing)}, not produced yet"})
        bad = [k for k in inst.keys(step.checks) if not self._sound(k)]
        if bad:
            kind = self.fault.kind if self.fault is not None else "contract_violation"
            message = f"{action} failed ({kind}): {', '.join(bad)} is incomplete or duplicated"
            return f"Error: {message}.", {"kind": kind, "message": message, "keys": bad, "site": action}
        writes = inst.keys(inst.skeleton.step_writes(index))
        if writes:
            fires = self._fault_site(inst, index) and inst.id not in self.world["fired"]
            if fires:
                self.world["fired"].add(inst.id)
            for key in writes:
                s["store"].setdefault(key, []).append({"by": inst.id, "partial": fires})
        if step.external:
            self.world["effects"].append({"instance": inst.id, "effect": inst.skeleton.effect, "clock": s["clock"],
                                          "attempt": self.world["attempt"], "compensated": False})
        s["done"][inst.id] += 1
        committed = s["done"][inst.id] == len(inst.skeleton.steps)
        return f"{action}: ok." + (f" {inst.id} committed." if committed else ""), None

    def _fault_site(self, inst: Instance, index: int) -> bool:
        fault = self.fault
        return (fault is not None and inst.skeleton.name == fault.skeleton and index == fault.step
                and inst.entity == self.entities[fault.entity])

    # -- state ----------------------------------------------------------------------------

    def _writers(self, key: str) -> list[str]:
        return [inst.id for inst in self.instances if key in inst.keys(inst.skeleton.writes)]

    def _sound(self, key: str) -> bool:
        """A key holds exactly one complete record per writer that wrote it so far."""
        records = self.state["store"].get(key, [])
        by = [r["by"] for r in records]
        return all(not r["partial"] for r in records) and len(by) == len(set(by))

    def _live_effects(self, instance: str) -> list[dict]:
        return [e for e in self.world["effects"] if e["instance"] == instance and not e["compensated"]
                and e["attempt"] == self.world["attempt"]]

    def valid(self) -> bool:
        """The semantic validity check of the final state: every instance committed, every key holds
        exactly one complete record per declared writer, one live external effect per effectful instance."""
        s = self.state
        if any(s["done"][inst.id] != len(inst.skeleton.steps) for inst in self.instances):
            return False
        for inst in self.instances:
            for key in inst.keys(inst.skeleton.writes):
                if not self._sound(key) or sorted(r["by"] for r in s["store"][key]) != sorted(self._writers(key)):
                    return False
            if any(step.external for step in inst.skeleton.steps) and len(self._live_effects(inst.id)) != 1:
                return False
        return True

    def committed(self) -> int:
        """The instances committed now (every step of theirs done)."""
        return sum(self.state["done"][inst.id] == len(inst.skeleton.steps) for inst in self.instances)

    def _irreversible_clocks(self) -> list[int]:
        """The clocks of this attempt's irreversible effects not compensated (ground truth, never for a sidecar)."""
        return [e["clock"] for e in self.world["effects"] if e["effect"] == "irreversible" and not e["compensated"]
                and e["attempt"] == self.world["attempt"]]

    def crosses_irreversible(self, step: int) -> bool:
        """Ground truth (for benchmarks, never for a sidecar): would restoring the state of `step`
        cross an irreversible effect of this attempt? Step 0 starts a new attempt: never."""
        return step > 0 and any(clock >= step for clock in self._irreversible_clocks())

    def ground_truth(self) -> dict[str, Any]:
        """For the trace only (`TextEnv.ground_truth`): instances committed, whether the task has a fault and it
        fired, the restores that crossed an irreversible effect so far, and the clocks of this attempt's live
        irreversible effects (a restore to a clock at or below one crosses it: `crosses_irreversible`)."""
        return {"committed": self.committed(), "faulty": self.fault is not None, "fired": bool(self.world["fired"]),
                "unsafe_restores": self.world["unsafe_restores"], "irreversible": self._irreversible_clocks()}

    def snapshot(self) -> dict:
        return copy.deepcopy(self.state)

    def restore(self, snapshot: dict) -> None:
        clock = snapshot["clock"]
        if clock == 0:
            self.world["attempt"] += 1
        else:
            if self.crosses_irreversible(clock):
                self.world["unsafe_restores"] += 1
            for effect in self.world["effects"]:
                if (effect["effect"] == "compensable" and effect["clock"] >= clock and not effect["compensated"]
                        and effect["attempt"] == self.world["attempt"]):
                    effect["compensated"] = True
                    self.world["compensations"] += 1
        self.state = copy.deepcopy(snapshot)

    # -- text -----------------------------------------------------------------------------

    def _goal(self) -> str:
        return (f"Run the {self.domain.name} workflow ({self.domain.description}) for "
                f"{' and '.join(self.entities)}; every instance must commit and the final state must be valid.")

    def _status(self) -> str:
        s = self.state
        parts = [f"{inst.id} {s['done'][inst.id]}/{len(inst.skeleton.steps)}" for inst in self.instances]
        return "Progress: " + ", ".join(parts) + "."

    def _plan(self) -> list[str]:
        s = self.state
        return [inst.action(i) for inst in self.instances for i in range(s["done"][inst.id], len(inst.skeleton.steps))]

    def _info(self, valid: bool) -> EnvInfo:
        s = self.state
        committed = self.committed()
        admissible = sorted([*self.by_action, "status"])
        won = committed == len(self.instances) and self.valid()
        info: EnvInfo = {
            "goal": self._goal(), "admissible_actions": admissible,
            "action_kinds": {a: ("look" if a == "status" else "use") for a in admissible},
            "valid_action": valid, "won": won, "lost": committed == len(self.instances) and not won,
            "score": committed / len(self.instances), "max_score": 1.0, "task": s["task"],
        }
        if self.expert:
            info["expert_plan"] = self._plan()
        return info


class WorkflowProvider(EnvProvider):
    """Provides `workflow` with one task set per domain: `schedule-form`, `travel`, `etl`, `navigation`, `diagnosis`."""

    name = "workflow"
    description = ("structured tool workflows (schedule-form, travel, ETL, navigation, diagnosis) with controlled "
                   "observable failures")
    default_task_set = "schedule-form"

    def task_sets(self) -> dict[str, TaskSet]:
        return {name: task_set(domain) for name, domain in DOMAINS.items()}

    def make(self, task_set: str, *, expert: bool = False, **options: Any) -> WorkflowEnv:
        sets = self.task_sets()
        if task_set not in sets:
            raise ValueError(f"workflow: unknown task set {task_set!r}; choose from: {', '.join(sorted(sets))}")
        if options:
            raise ValueError(f"workflow: unknown options {sorted(options)}")
        return WorkflowEnv(sets[task_set], expert=expert)

    def describe(self, task_set: str) -> dict:
        return {"env": "workflow", "task_set": task_set, "version": "1",
                "tasks": "<domain>-<variant>-<n>: test n 0-2, dev n 3-5"}
