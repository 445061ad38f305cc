"""DART's admission rule and restore search on a workflow whose consumer is multi-stage: an irreversible call of
any instance a restore would undo blocks it, and candidates stay within the failed instance."""

from __future__ import annotations

import pytest

from playground.envs.workflow.domains import DOMAINS, Domain, Fault, Skeleton, Step
from playground.envs.workflow.env import WorkflowProvider
from playground.plugins.dart import ABLATIONS
from playground.plugins.dart.sidecar import Dart
from playground.testing import ScriptedAgent, play
from tests.dart_cases import play_harness

# `publish` reads `data` and has three stages: an irreversible post, a check of the data it read, an archive. A
# partial `data` (the `stale` fault) is found by the check, after the post and before `publish` commits.
PIPELINE = Domain(
    "pipeline", "produce a dataset per source, then post it, check it and archive it",
    ("north", "south", "east"),
    (
        Skeleton("produce", (Step("produce"),), ("source.{e}",), ("data.{e}",)),
        Skeleton("publish", (Step("post", external=True, writes=("post.{e}",)), Step("verify", ("data.{e}",)),
                             Step("archive", writes=("archive.{e}",))),
                 ("data.{e}",), ("post.{e}", "archive.{e}"), "irreversible"),
    ),
    ("source.{e}",),
    {"clean": None, "stale": Fault("produce", -1, "contract_violation")},
)


@pytest.fixture
def pipeline(monkeypatch):
    """The workflow provider with the `pipeline` domain added to its domains."""
    monkeypatch.setitem(DOMAINS, PIPELINE.name, PIPELINE)
    return WorkflowProvider()


def decisions(played) -> list[dict]:
    return [e["details"] for e in played.of("intervention")]


def test_a_begun_consumer_with_an_irreversible_call_blocks_the_restore(pipeline):
    env = pipeline.make("pipeline", expert=True)
    played = play(env, ScriptedAgent(), plugins=[Dart()], task="pipeline-stale-0", max_steps=40,
                  params={"max_rollbacks": 10})
    (detail,) = decisions(played)
    assert detail["instance"].startswith("produce:")  # the writer of the partial data, not the consumer
    assert detail["decision"] == "rerun" and detail["blocked"]
    assert detail["conditions"]["effects_recoverable"]  # the failed instance's own calls are reversible ...
    assert "irreversible effect of publish:" in detail["reason"]  # ... its begun consumer's post is not
    assert played.of("rollback")[0]["to_step"] == 0  # a whole-task rerun, a new attempt
    assert env.world["unsafe_restores"] == 0 and played.result.won and env.valid()


def test_without_the_effect_check_the_same_restore_is_unsafe(pipeline):
    figures = play_harness(pipeline, "pipeline", "pipeline-stale-0", "dart", ScriptedAgent(), 40)
    env = pipeline.make("pipeline", expert=True)
    play(env, ScriptedAgent(), plugins=[Dart({"effect_check": False})], task="pipeline-stale-0", max_steps=40,
         params={"max_rollbacks": 10})
    assert figures["unsafe"] == 0 and figures["won"]
    assert env.world["unsafe_restores"] == 1 and not env.valid()  # the post is undone and sent twice


# -- the restore search --------------------------------------------------------------------


def test_candidates_stay_within_the_failed_instance_unless_a_named_ablation_widens_them():
    provider = WorkflowProvider()
    searched = {}
    for name, params in (("dart", {}), *((name, params) for name, params, _ in ABLATIONS)):
        env = provider.make("schedule-form", expert=True)
        played = play(env, ScriptedAgent(), plugins=[Dart(params)], task="schedule-form-late-0", max_steps=80,
                      params={"max_rollbacks": 10})
        searched[name] = decisions(played)[0]  # the first recovery
    own = searched["dart"]
    assert own["candidate"] > own["entry"]  # the failed instance's in-instance commit checkpoint ...
    assert list(own["candidates"]) == [own["candidate"], own["entry"]]  # ... then its entry, nothing else
    wide = searched["dart-wide-search"]
    assert list(wide["candidates"][:2]) == list(own["candidates"])
    outside = {name for name, detail in searched.items()
               if any(step < detail["entry"] for step in detail.get("candidates", ()))}
    assert outside == {"dart-wide-search", "dart-no-certify"}  # other instances' checkpoints, by name only


def test_exit_candidates_come_only_under_the_explicit_policy(pipeline):
    tried = {}
    for exits in (False, True):
        env = pipeline.make("pipeline", expert=True)
        played = play(env, ScriptedAgent(), plugins=[Dart({"exit_candidates": exits})], task="pipeline-stale-0",
                      max_steps=40, params={"max_rollbacks": 10})
        (detail,) = decisions(played)
        tried[exits] = list(detail["candidates"])
        entry = detail["entry"]
    assert tried[False] == [entry]  # `produce` is one call: no commit point inside, so its entry alone
    assert tried[True] == [entry + 1, entry]  # its exit, after its one call, then its entry
    assert "dart-wide-search" in [name for name, _, _ in ABLATIONS]
