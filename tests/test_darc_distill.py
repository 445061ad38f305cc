"""DARC evidence tables and chain distillation: the objective pinned on hand-computed matrices."""

from __future__ import annotations

import hashlib
import importlib.util
import itertools
import json
import sys

import numpy as np
import pytest

from playground.plugins.darc.distill import (Chain, count_chains, distill, halting_index, policy_dict, rank_key,
                                     save_policy, score_chain)
from playground.plugins.darc.evidence import Evidence, EvidenceError, evidence_hash, load_evidence, write_evidence
from playground.plugins.darc.frontier import PlotUnavailable, pareto_front, plot_frontier
from playground.plugins.darc.policy import read_policy
from tests.conftest import needs_extra

HAS_MATPLOTLIB = importlib.util.find_spec("matplotlib") is not None

# Four tasks, three interventions; worked values are in the tests below.
SUCCESS = {  # task: (a, b, c)
    "t1": (1, 0, 1),
    "t2": (0, 1, 0),
    "t3": (0, 0, 0),
    "t4": (0, 1, 1),
}
COST = {
    "t1": (1, 2, 3),
    "t2": (2, 1, 1),
    "t3": (1, 1, 1),
    "t4": (3, 2, 5),
}


def hand_rows():
    return [(task, name, SUCCESS[task][r], COST[task][r]) for task in SUCCESS for r, name in enumerate("abc")]


def hand_evidence(tmp_path):
    path = write_evidence(tmp_path / "evidence.csv", hand_rows())
    return path, load_evidence(path)


def by_names(result):
    return {chain.names: chain for chain in result.candidates}


def write_text(tmp_path, text):
    path = tmp_path / "evidence.csv"
    path.write_text(text)
    return path


# --- the objective on the hand example ---------------------------------------------------------

def test_halting_index_is_the_first_success_or_minus_one(tmp_path):
    _, evidence = hand_evidence(tmp_path)
    assert halting_index(evidence, ["a", "b"]).tolist() == [0, 1, -1, 1]
    assert halting_index(evidence, ["b", "a"]).tolist() == [1, 0, -1, 0]
    assert halting_index(evidence, ["c", "b", "a"]).tolist() == [0, 1, -1, 0]


def test_cost_adds_up_to_the_halting_intervention_and_everything_when_none_succeeds(tmp_path):
    _, evidence = hand_evidence(tmp_path)
    chains = by_names(distill(evidence, max_len=3, lam=0.0, tau_free=0.0))
    # (a, b): t1 halts on a (1); t2 on b (2+1); t3 never (1+1); t4 on b (3+2) -> 11 / 4
    assert chains["a", "b"].succ == 0.75 and chains["a", "b"].cost == 2.75
    # (b, a): t1 3, t2 1, t3 2, t4 2 -> 8 / 4
    assert chains["b", "a"].succ == 0.75 and chains["b", "a"].cost == 2.0
    # (a, b, c): t3 pays all three (1+1+1): 1 + 3 + 3 + 5 = 12
    assert chains["a", "b", "c"].succ == 0.75 and chains["a", "b", "c"].cost == 3.0
    assert (chains["a",].succ, chains["a",].cost) == (0.25, 1.75)
    assert (chains["b",].succ, chains["b",].cost) == (0.5, 1.5)
    assert (chains["c",].succ, chains["c",].cost) == (0.5, 2.5)


def test_without_a_cost_weight_the_cheapest_of_the_most_successful_chains_wins(tmp_path):
    _, evidence = hand_evidence(tmp_path)
    result = distill(evidence, max_len=3, lam=0.0, tau_free=0.0)
    assert result.best == Chain(("b", "a"), 0.75, 2.0, 0.75)


def test_lambda_and_tau_free_trade_success_against_cost(tmp_path):
    _, evidence = hand_evidence(tmp_path)
    # lam=1, tau=1: J(b) = 0.5 - 0.5 = 0 beats J(b, a) = 0.75 - 1.0
    costly = distill(evidence, max_len=3, lam=1.0, tau_free=1.0)
    assert costly.best.names == ("b",) and costly.best.J == 0.0
    assert by_names(costly)["b", "a"].J == -0.25
    # a free allowance of 2 makes (b, a) free again
    free = distill(evidence, max_len=3, lam=1.0, tau_free=2.0)
    assert free.best.names == ("b", "a") and free.best.J == 0.75


