"""Cascade harnesses (HarnessSpec.cascade, played by the runner): the order of the attempts, the stop at the
first win, the same seed for every attempt, and the summed steps and costs of the merged record.

The interventions are small test plugins: `quit-after-N` lets the expert play N steps, then stops the
episode (a lost attempt of exactly N steps); `let-play` does nothing (the expert wins).
"""

from __future__ import annotations

import json
from dataclasses import fields

import pytest

from playground.agents.base import ExpertAgent
from playground.cli.main import main
from playground.core.events import ProposalEvent, ResetEvent, RollbackEvent, StepEvent
from playground.core.hookspecs import hookimpl
from playground.core.payloads import AttemptVerdict, Decision
from playground.host.manager import Host
from playground.host.registry import HarnessSpec
from playground.run.attempts import SeenByAgent
from playground.run.config import RunConfig, RunConfigError, episode_seed
from playground.run.runner import run
from playground.run.traces import read_trace
from playground.testing.openai_server import Reply, ScriptedChatServer, chat_response

TASKS = ["tiny-20000", "tiny-20001", "tiny-20002"]
RESETS: list[tuple[str, int]] = []  # (task, seed) of every agent reset, in order


class QuitAfter:
    def __init__(self, steps: int) -> None:
        self.steps = steps

    @hookimpl
    def decide_intervention(self, context, proposal, detections):
        if context.step >= self.steps:
            return Decision("quit", "give_up", stop=True)


class LetPlay:
    @hookimpl
    def episode_started(self, start):
        pass


ATTEMPTS: list[tuple[str, int, int]] = []  # (episode id, ids.attempt at the start, ids.attempt at the end)


class QuitAndRecordAttempt(QuitAfter):
    """Quits after 2 steps and records the attempt number the payloads carry."""

    def __init__(self) -> None:
        super().__init__(2)
        self.started = 0

    @hookimpl
    def episode_started(self, start):
        self.started = start.ids.attempt

    @hookimpl
    def episode_finished(self, end):
        ATTEMPTS.append((end.ids.episode_id, self.started, end.ids.attempt))


class RecordingExpert(ExpertAgent):
    def reset(self, task_id, seed):
        RESETS.append((task_id, seed))
        super().reset(task_id, seed)


class CascadePlugin:
    @hookimpl
    def register_interventions(self, register):
        register("quit-after-2", lambda params: QuitAfter(2), cost=7.0)       # a fixed cost per attempt
        register("quit-after-3", lambda params: QuitAfter(3), cost_unit="steps")
        register("let-play", lambda params: LetPlay(), cost_unit="steps")
        register("let-play-too", lambda params: LetPlay(), cost=100.0)
        register("quit-and-record", lambda params: QuitAndRecordAttempt())

    @hookimpl
    def register_harnesses(self, register):
        register("three-trials", cascade=["quit-and-record"] * 3, description="three trials of one intervention")

    @hookimpl
    def register_agents(self, register):
        register("recording-expert", RecordingExpert, needs_expert=True)


@pytest.fixture
def host():
    RESETS.clear()
    ATTEMPTS.clear()
    return Host(strict=True).load(extra={"cascade-test": CascadePlugin()})


def play(host, tmp_path, chain, name="cascade", seed=0):
    host.harnesses.add(name, HarnessSpec(name, cascade=tuple(chain)))
    out = tmp_path / "run"
    summary = run(host, RunConfig(env="tiny", task_set="default", split="test", tasks=TASKS, agent="recording-expert",
                                  harnesses=[name], out=str(out), seed=seed, strict=True))
    records = {r["task_id"]: r for r in map(json.loads, (out / "episodes.jsonl").read_text().splitlines())}
    return summary, records, out


