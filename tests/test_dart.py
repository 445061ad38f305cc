"""DART, its baselines and the loop support they need: rewind, checkpoint tree, observable failures."""

from __future__ import annotations

import re

import pytest
from gymnasium.utils.env_checker import check_env as gymnasium_check_env

from playground.core.env import ObservableFailure
from playground.core.hookspecs import hookimpl
from playground.core.payloads import Decision
from playground.envs.workflow.env import WorkflowProvider
from playground.plugins.dart.sidecar import CoarseRetry, Dart, EntryOnly, RetryOnly
from playground.plugins.dart.structure import Declared
from playground.testing import ScriptedAgent, check_env, play, tiny_env
from playground.testing.tiny import TinyEnv
from tests.dart_cases import play_harness

PROVIDER = WorkflowProvider()


def run(task: str, plugin, agent=None):
    env = PROVIDER.make(task.split("-")[0] if not task.startswith("schedule") else "schedule-form", expert=True)
    played = play(env, agent or ScriptedAgent(), plugins=[plugin] if plugin else [], task=task, max_steps=80,
                  params={"max_rollbacks": 10})
    return played, env


def decisions(played) -> list[dict]:
    return [d["details"] for d in played.of("intervention")]


# -- the loop ----------------------------------------------------------------------------


class RollbackAt:
    """Checkpoints every step; rolls back once from step `at` to step `to`."""

    def __init__(self, at: int, to: int) -> None:
        self.at, self.to, self.done = at, to, False
        self.seen: list[tuple[int, tuple[int, ...]]] = []

    @hookimpl
    def want_checkpoint(self, context):
        return True

    @hookimpl
    def decide_intervention(self, context, proposal, detections):
        self.seen.append((context.step, context.checkpoints))
        if not self.done and context.step == self.at:
            self.done = True
            return Decision("rb", "rollback", rollback_to=self.to)
        return None


def test_rollback_rewinds_the_step_counter_and_the_budget_counts_env_steps():
    plugin = RollbackAt(at=3, to=1)
    result = play(tiny_env(), ScriptedAgent(), plugins=[plugin], task="tiny-5", max_steps=30)
    steps = [s["step"] for s in result.of("step")]
    assert steps[:3] == [0, 1, 2] and steps[3] == 1  # rewound: the step after the rollback is step 1 again
    assert result.result.won and result.result.steps == len(steps)  # env steps actually taken
    assert result.of("rollback")[0] == {"to_step": 1, "restored": True, "checkpoint": "c1", "branch": 1,
                                        "from_step": 3}
    after = [seen for seen in plugin.seen if seen[0] == 1][-1]
    assert after[1] == (0, 1)  # the lineage after the fork: c0, c1


def test_restores_fork_branches_and_never_overwrite_checkpoints():
    plugin = RollbackAt(at=3, to=1)
    result = play(tiny_env(), ScriptedAgent(), plugins=[plugin], task="tiny-5", max_steps=30)
    points = result.of("checkpoint")
    ids = [p["id"] for p in points]
    assert len(ids) == len(set(ids))  # every checkpoint has its own id
    first, second = [p for p in points if p["step"] == 2]  # step 2 on branch 0 and again on branch 1
    assert (first["branch"], second["branch"]) == (0, 1) and first["id"] != second["id"]
    assert second["parent"] == "c1"  # the new branch grows from the restored checkpoint
    assert [p["step"] for p in points].count(1) == 1  # the restored checkpoint stands for step 1: no new one


def test_retention_keeps_at_most_n_checkpoints_per_branch_and_the_first():
    result = play(tiny_env(), ScriptedAgent(), plugins=[RollbackAt(at=99, to=0)], task="tiny-5", max_steps=30,
                  params={"max_checkpoints_per_branch": 2})
    dropped = [d for p in result.of("checkpoint") for d in p.get("dropped", [])]
    assert dropped and "c0" not in dropped


def test_an_unbounded_rollback_loop_is_stopped_by_max_rollbacks():
    class Forever(RollbackAt):
        @hookimpl
        def decide_intervention(self, context, proposal, detections):
            return Decision("rb", "rollback", rollback_to=0)

    result = play(tiny_env(), ScriptedAgent(), plugins=[Forever(0, 0)], task="tiny-5", max_steps=30, strict=False,
                  params={"max_rollbacks": 4})
    assert result.result.status == "error" and "too many rollbacks" in result.result.error


class FailingTiny(TinyEnv):
    """The tiny env whose second action raises an observable failure (a timeout), once."""

    fired = False

    def step(self, action):
        if self.state["moves"] == 1 and not self.fired:
            self.fired = True
            raise ObservableFailure("timeout", "the tool did not answer in time", keys=["x"], site=action)
        return super().step(action)


