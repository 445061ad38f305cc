"""Sentry: test-time failure recovery with an external playbook of verified lessons.

Registers the `sentry` and `validity-guard` interventions, the harness `sentry` (the paper's
configuration), its variants (`VARIANTS`: `sentry-rules`, `sentry-shortlist`, `sentry-judge-blocks`) and
ablations (`ABLATIONS`), `sentry-persistent`, `sentry-frozen-persistent`, `guard-only` and
`sentry-llm`, `sentry-detect-only`, the pipeline step `sentry.paired_forks` (each intervention point forked with
and without the repair, `paired.py`), its study table columns (`figures.py`: among them the
detectors and verifier measured against a failure-injection agent's injected failures), its studies (the
papers' tables and instrument sweeps, `studies/`), and declares the failure types its detectors report
(`action_validity`, `progress`, `grounding`) with their labels.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from playground.core.hookspecs import hookimpl

if TYPE_CHECKING:
    from playground.api import Services
    from playground.plugins.sentry.harness import SentryPlugin
    from playground.plugins.sentry.params import SentryParams, ValidityGuardParams


def _sentry(params: SentryParams, services: Services) -> SentryPlugin:
    from playground.plugins.sentry.harness import SentryPlugin

    return SentryPlugin(params, services)


def _validity_guard(params: ValidityGuardParams, services: Services) -> SentryPlugin:
    from playground.plugins.sentry.harness import SentryPlugin

    # the admissibility guard DARC's library ranks: its ranked view restricts the agent, and the top-ranked
    # action replaces one still invalid after the re-asks (`ValidityGuardParams`' defaults, unless the harness
    # sets these itself); never the detectors or the soft repair
    return SentryPlugin(params.model_copy(update={"screen": False, "soft_repair": False}), services)


@hookimpl
def register_failure_labels(register):
    """Declare the failure types and labels Sentry's detectors report (see `labels`)."""
    from playground.plugins.sentry.labels import LABELS, TYPES

    for declaration in (*TYPES, *LABELS):
        register(declaration)


@hookimpl
def register_instrument_judges(register):
    """Say how the failure-injection instrument answers Sentry's judge roles (`instrument.py`)."""
    # the roles' names as judges.py asks under them (DETECTOR_ROLE, ...; tests/test_instrument_judges.py asks by them)
    for role, answer, kind in (("sentry.detector", "answer_detection", "detector"),
                               ("sentry.need_check", "answer_need", "need_check"),
                               ("sentry.verifier", "answer_verdict", "verifier"),
                               ("sentry.summariser", "answer_lesson", "summariser")):
        register(role, _lazy_answer(answer), kind=kind)


def _lazy_answer(name: str):
    """The answerer `instrument.<name>`, imported when the instrument first answers (plugin loading stays light)."""
    def answer(request):
        from playground.plugins.sentry import instrument

        return getattr(instrument, name)(request)

    return answer


def _sentry_effects(params) -> tuple[str, ...]:
    """What Sentry's decisions may do under `params`: re-ask always (soft repair, termination guard); replace the
    action and give up only with the hard repair on, and replace a looped action when `bar_loops` is set."""
    hard = ("replace", "stop") if params.get("hard_repair", True) else ()
    return ("reask", *hard, *(("replace",) if params.get("bar_loops", 0) and not hard else ()))


@hookimpl
def register_interventions(register):
    """Register Sentry's interventions, with the parameters they read (`params.SentryParams`)."""
    from playground.plugins.sentry.params import SentryParams, ValidityGuardParams

    # The full Sentry is a progress/grounding intervention (its soft repair and lessons); only its hard repair,
    # registered alone as `validity-guard` (the admissibility guard), is admissible for action validity.
    register("sentry", _sentry, modes=("progress", "grounding"), cost_unit="steps", params_model=SentryParams,
             effects=_sentry_effects,
             description="detectors, hard and soft repair, lesson retrieval, recovery verifier, verified lessons")
    register("validity-guard", _validity_guard, modes=("action_validity",), cost_unit="steps",
             params_model=ValidityGuardParams, effects=("reask", "replace", "stop"),
             description="hard repair of invalid actions only: ranked valid actions, rewrite, fallback")


