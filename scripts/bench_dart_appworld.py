"""DART on AppWorld: rollbacks around irreversible calls, blocked or admitted (needs `playground envs setup appworld`).

Tasks: the embedded tasks whose scripted solution makes an irreversible call, found from the
env's own declaration (a plain run of the solution; a step whose `structure` declares an
irreversible effect). For each, a scripted agent plays the solution with two cells added
around that call: a read `me = apis.supervisor.show_profile()` before it, and a later
cell that uses it, `print(me["email"])`. The injected fault: the read's first execution
reads the wrong record (`show_account_passwords()`, a list), silently, so the cell that uses
it fails (a TypeError) and AppWorld's error blames `me` (failure `keys`). A redone read
is right. Variants:

- `clean`: no fault (the read is right the first time);
- `before`: the read and its use both come before the irreversible call: restoring the
  read's entry undoes reads only (admissible);
- `after`: the read comes before the irreversible call and its use after it: restoring the
  read's entry would undo the sent payment or request (not admissible: DART reruns the task).

The agent's place in its plan is the number of cells that ran on the current branch, so a
restore puts it back where the restored state is. Rows: `base` (no recovery), `dart`,
`dart-no-effect-check` (DART with `effect_check=false`: the ablation that drops the
irreversible-effect check), `retry-only` (whole-task rerun), `checkpoint-latest` (restore the
latest checkpoint before the failing cell). Figures per row: success (AppWorld's `evaluate()`
passed and no restore undid an irreversible call, which the world keeps), admitted local
rollbacks, whole-task reruns, blocked rollbacks (a rerun instead), unsafe admissions
(restores that undid an irreversible call: the env's ground truth, which the loop writes into the trace)
and replayed cells (cells run minus the final branch's; each restore also replays the
restored branch's cells into a fresh world).

    python scripts/bench_dart_appworld.py [--max-steps 16]
"""

from __future__ import annotations

import argparse
from collections import Counter

from playground.core.payloads import AgentView, Proposal
from playground.envs.appworld.env import AppWorldProvider
from playground.plugins.dart.figures import episode_figures
from playground.plugins.dart.sidecar import CheckpointLatest, Dart, RetryOnly
from playground.testing import play

READ = "me = apis.supervisor.show_profile()"
WRONG_READ = "me = apis.supervisor.show_account_passwords()"  # the injected fault: the wrong record
USE = 'print(me["email"])'
VARIANTS = ("clean", "before", "after")
HARNESSES = {
    "base": lambda: None,
    "dart": lambda: Dart(),
    "dart-no-effect-check": lambda: Dart({"effect_check": False}),
    "retry-only": lambda: RetryOnly(),
    "checkpoint-latest": lambda: CheckpointLatest(),
}


class PlanAgent:
    """Plays `plan`; its place is the number of cells that ran on the current branch; cell `faulty` runs
    `WRONG_READ` the first time it is played (the fault fires once)."""

    def __init__(self, plan: list[str], faulty: int | None) -> None:
        self.plan, self.faulty = plan, faulty

    def reset(self, task_id: str, seed: int) -> None:
        self.fired = False

    def propose(self, view: AgentView) -> Proposal:
        place = sum(turn.valid_action for turn in view.history)
        if place >= len(self.plan):
            return Proposal("plan done", "", finish=True)
        if place == self.faulty and not self.fired:
            self.fired = True
            return Proposal("read the profile", WRONG_READ)
        return Proposal("next cell of the plan", self.plan[place])


def irreversible_cell(env, task: str) -> int | None:
    """The index of the first solution cell the env declares irreversible, from a plain run of the solution."""
    _, info = env.reset(options={"task": task})
    for index, cell in enumerate(list(env.solution)):
        *_, done, _, info = env.step(cell)
        instances = info.get("structure", {}).get("instances", [])
        if any(i["effect"] == "irreversible" for i in instances):
            return index
        if done:
            break
    return None


def plan_for(solution: list[str], at: int, variant: str) -> tuple[list[str], int | None]:
    """The plan of a variant (the solution with the read and its use added) and the index of the faulty cell."""
    head, call, tail = solution[:at], solution[at], solution[at + 1:]
    if variant == "after":
        return head + [READ, call, USE] + tail, len(head)
    return head + [READ, USE, call] + tail, None if variant == "clean" else len(head)


FIGURES = ("won", "rollbacks", "reruns", "blocked", "unsafe", "replayed")


def play_case(env, task: str, plan: list[str], faulty: int | None, harness: str, max_steps: int) -> Counter:
    """One episode; its figures: DART's study columns read from the trace (`episode_figures`: the env's ground
    truth the loop wrote there, never what the sidecar saw), success only when no restore undid a payment."""
    plugin = HARNESSES[harness]()
    played = play(env, PlanAgent(plan, faulty), plugins=[plugin] if plugin else [], task=task,
                  max_steps=max_steps, params={"max_rollbacks": 10})
    if played.result.status == "error":
        raise RuntimeError(f"{harness} on {task}: {played.result.error}")
    figures = episode_figures(played.trace)
    figures["won"] = int(played.result.won and figures["unsafe"] == 0)
    return Counter({key: int(figures[key]) for key in FIGURES}, episodes=1)


def cells(row: Counter) -> list[str]:
    """A row's success and counts as table cells."""
    return [f"{row['won']}/{row['episodes']}", *(str(row[key]) for key in FIGURES[1:])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-steps", type=int, default=16)
    args = parser.parse_args()
    provider = AppWorldProvider()
    env = provider.make("embedded", expert=True)
    tasks = {}
    for task in provider.task_sets()["embedded"].tasks("test", 100):
        at = irreversible_cell(env, task)
        if at is not None:
            tasks[task] = at
    print(f"tasks with an irreversible call: {', '.join(f'{t} (cell {at})' for t, at in tasks.items())}")
    rows = {harness: Counter() for harness in HARNESSES}
    by_variant: dict[tuple[str, str], Counter] = {}
    for task, at in tasks.items():
        env.reset(options={"task": task})
        solution = list(env.solution)
        for variant in VARIANTS:
            plan, faulty = plan_for(solution, at, variant)
            for harness, row in rows.items():
                figures = play_case(env, task, plan, faulty, harness, args.max_steps)
                row.update(figures)
                by_variant.setdefault((harness, variant), Counter()).update(figures)
    env.close()
    header = ["harness", "success", "admitted", "reruns", "blocked", "unsafe", "replayed"]
    table = [header] + [[name, *cells(row)] for name, row in rows.items()]
    print("\n## appworld (all variants)")
    print(_aligned(table))
    print("\n## appworld by variant (success, a admitted local rollbacks, b blocked, u unsafe, r replayed cells)")
    body = [["harness", *VARIANTS]]
    for name in rows:
        shown = []
        for variant in VARIANTS:
            v = by_variant[(name, variant)]
            shown.append(f"{v['won']}/{v['episodes']} a{v['rollbacks']} b{v['blocked']} u{v['unsafe']} "
                         f"r{v['replayed']}")
        body.append([name, *shown])
    print(_aligned(body))


def _aligned(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


if __name__ == "__main__":
    main()
