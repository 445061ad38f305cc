"""Issue 38: a hook that never returns, or an episode that never ends, used to hang the run for ever. Each hook call
and each episode now has a deadline; past it the episode ends in an error naming the plugin and hook (or the
episode's deadline), and is left unfinished for the next run."""

from __future__ import annotations

import json
import threading
import time

from playground.agents.base import ExpertAgent
from playground.core.deadlines import DeadlineExceeded, watch
from playground.core.hookspecs import hookimpl
from playground.host.manager import Host
from playground.host.registry import HarnessSpec
from playground.run.config import RunConfig
from playground.run.runner import run


class Spin:
    """A detector that never returns (busy in Python code)."""

    @hookimpl
    def detect_failures(self, context, proposal):
        while True:
            pass


class SlowExpert(ExpertAgent):
    """The expert, thinking for 0.6 s of busy Python before every action."""

    def propose(self, view):
        until = time.monotonic() + 0.6
        while time.monotonic() < until:
            pass
        return super().propose(view)


class DeadlinePlugin:
    @hookimpl
    def register_interventions(self, register):
        register("spin", lambda params: Spin())

    @hookimpl
    def register_agents(self, register):
        register("slow-expert", SlowExpert, needs_expert=True)


def play(tmp_path, agent: str, harness: str, **deadlines) -> tuple[dict, list[dict]]:
    host = Host(strict=True).load(extra={"deadline-test": DeadlinePlugin()})
    host.harnesses.add("spin", HarnessSpec("spin", ("spin",)))
    out = tmp_path / "run"
    summary = run(host, RunConfig(env="tiny", task_set="default", split="test", tasks=["tiny-20000"], agent=agent,
                                  harnesses=[harness], out=str(out), max_steps=10, **deadlines))
    logged = [json.loads(line) for line in (out / "unfinished.jsonl").read_text().splitlines()]
    return summary, logged


def test_a_hook_past_its_deadline_is_that_plugins_fault_and_the_run_goes_on(tmp_path):
    started = time.monotonic()
    summary, logged = play(tmp_path, "expert", "spin", hook_deadline=1.0)
    assert time.monotonic() - started < 30
    assert summary["unfinished"] == 1
    assert logged[0]["error"] == ("plugin 'spin' raised in hook 'detect_failures': TimeoutError: no answer within "
                                  "its deadline of 1 s (--hook-deadline)")


def test_an_episode_past_its_deadline_ends_in_an_error(tmp_path):
    summary, logged = play(tmp_path, "slow-expert", "base", episode_deadline=1.0)
    assert summary["unfinished"] == 1
    assert "the episode ran past its deadline of 1 s (--episode-deadline)" in logged[0]["error"]


def test_a_block_that_ends_in_time_is_not_interrupted_later():
    with watch(0.5):
        pass
    time.sleep(1.2)  # the watchdog checks twice a second: nothing may reach this thread now
    fired = threading.Event()
    try:
        with watch(0.5):
            while True:
                pass
    except DeadlineExceeded:
        fired.set()
    assert fired.is_set()
