"""`finance`: XBRL Finance (Formula and FiNER) as a playground env plugin, with its interventions.

Registers the env `finance` (task sets `formula`, `finer`, and `formula-data` /
`finer-data` from `FINANCE_DATA` files), the agents `oracle` and `format-noisy`, the
interventions `format-guard` and `demos-k1` ... `demos-k16` and a harness of the same
name for each, and declares the failure type `format_precision` with its labels. Nothing
heavy is imported here; `bm25s` is imported when a demonstration index is first built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from playground.core.hookspecs import hookimpl

if TYPE_CHECKING:
    from playground.api import Services
    from playground.envs.finance.demos import RetrievalDemos
    from playground.envs.finance.guard import FormatGuard
    from playground.envs.finance.params import DemosParams, FormatGuardParams

DEMO_BUDGETS = (1, 2, 4, 8, 16)


@hookimpl
def register_envs(register) -> None:
    """Register the `finance` env."""
    from playground.envs.finance.env import FinanceProvider

    register(FinanceProvider())


@hookimpl
def register_failure_labels(register) -> None:
    """Declare `format_precision` (a failure mode of its own) and the labels `format_check` reports."""
    from playground.core.labels import FailureLabel, FailureType
    from playground.envs.finance.format_check import FAILURE_TYPE, LABELS

    register(FailureType(FAILURE_TYPE, "format_precision", "the answer's format is not the one the question asks for"))
    for label in LABELS:
        register(FailureLabel(label, FAILURE_TYPE))


@hookimpl
def register_agents(register) -> None:
    """Register `oracle` and `format-noisy`."""
    from playground.envs.finance.agents import FormatNoisyAgent, OracleAgent

    register("oracle", OracleAgent, needs_expert=True,
             description="answers the env's expert plan's first action (Finance: the target); scores 100%")
    register("format-noisy", FormatNoisyAgent, needs_expert=True,
             description="Finance failure-injection instrument: the target with format failures at set rates")


def _format_guard(params: FormatGuardParams, services: Services) -> FormatGuard:
    from playground.envs.finance.guard import FormatGuard

    return FormatGuard(params)


def _demos(k: int) -> Callable[[DemosParams, Services], RetrievalDemos]:
    """The factory of `demos-k{k}`: `factory(params, services)`, `params` a `DemosParams`."""
    def factory(params: DemosParams, services: Services) -> RetrievalDemos:
        from playground.envs.finance.demos import RetrievalDemos

        return RetrievalDemos(k, params)

    return factory


@hookimpl
def register_interventions(register) -> None:
    """Register `format-guard` and the retrieval-demonstration interventions `demos-k1` ... `demos-k16`, with the
    parameters they read (`params`)."""
    from playground.envs.finance.params import DemosParams, FormatGuardParams

    register("format-guard", _format_guard, modes=("format_precision",), cost_unit="reasks", envs=("finance",),
             params_model=FormatGuardParams, effects=("reask",),
             description="Finance answer-format detector, re-ask with the exact format, format verifier")
    for k in DEMO_BUDGETS:
        register(f"demos-k{k}", _demos(k), modes=("format_precision",), cost_unit="k", cost=k, envs=("finance",),
                 params_model=DemosParams,
                 description=f"Finance: {k} BM25-retrieved solved train question{'s' if k > 1 else ''} "
                             "shown before answering")


@hookimpl
def register_harnesses(register) -> None:
    """Register a harness for each Finance intervention, named after it."""
    register("format-guard", ["format-guard"], description="Finance: format detector, re-ask and verifier")
    for k in DEMO_BUDGETS:
        register(f"demos-k{k}", [f"demos-k{k}"],
                 description=f"Finance: {k} retrieved demonstration{'s' if k > 1 else ''} per question")
