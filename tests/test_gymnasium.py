"""The envs as real gymnasium envs: Unicode text spaces that hold what they emit, reset by
seed without a task, gymnasium's own `check_env`, the `playground/<Env>-v0` registry ids
(`gymnasium.make`, `gymnasium.make_vec` with async workers).

Envs with an engine (TextWorld, ALFWorld, AppWorld) are marked slow: their games are
generated once per module into a temporary PLAYGROUND_CACHE. AppWorld's tests are skipped,
saying why, when its server has not been set up (`playground envs setup appworld`).
"""

from __future__ import annotations

import copy
import importlib.metadata
import importlib.util
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import gymnasium
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.utils.env_checker import check_env
from gymnasium.vector.utils import create_shared_memory, read_from_shared_memory, write_to_shared_memory

import playground
import playground.envs  # registers the playground/* ids
from playground.core.env import MAX_TEXT, TextEnv, UnknownTaskError
from playground.core.task_sets import TaskSet, seed_range
from playground.envs.appworld import setup as appworld_setup
from playground.envs.gymnasium_registry import IDS, env_id, register_envs
from playground.host.manager import get_host
from playground.core.text_space import CHARACTERS, UnicodeText
from tests.conftest import needs_extra

CACHE_AT_IMPORT = os.environ.get("PLAYGROUND_CACHE")
APPWORLD = needs_extra("appworld", appworld_setup.is_set_up(),
                       f"AppWorld not set up: {appworld_setup.not_set_up_message()}")
ALFWORLD = needs_extra("alfworld", importlib.util.find_spec("alfworld") is not None,
                       "the alfworld package is not installed")
SCIENCEWORLD = needs_extra("scienceworld", importlib.util.find_spec("scienceworld") is not None,
                           "the scienceworld package is not installed")
FAST = ["tiny", "finance", "webshop", "workflow"]
ENGINES = [pytest.param("textworld", marks=pytest.mark.slow),
           pytest.param("alfworld", marks=[pytest.mark.slow, ALFWORLD]),
           pytest.param("appworld", marks=[pytest.mark.slow, APPWORLD]),
           pytest.param("scienceworld", marks=[pytest.mark.slow, SCIENCEWORLD])]
EVERY_ENV = FAST + ENGINES
GYM_NAME = {env: name for name, env in IDS.items()}


@pytest.fixture(scope="module")
def engine_cache(tmp_path_factory):
    """A PLAYGROUND_CACHE for this module's generated TextWorld and ALFWorld games."""
    path = tmp_path_factory.mktemp("gym-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PLAYGROUND_CACHE", str(path))
        yield path


@pytest.fixture
def cache(request, engine_cache, monkeypatch):
    """The module's game cache, except for AppWorld, whose setup lives in the user's cache.

    ALFWORLD_DATA is unset so that ALFWorld's default task set is `generated` (something
    earlier in the session may have imported alfworld, which sets it to its download folder).
    """
    monkeypatch.delenv("ALFWORLD_DATA", raising=False)
    if "appworld" in request.node.name:
        if CACHE_AT_IMPORT is None:
            monkeypatch.delenv("PLAYGROUND_CACHE", raising=False)
        else:
            monkeypatch.setenv("PLAYGROUND_CACHE", CACHE_AT_IMPORT)


def provider_of(env: str):
    return get_host().envs.get(env).provider


def made(env: str, **kwargs) -> TextEnv:
    """The env on its default task set, as the runner makes it."""
    provider = provider_of(env)
    return provider.make(kwargs.pop("task_set", provider.default_task_set), **kwargs)


def gymnasium_warnings(caught) -> list[str]:
    """The warnings gymnasium's checkers raised (not those of the engines underneath)."""
    return [str(w.message) for w in caught if f"{os.sep}gymnasium{os.sep}" in w.filename]


# -- the text space ----------------------------------------------------------------------


