"""`appworld`: AppWorld (API workflows across apps, as Python code cells) as a playground env plugin.

AppWorld runs in its own virtual environment behind its own HTTP server (it pins
pydantic 1); `playground envs setup appworld` creates that venv and builds the embedded
task set. Registers the env `appworld` (task sets `embedded` and, with `APPWORLD_ROOT`,
`data`), the procedural interventions `local_induction`, `auto_knowledge` and
`retrieval_fallback` (DARC's procedure-breadth family) and a harness for each, and
declares the labels of a failed code cell (of the `procedure` failure type).
Nothing of AppWorld is imported in this process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from playground.core.hookspecs import hookimpl

if TYPE_CHECKING:
    from playground.api import Services
    from playground.envs.appworld.interventions import ProceduralHelp
    from playground.envs.appworld.params import ProceduralParams

PROCEDURAL = {
    "local_induction": "AppWorld: a rule induced from the failing cell's error (cheapest)",
    "auto_knowledge": "AppWorld: the API docs relevant to the instruction and the failing call",
    "retrieval_fallback": "AppWorld: the induced rule, then relevant docs, then every API of the task's apps",
}


@hookimpl
def register_envs(register) -> None:
    """Register the `appworld` env."""
    from playground.envs.appworld.env import AppWorldProvider

    register(AppWorldProvider())


@hookimpl
def register_failure_labels(register) -> None:
    """Declare the labels of a failed or schema-invalid cell (`interventions.LABELS`)."""
    from playground.core.labels import FailureLabel
    from playground.envs.appworld.interventions import FAILURE_TYPE, LABELS

    for label in LABELS:
        register(FailureLabel(label, FAILURE_TYPE))


def _procedural(source: str) -> Callable[[ProceduralParams, Services], ProceduralHelp]:
    """The factory of one procedural intervention: `factory(params, services)`, `params` a `ProceduralParams`."""
    def factory(params: ProceduralParams, services: Services) -> ProceduralHelp:
        from playground.envs.appworld.interventions import ProceduralHelp

        return ProceduralHelp(source, params)

    return factory


@hookimpl
def register_interventions(register) -> None:
    """Register the three procedural interventions; an attempt under one costs its env steps (code cells run). They
    read the parameters `params.ProceduralParams` declares."""
    from playground.envs.appworld.params import ProceduralParams

    for name, description in PROCEDURAL.items():
        register(name, _procedural(name), modes=("procedure_breadth",), cost_unit="steps", envs=("appworld",),
                 params_model=ProceduralParams, effects=("reask",), description=description)


@hookimpl
def register_harnesses(register) -> None:
    """A harness per procedural intervention, named after it."""
    for name, description in PROCEDURAL.items():
        register(name, [name], description=description)
