"""Retrieval demonstrations: BM25 over the train split, never the query itself, deduplicated, k per intervention."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from playground.envs.finance import data, demos
from playground.envs.finance.agents import FormatNoisyAgent
from playground.envs.finance.demos import RetrievalDemos, count_demos, get_index, render, retrieve
from playground.envs.finance.env import FinanceEnv
from playground.testing import ScriptedAgent, play

SAMPLES = Path(__file__).resolve().parents[2] / "shared/data/finance"
needs_samples = pytest.mark.skipif(not (SAMPLES / "formula_train_subset_500.jsonl").exists(),
                                   reason=f"benchmark samples not found under {SAMPLES}")


@pytest.fixture(autouse=True)
def no_finance_data(monkeypatch):
    monkeypatch.delenv(data.DATA_VARIABLE, raising=False)


def test_a_train_question_never_retrieves_itself():
    index = get_index("formula", size=200)
    for task in index.tasks:
        found = retrieve(index, task.id, task.context, 16)
        assert len(found) == 16 and task.id not in {t.id for t in found}
        assert demos.normalise(task.context) not in {demos.normalise(t.context) for t in found}


def test_the_same_question_under_another_id_is_not_retrieved():
    index = get_index("finer", size=200)
    task = index.tasks[17]
    spaced = "  " + task.context.replace(" ", "  ") + "\n"
    found = retrieve(index, "finer-99999", spaced, 8)
    assert task.id not in {t.id for t in found}
    assert retrieve(index, "finer-99999", task.context, 1)[0].id != task.id


def test_the_pool_is_deduplicated_and_retrieval_is_ranked(tmp_path, monkeypatch):
    rows = [{"context": "Current ratio of a bakery with assets $10 and liabilities $5. Answer:", "target": "2.0"},
            {"context": "Current ratio of a bakery with assets $10 and liabilities $5. Answer:", "target": "2.0"},
            {"context": "Current  ratio of a bakery with assets $10 and liabilities $5.  Answer:", "target": "2.0"},
            {"context": "Dividend yield of a stock at $50 paying $2. Answer:", "target": "0.04"},
            {"context": "Sharpe ratio of a fund returning 10% with volatility 5%. Answer:", "target": "1.6"}]
    (tmp_path / "formula_train_t.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (tmp_path / "formula_val_t.jsonl").write_text(json.dumps(
        {"context": "Current ratio of a bakery with assets $12 and liabilities $6. Answer:", "target": "2.0"}) + "\n")
    monkeypatch.setenv(data.DATA_VARIABLE, str(tmp_path))
    index = get_index("formula-data")
    assert [t.id for t in index.tasks] == ["formula_train_t:1", "formula_train_t:4", "formula_train_t:5"]
    query = data.get_task("formula_val_t:1")
    found = retrieve(index, query.id, query.context, 16)
    assert [t.id for t in found][0] == "formula_train_t:1" and len(found) == 3
    # a train question whose twin was kept in the pool: the twin is the same question, so it is not shown either
    assert {t.id for t in retrieve(index, "formula_train_t:2", rows[1]["context"], 16)} == {"formula_train_t:4",
                                                                                           "formula_train_t:5"}


def test_render_shows_question_answer_pairs_and_counts_them():
    pool = data.train_pool("finer", size=3)
    text = render(pool)
    assert text.startswith(demos.HEADER) and count_demos((text,)) == 3 and count_demos(("unrelated",)) == 0
    assert "Tag list: [the tag list, as in your question]" in text  # FiNER demos do not repeat the tag list
    for task in pool:
        assert f"Answer: {task.target}" in text
    formula = render(data.train_pool("formula", size=1))
    assert "Answer:\nAnswer:" not in formula


@pytest.mark.parametrize("k", (1, 2, 4, 8, 16))
def test_each_budget_shows_k_demonstrations_once_per_episode(k):
    agent = ScriptedAgent(["five", "5"])
    plugin = RetrievalDemos(k, {})
    play(FinanceEnv("formula", expert=True), agent, plugins=[plugin], task="formula-20005")
    assert count_demos(agent.views[0].notes) == k
    assert agent.views[0].notes == agent.views[-1].notes
    (note,) = agent.views[0].notes
    assert data.get_task("formula-20005").context not in note


def test_a_task_set_without_train_split_names_the_fix(tmp_path, monkeypatch):
    (tmp_path / "finer_val_only.jsonl").write_text(json.dumps({"context": "Tags? A,B", "target": "A"}) + "\n")
    monkeypatch.setenv(data.DATA_VARIABLE, str(tmp_path))
    result = play(FinanceEnv("finer-data"), ScriptedAgent(["A"]), plugins=[RetrievalDemos(2, {})],
                  task="finer_val_only:1", strict=False)
    assert result.result.status == "error" and "demo_pool" in result.result.error
    result = play(FinanceEnv("finer-data"), ScriptedAgent(["A"]), plugins=[RetrievalDemos(2, {"demo_pool": "finer_val_only"})],
                  task="finer_val_only:1")
    assert result.result.status != "error"  # the only record is the query itself: nothing to show, no error


def test_demonstrations_lower_the_noisy_agents_error_rate():
    tasks = [f"formula-{s}" for s in range(20_000, 20_200)]

    def wrong(k: int) -> int:
        plugins = (lambda: [RetrievalDemos(k, {})]) if k else (lambda: [])
        return sum(not play(FinanceEnv("formula", expert=True), FormatNoisyAgent(prose=0.4), plugins=plugins(),
                            task=t).result.won for t in tasks)

    assert wrong(0) > wrong(4) > wrong(16)


@needs_samples
def test_shared_train_file_retrieval_never_returns_the_query(monkeypatch):
    monkeypatch.setenv(data.DATA_VARIABLE, str(SAMPLES))
    index = get_index("formula-data")
    assert len(index.tasks) == 500
    for task in index.tasks[:100]:
        found = retrieve(index, task.id, task.context, 8)
        assert len(found) == 8 and task.id not in {t.id for t in found}
    val = data.get_task("formula_val_subset_300:2")
    assert len(retrieve(index, val.id, val.context, 16)) == 16
