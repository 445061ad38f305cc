"""`playground new-plugin NAME`: write a ready-to-install plugin project.

The project holds one intervention (a guard that re-asks the agent when it repeats its
last action), a harness using it, a pytest file using the fixtures playground ships
(`tiny_env`, `scripted_agent`, `play_episode`), and a pyproject declaring the
`playground` entry point.
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
dependencies = ["playground"]

[project.entry-points.playground]
{name} = "{module}"

[tool.setuptools]
py-modules = ["{module}"]
"""

MODULE = '''\
"""{name}: a playground plugin. Re-asks the agent when it repeats its last action."""

from playground.core.hookspecs import hookimpl
from playground.core.payloads import Decision, Detection, InterventionMessage


class NoRepeatGuard:
    """Episode plugin: one object per episode, so state never leaks between episodes."""

    def __init__(self, params):
        self.message = params.get("message", "You just did that. Try something that makes progress.")

    @hookimpl
    def detect_failures(self, context, proposal):
        if context.history and proposal.action == context.history[-1].action:
            return Detection("{name}", "progress", ("repetition_or_looping",), 1.0,
                             evidence=f"repeated {{proposal.action!r}}")

    @hookimpl
    def decide_intervention(self, context, proposal, detections):
        mine = [d for d in detections if d.detector == "{name}"]
        if mine and context.attempt == 0:
            return Decision("{name}", "soft_repair", detections=tuple(mine),
                            message=InterventionMessage("soft_repair", self.message, "progress",
                                                        labels=("repetition_or_looping",)))


@hookimpl
def register_interventions(register):
    register("{name}", NoRepeatGuard, description="re-ask when the agent repeats itself",
             modes=("progress",), cost_unit="steps")


@hookimpl
def register_harnesses(register):
    register("{name}", interventions=["{name}"], description="base plus the no-repeat guard")
'''

TEST = '''\
from {module} import NoRepeatGuard


def test_guard_reasks_after_a_repeat(tiny_env, scripted_agent, play_episode):
    agent = scripted_agent(["look", "look"])
    result = play_episode(tiny_env, agent, plugins=[NoRepeatGuard({{}})], task="tiny-1")
    assert result.count("intervention") == 1
    assert agent.views[2].message.kind == "soft_repair"
    assert result.result.won
'''


def scaffold_plugin(name: str, parent: Path) -> Path:
    """Write the plugin project `name` under `parent` and return its folder."""
    if not re.fullmatch(r"[a-z][a-z0-9_-]*", name):
        raise ValueError(f"plugin name {name!r} must be lowercase letters, digits, '-' or '_', starting with a letter")
    module = name.replace("-", "_")
    target = Path(parent) / name
    if target.exists():
        raise ValueError(f"{target} already exists; choose another name or folder")
    target.mkdir(parents=True)
    values = {"name": name, "module": module, "dist": f"playground-{name}"}
    (target / "pyproject.toml").write_text(PYPROJECT.format(**values))
    (target / f"{module}.py").write_text(MODULE.format(**values))
    (target / f"test_{module}.py").write_text(TEST.format(**values))
    return target
