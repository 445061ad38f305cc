"""The ScienceWorld env: task ids and splits (no JVM), then the real engine (one JVM for the module, slow).

The JVM tests share the process's one engine; the kill test stops it first, so no two JVMs
of these tests ever run at once.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

import pytest

from playground.core.env import UnknownTaskError
from playground.core.hookspecs import hookimpl
from playground.envs.scienceworld import ScienceWorldProvider
from playground.envs.scienceworld.env import admissible_view, door_actions
from playground.envs.scienceworld.tasks import TASK_SETS, TASKS, VARIATIONS, parse_task_id, variations
from playground.processes import is_running, wait_gone
from playground.testing import ScriptedAgent, play
from tests.conftest import needs_extra, run_cli

try:
    import scienceworld as _scienceworld  # noqa: F401
    HAS_SCIENCEWORLD = True
except ImportError:
    HAS_SCIENCEWORLD = False
ENGINE = needs_extra("scienceworld", HAS_SCIENCEWORLD and shutil.which("java") is not None,
                     "the scienceworld package or java is missing")
EXPERT_TASKS = ["boil", "find-animal", "identify-life-stages-1", "power-component", "chemistry-mix",
                "mendelian-genetics-known-plant"]


# -- task ids and splits: no engine ----------------------------------------------------------------------------------

def test_thirty_tasks_with_their_own_disjoint_splits():
    assert len(TASKS) == 30 and set(TASK_SETS) == {"all", *TASKS}
    every = TASK_SETS["all"]
    assert every.default_split == "test" and every.tasks("test", 3) == ["boil-21", "change-the-state-of-matter-of-21",
                                                                         "chemistry-mix-24"]
    for split in ("train", "dev", "test"):
        assert every.available(split) == sum(len(variations(t, split)) for t in TASKS)
    boil = TASK_SETS["boil"]
    assert boil.tasks("train") == [f"boil-{v}" for v in range(14)] and boil.tasks("test")[0] == "boil-21"
    assert set(boil.tasks("train")).isdisjoint(boil.tasks("test"))
    assert parse_task_id("boil-29") == ("boil", 29) and parse_task_id("boil-30") is None
    assert parse_task_id("identify-life-stages-1-0") == ("identify-life-stages-1", 0)
    assert not every.has_task("boil-30") and every.has_task("use-thermometer-539")


def test_the_admissible_view_is_bounded_sorted_and_keeps_the_doors():
    valid = [f"connect wire {i} to battery" for i in range(300)] + ["look around", "pick up cup", "reset task",
                                                                     "focus on agent", "move cup to sink"]
    doors = door_actions("You also see:\n\tA door to the kitchen (that is open)\n\tA door to the hallway "
                         "(that is closed)")
    assert doors == ["close door to kitchen", "go to kitchen", "open door to hallway"]
    view = admissible_view(valid, cap=10, keep=doors)
    assert len(view) == 10 and view == sorted(view)
    assert set(doors) | {"look around", "pick up cup", "move cup to sink"} <= set(view)
    assert "reset task" not in view and "focus on agent" not in view


def test_a_missing_engine_is_a_named_error(monkeypatch):
    from playground.envs.scienceworld.engine import ScienceWorldUnavailable

    monkeypatch.setitem(sys.modules, "scienceworld", None)
    with pytest.raises(ScienceWorldUnavailable, match=r"pip install 'playground\[scienceworld\]'"):
        ScienceWorldProvider().make("all")
    monkeypatch.delitem(sys.modules, "scienceworld")
    monkeypatch.setenv("PATH", "/nonexistent")
    if HAS_SCIENCEWORLD:
        with pytest.raises(ScienceWorldUnavailable, match="no `java` on PATH"):
            ScienceWorldProvider().make("all")


@pytest.mark.skipif(not HAS_SCIENCEWORLD, reason="needs scienceworld to get past the package check")
def test_the_cli_exits_2_without_java(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    done = run_cli("run", "--env", "scienceworld", "--agent", "expert", "--episodes", "1",
                   "--out", str(tmp_path / "runs"), env={"PATH": str(bin_dir)})
    assert done.returncode == 2, done.stderr
    assert "no `java` on PATH" in done.stderr


# -- the real engine -------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def provider():
    return ScienceWorldProvider()


@pytest.mark.slow
@ENGINE
@pytest.mark.parametrize("task", EXPERT_TASKS)
def test_the_expert_wins_a_test_variation(provider, task):
    env = provider.make(task, expert=True)
    task_id = TASK_SETS[task].tasks("test")[0]
    # ScienceWorld's own gold path for this Mendelian variation loses on some loads (2 of 18 measured on 2026-12-07:
    # 259 steps, then the focus on the wrong box; its API takes no seed). The process kept such a path and lost 3
    # loads of 3 in one CI run; now a kept path that lost is dropped and the next reset takes its own load's. Up to
    # 4 loads; every other task one.
    tries = []  # what each load came to, for the message should none be won
    for _ in range(4 if task.startswith("mendelian") else 1):
        _, info = env.reset(options={"task": task_id})
        played = []
        for _ in range(300):
            played.append(info["expert_plan"][0])
            _, _, terminated, _, info = env.step(played[-1])
            assert info["valid_action"]
            if terminated:
                break
        tries.append({"score": info["score"], "lost": info["lost"], "actions": len(played), "last": played[-5:],
                      "plan_left": info["expert_plan"][:5]})
        if info["won"]:
            break
    assert info["won"] and info["score"] == 100.0 and not info["lost"] and info["expert_plan"] == [], tries
    env.close()


@pytest.mark.slow
@ENGINE
def test_variation_splits_match_the_engine():
    from playground.envs.scienceworld.engine import engine

    sw = engine()
    assert sorted(sw.get_task_names()) == sorted(TASKS)
    for task in TASKS:
        sw.load(task, 0, "")
        got = (sw.get_variations_train(), sw.get_variations_dev(), sw.get_variations_test())
        ours = [list(variations(task, split)) for split in ("train", "dev", "test")]
        assert ours == [list(g) for g in got], task
        assert sum(VARIATIONS[task]) == sw.get_max_variations(task)


@pytest.mark.slow
@ENGINE
def test_invalid_actions_change_nothing_and_ids_are_episodes(provider):
    env, other = provider.make("all"), provider.make("all")
    first = env.reset(options={"task": "melt-21"})
    text, reward, terminated, _, info = env.step("xyzzy the cup")
    assert not info["valid_action"] and not terminated and reward == 0.0
    assert info["moves"] == first[1]["moves"] and info["admissible_actions"] == first[1]["admissible_actions"]
    assert env.step("look around")[0] == first[0]
    env.step("open door to kitchen")
    assert other.reset(options={"task": "melt-21"}) == first  # same id, same episode, on the shared engine
    other.step("pick up thermometer")
    after = env.step("look around")  # env's episode is put back: the door it opened is open, no thermometer taken
    assert "door to the kitchen (that is open)" in after[0] and after[4]["valid_action"]
    with pytest.raises(UnknownTaskError, match="scienceworld: unknown task 'melt-99'"):
        env.reset(options={"task": "melt-99"})
    assert env.reset(seed=1)[1]["task"] == TASK_SETS["all"].tasks("test")[1]
    env.close()
    other.close()


@pytest.mark.slow
@ENGINE
@pytest.mark.parametrize("task_set", ["all", "boil"])
def test_check_env_passes(provider, task_set):
    from playground.testing.check_env import check_env

    check_env(provider, task_set)


@pytest.mark.slow
@ENGINE
def test_the_expert_goes_past_gold_commands_the_engine_rejects_here(provider):
    """A gold command naming an object as another load of the world made it (after an ambiguity answer picked
    another seed there) is rejected by the engine's parser here: the expert plan goes past it and its answer."""
    env = provider.make("melt", expert=True)
    _, info = env.reset(options={"task": "melt-21"})
    plan = info["expert_plan"]
    env._gold[env._gold_at + 1:env._gold_at + 1] = ["move round orange pea seed in ceramic cup to ceramic cup", "0"]
    _, _, _, _, info = env.step(plan[0])
    assert info["valid_action"] and info["expert_plan"] == plan[1:]
    env.close()


