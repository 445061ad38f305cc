"""The workflow domains: subtask skeletons with declared interfaces and effect policies.

A domain lists its skeletons in the order one entity goes through them, the entities its
tasks draw from, skeletons run once after every entity (`final`), and its fault variants.
Keys in `reads`, `writes` and `checks` are templates: `{e}` is the entity.
"""

from __future__ import annotations

from dataclasses import dataclass, field

EFFECTS = ("reversible", "compensable", "irreversible")


@dataclass(frozen=True)
class Step:
    """One tool call of a skeleton: its tool, the keys it checks first, whether it has the external effect,
    and the keys it writes (when no step of the skeleton names any, the first step writes the skeleton's)."""

    tool: str
    checks: tuple[str, ...] = ()
    external: bool = False
    writes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Skeleton:
    """A subtask type: its tool calls, declared interface (reads, writes) and effect policy.

    The first step writes the skeleton's `writes` unless steps name their own; a step with
    `external` issues its effect (compensable: a restore past it compensates it; irreversible:
    nothing can take it back). `commits` are the step counts inside the instance after which
    its work so far is stable (written, checked, its effects final): in-instance commit points.
    """

    name: str
    steps: tuple[Step, ...]
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    effect: str = "reversible"
    interface: bool = True  # False: the read and write sets are not declared (not certifiable)
    commits: tuple[int, ...] = ()

    def step_writes(self, index: int) -> tuple[str, ...]:
        """The key templates the `index`-th step writes."""
        if any(step.writes for step in self.steps):
            return self.steps[index].writes
        return self.writes if index == 0 else ()

    def step_effect(self, index: int) -> str:
        """The effect policy of the `index`-th step: the skeleton's for its external step, else reversible."""
        return self.effect if self.steps[index].external else "reversible"


@dataclass(frozen=True)
class Fault:
    """A controlled fault: the first execution of `skeleton`'s `step`-th step (default its first)
    for the entity at `entity` (an index into the task's entities) writes a partial record; a
    later check of that key reports an observable failure of `kind`."""

    skeleton: str
    entity: int
    kind: str
    step: int = 0


@dataclass(frozen=True)
class Domain:
    name: str
    description: str
    entities: tuple[str, ...]
    skeletons: tuple[Skeleton, ...]
    inputs: tuple[str, ...]  # keys present at the start, per entity
    variants: dict[str, Fault | None] = field(default_factory=dict)
    final: tuple[Skeleton, ...] = ()


SCHEDULE_FORM = Domain(
    "schedule-form", "schedule a meeting per person, fill and submit their form, send the invitation",
    ("alice", "bob", "carol", "dave", "erin"),
    (
        Skeleton("lookup", (Step("lookup"),), ("calendar.{e}",), ("slot.{e}",)),
        Skeleton("fill", (Step("fill"), Step("check", ("field.{e}",))), ("slot.{e}",), ("field.{e}",)),
        Skeleton("submit", (Step("submit", external=True, writes=("submission.{e}",)),
                            Step("confirm", ("submission.{e}",)), Step("receipt", writes=("receipt.{e}",)),
                            Step("file_receipt", ("receipt.{e}",))),
                 ("field.{e}",), ("submission.{e}", "receipt.{e}"), "irreversible", commits=(2,)),
        Skeleton("notify", (Step("notify", ("slot.{e}",), external=True),), ("submission.{e}", "slot.{e}"),
                 ("invite.{e}",), "compensable"),
    ),
    ("calendar.{e}",),
    {"clean": None, "ordinary": Fault("fill", -1, "tool_error"), "committed": Fault("lookup", -1, "contract_violation"),
     "irreversible": Fault("submit", -1, "timeout"), "late": Fault("submit", -1, "tool_error", step=2)},
)

TRAVEL = Domain(
    "travel", "plan a trip per city: search, hold a seat, book it, write the itinerary",
    ("lisbon", "oslo", "kyoto", "quito", "accra"),
    (
        Skeleton("search", (Step("search"),), ("request.{e}",), ("options.{e}",)),
        Skeleton("hold", (Step("hold", external=True), Step("check_hold", ("hold.{e}",))), ("options.{e}",),
                 ("hold.{e}",), "compensable"),
        Skeleton("book", (Step("book", external=True, writes=("booking.{e}",)),
                          Step("confirm_booking", ("booking.{e}",)), Step("ticket", writes=("ticket.{e}",)),
                          Step("check_ticket", ("ticket.{e}",))),
                 ("hold.{e}",), ("booking.{e}", "ticket.{e}"), "irreversible", commits=(2,)),
        Skeleton("itinerary", (Step("itinerary", ("options.{e}",)),), ("booking.{e}", "options.{e}"),
                 ("itinerary.{e}",)),
    ),
    ("request.{e}",),
    {"clean": None, "ordinary": Fault("hold", -1, "tool_error"), "committed": Fault("search", -1, "contract_violation"),
     "irreversible": Fault("book", -1, "timeout"), "late": Fault("book", -1, "tool_error", step=2)},
)

