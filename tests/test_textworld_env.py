"""Tests of the TextWorld env plugin (`playground.envs.textworld`).

Game-generating tests are marked slow; they share a few games generated once per
session into a temporary `PLAYGROUND_CACHE`.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from playground.envs.textworld import games
from playground.envs.textworld.provider import TextWorldProvider
from playground.envs.textworld.tasks import TASK_SETS, params_hash, task_seed

CUSTOM = "custom-20000"
COOKING = "cooking-20000"
INFO_KEYS = {"goal", "admissible_actions", "valid_action", "won", "lost", "score", "max_score"}


@pytest.fixture(scope="session")
def textworld_cache(tmp_path_factory):
    """A game cache shared by the whole session, set as PLAYGROUND_CACHE."""
    path = tmp_path_factory.mktemp("playground-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PLAYGROUND_CACHE", str(path))
        yield path


@pytest.fixture(scope="session")
def provider(textworld_cache):
    """The provider, with the custom and cooking test games generated."""
    provider = TextWorldProvider()
    provider.prepare("custom", [CUSTOM])
    provider.prepare("cooking", [COOKING])
    return provider


def _play(env, actions):
    """Play `actions`; return the last step's result."""
    result = None
    for action in actions:
        result = env.step(action)
    return result


# ----------------------------------------------------------------------------- fast


