"""Sentry: test-time failure recovery with an external playbook of verified lessons.

Registers the `sentry` and `validity-guard` interventions and the harnesses `sentry`,
`sentry-no-soft`, `sentry-frozen`, `sentry-persistent`, `guard-only` and `sentry-llm`, and
declares the failure types its detectors report (`action_validity`, `progress`,
`grounding`) with their labels.
"""

from playground.core.hookspecs import hookimpl


def _sentry(params):
    from playground.plugins.sentry.harness import SentryPlugin

    return SentryPlugin(params)


def _validity_guard(params):
    from playground.plugins.sentry.harness import SentryPlugin

    return SentryPlugin({**params, "screen": False, "soft_repair": False})


@hookimpl
def register_failure_labels(register):
    """Declare the failure types and labels Sentry's detectors report (see `labels`)."""
    from playground.plugins.sentry.labels import LABELS, TYPES

    for declaration in (*TYPES, *LABELS):
        register(declaration)


@hookimpl
def register_interventions(register):
    """Register Sentry's interventions."""
    register("sentry", _sentry, modes=("action_validity", "procedure_breadth", "progress", "grounding"), cost_unit="steps",
             description="detectors, hard and soft repair, lesson retrieval, recovery verifier, verified lessons")
    register("validity-guard", _validity_guard, modes=("action_validity",), cost_unit="steps",
             description="hard repair of invalid actions only: ranked valid actions, rewrite, fallback")


@hookimpl
def register_harnesses(register):
    """Register Sentry's harness and its ablations."""
    register("sentry", ["sentry"], default=True, description="Sentry: hard + soft repair, retrieval, verified lesson updates")
    register("sentry-no-soft", ["sentry"], {"soft_repair": False}, description="Sentry with hard repair only")
    register("sentry-frozen", ["sentry"], {"update_playbook": False}, description="Sentry retrieving, never updating")
    register("sentry-persistent", ["sentry"], {"persistent": True},
             description="Sentry plus the whole playbook in context every step (exposure control)")
    register("guard-only", ["validity-guard"], description="the action-validity guard alone")
    register("sentry-llm", ["sentry"], {"detector": "both", "verifier": "llm", "summariser": "llm"},
             description="Sentry with LLM judges (detector, verifier, summariser); needs --param judge_base_url/judge_model or judge_local=true")
