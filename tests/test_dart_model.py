"""DART with a model in the loop (an OpenAI-compatible endpoint on 127.0.0.1): a run on a workflow domain whose agent's
own calls fail too, and DART's study columns over it; the bench study covers the five workflow domains."""

from __future__ import annotations

import json
import re

from playground.cli.main import main
from playground.core.study_file import load_study
from playground.envs.workflow.domains import DOMAINS
from playground.envs.workflow.env import Instance, WorkflowProvider
from playground.host.manager import Host
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


def test_the_bench_study_covers_the_five_domains():
    study = load_study(Host().load().studies.get("dart-bench").path)
    assert [grid.env for grid in study.grids] == [f"workflow:{name}" for name in DOMAIN_NAMES]
    assert list(WorkflowProvider().task_sets()) == list(DOMAIN_NAMES)


def test_a_run_with_an_endpoint_agent_whose_own_calls_fail_too(tmp_path, capsys):
    out = tmp_path / "run"
    with ScriptedChatServer(default=scripted_model) as server:
        code = main(["run", "--env", "workflow:navigation", "--split", "test", "--episodes", "15",
                     "--agent", "llm", "--llm-base-url", server.base_url, "--model", "m", "--agent-option",
                     "retries=0", "--max-steps", "60", "--harness", "dart", "--harness", "entry-only",
                     "--out", str(out)])
        asked = len(server.requests)
    assert code == 0 and asked > 0
    capsys.readouterr()
    assert main(["study", "table", str(out), "--reference", "dart", "--json"]) == 0
    rows = {row["harness"]: {**row, **row["figures"]} for row in json.loads(capsys.readouterr().out)}
    # the model's refused opening call in every episode; DART never crosses the irreversible purchase
    assert rows["dart"]["refused_calls"] >= 1 and not rows["dart"].get("unsafe")
    assert rows["entry-only"]["unsafe"] > 0  # the unchecked baseline does cross it
    assert rows["dart"]["success"] > rows["entry-only"]["success"]
