"""`playground new-plugin NAME --kind intervention|env|agent`: write a ready-to-install plugin project.

Every project holds a module registering the thing through playground's hooks, a
pyproject declaring the `playground` entry point, a README, and a pytest file that passes
as written:
- `intervention` (default): a guard that re-asks the agent when it repeats one of its last
  actions, its parameters declared as a pydantic model (`params_model`), and a harness using
  it; its tests use the fixtures playground ships (`tiny_env`, `scripted_agent`,
  `play_episode`) and read the episode's typed events (`playground.core.events`);
- `env`: a small dial-and-lock world behind the env contract (`TextEnv`, `EnvProvider`,
  `TaskSet`, `action_kinds`, snapshots, an expert plan); its test runs `check_env` and
  wins with the expert plan;
- `agent`: an agent that tries untried admissible actions, those sharing words with the
  goal first; its tests play episodes on the tiny env and read their typed `StepEvent`s.
"""

from __future__ import annotations

import re
from pathlib import Path

PYPROJECT = """\
[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "0.1.0"
description = "{description}"
readme = "README.md"
dependencies = ["playground"]

[project.entry-points.playground]
{name} = "{module}"

[tool.setuptools]
py-modules = ["{module}"]
"""

MODULE = '''\
"""{name}: a playground plugin. Re-asks the agent when it repeats one of its last actions."""

from pydantic import BaseModel, ConfigDict, Field

from playground.core.hookspecs import hookimpl
from playground.core.payloads import Decision, Detection, InterventionMessage


class NoRepeatParams(BaseModel):
    """The harness parameters `{name}` reads: a run checks its `--param` values against them before playing."""

    model_config = ConfigDict(frozen=True)

    message: str = Field(default="You just did that. Try something that makes progress.",
                         description="the re-ask's text")
    window: int = Field(default=1, ge=1, le=10, description="how many of the last actions a repeat is looked for in")


class NoRepeatGuard:
    """Episode plugin: one object per episode, so state never leaks between episodes."""

    def __init__(self, params: NoRepeatParams, services=None):
        # the host validates the harness's and the run's parameters into the model (defaults filled in) and hands
        # over its services (run ids, the episode's seed, the playbook path, a scratch folder, the judge model)
        self.params = params
        self.services = services

    @hookimpl
    def detect_failures(self, context, proposal):
        recent = [turn.action for turn in context.history[-self.params.window:]]
        if proposal.action in recent:
            return Detection("{name}", "progress", ("repetition_or_looping",), 1.0,
                             evidence=f"repeated {{proposal.action!r}}")

    @hookimpl
    def decide_intervention(self, context, proposal, detections):
        mine = [d for d in detections if d.detector == "{name}"]
        if mine and context.attempt == 0:
            return Decision("{name}", "soft_repair", detections=tuple(mine),
                            message=InterventionMessage("soft_repair", self.params.message, "progress",
                                                        labels=("repetition_or_looping",)))


@hookimpl
def register_interventions(register):
    register("{name}", NoRepeatGuard, params_model=NoRepeatParams,
             description="re-ask when the agent repeats itself", modes=("progress",), cost_unit="steps")


@hookimpl
def register_harnesses(register):
    register("{name}", interventions=["{name}"], description="base plus the no-repeat guard")
'''

TEST = '''\
import pytest
from pydantic import ValidationError

from playground.core.events import InterventionEvent, StepEvent

from {module} import NoRepeatGuard, NoRepeatParams, register_interventions


def test_guard_reasks_after_a_repeat(tiny_env, scripted_agent, play_episode):
    agent = scripted_agent(["look", "look"])
    result = play_episode(tiny_env, agent, plugins=[NoRepeatGuard(NoRepeatParams())], task="tiny-1")
    [reask] = result.events_of(InterventionEvent)
    assert (reask.plugin, reask.kind, reask.step) == ("{name}", "soft_repair", 1)
    assert agent.views[2].message.kind == "soft_repair"
    assert agent.views[2].message.text == NoRepeatParams().message
    assert result.result.won


def test_window_and_message_are_the_guard_s_parameters(tiny_env, scripted_agent, play_episode):
    agent = scripted_agent(["look", "inventory", "look"])
    guard = NoRepeatGuard(NoRepeatParams(window=2, message="Not again."))
    result = play_episode(tiny_env, agent, plugins=[guard], task="tiny-1", params={{"max_reasks_per_step": 2}})
    assert [event.step for event in result.events_of(InterventionEvent)] == [2]
    assert agent.views[3].message.text == "Not again."
    assert [step.action for step in result.events_of(StepEvent)][:2] == ["look", "inventory"]


def test_the_parameters_are_declared_typed_and_bounded():
    registered = []
    register_interventions(lambda name, factory, **options: registered.append((name, options)))
    assert registered[0][1]["params_model"] is NoRepeatParams
    assert NoRepeatParams().window == 1
    with pytest.raises(ValidationError):
        NoRepeatParams(window=0)
    with pytest.raises(ValidationError):
        NoRepeatParams().window = 3  # frozen
'''


