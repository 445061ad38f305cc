"""The DART bench with a model in the loop (an OpenAI-compatible endpoint on 127.0.0.1) and its paired latency
tests; the bench over all five workflow domains."""

from __future__ import annotations

import re

import pytest
from playground.envs.workflow.domains import DOMAINS
from playground.envs.workflow.env import Instance
from playground.plugins.dart.bench import bench_tasks
from playground.plugins.dart.latency import format_latency, paired_latency

from playground.cli.main import main
from playground.envs.workflow.env import WorkflowProvider
from playground.run.stats import holm, sign_flip_p
from playground.testing.openai_server import ScriptedChatServer

DOMAIN_NAMES = ("schedule-form", "travel", "etl", "navigation", "diagnosis")


def plan_of(goal: str) -> list[str]:
    """Every tool call of the task the goal names, in plan order (the domain and entities are in its text)."""
    found = re.search(r"Run the (\S+) workflow .* for (\S+) and (\S+); every", goal)
    assert found, goal
    domain = DOMAINS[found.group(1)]
    instances = [Instance(s, e) for e in found.group(2, 3) for s in domain.skeletons]
    instances += [Instance(s, "all") for s in domain.final]
    return [inst.action(i) for inst in instances for i in range(len(inst.skeleton.steps))]


def scripted_model(body: dict) -> str:
    """A model that follows the plan from what its prompt shows, and makes its own mistake first: it opens with
    the plan's second call (refused: its input is missing). After a refusal naming the call due it makes that
    call; after a refusal for missing input it starts the plan over; otherwise it makes the call after its last."""
    prompt = body["messages"][-1]["content"]
    plan = plan_of(prompt.split("\n", 1)[0])
    current = prompt.split("Current observation:\n", 1)[1].split("\n\n", 1)[0]
    actions = re.findall(r"^> (.+)$", prompt, flags=re.M)
    due = re.search(r"refused, first (.+)\.$", current)
    if due:
        action = due.group(1)
    elif not actions:
        action = plan[1]
    elif "missing input" in current:
        action = plan[0]
    else:
        last = actions[-1]
        action = plan[min(plan.index(last) + 1, len(plan) - 1)] if last in plan else plan[0]
    return f"Thought: next call\nAction: {action}"


def test_the_bench_lists_the_five_domains(capsys):
    assert main(["dart", "bench", "--harness", "dart", "--repeats", "0", "--per-variant", "1"]) == 0
    headers = re.findall(r"^## (\S+)$", capsys.readouterr().out, flags=re.M)
    assert headers == list(DOMAIN_NAMES)
    assert len(bench_tasks(WorkflowProvider(), "diagnosis", "test", per_variant=1)) == 5  # one per variant


def test_the_bench_runs_with_an_endpoint_agent_whose_own_calls_fail_too(capsys):
    with ScriptedChatServer(default=scripted_model) as server:
        code = main(["dart", "bench", "--domain", "navigation", "--agent", "llm", "--llm-base-url", server.base_url,
                     "--model", "m", "--agent-option", "retries=0", "--per-variant", "1", "--max-steps", "60",
                     "--harness", "dart", "--harness", "entry-only", "--harness", "retry-only"])
        asked = len(server.requests)
    out = capsys.readouterr().out
    assert code == 0 and asked > 0
    assert "no step timing with a model agent" in out
    rows: dict[str, list[str]] = {}
    for line in out.splitlines():  # the first table's rows
        rows.setdefault(line.split(" ", 1)[0], line.split())
    # success, then unsafe/false-block and model errors: the model's refused opening call in each of 5 episodes
    assert rows["dart"][1] == "5/5" and rows["dart"][5] == "0/0" and int(rows["dart"][6]) >= 5
    assert rows["entry-only"][1] == "2/5" and rows["entry-only"][5] == "2/0"  # it crosses the irreversible purchase
    assert "## paired latency" in out and re.search(r"^retry-only\s+5\s", out, flags=re.M)


def test_the_bench_refuses_a_model_agent_without_its_settings(capsys):
    assert main(["dart", "bench", "--domain", "etl", "--agent", "llm"]) == 2
    assert "--llm-base-url" in capsys.readouterr().err


def test_paired_latency_uses_the_projects_statistics_and_holm_across_the_rows():
    tasks = [f"t{i}" for i in range(8)]
    dart = {t: 1.0 + i / 10 for i, t in enumerate(tasks)}
    slower = {t: dart[t] + 0.5 + i / 100 for i, t in enumerate(tasks)}  # slower on every task
    mixed = {t: dart[t] + (0.2 if i % 2 else -0.2) for i, t in enumerate(tasks)}  # no difference on average
    tests = paired_latency({"dart": dart, "retry-only": slower, "entry-only": mixed, "other": {"x": 1.0}})
    by_name = {t.other: t for t in tests}
    assert set(by_name) == {"retry-only", "entry-only"}  # no common task with dart: no row
    slow, flat = by_name["retry-only"], by_name["entry-only"]
    assert slow.pairs == 8 and slow.diff == pytest.approx(0.535) and 0 < slow.ci_low <= slow.ci_high
    assert slow.p == sign_flip_p([slower[t] - dart[t] for t in tasks]) == pytest.approx(2 / 256)
    assert [slow.p_holm, flat.p_holm] == holm([slow.p, flat.p]) and flat.p_holm == pytest.approx(1.0)
    lines = format_latency(tests)
    assert lines[0].split()[:4] == ["dart", "vs", "pairs", "dart"] and "s" in lines[0].split()[4]
    assert paired_latency({"retry-only": slower}) == [] and format_latency([]) == []
