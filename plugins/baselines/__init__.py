"""Baselines the papers compare against, as intervention plugins: ACE, Reflexion, AWM, ReasoningBank, a runtime
monitor, and ACE+Sentry.

One module per baseline (`ace`, `reflexion`, `awm`, `reasoningbank`, `monitor`); shared parts:
`episode` (what the memory baselines do alike in an episode), `trajectory` (the observable
record), `judge` (the model roles, with Sentry's judge options), `success` (how a memory
baseline tells a success), `store` (memory files beside the run's playbook), `params`. Each
registers an intervention and a harness of the same name, plus `ace-frozen` (ACE read-only:
the evaluation half of its offline mode), `reflexion:N` (N trials) and `ace-sentry` (ACE's
task playbook next to Sentry, composed as a list of interventions, Sentry referenced by its
registered name). MIPROv2 and GEPA (DSPy's prompt optimisers, extra `prompt-opt`) run as the command
`playground baselines optimise` (`prompt_search`, `cli`), and their frozen prompt deploys as the harness
`prompt-opt:PROMPT.json` (`prompt_opt`). See docs/methods/baselines.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from playground import hookimpl

if TYPE_CHECKING:
    from playground.api import Services
    from playground.plugins.baselines.ace import AcePlugin
    from playground.plugins.baselines.awm import AwmPlugin
    from playground.plugins.baselines.monitor import MonitorPlugin
    from playground.plugins.baselines.params import (
        AceParams,
        AwmParams,
        MonitorParams,
        PromptOptParams,
        ReasoningBankParams,
        ReflexionParams,
    )
    from playground.plugins.baselines.prompt_opt import PromptNote
    from playground.plugins.baselines.reasoningbank import ReasoningBankPlugin
    from playground.plugins.baselines.reflexion import ReflexionPlugin


# Each factory is called `factory(params, services)`: `params` its declared model's instance, validated by the host.


def _ace(params: AceParams, services: Services) -> AcePlugin:
    from playground.plugins.baselines.ace import AcePlugin

    return AcePlugin(params)


def _reflexion(params: ReflexionParams, services: Services) -> ReflexionPlugin:
    from playground.plugins.baselines.reflexion import ReflexionPlugin

    return ReflexionPlugin(params)


def _awm(params: AwmParams, services: Services) -> AwmPlugin:
    from playground.plugins.baselines.awm import AwmPlugin

    return AwmPlugin(params)


def _reasoningbank(params: ReasoningBankParams, services: Services) -> ReasoningBankPlugin:
    from playground.plugins.baselines.reasoningbank import ReasoningBankPlugin

    return ReasoningBankPlugin(params)


def _prompt_note(params: PromptOptParams, services: Services) -> PromptNote:
    from playground.plugins.baselines.prompt_opt import PromptNote

    return PromptNote(params)


def _monitor(params: MonitorParams, services: Services) -> MonitorPlugin:
    from playground.plugins.baselines.monitor import MonitorPlugin

    return MonitorPlugin(params)


@hookimpl
def register_interventions(register):
    """Register the baselines' interventions as points of comparison (`candidate=False`, no failure modes): methods
    that choose among interventions (DARC's library) leave them out. Each declares its parameters (`params`)."""
    from playground.plugins.baselines.params import (
        AceParams,
        AwmParams,
        MonitorParams,
        PromptOptParams,
        ReasoningBankParams,
        ReflexionParams,
    )

    register("ace", _ace, cost_unit="steps", candidate=False, params_model=AceParams,
             description="ACE: itemised playbook in context; reflector and curator grow it by delta updates")
    register("reflexion", _reflexion, cost_unit="steps", candidate=False, params_model=ReflexionParams,
             description="Reflexion: the reflections on earlier failed trials of the task in context")
    register("awm", _awm, cost_unit="steps", candidate=False, params_model=AwmParams,
             description="AWM: workflows induced from successful episodes in context")
    register("reasoningbank", _reasoningbank, cost_unit="steps", candidate=False, params_model=ReasoningBankParams,
             description="ReasoningBank: memory items from successes and failures, retrieved by BM25 similarity")
    register("monitor", _monitor, cost_unit="reasks", candidate=False, effects=("reask",), params_model=MonitorParams,
             description="runtime monitor: corrective feedback when a repeat, invalid-action or stall rule fires")
    register("prompt-opt", _prompt_note, cost_unit="steps", candidate=False, params_model=PromptOptParams,
             description="MIPROv2 / GEPA: an optimised prompt's instructions and demos as a standing note "
                         "(--harness prompt-opt:PROMPT.json)")


@hookimpl
def register_harnesses(register):
    """Register one harness per baseline, ACE's frozen half, and ACE+Sentry."""
    from playground.plugins.baselines.reflexion import NAME, TRIALS

    register("ace", ["ace"], description="ACE (online): playbook in context, reflect and curate after each episode")
    register("ace-frozen", ["ace"], {"ace_mode": "frozen"},
             description="ACE reading its playbook, never updating it (offline mode's evaluation)")
    register("reflexion", cascade=[NAME] * TRIALS,
             description=f"Reflexion: up to {TRIALS} trials, a self-reflection after each failed one")
    register("awm", ["awm"], description="AWM (online): workflows induced from successes, given on later tasks")
    register("reasoningbank", ["reasoningbank"],
             description="ReasoningBank: distilled memory items, the most similar one retrieved per task")
    register("monitor", ["monitor"], description="runtime monitor: feedback on repeats, invalid actions, stalls")
    register("ace-sentry", ["ace", "sentry"],
             description="ACE's task playbook in context plus Sentry's recovery (its own playbook, retrieved "
                         "only on soft repair)")


@hookimpl
def register_harness_loaders(register):
    """`reflexion:N`: Reflexion with N trials; `prompt-opt:PATH`: a MIPROv2 or GEPA prompt, frozen."""
    from playground.plugins.baselines.prompt_opt import PREFIX, prompt_harness
    from playground.plugins.baselines.reflexion import trials_harness

    register("reflexion:", trials_harness, description="Reflexion with N trials (reflexion:N, N from 1 to 20)")
    register(PREFIX, prompt_harness, description="a MIPROv2 or GEPA prompt (`playground baselines optimise`) "
                                                 "deployed frozen as a standing note (prompt-opt:PROMPT.json)")


@hookimpl
def register_commands(cli) -> None:
    """Add `playground baselines` (MIPROv2 and GEPA prompt optimisation)."""
    from playground.plugins.baselines.cli import baselines_group

    cli.add_command(baselines_group)


@hookimpl(wrapper=True)
def copy_playbook(source: str, target: str):
    """Around the playbook's own copy: carry what the baselines keep beside the playbook at `source` (ACE's curated
    playbook and delta log, Reflexion's reflections, AWM's workflows, ReasoningBank's items) to beside `target`,
    so a copy (`playbook copy`, a held-out grid's `playbook_from`) starts where the source's baselines stopped.
    Checked before the playbook is copied (a target holding other memories is refused, nothing written), written
    once it is."""
    from playground.plugins.baselines.memory import memories_to_copy, write_memories

    plan = memories_to_copy(source, target)
    copied = yield
    if copied:
        write_memories(target, plan)
    return copied
