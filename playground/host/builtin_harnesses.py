"""Built-in harnesses that need no intervention plugin."""

from playground.core.hookspecs import hookimpl


@hookimpl
def register_harnesses(register) -> None:
    """Register `base`: the agent alone, no interventions."""
    register("base", interventions=(), default=True, description="the agent alone: no detectors, no repairs")
