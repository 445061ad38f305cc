"""The Finance env: generated tasks, benchmark-file loader, env API, oracle and the real runner."""

from __future__ import annotations

import json
import re
import string
import subprocess
import sys
from pathlib import Path

import pytest

from playground.core.env import UnknownTaskError
from playground.envs.finance import data
from playground.envs.finance.agents import OracleAgent
from playground.envs.finance.env import FinanceEnv, FinanceProvider
from playground.envs.finance.format_check import check, expected_format
from playground.envs.finance.formulas import FORMULAS, benchmark_round, formula_task
from playground.envs.finance.scoring import score_answer
from playground.envs.finance.tagging import TAGS, tagging_task
from playground.host.manager import Host
from playground.run.config import RunConfig
from playground.run.runner import run
from playground.testing import ScriptedAgent, play

SAMPLES = Path(__file__).resolve().parents[2] / "shared/data/finance"
needs_samples = pytest.mark.skipif(not (SAMPLES / "formula_val_subset_300.jsonl").exists(),
                                   reason=f"benchmark samples not found under {SAMPLES}")


def load_host() -> Host:
    """A strict host with the finance plugin (given explicitly until it is a built-in)."""
    return Host(strict=True).load()


@pytest.fixture(autouse=True)
def no_finance_data(monkeypatch):
    monkeypatch.delenv(data.DATA_VARIABLE, raising=False)


# -- generated tasks ---------------------------------------------------------------------


def test_at_least_30_formulas_all_used_and_targets_follow_the_rounding_rule():
    assert len({f.name for f in FORMULAS}) >= 30
    seen = set()
    for seed in range(1500):
        name, context, target = formula_task(seed)
        seen.add(name)
        assert target == str(float(target)) and round(float(target), 2) == float(target)
        assert "e" not in target and not check(context, target)
        assert expected_format(context).kind == "number"
    assert seen == {f.name for f in FORMULAS}
    assert [benchmark_round(x) for x in (2, 8.3333, -15e6, 0.004, 2.675)] == ["2.0", "8.33", "-15000000.0", "0.0", "2.67"]


SHOWN_VALUE = r"-?\$?[\d,]+(?:\.\d+)?%?(?: million)?|once|twice|\d+ times"

# The formulas as their `expression` states them, written out again here (percent figures as shown, e.g. 6.5
# for 6.5%), so that a wrong `compute` cannot agree with itself.
BY_HAND = {
    "Current Ratio": lambda v: v["ca"] / v["cl"],
    "Quick Ratio": lambda v: (v["ca"] - v["inv"]) / v["cl"],
    "Cash Ratio": lambda v: v["cash"] / v["cl"],
    "Debt-to-Equity Ratio": lambda v: v["tl"] / v["eq"],
    "Debt Ratio": lambda v: v["tl"] / v["ta"],
    "Interest Coverage Ratio": lambda v: v["ebit"] / v["int"],
    "Simple Interest": lambda v: v["p"] * (v["rate"] / 100) * v["t"],
    "Compound Interest": lambda v: v["p"] * (1 + v["rate"] / 100 / v["n"]) ** (v["n"] * v["t"]),
    "Future Value": lambda v: v["pv"] * (1 + v["rate"] / 100) ** v["n"],
    "Present Value": lambda v: v["fv"] / (1 + v["rate"] / 100) ** v["n"],
    "Net Present Value": lambda v: (-v["c0"] + v["cf1"] / (1 + v["rate"] / 100) + v["cf2"] / (1 + v["rate"] / 100) ** 2
                                    + v["cf3"] / (1 + v["rate"] / 100) ** 3),
    "Effective Annual Rate": lambda v: ((1 + v["rate"] / 100 / v["n"]) ** v["n"] - 1) * 100,
    "Capital Asset Pricing Model": lambda v: v["rf"] + v["beta"] * (v["rm"] - v["rf"]),
    "Sharpe Ratio": lambda v: (v["rp"] - v["rf"]) / v["sd"],
    "Treynor Ratio": lambda v: (v["rp"] - v["rf"]) / v["beta"],
    "Gordon Growth Model": lambda v: v["d1"] / (v["req"] / 100 - v["g"] / 100),
    "Break-Even Units": lambda v: v["fixed"] / (v["price"] - v["var"]),
    "Payback Period": lambda v: v["inv"] / v["cf"],
    "Loan Payment": lambda v: (v["p"] * (v["rate"] / 100 / 12)
                               / (1 - (1 + v["rate"] / 100 / 12) ** (-(v["years"] * 12)))),
    "Inflation Rate": lambda v: (v["now"] - v["last"]) / v["last"] * 100,
    "Unemployment Rate": lambda v: v["u"] / v["lf"] * 100,
    "Balance of Trade": lambda v: v["x"] * 1_000_000 - v["m"] * 1_000_000,
    "Weighted Average Cost of Capital": lambda v: (v["e"] / (v["e"] + v["d"]) * v["re"]
                                                   + v["d"] / (v["e"] + v["d"]) * v["rd"] * (1 - v["tc"] / 100)),
    "Rule of 72": lambda v: 72 / v["rate"],
}