def test_an_observable_failure_is_a_recoverable_step_not_an_error():
    seen = []

    class Watch:
        @hookimpl
        def step_completed(self, outcome):
            seen.append(outcome.failure)

    result = play(FailingTiny(expert=True), ScriptedAgent(), plugins=[Watch()], task="tiny-5", max_steps=30)
    assert result.result.status == "won" and result.count("error") == 0
    failed = [s for s in result.of("step") if "failure" in s]
    assert len(failed) == 1 and failed[0]["valid_action"] is False
    assert failed[0]["failure"] == {"kind": "timeout", "message": "the tool did not answer in time", "keys": ["x"],
                                    "site": failed[0]["action"]}
    assert [f["kind"] for f in seen if f] == ["timeout"]
    with pytest.raises(ValueError, match="unknown failure kind"):
        ObservableFailure("oops", "no such kind")


# -- the workflow env --------------------------------------------------------------------


@pytest.mark.parametrize("task_set", ["schedule-form", "travel", "etl", "navigation", "diagnosis"])
def test_workflow_passes_both_env_checkers(task_set):
    check_env(PROVIDER, task_set, tasks=12)
    env = PROVIDER.make(task_set)
    gymnasium_check_env(env, skip_render_check=True)


def test_workflow_declares_its_structure_and_grades_the_final_state():
    env = PROVIDER.make("etl", expert=True)
    _, info = env.reset(options={"task": "etl-clean-0"})
    instances = info["workflow"]["instances"]
    assert {i["effect"] for i in instances} == {"reversible", "irreversible"}
    assert all(i["id"].count(":") == 2 and i["reads"] and i["writes"] for i in instances)
    for action in info["expert_plan"]:
        *_, terminated, _, info = env.step(action)
    assert terminated and info["won"] and env.valid()


def test_an_observable_failure_is_recovered_without_erroring_the_episode():
    played, _ = run("etl-ordinary-0", Dart())
    assert played.result.status == "won" and played.count("error") == 0
    failed = [s for s in played.of("step") if "failure" in s]
    assert failed and failed[0]["failure"]["kind"] == "tool_error"
    (detail,) = decisions(played)
    assert detail["decision"] == "rollback" and detail["instance"].startswith("transform:")
    assert detail["preserved"] > 0 and played.of("rollback")[0]["to_step"] > 0  # local: not a rerun


def test_committed_consumer_veto():
    played, env = run("schedule-form-committed-0", Dart())
    (detail,) = decisions(played)
    assert detail["decision"] == "rerun" and detail["blocked"] and "writes_not_consumed" in detail["reason"]
    assert played.result.won and env.world["unsafe_restores"] == 0
    # without the veto, the effect check still blocks: the committed consumer's submission is irreversible
    effect, env = run("schedule-form-committed-0", Dart({"consumer_check": False}))
    (detail,) = decisions(effect)
    assert detail["decision"] == "rerun" and "irreversible effect of submit:" in detail["reason"]
    assert effect.result.won and env.world["unsafe_restores"] == 0
    unsafe, env = run("schedule-form-committed-0", Dart({"consumer_check": False, "effect_check": False}))
    assert decisions(unsafe)[0]["decision"] == "rollback"  # without both, it is admitted
    assert env.world["unsafe_restores"] == 1 and not unsafe.result.won


def test_irreversible_effect_blocks_the_local_rollback():
    played, env = run("travel-irreversible-0", Dart())
    (detail,) = decisions(played)
    assert detail["decision"] == "rerun" and detail["blocked"] and "effects_recoverable" in detail["reason"]
    assert played.result.won and played.of("rollback")[0]["to_step"] == 0
    naive, env = run("travel-irreversible-0", EntryOnly())  # the unchecked baseline crosses it
    assert env.world["unsafe_restores"] == 1 and not naive.result.won


def test_ambiguity_reruns_the_whole_task():
    played, _ = run("etl-ambiguous-0", Dart())
    (detail,) = decisions(played)
    assert detail["decision"] == "rerun" and "ambiguous" in detail["reason"] and detail["instance"] is None
    assert played.of("rollback")[0]["to_step"] == 0 and played.result.won


def test_the_sidecar_never_reads_the_grade():
    import inspect

    from playground.plugins.dart import sidecar, structure

    source = inspect.getsource(sidecar) + inspect.getsource(structure)
    assert not re.search(r"\.(won|reward|score)\b|\[[\"'](won|reward|score)[\"']\]", source)


def test_a_rollback_keeps_what_was_committed():
    figures = play_harness(PROVIDER, "travel", "travel-ordinary-0", "dart", ScriptedAgent(), 80)
    assert figures["won"] and figures["unsafe"] == 0 and figures["preserved"] > 0