@pytest.mark.slow
@ENGINE
def test_a_gold_path_played_to_its_end_that_lost_is_not_kept(provider):
    """The process keeps a task's first gold path (a reset gives the same plan; a restore keeps the episode's),
    unless an episode played it to its end and lost: the next reset then takes its own load's path. A loss off
    the path keeps it."""
    from playground.envs.scienceworld import env as env_module

    env = provider.make("melt", expert=True)
    _, info = env.reset(options={"task": "melt-21"})
    kept = list(env._gold)
    wrong = next(a for a in info["admissible_actions"] if a.startswith("focus on") and a not in kept)
    assert env.reset(options={"task": "melt-21"})[1]["expert_plan"] == info["expert_plan"]
    env.step(info["expert_plan"][0])
    snapshot = env.snapshot()
    env.step(env._plan()[0])
    env.restore(snapshot)
    assert env._gold == kept and env._gold_at == 1
    assert env.step(wrong)[4]["lost"]  # lost off the path: kept
    assert env_module._gold["melt-21"] == tuple(kept)
    env.reset(options={"task": "melt-21"})
    env._gold = [wrong]  # a path that loses, as the process's
    env_module._gold["melt-21"] = (wrong,)
    assert env.step(wrong)[4]["lost"]
    assert "melt-21" not in env_module._gold
    env.reset(options={"task": "melt-21"})
    assert env._gold != [wrong] and env_module._gold["melt-21"] == tuple(env._gold)
    env.close()