def test_equal_objective_is_broken_by_higher_success(tmp_path):
    _, evidence = hand_evidence(tmp_path)
    # lam=0.5, tau=1: J(b) = 0.5 - 0.25 = 0.25 and J(b, a) = 0.75 - 0.5 = 0.25
    result = distill(evidence, max_len=3, lam=0.5, tau_free=1.0)
    chains = by_names(result)
    assert chains["b",].J == chains["b", "a"].J == 0.25
    assert result.best.names == ("b", "a")


def test_full_ties_go_to_the_shorter_chain_then_to_name_order():
    # "z" never succeeds and costs nothing, so appending it changes nothing;
    # "b" and "a" are identical columns, listed b first.
    success = np.array([[1, 1, 0], [0, 0, 0]])
    cost = np.array([[1.0, 1.0, 0.0], [1.0, 1.0, 0.0]])
    evidence = Evidence(["t1", "t2"], ["b", "a", "z"], success, cost)
    result = distill(evidence, max_len=3, lam=0.0, tau_free=0.0)
    chains = by_names(result)
    assert chains["a",] == Chain(("a",), 0.5, 1.0, 0.5)
    assert chains["a", "z"].J == chains["b", "z"].J == 0.5
    assert chains["a", "z"].cost == 1.0
    assert result.best.names == ("a",)
    assert [c.names for c in result.ranked()[:4]] == [("a",), ("b",), ("a", "z"), ("b", "z")]


def test_costs_equal_up_to_float_rounding_count_as_a_tie():
    rounded_up = Chain(("c", "b", "a"), 0.0, 0.1 + 0.2 + 0.3, -(0.1 + 0.2 + 0.3))
    exact = Chain(("d", "b", "a"), 0.0, 0.6, -0.6)
    assert rounded_up.cost != exact.cost
    assert sorted([exact, rounded_up], key=rank_key)[0] is rounded_up


# --- the search space ----------------------------------------------------------------------------

@pytest.mark.parametrize(("m", "max_len", "count"), [(4, 3, 40), (8, 3, 400), (3, 1, 3), (2, 3, 4), (0, 2, 0)])
def test_count_chains(m, max_len, count):
    assert count_chains(m, max_len) == count


def random_evidence(n_tasks, m, seed=0):
    rng = np.random.default_rng(seed)
    names = [f"r{k}" for k in range(m)]
    return Evidence([f"t{i}" for i in range(n_tasks)], names, rng.random((n_tasks, m)) < 0.35,
                    rng.integers(0, 5, (n_tasks, m)) * 0.5)


@pytest.mark.parametrize(("m", "count"), [(4, 40), (8, 400)])
def test_every_duplicate_free_chain_is_scored_once(m, count):
    evidence = random_evidence(30, m)
    result = distill(evidence, max_len=3, lam=0.1, tau_free=1.0)
    names = [chain.names for chain in result.candidates]
    expected = [p for length in (1, 2, 3) for p in itertools.permutations(evidence.interventions, length)]
    assert result.search_space == count == len(names)
    assert names == expected
    assert all(len(set(chain)) == len(chain) for chain in names)


def reference_score(success, cost, chain):
    """The objective's definition, task by task, in plain Python."""
    solved, spent = 0, 0.0
    for i in range(len(success)):
        for r in chain:
            spent += cost[i][r]
            if success[i][r]:
                solved += 1
                break
    return solved / len(success), spent / len(success)


def test_vectorised_scores_match_the_definition_on_random_tables():
    evidence = random_evidence(57, 5, seed=3)
    result = distill(evidence, max_len=3, lam=0.3, tau_free=0.7)
    success, cost = evidence.success.tolist(), evidence.cost.tolist()
    for chain in result.candidates:
        columns = [evidence.interventions.index(name) for name in chain.names]
        succ, mean_cost = reference_score(success, cost, columns)
        assert chain.succ == pytest.approx(succ) and chain.cost == pytest.approx(mean_cost)
        assert chain.J == pytest.approx(succ - 0.3 * max(0.0, mean_cost - 0.7))
        assert score_chain(evidence, chain.names, 0.3, 0.7) == pytest.approx(chain)
    assert result.best == sorted(result.candidates, key=rank_key)[0]


def test_distil_over_a_restricted_set_of_interventions(tmp_path):
    _, evidence = hand_evidence(tmp_path)
    result = distill(evidence, max_len=3, lam=0.0, tau_free=0.0, interventions=["c", "a"])
    assert result.interventions == ("c", "a")
    assert [c.names for c in result.candidates] == [("c",), ("a",), ("c", "a"), ("a", "c")]
    # a only solves t1, which c solves first: (c, a) costs more for the same success
    assert (by_names(result)["c", "a"].succ, by_names(result)["c", "a"].cost) == (0.5, 3.25)
    assert result.best.names == ("c",) and result.best.cost == 2.5
    with pytest.raises(EvidenceError, match="'nope'"):
        distill(evidence, max_len=2, lam=0.0, tau_free=0.0, interventions=["a", "nope"])