def test_a_cascade_tries_in_order_and_stops_at_the_first_win(host, tmp_path):
    summary, records, out = play(host, tmp_path, ["quit-after-2", "quit-after-3", "let-play", "let-play-too"])
    for task in TASKS:
        record = records[task]
        assert [a["interventions"] for a in record["attempts"]] == [["quit-after-2"], ["quit-after-3"], ["let-play"]]
        assert [a["won"] for a in record["attempts"]] == [False, False, True]
        assert [a["status"] for a in record["attempts"]] == ["stopped", "stopped", "won"]
        assert record["won"] and record["status"] == "won"  # the outcome is the last attempt's
        # each attempt is traced under its own file, with its own interventions in the header
        traces = [a["trace"] for a in record["attempts"]]
        assert traces == [f"traces/cascade/{task}.jsonl", f"traces/cascade/{task}.attempt2.jsonl",
                          f"traces/cascade/{task}.attempt3.jsonl"]
        assert record["trace"] == traces[0]
        headers = [next(iter(read_trace(out / t))) for t in traces]
        assert [h["interventions"] for h in headers] == [["quit-after-2"], ["quit-after-3"], ["let-play"]]
        assert not (out / f"traces/cascade/{task}.attempt4.jsonl").exists()  # never reached
    assert summary["harnesses"]["cascade"]["mean_attempts"] == 3.0
    assert summary["harnesses"]["cascade"]["success_rate"] == 1.0


def test_a_first_attempt_win_plays_nothing_else(host, tmp_path):
    summary, records, out = play(host, tmp_path, ["let-play", "quit-after-2"])
    for task in TASKS:
        assert [a["interventions"] for a in records[task]["attempts"]] == [["let-play"]]
        assert not (out / f"traces/cascade/{task}.attempt2.jsonl").exists()
    assert summary["harnesses"]["cascade"]["mean_attempts"] == 1.0
    assert len(RESETS) == len(TASKS)


def test_a_cascade_with_no_win_plays_every_attempt_and_ends_lost(host, tmp_path):
    summary, records, _ = play(host, tmp_path, ["quit-after-3", "quit-after-2"])
    for task in TASKS:
        record = records[task]
        assert [a["won"] for a in record["attempts"]] == [False, False]
        assert not record["won"] and record["status"] == "stopped"
        assert record["steps"] == 3 + 2 and record["cost"] == 3.0 + 7.0
    assert summary["harnesses"]["cascade"]["success_rate"] == 0.0
    assert summary["harnesses"]["cascade"]["mean_attempts"] == 2.0
    assert summary["harnesses"]["cascade"]["mean_cost"] == 10.0


def test_every_attempt_replays_the_task_with_the_same_seed(host, tmp_path):
    _, records, out = play(host, tmp_path, ["quit-after-2", "quit-after-3", "let-play"], seed=11)
    assert [task for task, _ in RESETS] == [t for t in TASKS for _ in range(3)]  # three attempts per task, in turn
    for task in TASKS:
        seeds = {seed for t, seed in RESETS if t == task}
        assert seeds == {episode_seed(11, task)} and records[task]["seed"] == episode_seed(11, task)
        headers = [next(iter(read_trace(out / a["trace"]))) for a in records[task]["attempts"]]
        assert {h["seed"] for h in headers} == {episode_seed(11, task)}
        # the same initial state: every attempt's reset shows the same observation and goal
        resets = [next(e for e in read_trace(out / a["trace"]) if e["type"] == "reset")
                  for a in records[task]["attempts"]]
        assert len({(r["observation"], r["goal"]) for r in resets}) == 1
    assert len({seed for _, seed in RESETS}) == len(TASKS)  # and the seed differs between tasks