def _shown_number(text: str) -> float:
    """The value a question shows ("$1,250,000", "6.5%", "$45 million", "twice", "12 times") as a number."""
    words = {"once": 1.0, "twice": 2.0}
    if text in words:
        return words[text]
    return float(text.removesuffix(" times").removesuffix(" million").replace("$", "").replace(",", "").rstrip("%"))


def _values_shown(formula, question: str) -> dict[str, float]:
    """Read the formula's values back out of the question, by matching it against the formula's templates."""
    for template in formula.questions:
        pattern, names = "", set()
        for literal, field, _, _ in string.Formatter().parse(template):
            pattern += re.escape(literal)
            if field == "who":
                pattern += ".+?"
            elif field:
                pattern += f"(?P<{field}>{SHOWN_VALUE})" if field not in names else f"(?P={field})"
                names.add(field)
        match = re.fullmatch(pattern, question, flags=re.IGNORECASE)
        if match:
            return {name: _shown_number(text) for name, text in match.groupdict().items()}
    raise AssertionError(f"question matches no template of {formula.name}: {question}")


def test_generated_formula_values_give_the_stated_result():
    """The values the question shows, put into the formula, give the target (rounded as the benchmark does)."""
    formulas = {f.name: f for f in FORMULAS}
    checked_by_hand = set()
    for seed in range(600):
        name, context, target = formula_task(seed)
        question = re.search(r"^Question: (.*)$", context, flags=re.MULTILINE).group(1)
        assert f"Financial formula: {name}\nFormula: {formulas[name].expression}\n" in context
        values = _values_shown(formulas[name], question)
        assert set(values) == set(formulas[name].show)  # every value the formula needs is in the question
        assert benchmark_round(formulas[name].compute(values)) == target, (seed, name, values)
        if name in BY_HAND:
            assert float(target) == pytest.approx(round(BY_HAND[name](values), 2), abs=0.011), (seed, name, values)
            checked_by_hand.add(name)
    assert checked_by_hand == set(BY_HAND)
    assert formula_task(7) == formula_task(7)  # deterministic by seed


@pytest.mark.parametrize("name, values, expected", [
    ("Current Ratio", {"ca": 1_250_000, "cl": 500_000}, "2.5"),
    ("Gross Margin", {"rev": 1_000_000, "cogs": 600_000}, "40.0"),
    ("Compound Interest", {"p": 10_000, "rate": 5, "n": 12, "t": 10}, "16470.09"),
    ("Net Present Value", {"c0": 10_000, "cf1": 5_000, "cf2": 4_000, "cf3": 3_000, "rate": 10}, "105.18"),
    ("Loan Payment", {"p": 200_000, "rate": 6, "years": 30}, "1199.1"),
    ("Weighted Average Cost of Capital", {"e": 600_000, "d": 400_000, "re": 10, "rd": 5, "tc": 25}, "7.5"),
    ("Gordon Growth Model", {"d1": 2, "req": 10, "g": 4}, "33.33"),
    ("Effective Annual Rate", {"rate": 12, "n": 12}, "12.68"),
    ("Rule of 72", {"rate": 8}, "9.0"),
    ("Balance of Trade", {"x": 300, "m": 450}, "-150000000.0"),
])
def test_formulas_give_hand_computed_results(name, values, expected):
    formula = next(f for f in FORMULAS if f.name == name)
    assert benchmark_round(formula.compute({k: float(v) for k, v in values.items()})) == expected