# -- in-instance commit checkpoints (the `late` variant) -----------------------------------


@pytest.mark.parametrize("task", ["schedule-form-late-0", "travel-late-1", "etl-late-2", "navigation-late-0",
                                  "diagnosis-late-1"])
def test_dart_restores_an_in_instance_commit_checkpoint_where_entry_only_reruns(task):
    played, env = run(task, Dart())
    (detail,) = decisions(played)
    (rollback,) = played.of("rollback")
    assert detail["decision"] == "rollback" and detail["conditions"]["effects_recoverable"]
    assert rollback["to_step"] == detail["candidate"] > detail["entry"]  # the commit point inside the instance
    assert played.result.won and env.valid() and env.world["unsafe_restores"] == 0
    dart = play_harness(PROVIDER, env.domain.name, task, "dart", ScriptedAgent(), 80)
    ablation = play_harness(PROVIDER, env.domain.name, task, "dart-entry-only", ScriptedAgent(), 80)
    assert dart["replayed"] == 2  # the partial write and the failed check
    assert ablation["won"] and ablation["blocked"] == 1 and ablation["replayed"] > dart["replayed"] + 10
    assert dart["preserved"] > ablation["preserved"] == 0
    # the unchecked baselines: the instance's entry crosses its committed irreversible effect; the latest
    # checkpoint keeps the partial write
    for harness, unsafe in (("entry-only", 1), ("coarse-retry", 1), ("checkpoint-latest", 0)):
        figures = play_harness(PROVIDER, env.domain.name, task, harness, ScriptedAgent(), 80)
        assert not figures["won"] and figures["unsafe"] == unsafe, harness


def test_dart_checkpoints_at_in_instance_commit_points_only():
    played, _ = run("schedule-form-clean-0", Dart())
    steps = [s["action"] for s in played.of("step")]
    taken = {p["step"] for p in played.of("checkpoint")}
    receipt = [i for i, a in enumerate(steps) if a.startswith("receipt ")]
    confirm = [i for i, a in enumerate(steps) if a.startswith("confirm ")]
    assert receipt and set(receipt) <= taken  # after confirm: the submission is stable
    assert not set(confirm) & taken  # after submit, before its check: half done, no checkpoint


def test_an_undeclared_step_structure_reads_conservatively():
    declared = Declared.of({"id": "x:a:1", "steps": ["x a", "y a"], "reads": ["k"], "writes": ["w"],
                            "effect": "irreversible"})
    assert declared.commits == () and declared.first_write({"w"}) == 0
    assert declared.step_effects == ("irreversible", "irreversible")


# -- the coarse-retry baseline --------------------------------------------------------------


def test_coarse_retry_reruns_the_failing_entity_from_its_start():
    played, env = run("schedule-form-ordinary-0", CoarseRetry())
    (detail,) = decisions(played)
    (rollback,) = played.of("rollback")
    first = next(s["step"] for s in played.of("step") if s["action"].startswith(f"lookup {env.entities[-1]}"))
    assert rollback["to_step"] == first and played.result.won  # coarser than the fill instance's entry
    entry, _ = run("schedule-form-ordinary-0", EntryOnly())
    retry, _ = run("schedule-form-ordinary-0", RetryOnly())
    assert entry.result.steps < played.result.steps < retry.result.steps  # finer than a whole-task rerun
    crossing, env = run("schedule-form-committed-0", CoarseRetry())  # its chain holds the irreversible submit
    assert env.world["unsafe_restores"] == 1 and not crossing.result.won


# -- the paper's other domains: navigation and diagnosis ---------------------------------------


@pytest.mark.parametrize("task", ["navigation-committed-0", "diagnosis-committed-2"])
def test_a_consumed_fault_in_the_new_domains_is_vetoed_and_the_unchecked_baselines_end_invalid(task):
    played, env = run(task, Dart())
    (detail,) = decisions(played)
    assert detail["decision"] == "rerun" and detail["blocked"] and "writes_not_consumed" in detail["reason"]
    assert played.result.won and env.world["unsafe_restores"] == 0
    assert {"purchase", "prescribe"} & {i.split(":")[0] for i in detail["irreversible"]}
    for harness in ("entry-only", "coarse-retry", "checkpoint-latest"):
        assert not play_harness(PROVIDER, env.domain.name, task, harness, ScriptedAgent(), 80)["won"], harness


@pytest.mark.parametrize("task_set", ["navigation", "diagnosis"])
def test_dart_solves_every_variant_of_the_new_domains_without_an_unsafe_restore(task_set):
    for task in PROVIDER.task_sets()[task_set].tasks("test"):
        figures = play_harness(PROVIDER, task_set, task, "dart", ScriptedAgent(), 80)
        assert figures["won"] and figures["unsafe"] == 0, task
