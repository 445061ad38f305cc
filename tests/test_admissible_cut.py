"""An env whose admissible list is a cut of what it accepts (`admissible_complete` False) gives its own verdict
through `check_action`, and the validity rules (Sentry's, the runtime monitor's) take that verdict instead of
membership in the list. Envs with a complete list are judged exactly as before: their detections are pinned
(`tests/data/full_list_detections.json`, recorded before the cut rule existed). ScienceWorld's verdict on the
real engine is tested in test_scienceworld.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from playground.core.actions import env_accepts
from playground.core.payloads import SchemaProblem
from playground.host.manager import Host
from playground.plugins.baselines.monitor import MonitorPlugin
from playground.plugins.sentry.harness import SentryPlugin
from playground.run.config import RunConfig
from playground.run.runner import run
from playground.testing import ScriptedAgent, play
from playground.testing.check_env import check_env
from playground.testing.tiny import TinyEnv, TinyProvider
from tests.conftest import require_extra

PINNED = Path(__file__).with_name("data") / "full_list_detections.json"
PROBLEM = (SchemaProblem("syntax_error", "x", "no such command"),)


class CutTiny(TinyEnv):
    """The tiny world showing a cut of what it accepts: `take` and `drop` work but are never listed, so the list
    is marked incomplete and `check_action` says what the world takes (its full list)."""

    def check_action(self, action: str) -> list[SchemaProblem]:
        if action in self._admissible():
            return []
        return [SchemaProblem("syntax_error", action, f"the world knows no command {action!r} here")]

    def _info(self, valid: bool):
        info = super()._info(valid)
        shown = [a for a in info["admissible_actions"] if a.split(" ", 1)[0] not in ("take", "drop")]
        return {**info, "admissible_actions": shown, "admissible_complete": False,
                "action_kinds": {a: k for a, k in info["action_kinds"].items() if a in shown}}


class CutProvider(TinyProvider):
    """`tiny`, cut."""

    def make(self, task_set: str, *, expert: bool = False, **options):
        return CutTiny(expert=expert)


def test_the_verdict_is_membership_only_where_the_list_is_complete():
    listed = ["look", "take key"]
    assert env_accepts("take key", listed, None) is True
    assert env_accepts("take lamp", listed, None) is False  # a complete list leaves it out
    assert env_accepts("take lamp", listed, (), admissible_complete=False) is True  # the env's check passed it
    assert env_accepts("take lamp", listed, PROBLEM, admissible_complete=False) is False
    assert env_accepts("take lamp", listed, None, admissible_complete=False) is None  # a cut and no verdict
    assert env_accepts("take lamp", listed, (), admissible_complete=True) is False  # the complete list decides
    assert env_accepts("x = 1", None, ()) is True and env_accepts("x = 1", None, PROBLEM) is False  # code cells
    assert env_accepts("anything", None, None) is None


def test_sentry_flags_only_what_the_env_rejects_where_its_list_is_a_cut():
    agent = ScriptedAgent(["tkae key"])  # then the expert: its `take` and `drop` are outside the cut
    result = play(CutTiny(expert=True), agent, plugins=[SentryPlugin({})], task="tiny-20003", max_steps=12)
    detections = [(d["step"], list(d["labels"])) for d in result.of("detection")]
    assert detections == [(0, ["invalid_action"])]
    [repair] = result.of("intervention")
    assert repair["kind"] == "hard_repair" and "the world knows no command 'tkae key' here" in repair["message"]["text"]
    planned = [s["action"] for s in result.of("step")]
    assert any(a.startswith("take ") for a in planned) and any(a.startswith("drop ") for a in planned)
    assert result.result.won
    assert all(p.get("admissible_complete") is False for p in result.of("proposal"))


def test_the_monitor_takes_the_envs_verdict_too():
    result = play(CutTiny(expert=True), ScriptedAgent(["tkae key"]), plugins=[MonitorPlugin({})], task="tiny-20003",
                  max_steps=12)
    assert [(d["step"], d["subtype"]) for d in result.of("detection")] == [(0, "invalid")]
    assert result.result.won


def test_check_env_holds_a_cut_to_its_verdict():
    check_env(CutProvider())

    class Lenient(CutTiny):
        def check_action(self, action):
            return []

    class LenientProvider(CutProvider):
        def make(self, task_set, *, expert=False, **options):
            return Lenient(expert=expert)

    with pytest.raises(AssertionError, match="check_action rejects the invalid action"):
        check_env(LenientProvider())

    class Silent(CutTiny):
        def check_action(self, action):
            return None

    class SilentProvider(CutProvider):
        def make(self, task_set, *, expert=False, **options):
            return Silent(expert=expert)

    with pytest.raises(AssertionError, match="gives its verdict through check_action"):
        check_env(SilentProvider())


# -- envs with a complete list (or none): judged exactly as before -------------------------------------------------
#
# The pin was recorded with `detections()` on commit 1868bcd, before the cut rule: noisy episodes (failure rates up so
# that every env sees invalid actions) under Sentry and the runtime monitor, every detection and intervention with its
# evidence and message. Its textworld and alfworld entries were remade when Sentry's need check began to weigh the
# evidence and its soft repair dropped the action list (webshop's did not change); the cut rule was not touched. AppWorld (no list, a schema check) keeps its own pins in test_sentry_schema.py and
# test_appworld.py (the hard repair's message, what is sent).

# env -> (task set, split, tasks, step budget, noisy options)
CASES = {
    "textworld": ("custom", "test", 6, 40, {"invalid": 0.3, "repeat": 0.1, "stall": 0.1, "drift": 0.1}),
    "webshop": ("generated", "test", 3, 30, {"invalid": 0.2, "repeat": 0.1, "stall": 0.1}),
    "alfworld": ("generated", "valid_unseen", 2, 30, {"invalid": 0.3}),
}
HARNESSES = ["sentry", "monitor"]


def _event(e: dict) -> list:
    if e["type"] == "detection":
        return [e["type"], e["step"], e["attempt"], e["detector"], e["labels"], e["subtype"], e["evidence"]]
    return [e["type"], e["step"], e["attempt"], e["kind"], e.get("action"), (e.get("message") or {}).get("text")]


def detections(env: str, out: Path) -> dict:
    """Every detection and intervention of noisy episodes under `HARNESSES` on `env` (what the pin records)."""
    task_set, split, count, max_steps, options = CASES[env]
    host = Host().load()
    tasks = host.envs.get(env).provider.task_sets()[task_set].tasks(split, count)
    run(host, RunConfig(env=env, task_set=task_set, split=split, tasks=tasks, agent="noisy", harnesses=HARNESSES,
                        out=str(out), max_steps=max_steps, agent_options=options, strict=True))
    found: dict[str, list] = {}
    for harness in HARNESSES:
        for trace in sorted((out / "traces" / harness).glob("*.jsonl")):
            events = [json.loads(line) for line in trace.read_text().splitlines()]
            found[f"{harness}/{trace.stem}"] = [_event(e) for e in events if e["type"] in ("detection", "intervention")]
    return found


@pytest.mark.slow
@pytest.mark.parametrize("env", list(CASES))
def test_detections_on_full_list_envs_are_pinned(env, tmp_path):
    if env == "alfworld":
        require_extra("alfworld", "alfworld")
    assert detections(env, tmp_path / "run") == json.loads(PINNED.read_text())[env]