def test_generated_tagging_tasks_have_four_listed_tags():
    for seed in range(300):
        context, target = tagging_task(seed)
        tags = target.split(",")
        fmt = expected_format(context)
        assert len(tags) == 4 and set(tags) <= set(TAGS)
        assert fmt.kind == "tags" and fmt.count == 4 and fmt.tags == {t.lower() for t in TAGS}
        assert not check(context, target)
    assert tagging_task(3) == tagging_task(3) and tagging_task(3) != tagging_task(4)


def test_generated_splits_are_disjoint_seed_ranges():
    sets = FinanceProvider().task_sets()
    assert set(sets) == {"formula", "finer"}
    ids = {split: set(sets["formula"].tasks(split, 50)) for split in ("train", "dev", "test")}
    assert not (ids["train"] & ids["dev"]) and not (ids["dev"] & ids["test"]) and not (ids["train"] & ids["test"])
    assert sets["finer"].tasks("test", 2) == ["finer-20000", "finer-20001"]


# -- env ---------------------------------------------------------------------------------


def test_reset_shows_the_question_and_step_scores_and_terminates():
    env = FinanceEnv("formula", expert=True)
    observation, info = env.reset(seed=1, options={"task": "formula-20003"})
    target = data.get_task("formula-20003").target
    assert observation == data.get_task("formula-20003").context
    assert info["admissible_actions"] is None and info["expert_plan"] == [target]
    assert (info["won"], info["score"], info["max_score"], info["valid_action"]) == (False, 0.0, 1.0, True)
    assert "number" in info["goal"]
    observation, reward, terminated, truncated, info = env.step(f" {target} ")
    assert (reward, terminated, truncated, info["won"], info["score"]) == (1.0, True, False, True, 1.0)
    with pytest.raises(RuntimeError, match="episode is over"):
        env.step(target)
    env.reset(options={"task": "formula-20003"})
    _, reward, _, _, info = env.step(f"The answer is {target}")
    assert (reward, info["won"], info["valid_action"], info["lost"]) == (0.0, False, False, True)


def test_finer_env_scores_positions_and_reports_them():
    env = FinanceEnv("finer")
    _, info = env.reset(options={"task": "finer-20001"})
    assert info["max_score"] == 4.0 and "expert_plan" not in info
    gold = data.get_task("finer-20001").target.split(",")
    _, reward, _, _, info = env.step(",".join(gold[:2] + ["Revenues" if gold[2] != "Revenues" else "Goodwill"]))
    assert (info["score"], info["max_score"], reward, info["won"]) == (2.0, 4.0, 0.5, False)


def test_bad_task_ids_are_named():
    env = FinanceEnv("formula")
    with pytest.raises(UnknownTaskError, match=r"finance: unknown task 'finer-1' in task set 'formula'; "
                                               r"expected 'formula-<n>' with n in 0-9999 \(train\)"):
        env.reset(options={"task": "finer-1"})
    with pytest.raises(UnknownTaskError, match="finance: unknown task 'nope'"):
        env.reset(options={"task": "nope"})


def test_oracle_scores_everything_on_generated_tasks():
    for task_set in ("formula", "finer"):
        for task in FinanceProvider().task_sets()[task_set].tasks("test", 25):
            result = play(FinanceEnv(task_set, expert=True), OracleAgent(), task=task).result
            assert result.won and result.score == result.max_score and result.steps == 1