# The paper's configuration is `sentry` itself (LLM roles on the agent's own model for a model agent, guidance
# soft repairs); these are its variants and ablations.
VARIANTS = (
    ("sentry-rules", {"detector": "rules", "verifier": "rules", "summariser": "template", "need_judge": "rules"},
     "Sentry with rules for every judge role, also for a model agent (the default for scripted agents)"),
    ("sentry-shortlist", {"shortlist": True, "fallback": "best"},
     "Sentry whose repairs restrict the agent to a harness-picked list (actions not tried recently after a "
     "progress repair, the ranked valid actions after a hard repair) and replace a still-invalid action "
     "with the top-ranked one (a variant, not the paper's configuration)"),
    ("sentry-judge-blocks", {"judge_history": "blocks"},
     "Sentry whose LLM detector and need check see the steps from the last multiple of W (W to 2W-1 of them), "
     "so consecutive prompts share their prefix and a local model evaluates less (a variant: the paper's "
     "detector sees the last W)"),
    ("sentry-detect-only", {"hard_repair": False, "soft_repair": False, "update_playbook": False},
     "Sentry's detectors alone: nothing repaired or stored (the trajectory is base's; its detections measured)"),
)
ABLATIONS = (
    ("sentry-no-hard", {"hard_repair": False}, "Sentry without the hard repair (invalid actions go to the env)"),
    ("sentry-no-soft", {"soft_repair": False}, "Sentry with hard repair only"),
    ("sentry-no-verify", {"admission": "none"}, "Sentry writing a lesson from every soft repair, unverified"),
    ("sentry-no-need-check", {"need_check": False},
     "Sentry repairing every detection (no confidence threshold, no cooldown)"),
    ("sentry-early-admission", {"admission": "early"},
     "Sentry admitting a lesson after quiet_steps quiet steps and any grounded progress (the earlier rule)"),
    ("sentry-frozen", {"update_playbook": False}, "Sentry retrieving, never updating"),
    ("sentry-retrieval-random", {"retrieval": "random"}, "Sentry retrieving k lessons at random"),
    ("sentry-retrieval-unfiltered", {"retrieval": "any"}, "Sentry retrieving the newest lessons of any type"),
    ("sentry-retrieval-type-only", {"retrieval": "type"}, "Sentry retrieving by failure type only, no label match"),
    ("sentry-retrieval-off", {"retrieval": "off"},
     "Sentry retrieving no lessons (soft repairs carry advice and evidence only; verified lessons are still stored)"),
    ("sentry-k3", {"k": 3}, "Sentry retrieving at most 3 lessons"),
    ("sentry-k10", {"k": 10}, "Sentry retrieving at most 10 lessons"),
    ("sentry-bar-loops", {"bar_loops": 3}, "Sentry barring the looped actions for 3 steps after a progress repair"),
)


@hookimpl
def register_harnesses(register):
    """Register Sentry's harness and its ablations."""
    register("sentry", ["sentry"], default=True,
             description="Sentry: hard + soft repair, retrieval, verified lesson updates")
    for name, params, description in (*VARIANTS, *ABLATIONS):
        register(name, ["sentry"], params, description=description)
    register("sentry-persistent", ["sentry"], {"persistent": True},
             description="Sentry plus the whole playbook in context every step (exposure control)")
    register("sentry-frozen-persistent", ["sentry"], {"persistent": True, "update_playbook": False},
             description="sentry-frozen plus the whole playbook in context every step (frozen exposure control)")
    register("guard-only", ["validity-guard"], description="the action-validity guard alone")
    register("sentry-llm", ["sentry"], {"detector": "both", "verifier": "llm", "summariser": "llm"},
             description="Sentry with LLM judges (detector, verifier, summariser); "
                         "needs --param judge_base_url/judge_model or judge_local=true")


@hookimpl
def register_figures(register) -> None:
    """Add Sentry's study table columns: soft repairs and need-check declines per episode, and its detectors,
    verifier and lessons scored against injected failures."""
    from playground.plugins.sentry.figures import FIGURES

    for figure in FIGURES:
        register(figure)


@hookimpl
def register_pipeline_steps(register) -> None:
    """Sentry's paired forks as a study's pipeline step (`sentry.paired_forks`, `paired.py`)."""
    from playground.api import PipelineStep
    from playground.plugins.sentry.paired import PairedForksParams, paired_forks_step

    register(PipelineStep("sentry.paired_forks", "from each step where Sentry intervened, fork with its repair and "
                                                 "with the original proposal; local recovery judged blind",
                          paired_forks_step, PairedForksParams))


@hookimpl
def register_studies(register) -> None:
    """Ship the plugin's studies as data (Sentry's instrument sweeps): every `studies/*.toml` beside this module."""
    from pathlib import Path

    for path in sorted((Path(__file__).parent / "studies").glob("*.toml")):
        register(path)