def test_steps_and_costs_are_summed_over_the_attempts_played(host, tmp_path):
    summary, records, out = play(host, tmp_path, ["quit-after-2", "quit-after-3", "let-play", "let-play-too"])
    costs = []
    for task in TASKS:
        record = records[task]
        won_steps = record["attempts"][2]["steps"]
        assert [a["steps"] for a in record["attempts"]] == [2, 3, won_steps] and won_steps > 3
        # quit-after-2 has a fixed cost of 7; the others cost their steps
        assert [a["cost"] for a in record["attempts"]] == [7.0, 3.0, float(won_steps)]
        assert record["steps"] == 2 + 3 + won_steps
        assert record["cost"] == 7.0 + 3.0 + won_steps
        # the counters of the tally add up too: one stop decision in each lost attempt
        assert record["interventions"] == {"give_up": 2}
        step_events = sum(e["type"] == "step" for a in record["attempts"] for e in read_trace(out / a["trace"]))
        assert step_events == record["steps"]
        costs.append(record["cost"])
    assert summary["harnesses"]["cascade"]["mean_cost"] == pytest.approx(sum(costs) / len(costs))
    assert summary["harnesses"]["cascade"]["mean_steps"] == pytest.approx(
        sum(records[t]["steps"] for t in TASKS) / len(TASKS))


def test_a_darc_policy_file_deploys_the_same_cascade(tmp_path, capsys):
    """`--harness darc:POLICY.json` plays the policy's chain as a cascade, in the chain's order."""
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"chain": ["validity-guard", "sentry"]}))
    out = tmp_path / "deploy"
    code = main(["run", "--env", "tiny", "--agent", "noisy", "--agent-option", "stop=1.0", "--episodes", "4",
                 "--harness", f"darc:{policy}", "--out", str(out), "--quiet"])
    assert code == 0, capsys.readouterr().err
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert len(records) == 4
    for record in records:
        attempts = record["attempts"]
        # the noisy agent with stop=1.0 declares victory at once: the guard cannot stop that, so the
        # first attempt is lost and the chain goes on to sentry, in the chain's order
        assert attempts[0]["interventions"] == ["validity-guard"] and not attempts[0]["won"]
        assert [a["interventions"] for a in attempts] == [["validity-guard"], ["sentry"]]
        assert record["won"] == attempts[-1]["won"] and record["verifier"] == "env:won"
        assert record["steps"] == sum(a["steps"] for a in attempts)
        assert record["cost"] == sum(a["cost"] for a in attempts) == record["steps"]  # both cost their steps


def test_a_plugin_registers_a_cascade_of_repeated_trials_and_each_attempt_knows_its_number(host, tmp_path, capsys):
    spec = host.harnesses.get("three-trials")
    assert spec.attempts == (("quit-and-record",),) * 3 and spec.verifier == "env:won"
    out = tmp_path / "run"
    summary = run(host, RunConfig(env="tiny", task_set="default", split="test", tasks=TASKS[:2],
                                  agent="recording-expert", harnesses=["three-trials"], out=str(out), strict=True))
    assert summary["harnesses"]["three-trials"]["mean_attempts"] == 3.0
    for task in TASKS[:2]:
        mine = [(start, end) for episode, start, end in ATTEMPTS if episode.endswith(f":three-trials:{task}")]
        assert mine == [(1, 1), (2, 2), (3, 3)]  # one episode id, three attempts, numbered in every payload


def test_a_harness_with_both_interventions_and_a_cascade_is_refused():
    class Both:
        @hookimpl
        def register_harnesses(self, register):
            register("both", interventions=["let-play"], cascade=["let-play"])

    loaded = Host(strict=False).load(extra={"cascade-test": CascadePlugin(), "both": Both()})
    assert "both" not in loaded.harnesses
    assert any("interventions or a cascade, not both" in (r.error or "") for r in loaded.records)