def test_unicode_text_holds_any_text_and_nothing_else():
    space = UnicodeText(50)
    for text in ("", "You are in the hall. You see a red key.", "search[blue mug, $10 - 20%]",
                 "print(apis.venmo.login(username='x@y.com'))\n", "Grüße, 日本語, emoji 🎲, tab\t, NUL \0"):
        assert text in space
    assert "x" * 51 not in space and 5 not in space and b"bytes" not in space
    assert "\ud800" not in space  # a lone surrogate is not a character
    assert len(space.character_set) == CHARACTERS and "é" in space.character_set
    # gymnasium's default Text space (alphanumeric) is what every env declared before
    assert "You are in the hall." not in spaces.Text(max_length=MAX_TEXT)


def test_unicode_text_samples_flattens_and_batches():
    space = UnicodeText(300, seed=7)
    samples = [space.sample() for _ in range(50)]
    assert all(s in space for s in samples) and len(set(samples)) == 50
    assert max(len(s) for s in samples) > 100 and any(not s.isascii() for s in samples)
    again = UnicodeText(300, seed=7)
    assert [again.sample() for _ in range(50)] == samples
    mask = np.zeros(CHARACTERS, dtype=np.int8)
    mask[[space.character_index(c) for c in "ab "]] = 1
    assert set(space.sample(mask=(20, mask))) <= set("ab ")
    for text in samples[:5] + ["", "über \U0001f3b2"]:
        flat = spaces.flatten(space, text)
        assert flat.shape == (300,) and spaces.unflatten(space, flat) == text
    assert copy.deepcopy(space) == space and space != UnicodeText(301) and space != spaces.Text(300, min_length=0)


def test_unicode_text_shared_memory_is_a_view_of_the_latest_writes():
    space = UnicodeText(40)
    memory = create_shared_memory(space, n=2)
    view = read_from_shared_memory(space, memory, n=2)
    write_to_shared_memory(space, 0, "first ü", memory)
    write_to_shared_memory(space, 1, "", memory)
    assert copy.deepcopy(view) == ("first ü", "")
    write_to_shared_memory(space, 0, "2nd", memory)
    assert copy.deepcopy(view) == ("2nd", "") and type(copy.deepcopy(view)) is tuple


def _collect(env: TextEnv, seeds: range, steps: int) -> tuple[list[str], list[str]]:
    """Observations and actions of a few episodes: each admissible (or expert) action is an action."""
    observations, actions = [], []
    for seed in seeds:
        obs, info = env.reset(seed=seed)
        observations.append(obs)
        for _ in range(steps):
            choices = list(info.get("admissible_actions") or []) + list(info.get("expert_plan") or [])
            actions += choices
            if not choices:
                break
            obs, _, terminated, _, info = env.step(choices[(seed + len(observations)) % len(choices)])
            observations.append(obs)
            if terminated:
                break
    return observations, actions


@pytest.mark.parametrize("env_name", EVERY_ENV)
def test_spaces_contain_every_observation_and_action(env_name, cache):
    env = made(env_name, expert=True)
    try:
        observations, actions = _collect(env, range(4), 12)
    finally:
        env.close()
    assert len(observations) > 4 and actions
    assert [o for o in observations if o not in env.observation_space] == []
    assert [a for a in actions if a not in env.action_space] == []
    # the test can fail: what these envs emit is not alphanumeric text
    assert not all(o in spaces.Text(MAX_TEXT) for o in observations)


# -- reset without a task ----------------------------------------------------------------


def test_reset_by_seed_plays_that_task_of_the_default_split():
    env = made("tiny")
    tasks = env.task_set.tasks("test")
    assert len(tasks) == 10
    for seed in (0, 3, 13):
        by_seed = env.reset(seed=seed)
        assert by_seed == env.reset(options={"task": tasks[seed % 10]})
    first = env.reset(seed=5)
    follow = [env.reset()[0] for _ in range(5)]
    assert env.reset(seed=5) == first and [env.reset()[0] for _ in range(5)] == follow
    assert env.reset(options={})[0] in env.observation_space


def test_split_and_task_options_are_checked():
    env = made("tiny")
    env.use_split("dev")
    assert env.reset(seed=1) == env.reset(options={"task": "tiny-10001"})
    with pytest.raises(ValueError, match="tiny: unknown split 'valid'; choose from: train, dev, test"):
        env.use_split("valid")
    with pytest.raises(ValueError, match="tiny: unknown reset option\\(s\\) 'tsk'; known: 'task'"):
        env.reset(options={"tsk": "tiny-1"})
    bare = TextEnv()
    bare.reset()
    with pytest.raises(ValueError, match="reset needs options"):
        bare.task_for_reset(None, None)


