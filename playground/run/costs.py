"""What an attempt under an intervention costs, in the intervention's own unit (used by methods that weigh cost
against success)."""

from __future__ import annotations

from playground.core.records import EpisodeRecord
from playground.host.registry import InterventionSpec

UNIT_COSTS = {
    "steps": lambda record: float(record.steps),
    "tokens": lambda record: float(record.prompt_tokens + record.completion_tokens),
    "reasks": lambda record: float(sum(record.interventions.values())),
}


def attempt_cost(specs: list[InterventionSpec], record: EpisodeRecord) -> float:
    """The cost of one attempt (an episode record) under the given interventions.

    A fixed `cost` registered with an intervention wins; otherwise the unit decides
    (steps, tokens or re-asks); with several interventions the costs add up; with none
    (the bare agent) the attempt costs its steps.
    """
    if not specs:
        return UNIT_COSTS["steps"](record)
    total = 0.0
    for spec in specs:
        if spec.cost is not None:
            total += spec.cost
        elif spec.cost_unit in UNIT_COSTS:
            total += UNIT_COSTS[spec.cost_unit](record)
        else:
            raise ValueError(f"intervention {spec.name!r} has cost unit {spec.cost_unit!r} but no fixed cost; "
                             f"units with a derived cost: {', '.join(UNIT_COSTS)}")
    return total