class Seen:
    """Records what each first proposal of a step was judged against."""

    def __init__(self) -> None:
        self.seen: list = []

    @hookimpl
    def detect_failures(self, context, proposal):
        if context.attempt == 0:
            self.seen.append((proposal.action, context.admissible_actions, context.schema_problems))


@pytest.mark.slow
@ENGINE
def test_sentry_takes_the_engines_verdict_outside_the_cut(provider):
    """The view is a cut of what the engine accepts (here 8 commands): an expert command outside it is not flagged
    invalid (the engine's parser takes it), a garbled one is; nothing the check does changes the episode."""
    from playground.plugins.sentry.harness import SentryPlugin

    env, seen = provider.make("all", expert=True, cap=8), Seen()
    result = play(env, ScriptedAgent(["xyzzy the cup"]), plugins=[seen, SentryPlugin({})], task="melt-21",
                  max_steps=8)
    validity = [(d["step"], list(d["labels"])) for d in result.of("detection") if d["failure_type"] == "action_validity"]
    assert validity == [(0, ["invalid_action"])]
    assert "the engine knows no command 'xyzzy the cup' here" in result.of("intervention")[0]["message"]["text"]
    outside = [action for action, shown, problems in seen.seen[1:] if action not in shown]
    assert outside and all(problems == () for action, shown, problems in seen.seen[1:])  # accepted beyond the cut
    assert [s["valid_action"] for s in result.of("step")] == [True] * len(result.of("step"))
    assert "xyzzy the cup" not in [s["action"] for s in result.of("step")]
    again = provider.make("all", expert=True)  # the same actions, sent without any check, give the same episode
    _, info = again.reset(options={"task": "melt-21"})
    for event in result.of("step"):
        observation, *_ = again.step(event["action"])
        assert observation == event["observation"]
    env.close()
    again.close()


@pytest.mark.slow
@ENGINE
def test_no_jvm_outlives_a_killed_run(tmp_path):
    """A process with the engine is killed with SIGKILL: its JVM goes with it."""
    from playground.envs.scienceworld.engine import shutdown

    shutdown()  # this process's JVM: never two at once
    code = ("from playground.envs.scienceworld.engine import engine, java_pid; engine(); "
            "print(java_pid(), flush=True); import time; time.sleep(600)")
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        java = int(child.stdout.readline())
        assert is_running(java)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
        assert wait_gone(java, 30.0), f"java {java} outlived its run"
    finally:
        if child.poll() is None:
            child.kill()


def test_the_expert_skips_answers_to_questions_the_engine_did_not_ask():
    """ScienceWorld's gold path answers ambiguity questions ("0"); unasked, the expert goes past them; asked but
    unanswered (the gold path's own load did not raise it), the expert answers "0"."""
    from playground.envs.scienceworld.env import ScienceWorldEnv

    env = ScienceWorldEnv(TASK_SETS["boil"], expert=True)
    env._gold, env._text = ["move jug to sink", "0", "wait1"], "You move the jug to the sink."
    env._follow_gold("move jug to sink")
    assert env._gold[env._gold_at:] == ["wait1"]
    env._gold_at, env._text = 0, "Ambiguous request: Please enter the number for the action you intended"
    env._follow_gold("move jug to sink")
    assert env._gold[env._gold_at:] == ["0", "wait1"]
    env._gold, env._gold_at = ["move jug to sink", "wait1"], 1  # a question the gold path's own load did not raise
    assert env._plan() == ["0", "wait1"]
    env._follow_gold("0")
    assert env._plan() == ["0", "wait1"] and env._gold_at == 1  # answered: the engine goes on, and so does the plan
    env._text = "You move the jug to the sink."
    assert env._plan() == ["wait1"]