def test_a_fixed_split_is_checked_and_picked_from():
    task_set = TaskSet("hand", "listed ids", {"test": ("a", "b", "c")})
    env = TextEnv(task_set)
    env.reset(seed=4)
    assert env.task_for_reset(4, None) == "b" and env.task_for_reset(None, {"task": "c"}) == "c"
    with pytest.raises(UnknownTaskError, match="TextEnv: unknown task 'd' in task set 'hand'; "
                                               "expected one of the 3 ids of test \\('a', 'b', ...\\)"):
        env.task_for_reset(None, {"task": "d"})
    assert "tiny-10000" in seed_range("tiny", 10_000) and "tiny-20000" not in seed_range("tiny", 10_000)


@pytest.mark.parametrize("env_name", EVERY_ENV)
def test_an_unknown_task_is_the_same_error_for_every_env(env_name, cache):
    env = made(env_name)
    with pytest.raises(UnknownTaskError) as raised:
        env.reset(options={"task": "no-such-task-7"})
    message = str(raised.value)
    assert message.startswith(f"{env_name}: unknown task 'no-such-task-7' in task set '{env.task_set.name}'; expected ")
    assert isinstance(raised.value, ValueError) and raised.value.env == env_name
    env.close()


# -- gymnasium's own checker -------------------------------------------------------------


@pytest.mark.parametrize("env_name", EVERY_ENV)
def test_gymnasium_check_env_passes(env_name, cache):
    """`check_env` on the env the provider makes, and on the registered one (with a spec, so
    that the reset determinism checks run too); gymnasium warns about nothing."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env = made(env_name)
        check_env(env, skip_render_check=True)
        env.close()
        registered = gymnasium.make(env_id(GYM_NAME[env_name]))
        assert registered.unwrapped.spec is not None and registered.unwrapped.spec.nondeterministic is False
        check_env(registered.unwrapped, skip_render_check=True)
        registered.close()
    assert gymnasium_warnings(caught) == []


def test_check_env_rejects_the_old_spaces():
    """What the issue reported: with gymnasium's default Text spaces the checker fails."""
    env = made("tiny")
    env.observation_space = spaces.Text(max_length=MAX_TEXT)
    with pytest.raises(AssertionError, match="not within the observation space"):
        check_env(env, skip_render_check=True)


# -- the registry ------------------------------------------------------------------------


def test_every_env_is_registered_by_its_entry_point():
    ids = {env_id(name) for name in IDS}
    assert ids == {"playground/Tiny-v0", "playground/TextWorld-v0", "playground/ALFWorld-v0", "playground/WebShop-v0",
                   "playground/Finance-v0", "playground/AppWorld-v0", "playground/Workflow-v0",
                   "playground/ScienceWorld-v0"}
    assert ids <= set(gymnasium.registry)  # `import playground.envs` registered them
    points = [ep for ep in importlib.metadata.entry_points(group="gymnasium.envs") if ep.name == "playground"]
    assert [ep.value for ep in points] == ["playground.envs.gymnasium_registry:register_envs"]
    assert points[0].load() is register_envs
    register_envs()  # again: no error, nothing new
    assert playground.__version__


def test_registering_imports_no_engine():
    code = ("import sys, gymnasium, playground.envs; "
            "assert 'playground/TextWorld-v0' in gymnasium.registry; "
            "heavy = [m for m in sys.modules if m.startswith(('textworld', 'alfworld', 'playground.envs.', "
            "'playground.host', 'bm25s')) and m != 'playground.envs.gymnasium_registry']; "
            "assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("env_name,kwargs", [("tiny", {}), ("finance", {"task_set": "finer"}),
                                             ("webshop", {"task_set": "generated", "split": "dev"}),
                                             ("finance", {"expert": True})])
