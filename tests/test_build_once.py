"""Issue 53, item 4, "check once, build once": `playground run` checks its configuration once (the CLI checks it;
the runner takes that check instead of making its own), and the agent that check builds is the one the lock reads
and the episodes play (a player resets its agent every episode), so the agent factory is called once per process
for a run. Interventions are per-episode plugin objects that keep state: each is built once by the check and then
fresh for every episode.

Before: a 2-episode `playground run` built the agent 3 times (the CLI's check, the runner's check, the player)
and an intervention 4 times (the two checks, then once per episode)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from playground.agents.noisy import NoisyAgent
from playground.cli.main import cli
from playground.core.hookspecs import hookimpl
from playground.host import manager
from playground.host.manager import Host
from playground.run.config import RunConfig
from playground.run.runner import run

AGENT, INTERVENTION, HARNESS = "counted-agent", "counted-watch", "counted"


class Watch:
    """An intervention that only keeps per-episode state: the episodes it saw start."""

    def __init__(self) -> None:
        self.started: list[str] = []

    @hookimpl
    def episode_started(self, start):
        self.started.append(start.ids.episode_id)


class Counting:
    """A plugin whose agent and intervention factories count their calls."""

    def __init__(self) -> None:
        self.agents: list[NoisyAgent] = []
        self.interventions: list[Watch] = []

    @hookimpl
    def register_agents(self, register):
        def factory(**options):
            agent = NoisyAgent(**options)
            self.agents.append(agent)
            return agent
        register(AGENT, factory, needs_expert=True, description="the noisy agent, counted")

    @hookimpl
    def register_interventions(self, register):
        def factory(params):
            watch = Watch()
            self.interventions.append(watch)
            return watch
        register(INTERVENTION, factory, description="watches, counted")

    @hookimpl
    def register_harnesses(self, register):
        register(HARNESS, interventions=[INTERVENTION], description="the counted watch")


@pytest.fixture
def counting(monkeypatch):
    """The counting plugin, loaded into the process-wide host the CLI uses."""
    plugin = Counting()
    monkeypatch.setattr(manager, "_HOST", Host().load(extra={"counting-test": plugin}))
    return plugin


def _records(out) -> list[dict]:
    return [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("in_flight", [1, 2])
def test_a_cli_run_builds_its_agent_once_and_each_intervention_once_per_check_and_episode(counting, tmp_path,
                                                                                         in_flight):
    out = tmp_path / "run"
    result = CliRunner().invoke(cli, ["run", "--env", "tiny", "--agent", AGENT, "--harness", HARNESS,
                                      "--episodes", "2", "--quiet", "--out", str(out), "--in-flight", str(in_flight)])
    assert result.exit_code == 0, result.output
    records = _records(out)
    assert len(records) == 2 and {r["status"] for r in records} != {"error"}
    # in this process: one agent for the check, the lock and (reset each episode) the episodes; with two episodes
    # in flight a second thread that gets an episode needs an agent of its own (when the first thread finishes
    # both tiny episodes before the second starts, it never builds one)
    assert len(counting.agents) == 1 if in_flight == 1 else 1 <= len(counting.agents) <= 2
    assert len(counting.interventions) == 1 + 2  # the check's, then a fresh one per episode
    assert counting.interventions[0].started == []  # the check's watch plays nothing
    assert sorted(w.started[0] for w in counting.interventions[1:]) == sorted(r["episode_id"] for r in records)
    assert all(len(watch.started) == 1 for watch in counting.interventions[1:])  # one episode each


def test_the_runner_alone_checks_and_builds_once_too(counting, tmp_path):
    config = RunConfig(env="tiny", task_set="default", split="test", tasks=["tiny-20000", "tiny-20001"],
                       agent=AGENT, harnesses=[HARNESS], out=str(tmp_path / "run"))
    summary = run(manager.get_host(), config)
    assert summary["harnesses"][HARNESS]["episodes"] == 2
    assert (len(counting.agents), len(counting.interventions)) == (1, 1 + 2)


def test_a_config_changed_after_its_check_is_checked_again(counting, tmp_path):
    from playground.cli.options import make_checked_config

    options = dict(env_name="tiny", agent=AGENT, agent_options=(), llm_base_url=None, model=None, params=(),
                   episodes=1, split=None, seed=0, max_steps=None, strict=False, quiet=True)
    checked = make_checked_config(manager.get_host(), [HARNESS], str(tmp_path / "run"), None, **options)
    assert (len(counting.agents), len(counting.interventions)) == (1, 1)
    assert checked.holds(manager.get_host(), checked.config)
    checked.config.seed = 7  # not what was checked: the runner checks (and builds) again
    assert not checked.holds(manager.get_host(), checked.config)
    summary = run(manager.get_host(), checked.config, checked=checked)
    assert summary["seed"] == 7
    assert (len(counting.agents), len(counting.interventions)) == (2, 2 + 1)


def test_the_checked_agent_stays_in_the_process_that_built_it(counting, tmp_path):
    import pickle

    from playground.run.episodes import BuiltAgent

    host = manager.get_host()
    agent = object()
    built = BuiltAgent(agent, host)
    assert pickle.loads(pickle.dumps(built)).take(host) is None  # a worker elsewhere builds its own
    assert built.take(Host()) is None  # ... as does a player on another host
    assert built.take(host) is agent and built.take(host) is None  # handed out once