def test_an_agent_that_gives_up_scores_nothing():
    result = play(FinanceEnv("formula"), ScriptedAgent(), task="formula-20000").result
    assert (result.status, result.won, result.steps) == ("stopped", False, 0)


# -- benchmark files ---------------------------------------------------------------------


def write_jsonl(path: Path, records: list) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def test_files_become_splits_named_by_file_with_stable_line_ids(tmp_path, monkeypatch):
    write_jsonl(tmp_path / "formula_train_x.jsonl", [{"context": "Q1 Answer:", "target": "1.0"},
                                                     {"context": "Q2 Answer:", "target": "2.5"}])
    (tmp_path / "formula_val_x.jsonl").write_text(json.dumps({"context": "Q3", "target": "3.0"}) + "\n\n"
                                                  + json.dumps({"context": "Q4", "target": "4.0"}) + "\n")
    write_jsonl(tmp_path / "mine.jsonl", [{"context": "Tags?", "target": "A,B"}])  # sorted by content: finer
    monkeypatch.setenv(data.DATA_VARIABLE, str(tmp_path))
    sets = FinanceProvider().task_sets()
    assert set(sets) == {"formula", "finer", "formula-data", "finer-data"}
    formula = sets["formula-data"]
    assert list(formula.splits) == ["formula_train_x", "formula_val_x"] and formula.default_split == "formula_val_x"
    assert formula.tasks("formula_val_x") == ["formula_val_x:1", "formula_val_x:3"]  # line numbers, blanks skipped
    assert sets["finer-data"].tasks("mine") == ["mine:1"]
    assert data.get_task("formula_val_x:3") == data.Task("formula_val_x:3", "formula", "Q4", "4.0")
    assert [t.id for t in data.train_pool("formula-data")] == ["formula_train_x:1", "formula_train_x:2"]
    assert data.train_pool("finer-data") == []
    header = FinanceProvider().describe("formula-data")
    assert len(header["data_hash"]) == 12 and header["files"]["formula_val_x"].endswith("formula_val_x.jsonl")
    env = FinanceEnv("formula-data", expert=True)
    _, info = env.reset(options={"task": "formula_val_x:3"})
    assert info["expert_plan"] == ["4.0"]
    with pytest.raises(data.FinanceDataError, match="no record on line 2"):
        data.get_task("formula_val_x:2")


def test_malformed_files_are_named_with_their_line(tmp_path, monkeypatch):
    write_jsonl(tmp_path / "formula_bad.jsonl", [{"context": "Q", "target": "1"}, "{not json"])
    write_jsonl(tmp_path / "formula_worse.jsonl", [{"context": "Q", "target": 1}])
    with pytest.raises(data.FinanceDataError, match=r"formula_bad.jsonl:2: not valid JSON"):
        data.read_jsonl(tmp_path / "formula_bad.jsonl")
    with pytest.raises(data.FinanceDataError, match=r"formula_worse.jsonl:1: expected an object with string fields"):
        data.read_jsonl(tmp_path / "formula_worse.jsonl")