def test_make_builds_the_env_the_runner_uses(env_name, kwargs):
    kwargs = dict(kwargs)
    env = gymnasium.make(env_id(GYM_NAME[env_name]), **kwargs)
    split = kwargs.pop("split", None)
    runner_env = made(env_name, **kwargs)
    assert type(env.unwrapped) is type(runner_env)
    assert env.unwrapped.task_set.name == runner_env.task_set.name
    assert env.unwrapped.split == split
    task = runner_env.task_set.tasks(split or runner_env.task_set.default_split)[2]
    first, info = env.reset(seed=2)
    assert (first, info) == runner_env.reset(options={"task": task})
    assert ("expert_plan" in info) == bool(kwargs.get("expert"))
    action = (info.get("admissible_actions") or ["an answer"])[0]
    assert env.step(action) == runner_env.step(action)


def test_make_names_bad_arguments():
    with pytest.raises(ValueError, match="finance: unknown task set 'nope'; choose from: finer, formula"):
        gymnasium.make("playground/Finance-v0", task_set="nope")
    with pytest.raises(ValueError, match="tiny: unknown split 'valid'"):
        gymnasium.make("playground/Tiny-v0", split="valid")
    with pytest.raises(ValueError, match="no render modes"):
        gymnasium.make("playground/Tiny-v0", render_mode="human")


@pytest.mark.slow
@ALFWORLD
def test_make_textworld_and_alfworld_with_their_kwargs(cache):
    env = gymnasium.make("playground/TextWorld-v0", task_set="easy")
    runner_env = provider_of("textworld").make("easy")
    assert type(env.unwrapped) is type(runner_env) and env.unwrapped.task_set is runner_env.task_set
    assert env.reset(seed=1) == runner_env.reset(options={"task": "easy-20001"})
    env.close(), runner_env.close()

    env = gymnasium.make("playground/ALFWorld-v0", split="valid_unseen", expert=True)
    runner_env = provider_of("alfworld").make("generated", expert=True)
    assert type(env.unwrapped) is type(runner_env) and env.unwrapped.split == "valid_unseen"
    obs, info = env.reset(seed=0)
    assert (obs, info) == runner_env.reset(options={"task": runner_env.task_set.tasks("valid_unseen")[0]})
    assert env.step(info["expert_plan"][0]) == runner_env.step(info["expert_plan"][0])
    env.close(), runner_env.close()


def _play_vector(envs, steps: int) -> list:
    """Reset with seeds 0 and 1, then play each env's first admissible action; return what came back."""
    obs, infos = envs.reset(seed=[0, 1])
    seen = [obs]
    for _ in range(steps):
        actions = tuple(a[0] if a else "look" for a in infos["admissible_actions"])
        obs, rewards, terminated, truncated, infos = envs.step(actions)
        seen.append((obs, rewards.tolist(), terminated.tolist()))
    return seen


def _vector_matches_single_envs(name: str, **kwargs) -> None:
    async_envs = gymnasium.make_vec(name, num_envs=2, vectorization_mode="async", **kwargs)
    sync_envs = gymnasium.make_vec(name, num_envs=2, vectorization_mode="sync", **kwargs)
    try:
        assert async_envs.single_observation_space == UnicodeText(MAX_TEXT)
        played = _play_vector(async_envs, 4)
        assert played == _play_vector(sync_envs, 4)
    finally:
        async_envs.close(), sync_envs.close()
    single = gymnasium.make(name, **kwargs)
    assert played[0] == (single.reset(seed=0)[0], single.reset(seed=1)[0])
    observations = [step[0] for step in played[1:]]
    assert all(type(obs) is tuple and all(isinstance(o, str) and o for o in obs) for obs in observations)
    assert len({obs for obs in observations}) > 1  # the observations change from step to step
    single.close()


def test_async_vector_env_of_tiny():
    _vector_matches_single_envs("playground/Tiny-v0")


@pytest.mark.slow
def test_async_vector_env_of_textworld(cache):
    _vector_matches_single_envs("playground/TextWorld-v0", task_set="easy")


@pytest.mark.slow
def test_the_loop_in_the_docs_wins_its_game(cache):
    doc = (Path(__file__).resolve().parent.parent / "docs" / "gymnasium.md").read_text()
    code = re.search(r"```python\n(.*?)```", doc, re.S).group(1)
    assert len(code.strip().splitlines()) == 6  # an import and a five-line loop
    scope: dict = {}
    exec(code, scope)
    assert scope["terminated"] and scope["info"]["won"]
    scope["env"].close()