def test_playground_harnesses_lists_a_registered_cascade(capsys, monkeypatch):
    monkeypatch.setattr("playground.cli.main.get_host",
                        lambda: Host(strict=True).load(extra={"cascade-test": CascadePlugin()}))
    assert main(["harnesses"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("three-trials"))
    assert "cascade: quit-and-record -> quit-and-record -> quit-and-record, until env:won" in line


def test_compare_sets_a_cascade_pass_at_l_beside_the_other_sides_pass_at_1_and_pass_at_l(host, tmp_path, capsys):
    """Issue 37: a cascade's success is a pass@L; compare says so and gives the single-attempt side the same budget."""
    host.harnesses.add("cascade", HarnessSpec("cascade", cascade=("quit-after-2", "let-play")))
    host.harnesses.add("quitter", HarnessSpec("quitter", ("quit-after-3",)))
    for trials, out in ((1, tmp_path / "one"), (2, tmp_path / "two")):
        run(host, RunConfig(env="tiny", task_set="default", split="test", tasks=TASKS, agent="expert",
                            harnesses=["quitter", "cascade"], out=str(out), trials=trials, strict=True))
    from playground.run.deployment import deployment
    from playground.run.rundir import load_records

    records = load_records(tmp_path / "two")
    view = deployment("quitter", [r for r in records if r.harness == "quitter"],
                      "cascade", [r for r in records if r.harness == "cascade"])
    assert view["cascade"]["budget"] == 2 and view["cascade"]["pass_at_budget"] == 1.0
    assert view["cascade"]["attempts_per_task"] == 2.0 and view["cascade"]["steps_per_task"] > 2  # 2, then a win
    assert view["single"]["pass_at_1"] == 0.0 and view["single"]["pass_at_budget"] == 0.0
    assert view["grade_verifier"]

    code = main(["compare", str(tmp_path / "two"), str(tmp_path / "two"), "--harness-a", "quitter",
                 "--harness-b", "cascade", "--resamples", "100"])
    out = capsys.readouterr().out
    assert code == 0 and "L = 2 attempts" in out and "pass@2 1.000" in out and "pass@1 0.000" in out
    assert "pass@2 0.000" in out and "benchmark's own grade" in out
    code = main(["compare", str(tmp_path / "one"), str(tmp_path / "one"), "--harness-a", "quitter",
                 "--harness-b", "cascade", "--resamples", "100", "--json"])
    result = json.loads(capsys.readouterr().out)
    assert result["attempt_budget"]["single"]["pass_at_budget"] is None
    assert "--trials 2" in result["attempt_budget"]["single"]["why_no_pass_at_budget"]
    code = main(["compare", str(tmp_path / "one"), str(tmp_path / "one"), "--harness-a", "quitter",
                 "--harness-b", "quitter", "--resamples", "100", "--json"])
    assert json.loads(capsys.readouterr().out)["attempt_budget"] is None


VIEWS: list = []  # the AttemptViews the recording verifier was given


class VerifierPlugin:
    """`test:pass-first`: passes every attempt it is asked about, keeping what it saw."""

    @hookimpl
    def register_attempt_verifiers(self, register):
        def factory(params):
            def verify(view):
                VIEWS.append(view)
                return AttemptVerdict(True, "looks done to me")
            return verify
        register("test:pass-first", factory)


def test_a_deployment_verifier_decides_the_retries_from_what_the_agent_saw(tmp_path, capsys):
    """Issue 37: a cascade can stop on a grade-blind verifier; it sees goal, actions and observations, no grade."""
    VIEWS.clear()
    host = Host(strict=True).load(extra={"cascade-test": CascadePlugin(), "verifier-test": VerifierPlugin()})
    host.harnesses.add("blind", HarnessSpec("blind", cascade=("quit-after-2", "let-play"), verifier="test:pass-first"))
    out = tmp_path / "run"
    run(host, RunConfig(env="tiny", task_set="default", split="test", tasks=TASKS, agent="recording-expert",
                        harnesses=["blind"], out=str(out), strict=True))
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    # the verifier passed the lost first attempt, so the cascade stopped there: the benchmark grade says lost
    assert all(len(r["attempts"]) == 1 and r["attempts"][0]["verified"] and not r["won"] for r in records)
    assert all(r["verifier"] == "test:pass-first" for r in records)
    view = VIEWS[0]
    assert len(VIEWS) == len(TASKS) and len(view.steps) == 2 and view.goal and not view.agent_finished
    assert {f.name for f in fields(view)} == {"ids", "goal", "steps", "agent_finished", "max_steps"}
    assert {f.name for f in fields(view.steps[0])} == {"action", "observation", "valid_action"}
    verdicts = [e for e in read_trace(out / records[0]["trace"]) if e["type"] == "attempt_verdict"]
    assert [(v["verifier"], v["passed"], v["why"]) for v in verdicts] == [("test:pass-first", True, "looks done to me")]
    # `view` shows the verdict in the episode's steps
    capsys.readouterr()
    assert main(["view", str(out), "--episode", "1", "--no-pager"]) == 0
    assert "attempt passed by the deployment verifier test:pass-first" in capsys.readouterr().out


def test_what_the_verifier_sees_passes_through_the_envs_grade_text_remover():
    seen = SeenByAgent()
    seen.add(ResetEvent(goal="Put the mug away. Your score: 0", observation=""))
    seen.add(ProposalEvent(step=0, finish=False))
    seen.add(StepEvent(step=0, action="go east", observation="Kitchen. Your score: 1", valid_action=True, won=True,
                       score=1.0, reward=1.0))
    seen.add(StepEvent(step=1, action="drop mug", observation="Dropped.", valid_action=False))
    seen.add(RollbackEvent(to_step=1))
    seen.add(ProposalEvent(step=1, finish=True))
    view = seen.view(None, 10, lambda text: text.replace(" Your score: 1", "").replace(" Your score: 0", ""))
    assert view.goal == "Put the mug away." and [(s.action, s.observation) for s in view.steps] == [
        ("go east", "Kitchen.")]
    assert view.agent_finished


def test_an_unknown_deployment_verifier_is_refused_before_the_run(host, tmp_path):
    host.harnesses.add("odd", HarnessSpec("odd", cascade=("quit-after-2", "let-play"), verifier="nobody:knows"))
    with pytest.raises(RunConfigError, match="unknown verifier 'nobody:knows'; choose from: env:won"):
        run(host, RunConfig(env="tiny", task_set="default", split="test", tasks=TASKS, agent="recording-expert",
                            harnesses=["odd"], out=str(tmp_path / "run")))


def test_a_darc_policy_stops_on_the_agents_own_self_check_through_an_endpoint(tmp_path, monkeypatch):
    """`agent:self-check`: the agent's own model, asked through its endpoint in a schema-checked reply, decides."""
    monkeypatch.setenv("PLAYGROUND_RESPONSE_CACHE", "off")

    def reply(body):
        system = body["messages"][0]["content"]
        if "check an agent's attempt" in system:
            return Reply(raw=json.dumps(chat_response('{"done": true, "why": "the apple is in the hall"}')))
        return Reply(raw=json.dumps(chat_response("Thought: look\nAction: look")))

    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"chain": ["validity-guard", "sentry"], "verifier": "agent:self-check"}))
    with ScriptedChatServer(default=reply) as server:
        run(Host().load(), RunConfig(env="tiny", task_set="default", split="test", tasks=["tiny-20000"], agent="llm",
                                     harnesses=[f"darc:{policy}"], out=str(tmp_path / "run"), max_steps=3,
                                     agent_options={"base_url": server.base_url, "model": "agent", "retries": 0}))
        checks = [r for r in server.requests if "check an agent's attempt" in r["messages"][0]["content"]]
    record = json.loads((tmp_path / "run" / "episodes.jsonl").read_text())
    assert len(checks) == 1 and len(record["attempts"]) == 1 and record["attempts"][0]["verified"]
    assert not record["won"] and record["judge_replies"]["self_check"]["calls"] == 1
    assert "Goal:" in checks[0]["messages"][1]["content"] and "look" in checks[0]["messages"][1]["content"]
