"""Harness stacks (`--harness A+B`, `playground.run.harnesses.stack_harnesses`): the interventions of several
harnesses in one episode, in the order given, and the named refusal of stacks that cannot run as one.

Small test plugins on the `tiny` env pin the rules; the last tests stack the real Sentry and DART plugins on the
workflow env, where each keeps doing its own work in the same episode.
"""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from playground.cli.main import main
from playground.core.hookspecs import hookimpl
from playground.host.manager import Host
from playground.run.config import RunConfig
from playground.run.harnesses import HarnessConflict, harness_fingerprint, resolve_harness
from playground.run.parameters import describe_params
from playground.run.runner import run
from playground.run.traces import read_trace

TASKS = ["tiny-20000", "tiny-20001"]
NOTES: list[tuple[str, int]] = []  # (note plugin, step) of every agent_notes call, in order
BUILT: dict[str, dict] = {}  # intervention -> the parameters its factory got last


class Note:
    """Shows a standing note and remembers that it was asked."""

    def __init__(self, name: str) -> None:
        self.name = name

    @hookimpl
    def agent_notes(self, context):
        NOTES.append((self.name, context.step))
        return f"note from {self.name}"


class Limit(BaseModel):
    limit: int = 3


def build(name: str):
    """A factory that remembers the parameters it was given."""
    def factory(params):
        BUILT[name] = dict(params)
        return Note(name)
    return factory


class StackPlugin:
    @hookimpl
    def register_interventions(self, register):
        register("note-a", build("note-a"))
        register("note-b", build("note-b"), params_model=Limit)
        register("rewrite-a", lambda params: Note("rewrite-a"), effects=("reask", "replace"))
        register("rewrite-b", lambda params: Note("rewrite-b"), effects=("replace",))
        register("rollback-a", lambda params: Note("rollback-a"), effects=("rollback",))
        register("rollback-b", lambda params: Note("rollback-b"), effects=("rollback", "stop"))

    @hookimpl
    def register_harnesses(self, register):
        register("a", ["note-a"], {"colour": "red"}, description="note a")
        register("b", ["note-b"], description="note b")
        register("b-tight", ["note-b"], {"limit": 1})
        register("b-blue", ["note-b"], {"colour": "blue"})
        register("rw-a", ["rewrite-a"])
        register("rw-b", ["rewrite-b"])
        register("rb-a", ["rollback-a"])
        register("rb-b", ["rollback-b"])
        register("loose", ["note-a"], {"max_rollbacks": 2})
        register("tight", ["note-b"], {"max_rollbacks": 1, "limit": 2})
        register("twice", cascade=["note-a", "note-a"], verifier="env:won")
        register("thrice", cascade=["rewrite-a"] * 3)


@pytest.fixture
def host():
    NOTES.clear()
    BUILT.clear()
    return Host(strict=True).load(extra={"stack-test": StackPlugin()})


def test_a_stack_runs_the_interventions_of_its_parts_in_order(host, tmp_path):
    spec = resolve_harness(host, "b+a")
    assert spec.interventions == ("note-b", "note-a")
    assert spec.params_for("note-a") == {"colour": "red"} and spec.params_for("note-b") == {}
    assert spec.description == "b (note b) + a (note a)" and not spec.cascade
    out = tmp_path / "run"
    summary = run(host, RunConfig(env="tiny", task_set="default", split="test", tasks=TASKS, agent="expert",
                                  harnesses=["b+a"], out=str(out), strict=True))
    assert summary["harnesses"]["b+a"]["episodes"] == len(TASKS)
    for record in map(json.loads, (out / "episodes.jsonl").read_text().splitlines()):
        header = next(iter(read_trace(out / record["trace"])))
        assert header["interventions"] == ["note-b", "note-a"]
    # both notes are asked every step, the first part's first
    assert NOTES[:2] == [("note-b", 0), ("note-a", 0)]
    assert {name for name, _ in NOTES} == {"note-a", "note-b"}


def test_a_cascade_in_a_stack_keeps_its_attempts_and_the_other_parts_join_each(host):
    spec = resolve_harness(host, "thrice+b")
    assert spec.attempts == (("rewrite-a", "note-b"),) * 3
    assert spec.verifier == "env:won"
    assert resolve_harness(host, "b+thrice").attempts == (("rewrite-a", "note-b"),) * 3