def test_a_missing_finance_data_path_is_reported_not_fatal(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(data.DATA_VARIABLE, str(tmp_path / "missing"))
    assert set(FinanceProvider().task_sets()) == {"formula", "finer"}
    assert "neither a directory nor a file" in capsys.readouterr().err


@needs_samples
def test_oracle_scores_everything_on_the_shared_samples(monkeypatch):
    monkeypatch.setenv(data.DATA_VARIABLE, str(SAMPLES))
    sets = FinanceProvider().task_sets()
    assert sets["formula-data"].default_split == "formula_val_subset_300"
    for task_set, split, expected in (("formula-data", "formula_val_subset_300", 300),
                                      ("formula-data", "formula_train_subset_500", 500),
                                      ("finer-data", "finer_val_batched_500_samples", 500)):
        tasks = sets[task_set].tasks(split)
        assert len(tasks) == expected
        for task_id in tasks:
            task = data.get_task(task_id)
            assert score_answer(task.family, task.target, task.target).won
            assert not check(task.context, task.target)  # every gold answer is well-formed for its question
        for task_id in tasks[:5]:
            assert play(FinanceEnv(task_set, expert=True), OracleAgent(), task=task_id).result.won


# -- the real runner ---------------------------------------------------------------------

HARNESSES = ["base", "format-guard", "demos-k1", "demos-k2", "demos-k4", "demos-k8", "demos-k16"]


def test_runner_oracle_scores_one_under_every_finance_harness(tmp_path):
    host = load_host()
    assert {"oracle", "format-noisy"} <= set(host.agents.names())
    assert set(HARNESSES) <= set(host.harnesses.names())
    assert host.interventions.get("format-guard").modes == ("format_precision",)
    for task_set in ("formula", "finer"):
        tasks = FinanceProvider().task_sets()[task_set].tasks("test", 4)
        summary = run(host, RunConfig(env="finance", task_set=task_set, split="test", tasks=tasks, agent="oracle",
                                      harnesses=HARNESSES, out=str(tmp_path / task_set), strict=True))
        for harness in HARNESSES:
            figures = summary["harnesses"][harness]
            assert (figures["episodes"], figures["success_rate"], figures["mean_score"], figures["errors"]) == (4, 1.0, 1.0, 0)


@needs_samples
def test_runner_oracle_on_shared_samples_and_noisy_agent_with_retrieval(tmp_path, monkeypatch):
    monkeypatch.setenv(data.DATA_VARIABLE, str(SAMPLES))
    host = load_host()
    tasks = FinanceProvider().task_sets()["formula-data"].tasks("formula_val_subset_300", 12)
    summary = run(host, RunConfig(env="finance", task_set="formula-data", split="formula_val_subset_300", tasks=tasks,
                                  agent="oracle", harnesses=["base"], out=str(tmp_path / "oracle"), strict=True))
    assert summary["harnesses"]["base"]["success_rate"] == 1.0
    summary = run(host, RunConfig(env="finance", task_set="formula-data", split="formula_val_subset_300", tasks=tasks,
                                  agent="format-noisy", harnesses=["base", "format-guard", "demos-k4"],
                                  out=str(tmp_path / "noisy"), strict=True, agent_options={"prose": 0.5}))
    base, guard = summary["harnesses"]["base"], summary["harnesses"]["format-guard"]
    assert base["success_rate"] < 1.0 and guard["success_rate"] > base["success_rate"]
    assert guard["interventions"].get("format_repair", 0) > 0 and guard["verified_recoveries"] > 0
    assert summary["harnesses"]["demos-k4"]["errors"] == 0
    header = json.loads((tmp_path / "noisy/traces/base" / f"{tasks[0]}.jsonl").read_text().splitlines()[0])
    assert header["task_set"] == "formula-data" and len(header["data_hash"]) == 12


def test_a_malformed_file_is_skipped_with_its_line_named(tmp_path, monkeypatch, capsys):
    write_jsonl(tmp_path / "formula_good.jsonl", [{"context": "Q", "target": "1.0"}])
    write_jsonl(tmp_path / "formula_bad.jsonl", [{"context": "Q", "target": "1.0"}, "{broken"])
    monkeypatch.setenv(data.DATA_VARIABLE, str(tmp_path))
    assert list(FinanceProvider().task_sets()["formula-data"].splits) == ["formula_good"]
    assert "formula_bad.jsonl:2: not valid JSON" in capsys.readouterr().err


def test_loading_the_plugin_does_not_import_bm25s():
    code = ("import sys; from playground.host.manager import Host; "
            "Host(strict=True).load(); "
            "print('bm25s' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "False\n"


@pytest.mark.parametrize("task_set", ["formula", "finer"])
def test_finance_meets_the_env_contract(task_set):
    from playground.testing import check_env

    check_env(FinanceProvider(), task_set)