ETL = Domain(
    "etl", "extract, transform, load and audit each table, stage it, then build the report",
    ("orders", "refunds", "customers", "invoices", "payments"),
    (
        Skeleton("extract", (Step("extract"),), ("source.{e}",), ("raw.{e}",)),
        Skeleton("transform", (Step("transform"), Step("validate", ("clean.{e}",))), ("raw.{e}",), ("clean.{e}",)),
        Skeleton("load", (Step("load", external=True, writes=("warehouse.{e}",)),
                          Step("verify_load", ("warehouse.{e}",)), Step("index", writes=("index.{e}",)),
                          Step("check_index", ("index.{e}",))),
                 ("clean.{e}",), ("warehouse.{e}", "index.{e}"), "irreversible", commits=(2,)),
        Skeleton("audit", (Step("audit", ("raw.{e}", "warehouse.{e}")),), ("warehouse.{e}", "raw.{e}"),
                 ("audit.{e}",)),
        Skeleton("stage", (Step("stage"),), ("clean.{e}",), ("staging",)),
    ),
    ("source.{e}",),
    {"clean": None, "ordinary": Fault("transform", -1, "tool_error"),
     "committed": Fault("extract", -1, "contract_violation"), "ambiguous": Fault("stage", -1, "contract_violation"),
     "late": Fault("load", -1, "tool_error", step=2)},
    final=(Skeleton("report", (Step("report", ("staging",)),), ("staging",), ("report",)),),
)

NAVIGATION = Domain(
    "navigation", "navigate each leg of a route: plan it, quote the fare, reserve a seat, buy the ticket, "
    "write the directions",
    ("harbour", "airport", "museum", "stadium", "campus"),
    (
        Skeleton("route", (Step("route"),), ("origin.{e}",), ("route.{e}",)),
        Skeleton("fare", (Step("quote"), Step("check_fare", ("fare.{e}",))), ("route.{e}",), ("fare.{e}",)),
        Skeleton("reserve", (Step("reserve", external=True), Step("check_seat", ("seat.{e}",))), ("fare.{e}",),
                 ("seat.{e}",), "compensable"),
        Skeleton("purchase", (Step("purchase", external=True, writes=("ticket.{e}",)),
                              Step("confirm_ticket", ("ticket.{e}",)), Step("boarding_pass", writes=("pass.{e}",)),
                              Step("check_pass", ("pass.{e}",))),
                 ("seat.{e}",), ("ticket.{e}", "pass.{e}"), "irreversible", commits=(2,)),
        Skeleton("directions", (Step("directions", ("route.{e}",)),), ("ticket.{e}", "route.{e}"),
                 ("directions.{e}",)),
    ),
    ("origin.{e}",),
    {"clean": None, "ordinary": Fault("fare", -1, "tool_error"), "committed": Fault("route", -1, "contract_violation"),
     "irreversible": Fault("purchase", -1, "timeout"), "late": Fault("purchase", -1, "tool_error", step=2)},
)

DIAGNOSIS = Domain(
    "diagnosis", "work up each patient: intake, order tests, read the results, diagnose, prescribe, discharge",
    ("ana", "ben", "chen", "dara", "eli"),
    (
        Skeleton("intake", (Step("intake"),), ("record.{e}",), ("history.{e}",)),
        Skeleton("order", (Step("order_tests", external=True), Step("check_order", ("order.{e}",))),
                 ("history.{e}",), ("order.{e}",), "compensable"),
        Skeleton("results", (Step("read_results"), Step("validate_results", ("results.{e}",))), ("order.{e}",),
                 ("results.{e}",)),
        Skeleton("diagnose", (Step("diagnose"), Step("review", ("diagnosis.{e}",))), ("results.{e}", "history.{e}"),
                 ("diagnosis.{e}",)),
        Skeleton("prescribe", (Step("prescribe", external=True, writes=("prescription.{e}",)),
                               Step("confirm_prescription", ("prescription.{e}",)),
                               Step("label", writes=("label.{e}",)),
                               Step("check_label", ("label.{e}",))),
                 ("diagnosis.{e}",), ("prescription.{e}", "label.{e}"), "irreversible", commits=(2,)),
        Skeleton("discharge", (Step("discharge", ("history.{e}",)),), ("prescription.{e}", "history.{e}"),
                 ("summary.{e}",)),
    ),
    ("record.{e}",),
    {"clean": None, "ordinary": Fault("results", -1, "tool_error"),
     "committed": Fault("intake", -1, "contract_violation"), "irreversible": Fault("prescribe", -1, "timeout"),
     "late": Fault("prescribe", -1, "tool_error", step=2)},
)

DOMAINS = {domain.name: domain for domain in (SCHEDULE_FORM, TRAVEL, ETL, NAVIGATION, DIAGNOSIS)}
