"""The env's schema check (`TextEnv.check_action`) reaches plugins and traces, and Sentry hard-repairs an
action that fails it before it runs (`sentry-no-hard` sends it). AppWorld's own check against the real
server is tested in test_appworld.py."""

from __future__ import annotations

import difflib

import pytest

from playground.core.hookspecs import hookimpl
from playground.core.payloads import SchemaProblem
from playground.plugins.sentry.harness import SentryPlugin
from playground.run.report import EpisodeTally
from playground.testing import ScriptedAgent, play
from playground.testing.tiny import TinyEnv


class ToolTiny(TinyEnv):
    """The tiny world behind a command schema: no admissible list (actions are free text, like code cells),
    but a command's verb is checked against the world's verbs before it runs."""

    VERBS = {"look": "look", "inventory": "inventory", "go": "go east | go west", "take": "take <object>",
             "drop": "drop <object>", "examine": "examine <object>"}

    def check_action(self, action: str) -> list[SchemaProblem]:
        verb = action.split(" ", 1)[0]
        if verb in self.VERBS:
            return []
        near = tuple(difflib.get_close_matches(verb, list(self.VERBS), n=2, cutoff=0.0))
        return [SchemaProblem("unknown_api", verb, f"there is no command {verb!r}", near,
                              tuple(self.VERBS[v] for v in near), line=1, col=1)]

    def _info(self, valid: bool):
        return {**super()._info(valid), "admissible_actions": None, "action_kinds": {}, "action_format": "code"}


class Seen:
    """Records the schema problems each detect_failures call saw."""

    def __init__(self) -> None:
        self.problems: list = []

    @hookimpl
    def detect_failures(self, context, proposal):
        self.problems.append((proposal.action, context.schema_problems))


def tally(result) -> dict:
    counts = EpisodeTally()
    for event in result.trace:
        counts.add(event)
    return counts.as_record()


def test_the_loop_hands_the_schema_check_to_plugins_and_the_trace():
    seen = Seen()
    result = play(ToolTiny(expert=True), ScriptedAgent(["tkae key"]), plugins=[seen], task="tiny-3", max_steps=3)
    action, problems = seen.problems[0]
    assert action == "tkae key" and [(p.kind, p.text, p.alternatives[0]) for p in problems] == [
        ("unknown_api", "tkae", "take")]
    assert seen.problems[1][1] == ()  # the expert's next action passes
    proposals = result.of("proposal")
    assert proposals[0]["schema_problems"][0]["kind"] == "unknown_api" and proposals[1]["schema_problems"] == []
    assert tally(result)["schema_invalid_steps"] == 1
    # an env without a schema check: None for plugins, no key in the trace, no count
    plain = Seen()
    result = play(TinyEnv(expert=True), ScriptedAgent(["tkae key"]), plugins=[plain], task="tiny-3", max_steps=2)
    assert plain.problems[0][1] is None and "schema_problems" not in result.of("proposal")[0]
    assert "schema_invalid_steps" not in tally(result)


def test_a_schema_check_that_returns_something_else_is_the_envs_error():
    class Broken(ToolTiny):
        def check_action(self, action):
            return "looks fine"

    result = play(Broken(expert=True), ScriptedAgent(), task="tiny-3", strict=False)
    assert result.result.status == "error" and "env check_action returned 'looks fine'" in result.result.error


def test_sentry_hard_repairs_a_schema_invalid_action_before_it_runs():
    agent = ScriptedAgent(["tkae key"])  # then the expert's plan
    result = play(ToolTiny(expert=True), agent, plugins=[SentryPlugin({})], task="tiny-3", max_steps=12)
    [repair] = [e for e in result.of("intervention") if e["kind"] == "hard_repair"]
    text = repair["message"]["text"]
    assert "unknown_api (line 1): there is no command 'tkae'. Closest valid: take" in text
    assert "Closest valid calls:\n- take <object>" in text and "Fix the call" in text
    assert agent.views[1].message.labels == ("wrong_schema", "unknown_api") and agent.views[1].message.actions == ()
    assert "tkae key" not in [s["action"] for s in result.of("step")]  # never sent
    assert result.result.won and tally(result)["schema_invalid_steps"] == 0


def test_sentry_no_hard_sends_the_schema_invalid_action():
    result = play(ToolTiny(expert=True), ScriptedAgent(["tkae key"]), plugins=[SentryPlugin({"hard_repair": False})],
                  task="tiny-3", max_steps=12)
    assert not [e for e in result.of("intervention") if e["kind"] == "hard_repair"]
    first = result.of("step")[0]
    assert first["action"] == "tkae key" and not first["valid_action"]
    assert tally(result)["schema_invalid_steps"] == 1


@pytest.mark.parametrize("fallback", ["best", "reask"])
def test_an_agent_that_insists_gets_its_action_sent_after_the_reasks(fallback):
    """No valid action can be named for free text or code, so after the re-asks the action goes to the env."""
    agent = ScriptedAgent(["tkae key"] * 3)
    result = play(ToolTiny(expert=True), agent, plugins=[SentryPlugin({"fallback": fallback})], task="tiny-3",
                  max_steps=12)
    assert [e["kind"] for e in result.of("intervention")][:2] == ["hard_repair", "hard_repair"]
    assert result.of("step")[0]["action"] == "tkae key" and tally(result)["schema_invalid_steps"] == 1


def test_summaries_count_schema_invalid_actions_only_where_the_env_checks_a_schema():
    from playground.run.report import format_table, summarise_harness
    from playground.run.attempts import merge_attempts

    from playground.core.records import new_record

    def record(won, **fields):
        return new_record(harness="h", task_id=f"t{won}", won=won, status="won" if won else "lost", **fields)

    checked = summarise_harness([record(True, schema_invalid_steps=1), record(False, schema_invalid_steps=2)])
    assert checked["schema_invalid_per_episode"] == 1.5
    assert summarise_harness([record(True)])["schema_invalid_per_episode"] is None
    table = format_table({"harnesses": {"checked": checked}})
    assert "schema/ep" in table.splitlines()[0] and "1.50" in table and "schema check found problems" in table
    assert "schema/ep" not in format_table({"harnesses": {"plain": summarise_harness([record(True)])}})

    class Spec:
        verifier, attempts = "rules", (("a",), ("b",))

    attempt = record(False, steps=2, cost=1.0, trace="t", schema_invalid_steps=1)
    assert merge_attempts([attempt, attempt.model_copy(update={"won": True})], Spec()).schema_invalid_steps == 2
    unchecked = record(False, steps=2, cost=1.0, trace="t")
    assert merge_attempts([unchecked, unchecked], Spec()).schema_invalid_steps is None