@pytest.mark.parametrize("max_len", [0, -1])
def test_max_len_below_one_is_rejected(tmp_path, max_len):
    _, evidence = hand_evidence(tmp_path)
    with pytest.raises(ValueError, match="max_len"):
        distill(evidence, max_len=max_len, lam=0.0, tau_free=0.0)
    with pytest.raises(ValueError, match="max_len"):
        count_chains(3, max_len)


def test_negative_lambda_is_rejected(tmp_path):
    _, evidence = hand_evidence(tmp_path)
    with pytest.raises(ValueError, match="lambda"):
        distill(evidence, max_len=2, lam=-0.1, tau_free=0.0)


# --- the policy file --------------------------------------------------------------------------------

def test_policy_dict_records_the_choice_and_the_evidence_it_came_from(tmp_path):
    path, evidence = hand_evidence(tmp_path)
    result = distill(evidence, max_len=3, lam=0.5, tau_free=1.0)
    policy = policy_dict(result, path, failure_mode="looping")
    assert policy["chain"] == ["b", "a"]
    assert (policy["J"], policy["succ"], policy["cost"]) == (0.25, 0.75, 2.0)
    assert (policy["lambda"], policy["tau_free"], policy["max_len"], policy["search_space"]) == (0.5, 1.0, 3, 15)
    assert policy["evidence_hash"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert policy["failure_mode"] == "looping" and policy["n_tasks"] == 4
    saved = save_policy(tmp_path / "policy.json", policy)
    assert read_policy(saved) == json.loads(json.dumps(policy))    # the file the cascade harness deploys


# --- evidence files -----------------------------------------------------------------------------------

def test_evidence_round_trips_and_is_hashed_by_its_bytes(tmp_path):
    path, evidence = hand_evidence(tmp_path)
    assert path.read_text().splitlines()[:2] == ["task_id,intervention,success,cost", "t1,a,1,1"]
    assert evidence.task_ids == ("t1", "t2", "t3", "t4") and evidence.interventions == ("a", "b", "c")
    assert evidence.success.dtype == bool and evidence.success[:, 1].tolist() == [False, True, False, True]
    assert evidence.cost[3].tolist() == [3.0, 2.0, 5.0]
    again = write_evidence(tmp_path / "copy.csv", evidence.rows())
    assert again.read_bytes() == path.read_bytes()
    first = evidence_hash(path)
    assert first == hashlib.sha256(path.read_bytes()).hexdigest()
    path.write_text(path.read_text().replace("t4,c,1,5", "t4,c,1,5.5"))
    assert evidence_hash(path) != first and load_evidence(path).cost[3, 2] == 5.5


def test_restricting_interventions_keeps_their_order_and_ignores_other_columns(tmp_path):
    path = write_text(tmp_path, "task_id,intervention,success,cost\n"
                                "t1,a,1,1\nt1,b,0,2\nt1,z,1,0\nt2,a,0,1\nt2,b,1,2\n")
    evidence = load_evidence(path, interventions=["b", "a"])
    assert evidence.interventions == ("b", "a")
    assert evidence.success.tolist() == [[False, True], [True, False]]
    with pytest.raises(EvidenceError, match="'t2'.*'z'"):
        load_evidence(path)


HEADER = "task_id,intervention,success,cost\n"


@pytest.mark.parametrize(("text", "match"), [
    ("", "empty file"),
    ("t1,a,1,1\n", "line 1: header must be exactly task_id,intervention,success,cost"),
    ("task_id,intervention,success\nt1,a,1\n", "header must be exactly"),
    ("task_id,intervention,outcome,cost\n", "header must be exactly"),
    (HEADER, "no evidence rows"),
    (HEADER + "t1,a,1,1\nt1,b,1\n", "line 3: expected 4 columns"),
    (HEADER + "t1,a,1,1\n,b,1,1\n", "line 3: empty task_id"),
    (HEADER + "t1,a,1,1\nt1,a,0,2\n", "line 3: duplicate row for task 't1' and intervention 'a' \\(first at line 2\\)"),
    (HEADER + "t1,a,1,1\nt1,b,2,1\n", "line 3: success must be 0 or 1, got '2'"),
    (HEADER + "t1,a,yes,1\n", "line 2: success must be 0 or 1, got 'yes'"),
    (HEADER + "t1,a,1,-0.5\n", "line 2: cost must be non-negative, got '-0.5'"),
    (HEADER + "t1,a,1,cheap\n", "line 2: cost must be a number, got 'cheap'"),
    (HEADER + "t1,a,1,nan\n", "line 2: cost must be a finite number"),
    (HEADER + "t1,a,1,1\nt1,b,1,1\nt2,a,0,1\n", "missing cell: task 't2' has no row for intervention 'b'"),
])
def test_bad_evidence_is_named(tmp_path, text, match):
    with pytest.raises(EvidenceError, match=match):
        load_evidence(write_text(tmp_path, text))


def test_unknown_or_repeated_restriction_names_are_errors(tmp_path):
    path, _ = hand_evidence(tmp_path)
    with pytest.raises(EvidenceError, match="unknown intervention.*'retry'.*the evidence has: a, b, c"):
        load_evidence(path, interventions=["a", "retry"])
    with pytest.raises(EvidenceError, match="duplicate"):
        load_evidence(path, interventions=["a", "a"])


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(EvidenceError, match="cannot read evidence file.*absent.csv"):
        load_evidence(tmp_path / "absent.csv")


def test_writing_a_bad_row_leaves_the_existing_file_alone(tmp_path):
    path, _ = hand_evidence(tmp_path)
    before = path.read_bytes()
    with pytest.raises(EvidenceError, match="evidence row 2: cost must be non-negative"):
        write_evidence(path, [("t1", "a", 1, 1), {"task_id": "t1", "intervention": "b", "success": 0, "cost": -1}])
    with pytest.raises(EvidenceError, match="evidence row 2: duplicate"):
        write_evidence(path, [("t1", "a", True, 1), ("t1", "a", False, 1)])
    assert path.read_bytes() == before


# --- the frontier ---------------------------------------------------------------------------------------

def test_pareto_front_keeps_chains_no_other_beats_on_both_axes(tmp_path):
    _, evidence = hand_evidence(tmp_path)
    front = pareto_front(distill(evidence, max_len=3, lam=0.0, tau_free=0.0))
    assert [(c.names, c.cost, c.succ) for c in front] == [(("b",), 1.5, 0.5), (("b", "a"), 2.0, 0.75)]


@needs_extra("test", HAS_MATPLOTLIB, "matplotlib is not installed")
def test_plot_frontier_writes_a_png(tmp_path):
    result = distill(random_evidence(40, 4), max_len=3, lam=0.2, tau_free=1.0)
    path = plot_frontier(result, tmp_path / "plots" / "frontier.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_plot_frontier_without_matplotlib_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if it were not installed: importing it fails
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    result = distill(random_evidence(10, 2), max_len=2, lam=0.0, tau_free=0.0)
    with pytest.raises(PlotUnavailable, match="matplotlib"):
        plot_frontier(result, tmp_path / "frontier.png")


# --- boundaries found by mutation testing (scripts/mutation.sh) -----------------------------------------------

def test_chains_of_length_one_are_allowed_and_zero_is_refused(tmp_path):
    from playground.plugins.darc.distill import score_all_chains

    _, evidence = hand_evidence(tmp_path)
    result = distill(evidence, max_len=1, lam=0.0, tau_free=0.0)
    assert sorted(c.names for c in result.candidates) == [("a",), ("b",), ("c",)] and count_chains(3, 1) == 3
    chains, succ, cost = score_all_chains(evidence.success, evidence.cost, 1)
    assert chains == [(0,), (1,), (2,)] and succ.tolist() == [0.25, 0.5, 0.5] and cost.tolist() == [1.75, 1.5, 2.5]
    for call in (lambda: distill(evidence, max_len=0, lam=0.0, tau_free=0.0),
                 lambda: score_all_chains(evidence.success, evidence.cost, 0)):
        with pytest.raises(ValueError, match="at least 1"):
            call()


def test_one_task_is_enough_and_no_task_is_refused():
    one = Evidence(("t1",), ("a", "b"), np.array([[0, 1]], dtype=bool), np.array([[2.0, 3.0]]))
    assert distill(one, max_len=2, lam=0.0, tau_free=0.0).best.names == ("b",)
    none = Evidence((), ("a", "b"), np.zeros((0, 2), dtype=bool), np.zeros((0, 2)))
    with pytest.raises(ValueError, match="no tasks or no interventions"):
        distill(none, max_len=2, lam=0.0, tau_free=0.0)


def test_a_policy_is_saved_into_new_folders_as_indented_json(tmp_path):
    path = save_policy(tmp_path / "new" / "deeper" / "policy.json", {"chain": ["a"], "J": 0.5})
    assert path.read_text() == '{\n  "chain": [\n    "a"\n  ],\n  "J": 0.5\n}\n'