ENV_MODULE = '''\
"""{name}: a playground env plugin. Turn a dial to the task's number, then open the lock."""

import copy
import random

from playground.core.env import EnvProvider, TextEnv
from playground.core.hookspecs import hookimpl
from playground.core.task_sets import TaskSet, seed_range

KINDS = {{"look": "look", "turn dial up": "use", "turn dial down": "use", "open lock": "finish"}}


class DialEnv(TextEnv):
    """One task = one secret number (from the task's seed); the dial starts at 0."""

    can_snapshot = True

    def __init__(self, expert=False):
        super().__init__()
        self.expert = expert
        self.state = {{}}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        task = (options or {{}}).get("task", "{name}-0")
        target = random.Random(f"{name}:{{task}}").randint(1, 5)
        self.state = {{"task": task, "target": target, "dial": 0, "done": False, "won": False}}
        return self._describe(), self._info(valid=True)

    def step(self, action):
        s = self.state
        command = " ".join(action.lower().split())
        if s["done"] or command not in KINDS:  # an invalid action changes nothing
            return "Nothing happens.", 0.0, s["done"], False, self._info(valid=False)
        if command == "turn dial up":
            s["dial"] = min(s["dial"] + 1, 9)
        elif command == "turn dial down":
            s["dial"] = max(s["dial"] - 1, 0)
        elif command == "open lock":
            s["done"], s["won"] = True, s["dial"] == s["target"]
            return ("The lock opens." if s["won"] else "The lock stays shut."), float(s["won"]), True, False, \\
                self._info(valid=True)
        return self._describe(), 0.0, False, False, self._info(valid=True)

    def _describe(self):
        return f"A lock with a dial. The dial shows {{self.state['dial']}}."

    def _info(self, valid):
        s = self.state
        admissible = [] if s["done"] else sorted(KINDS)
        info = {{"goal": f"Set the dial to {{s['target']}} and open the lock.", "admissible_actions": admissible,
                "action_kinds": {{a: KINDS[a] for a in admissible}}, "valid_action": valid, "won": s["won"],
                "lost": s["done"] and not s["won"], "score": float(s["won"]), "max_score": 1.0, "task": s["task"]}}
        if self.expert:
            turn = "turn dial up" if s["dial"] < s["target"] else "turn dial down"
            info["expert_plan"] = [] if s["done"] else [turn] * abs(s["target"] - s["dial"]) + ["open lock"]
        return info

    def snapshot(self):
        return copy.deepcopy(self.state)

    def restore(self, snapshot):
        self.state = copy.deepcopy(snapshot)


class DialProvider(EnvProvider):
    name = "{name}"
    description = "turn a dial to the task's number, then open the lock"
    default_task_set = "default"

    def task_sets(self):
        return {{"default": TaskSet("default", "one secret number per task",
                                   {{"train": seed_range("{name}", 0), "dev": seed_range("{name}", 10_000),
                                    "test": seed_range("{name}", 20_000)}})}}

    def make(self, task_set, *, expert=False, **options):
        return DialEnv(expert=expert)


@hookimpl
def register_envs(register):
    register(DialProvider())
'''

ENV_TEST = '''\
from playground.testing import ScriptedAgent, check_env, play

from {module} import DialEnv, DialProvider


def test_env_meets_the_contract():
    check_env(DialProvider(), tasks=3, steps=6)


def test_expert_plan_wins_and_a_wrong_number_loses():
    assert play(DialEnv(expert=True), ScriptedAgent(), task="{name}-20000").result.won
    assert not play(DialEnv(), ScriptedAgent(["open lock"]), task="{name}-20000").result.won
'''