def test_importing_the_plugin_does_not_import_textworld():
    code = ("import sys, playground.envs.textworld as p; "
            "assert hasattr(p, 'register_envs'); "
            "assert not [m for m in sys.modules if m.startswith('textworld')], 'textworld imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_register_envs_registers_the_provider():
    from playground.envs.textworld import register_envs

    registered = []
    register_envs(registered.append)
    assert [p.name for p in registered] == ["textworld"]
    assert registered[0].default_task_set == "easy" and registered[0].is_default  # what a bare `playground run` plays


def test_task_sets_and_disjoint_splits():
    provider = TextWorldProvider()
    assert set(provider.task_sets()) == {"custom", "easy", "cooking"}
    for task_set in provider.task_sets().values():
        assert task_set.default_split == "test"
        ids = {split: set(task_set.tasks(split, 50)) for split in ("train", "dev", "test")}
        assert all(len(tasks) == 50 for tasks in ids.values())
        assert not ids["train"] & ids["dev"] and not ids["dev"] & ids["test"] and not ids["train"] & ids["test"]
    assert TASK_SETS["custom"].tasks("test", 2) == ["custom-20000", "custom-20001"]
    with pytest.raises(ValueError):
        TASK_SETS["custom"].tasks("train", 10_001)  # would run into the dev seeds


def test_unknown_task_id_is_a_value_error_naming_it(textworld_cache):
    provider = TextWorldProvider()
    for bad in ["easy-20000", "custom-x", "custom--1", "custom-020000", "custom"]:
        with pytest.raises(ValueError, match=bad):
            task_seed("custom", bad)
        with pytest.raises(ValueError, match=bad):
            provider.prepare("custom", [bad])
    env = provider.make("custom")
    with pytest.raises(ValueError, match="nope-1"):
        env.reset(options={"task": "nope-1"})
    with pytest.raises(ValueError, match="unknown task set 'nope'"):
        provider.make("nope")


def test_describe():
    description = TextWorldProvider().describe("easy")
    assert description["env"] == "textworld" and description["task_set"] == "easy"
    assert description["version"]
    assert description["generator"] == {"challenge": "custom", "nb_rooms": 2, "nb_objects": 4, "quest_length": 1}
    assert "20000" in description["seeds"]
    assert TextWorldProvider().describe("cooking")["generator"]["split"]["dev"] == "valid"


def test_cache_dir_is_read_at_call_time(monkeypatch, tmp_path):
    folder = f"easy-{params_hash(TASK_SETS['easy'])}"
    monkeypatch.setenv("PLAYGROUND_CACHE", str(tmp_path))
    assert games.game_path("easy", "easy-3") == tmp_path / "textworld" / folder / "easy-3.z8"
    monkeypatch.delenv("PLAYGROUND_CACHE")
    assert games.game_path("easy", "easy-3") == Path.home() / ".cache/playground/textworld" / folder / "easy-3.z8"


def test_other_generator_settings_get_another_cache_folder():
    custom = TASK_SETS["custom"]
    changed = dataclasses.replace(custom, params={**custom.params, "quest_length": 2})
    assert params_hash(custom) != params_hash(changed)


def test_failed_generation_leaves_nothing_behind(monkeypatch, tmp_path):
    broken = tmp_path / "broken.py"
    broken.write_text("import sys\nout = sys.argv[sys.argv.index('--out') + 1]\n"
                      "open(out, 'w').write('half a game')\nsys.exit('generator crashed')\n")
    monkeypatch.setattr(games, "GENERATE_SCRIPT", broken)
    monkeypatch.setenv("PLAYGROUND_CACHE", str(tmp_path / "cache"))
    with pytest.raises(RuntimeError, match="generator crashed"):
        TextWorldProvider().prepare("easy", ["easy-7"])
    folder = games.game_path("easy", "easy-7").parent
    assert folder.parent.parent == tmp_path / "cache" and list(folder.iterdir()) == []


def test_clean_feedback_strips_banner_and_status_line():
    from playground.envs.textworld.env import clean_feedback

    raw = ("\n\n   ________  ____\n  |        \\|  \\\n   \\$$$$$$$$| $$\n\nWelcome!\n\n-= Lounge =-\n"
           "A lounge.\n\n\n\n>                                    -= Lounge =-0/1")
    assert clean_feedback(raw) == "Welcome!\n\n-= Lounge =-\nA lounge."
    end = ("\nYou eat.\n\n      *** The End ***\n\nYou scored 3 out of a possible 3, in 7 turns.\n\n\n"
           "Would you like to RESTART, RESTORE a saved game, QUIT or UNDO the last command?\n>      -= Kitchen =-2/6")
    assert clean_feedback(end) == "You eat.\n\n*** The End ***\n\nYou scored 3 out of a possible 3, in 7 turns."


# ----------------------------------------------------------------------------- slow


@pytest.mark.slow
@pytest.mark.parametrize("task_set, task", [("custom", CUSTOM), ("cooking", COOKING)])
def test_generation_is_deterministic_and_on_demand(provider, monkeypatch, tmp_path, task_set, task):
    # tw-cooking iterates over sets: this also checks the generator's fixed hash seed.
    first = games.game_path(task_set, task)
    monkeypatch.setenv("PLAYGROUND_CACHE", str(tmp_path))
    env = provider.make(task_set)
    env.reset(options={"task": task})  # generates the missing game on demand
    second = games.game_path(task_set, task)
    assert second != first and second.is_file()
    assert second.read_bytes() == first.read_bytes()
    assert second.with_suffix(".json").read_bytes() == first.with_suffix(".json").read_bytes()
    assert sorted(p.name for p in second.parent.iterdir()) == [f"{task}.json", f"{task}.z8"]
    env.close()


@pytest.mark.slow
def test_prepare_skips_existing_games(provider):
    path = games.game_path("custom", CUSTOM)
    before = path.stat().st_mtime_ns
    messages = []
    provider.prepare("custom", [CUSTOM], messages.append)
    assert messages == [] and path.stat().st_mtime_ns == before


@pytest.mark.slow
def test_reset_gives_the_same_initial_state(provider):
    env = provider.make("custom")
    obs, info = env.reset(seed=1, options={"task": CUSTOM})
    assert set(info) >= INFO_KEYS and "expert_plan" not in info
    assert info["admissible_actions"] == sorted(info["admissible_actions"])
    assert info["goal"] and info["max_score"] > 0 and info["score"] == 0
    assert "-= " in obs and "$$" not in obs and not obs.rstrip().endswith("0/1")
    _play(env, info["admissible_actions"][:3])
    again, info_again = env.reset(seed=2, options={"task": CUSTOM})
    assert (again, info_again) == (obs, info)
    other = provider.make("custom")
    assert other.reset(options={"task": CUSTOM}) == (obs, info)
    env.close()
    other.close()


@pytest.mark.slow
def test_invalid_action_changes_nothing(provider):
    env = provider.make("custom")
    env.reset(options={"task": CUSTOM})
    look, _, _, _, info = env.step("look")
    obs, reward, terminated, truncated, bad = env.step("dance with the toolbox")
    assert bad["valid_action"] is False and reward == 0 and not terminated and not truncated
    assert bad["admissible_actions"] == info["admissible_actions"] and bad["score"] == info["score"]
    assert env.step("look")[0] == look
    action = info["admissible_actions"][0]
    assert env.step(f"  {action.upper()} ")[4]["valid_action"] is True  # case and spaces do not matter
    env.close()


@pytest.mark.slow
@pytest.mark.parametrize("task_set, task", [("custom", CUSTOM), ("cooking", COOKING)])
def test_expert_plan_wins(provider, task_set, task):
    env = provider.make(task_set, expert=True)
    _, info = env.reset(options={"task": task})
    total = 0.0
    for _ in range(50):
        assert info["expert_plan"], "expert plan ran out before the game was won"
        _, reward, terminated, truncated, info = env.step(info["expert_plan"][0])
        assert info["valid_action"] and not truncated
        total += reward
        if terminated:
            break
    assert terminated and info["won"] and not info["lost"]
    assert total == info["score"] == info["max_score"]
    assert info["admissible_actions"] == [] and info["expert_plan"] == []
    obs, reward, terminated, _, after = env.step("look")  # the game stays over
    assert terminated and reward == 0 and after["valid_action"] is False
    env.close()


@pytest.mark.slow
def test_snapshot_restore(provider):
    env = provider.make("custom", expert=True)
    _, info = env.reset(options={"task": CUSTOM})
    _, _, _, _, info = env.step(info["expert_plan"][0])
    saved = env.snapshot()
    look_before, _, _, _, info_before = env.step("look")

    _play(env, info_before["expert_plan"])  # the original plays on and wins
    assert env.step("look")[4]["won"] is True

    for _ in range(2):  # the snapshot is untouched by play after a restore
        env.restore(saved)
        look, _, terminated, _, info_now = env.step("look")
        assert (look, info_now) == (look_before, info_before) and not terminated
        *_, last_info = _play(env, info_now["expert_plan"])
        assert last_info["won"] is True

    obs, info = env.reset(options={"task": CUSTOM})  # reset still works after a restore
    assert info["score"] == 0 and not info["won"]
    env.close()


def test_stale_generation_folders_are_removed_but_fresh_ones_kept(tmp_path):
    import os
    import time

    game = tmp_path / "easy-20001.z8"
    stale, fresh, other = tmp_path / ".easy-20001-abc", tmp_path / ".easy-20001-def", tmp_path / ".easy-20002-ghi"
    for folder in (stale, fresh, other):
        folder.mkdir()
    old = time.time() - 3 * games.GENERATE_TIMEOUT_S
    os.utime(stale, (old, old))
    os.utime(other, (old, old))
    assert games.remove_stale_temporaries(game) == [stale]
    assert not stale.exists() and fresh.exists() and other.exists()  # only this game's, only old ones


@pytest.mark.slow
@pytest.mark.parametrize("task_set", ["custom", "cooking"])
def test_textworld_meets_the_env_contract(provider, task_set):
    from playground.testing import check_env

    check_env(provider, task_set, tasks=1)
