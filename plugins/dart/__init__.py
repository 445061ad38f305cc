"""DART: admissible rollback for structured tool agents (docs/methods/dart.md).

Registers the intervention and harness `dart`, its ablations (`ABLATIONS`), the baselines
`retry-only`, `coarse-retry`, `entry-only` and `checkpoint-latest` (intervention and harness
each), DART's columns in study tables (`figures.py`: replayed actions, unsafe admissions, false
blocks, ... from the traces and the env's ground truth) and its studies (`studies/*.toml`: the
bench, the noisy instrument, the stack with Sentry). The LangGraph baseline (`graph.py`) and the
step timing are `scripts/bench_dart_steps.py`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from playground.core.hookspecs import hookimpl
from playground.plugins.dart.variants import ABLATIONS, BASELINES

if TYPE_CHECKING:
    from playground.api import Services
    from playground.plugins.dart.params import SidecarParams


def _factory(class_name: str) -> Callable[[SidecarParams, Services], Any]:
    """The factory of sidecar `class_name`: `factory(params, services)`, `params` its declared model's instance
    (`DartParams` for `dart`, `SidecarParams` for the baselines)."""
    def make(params: SidecarParams, services: Services) -> Any:
        from playground.plugins.dart import sidecar

        return getattr(sidecar, class_name)(params)

    return make


@hookimpl
def register_interventions(register) -> None:
    """Register `dart` and the baselines, with the parameters they read (`params`)."""
    from playground.plugins.dart.params import DartParams, SidecarParams

    register("dart", _factory("Dart"), cost_unit="steps", envs=("workflow",), params_model=DartParams,
             effects=("rollback",),
             description="DART: localise, certify, align checkpoints, admit a rollback or rerun the whole task")
    for name, class_name, description in BASELINES:
        register(name, _factory(class_name), cost_unit="steps", envs=("workflow",), params_model=SidecarParams,
                 effects=("rollback",), description=description)


@hookimpl
def register_harnesses(register) -> None:
    """Register the `dart` harness, its ablations and the baselines."""
    register("dart", ["dart"], description="DART admissible rollback (structured tool workflows)")
    for name, params, description in ABLATIONS:
        register(name, ["dart"], params, description=description)
    for name, _, description in BASELINES:
        register(name, [name], description=f"baseline: {description}")


@hookimpl
def register_figures(register) -> None:
    """Add DART's study table columns (`figures.FIGURES`)."""
    from playground.plugins.dart.figures import FIGURES

    for figure in FIGURES:
        register(figure)


@hookimpl
def register_studies(register) -> None:
    """Ship the plugin's studies as data (Sentry and DART stacked on the workflow domains): every `studies/*.toml`
    beside this module."""
    from pathlib import Path

    for path in sorted((Path(__file__).parent / "studies").glob("*.toml")):
        register(path)