@pytest.mark.parametrize("name, words", [
    ("a+a", ["intervention 'note-a' comes from both a and a"]),
    ("twice+thrice", ["twice and thrice are both cascades"]),
    ("a+b-blue", []),  # each part's colour reaches its own interventions
    ("b+b-tight", ["intervention 'note-b'"]),
    ("a+rw-a", []),  # one rewriting intervention is fine
    ("rw-a+rw-b", ["rewrite-a (from rw-a) and rewrite-b (from rw-b) both rewrite the proposed action"]),
    ("rb-a+a+rb-b", ["rollback-a (from rb-a) and rollback-b (from rb-b) both roll the env back"]),
    ("rb-a+rw-b", []),  # a rollback and a rewrite do not overrule each other
    ("a+", ["has an empty part"]),
])
def test_a_stack_that_cannot_run_as_one_is_refused_by_name(host, name, words):
    if not words:
        assert resolve_harness(host, name).name == name
        return
    with pytest.raises(ValueError) as raised:
        resolve_harness(host, name)
    assert all(word in str(raised.value) for word in words), str(raised.value)
    assert name in str(raised.value)


def test_each_part_s_parameters_reach_its_own_interventions_only(host, tmp_path):
    spec = resolve_harness(host, "a+b-tight")
    assert dict(spec.params) == {} and spec.params_for("note-b") == {"limit": 1}
    assert resolve_harness(host, "a+b-blue").params_for("note-b") == {"colour": "blue"}
    assert spec.params_for("note-a") == {"colour": "red"}
    run(host, RunConfig(env="tiny", task_set="default", split="test", tasks=TASKS[:1], agent="expert",
                        harnesses=["a+b-tight"], out=str(tmp_path / "run"), strict=True, params={"extra": 1}))
    assert BUILT == {"note-a": {"colour": "red", "extra": 1}, "note-b": {"limit": 1, "extra": 1}}


def test_the_loop_s_budgets_are_the_stack_s_and_must_agree(host):
    assert dict(resolve_harness(host, "loose+b").params) == {"max_rollbacks": 2}
    assert resolve_harness(host, "loose+b").params_for("note-b") == {"max_rollbacks": 2}
    with pytest.raises(HarnessConflict, match="incompatible step budget 'max_rollbacks': 2 in loose but 1 in tight"):
        resolve_harness(host, "loose+tight")


def test_sentry_without_its_hard_repair_stacks_with_the_validity_guard():
    """Sentry declares its effects as a function of its parameters: without the hard repair it only re-asks."""
    host = Host().load()
    spec = resolve_harness(host, "guard-only+sentry-no-hard")
    assert spec.params_for("sentry") == {"hard_repair": False} and spec.params_for("validity-guard") == {}
    with pytest.raises(HarnessConflict, match="validity-guard .from guard-only. and sentry .from sentry. both "
                                              "rewrite the proposed action"):
        resolve_harness(host, "guard-only+sentry")


def test_the_cli_refuses_a_conflicting_stack_before_writing_anything(tmp_path, capsys):
    out = tmp_path / "run"
    code = main(["run", "--env", "workflow", "--agent", "noisy", "--episodes", "1", "--harness", "guard-only+sentry",
                 "--out", str(out)])
    said = capsys.readouterr().err
    assert code != 0
    assert "harness stack 'guard-only+sentry'" in said and "both rewrite the proposed action" in said
    assert not (out / "episodes.jsonl").exists()


def test_an_unknown_part_is_named():
    with pytest.raises(KeyError, match="unknown harness 'nope'"):
        resolve_harness(Host().load(), "sentry+nope")


def test_a_stack_fingerprint_follows_its_parts_and_its_parameters_are_listed(host):
    before = harness_fingerprint(host, "a+b")
    assert before != harness_fingerprint(host, "b+a")  # the order is part of what the stack does
    lines = describe_params(host, "a+b")
    assert "set for note-a: colour='red'" in lines and "intervention note-b:" in lines


def test_sentry_and_dart_stacked_each_do_their_own_work_in_one_episode(tmp_path):
    """The real plugins on the workflow env with the instrument (`noisy`): Sentry's repairs and DART's rollbacks
    in the same episodes."""
    out = tmp_path / "run"
    assert main(["run", "--env", "workflow", "--agent", "noisy", "--episodes", "8", "--harness", "sentry+dart",
                 "--out", str(out)]) == 0
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    kinds = [set(record["interventions"]) for record in records]
    assert any({"dart_rollback", "hard_repair"} <= found for found in kinds), kinds
    header = next(iter(read_trace(out / records[0]["trace"])))
    assert header["interventions"] == ["sentry", "dart"]
