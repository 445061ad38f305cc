"""`alfworld`: ALFWorld on the real engine, plus DARC's action-validity guard.

Env task sets: `generated` (the embedded generator; the default unless ALFWORLD_DATA is
set) and `official` (the real games under $ALFWORLD_DATA). Interventions for action
validity: `action_pruning`, `type_saturation`, `loop_fallback`; for procedure breadth:
`alfworld_induction`, `alfworld_knowledge`, `alfworld_retrieval_fallback`; harnesses
`alfworld-guard` (the three guard interventions together) and `alfworld-sentry` (action
pruning under Sentry); the agent `guard-top1` (the guard's top command, no model).
alfworld and textworld are imported only when an env is made or a guard runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from playground.core.hookspecs import hookimpl
from playground.envs.alfworld.provider import AlfWorldProvider

if TYPE_CHECKING:
    from playground.api import Services
    from playground.envs.alfworld.interventions import ActionPruning, LoopFallback, TypeSaturation
    from playground.envs.alfworld.params import GuardParams, ProceduralParams
    from playground.envs.alfworld.procedural import ProceduralHelp

# Each intervention factory is called `factory(params, services)`: `params` its declared model's instance.


def _action_pruning(params: GuardParams, services: Services) -> ActionPruning:
    from playground.envs.alfworld.interventions import ActionPruning

    return ActionPruning(params)


def _type_saturation(params: GuardParams, services: Services) -> TypeSaturation:
    from playground.envs.alfworld.interventions import TypeSaturation

    return TypeSaturation(params)


def _loop_fallback(params: GuardParams, services: Services) -> LoopFallback:
    from playground.envs.alfworld.interventions import LoopFallback

    return LoopFallback(params)


def _procedural(source: str) -> Callable[[ProceduralParams, Services], ProceduralHelp]:
    def factory(params: ProceduralParams, services: Services) -> ProceduralHelp:
        from playground.envs.alfworld.procedural import ProceduralHelp

        return ProceduralHelp(source, params)

    return factory


def _guard_top1(**options):
    from playground.envs.alfworld.procedural import GuardTop1Agent

    return GuardTop1Agent(**options)


PROCEDURAL = {
    "alfworld_induction": "ALFWorld: after a rejected command, a rule induced from it (local induction; cheapest)",
    "alfworld_knowledge": "ALFWorld: after a rejected command, the command forms and the task type's procedure",
    "alfworld_retrieval_fallback": "ALFWorld: the induced rule, then the manual, then every admissible command",
}


@hookimpl
def register_envs(register) -> None:
    """Register the `alfworld` env."""
    register(AlfWorldProvider())


@hookimpl
def register_interventions(register) -> None:
    """Register the guard's interventions (DARC chooses among them, with Sentry's hard repair), with the parameters
    they read (`params`)."""
    from playground.envs.alfworld.params import GuardParams, ProceduralParams

    register("action_pruning", _action_pruning, modes=("action_validity",), cost_unit="steps", envs=("alfworld",),
             params_model=GuardParams, effects=("reask", "replace", "stop"),
             description="the DARC guard's top-12 admissible actions as the agent's view, a phase prompt every step, "
                         "and a re-ask with the top 12 after an invalid action")
    register("type_saturation", _type_saturation, modes=("action_validity",), cost_unit="steps", envs=("alfworld",),
             params_model=GuardParams, effects=("reask", "replace", "stop"),
             description="invalid or off-task action: re-ask with only the commands relevant to the task type")
    register("loop_fallback", _loop_fallback, modes=("action_validity",), cost_unit="steps", envs=("alfworld",),
             params_model=GuardParams, effects=("replace",),
             description="looping action: replace it with the best-ranked unexplored command")
    for name, description in PROCEDURAL.items():  # DARC's procedure-breadth family on ALFWorld
        register(name, _procedural(name), modes=("procedure_breadth",), cost_unit="steps", envs=("alfworld",),
                 params_model=ProceduralParams, effects=("reask",), description=description)


@hookimpl
def register_agents(register) -> None:
    """Register `guard-top1`: the guard's best-ranked command every step, no model."""
    register("guard-top1", _guard_top1, description="ALFWorld: plays the DARC guard's top-ranked command (no model)")


@hookimpl
def register_harnesses(register) -> None:
    """Register the guard's harnesses."""
    # Listed in the order they decide: pruning first, then the loop fallback, then type saturation.
    # Both use action pruning as a repair only (the full list shown, the phase prompt in re-asks), as they always have.
    repair_only = {"view": "full", "recovery_prompt": "repair"}
    register("alfworld-guard", ["action_pruning", "loop_fallback", "type_saturation"], params=repair_only,
             description="DARC's action-validity guard: pruning (as a repair), type saturation, loop fallback")
    register("alfworld-sentry", ["action_pruning", "sentry"], params=repair_only,
             description="Sentry with the DARC guard's ranked view as its hard repair")