AGENT_MODULE = '''\
"""{name}: a playground agent plugin. Tries untried admissible actions, goal words first."""

import random
import re

from playground.core.hookspecs import hookimpl
from playground.core.payloads import Proposal


def words(text):
    return set(re.findall(r"[a-z]+", text.lower()))


class CuriousAgent:
    """Picks the admissible action it has tried least, preferring actions that share words with the goal."""

    def __init__(self, **options):
        unknown = set(options) - {{"seed_offset"}}
        if unknown:
            raise ValueError(f"agent '{name}' has no option(s) {{', '.join(sorted(unknown))}}")
        self.offset = int(options.get("seed_offset", 0))
        self.tried = {{}}
        self.rng = random.Random(0)

    def reset(self, task_id, seed):
        self.tried = {{}}
        self.rng = random.Random(f"{name}:{{seed + self.offset}}:{{task_id}}")

    def propose(self, view):
        actions = sorted(a for a in view.admissible_actions or () if not a.endswith("[...]"))
        if not actions:
            return Proposal(thought="Nothing left to try.", action="", finish=True)
        goal = words(view.goal)
        best = min(actions, key=lambda a: (self.tried.get(a, 0), -len(words(a) & goal), self.rng.random()))
        self.tried[best] = self.tried.get(best, 0) + 1
        return Proposal(thought=f"I have tried {{best!r}} least so far.", action=best)


@hookimpl
def register_agents(register):
    register("{name}", CuriousAgent, description="tries untried admissible actions, goal words first")
'''

AGENT_TEST = '''\
from playground.core.events import StepEvent
from playground.testing import play, tiny_env

from {module} import CuriousAgent


def test_agent_plays_a_tiny_episode_with_valid_actions():
    result = play(tiny_env(expert=False), CuriousAgent(), task="tiny-20000", max_steps=30)
    steps = result.events_of(StepEvent)
    assert steps and all(step.valid_action for step in steps)
    assert result.result.status in ("won", "truncated")


def test_agent_is_repeatable_by_seed():
    first = play(tiny_env(expert=False), CuriousAgent(), task="tiny-20001", seed=3).events_of(StepEvent)
    again = play(tiny_env(expert=False), CuriousAgent(), task="tiny-20001", seed=3).events_of(StepEvent)
    assert [step.action for step in first] == [step.action for step in again]
'''

README = """\
# {dist}

A playground {kind} plugin: {description}.

```bash
pip install -e .              # registers `{name}` through the `playground` entry point
playground plugins            # lists {name}
{try_it}
pytest                        # the plugin's own tests
```

`{module}.py` holds the code; edit it, then rerun the tests.
"""

KINDS = {
    "intervention": {"module": MODULE, "test": TEST, "description": "re-asks the agent when it repeats a recent action",
                     "try_it": "playground harnesses --params {name}   # the parameters it declares (NoRepeatParams)\n"
                               "playground run --env tiny --agent noisy --harness base --harness {name} "
                               "--param window=2"},
    "env": {"module": ENV_MODULE, "test": ENV_TEST,
            "description": "turn a dial to the task's number, then open the lock",
            "try_it": "playground run --env {name} --agent expert --harness base"},
    "agent": {"module": AGENT_MODULE, "test": AGENT_TEST,
              "description": "tries untried admissible actions, goal words first",
              "try_it": "playground run --env tiny --agent {name} --harness base"},
}


def scaffold_plugin(name: str, parent: Path, kind: str = "intervention") -> Path:
    """Write the plugin project `name` of `kind` (intervention, env or agent) under `parent`; return its folder."""
    if kind not in KINDS:
        raise ValueError(f"unknown plugin kind {kind!r}; choose from: {', '.join(KINDS)}")
    if not re.fullmatch(r"[a-z][a-z0-9_-]*", name):
        raise ValueError(f"plugin name {name!r} must be lowercase letters, digits, '-' or '_', starting with a letter")
    module = name.replace("-", "_")
    target = Path(parent) / name
    if target.exists():
        raise ValueError(f"{target} already exists; choose another name or folder")
    target.mkdir(parents=True)
    spec = KINDS[kind]
    values = {"name": name, "module": module, "dist": f"playground-{name}", "kind": kind,
              "description": spec["description"]}
    values["try_it"] = spec["try_it"].format(**values)
    (target / "pyproject.toml").write_text(PYPROJECT.format(**values))
    (target / "README.md").write_text(README.format(**values))
    (target / f"{module}.py").write_text(spec["module"].format(**values))
    (target / f"test_{module}.py").write_text(spec["test"].format(**values))
    return target
