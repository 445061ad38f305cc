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
    """One tool call of a skeleton: its tool, the keys it checks first, whether it has the external effect."""

    tool: str
    checks: tuple[str, ...] = ()
    external: bool = False


@dataclass(frozen=True)
class Skeleton:
    """A subtask type: its tool calls, declared interface (reads, writes) and effect policy.

    The first step writes the skeleton's `writes`; a step with `external` issues its effect
    (compensable: a restore past it compensates it; irreversible: nothing can take it back).
    """

    name: str
    steps: tuple[Step, ...]
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    effect: str = "reversible"
    interface: bool = True  # False: the read and write sets are not declared (not certifiable)


@dataclass(frozen=True)
class Fault:
    """A controlled fault: the first execution of `skeleton`'s first step for the entity at
    `entity` (an index into the task's entities) writes a partial record; a later check of
    that key reports an observable failure of `kind`."""

    skeleton: str
    entity: int
    kind: str


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
        Skeleton("submit", (Step("submit", external=True), Step("confirm", ("submission.{e}",))), ("field.{e}",),
                 ("submission.{e}",), "irreversible"),
        Skeleton("notify", (Step("notify", ("slot.{e}",), external=True),), ("submission.{e}", "slot.{e}"),
                 ("invite.{e}",), "compensable"),
    ),
    ("calendar.{e}",),
    {"clean": None, "ordinary": Fault("fill", -1, "tool_error"), "committed": Fault("lookup", -1, "contract_violation"),
     "irreversible": Fault("submit", -1, "timeout")},
)

TRAVEL = Domain(
    "travel", "plan a trip per city: search, hold a seat, book it, write the itinerary",
    ("lisbon", "oslo", "kyoto", "quito", "accra"),
    (
        Skeleton("search", (Step("search"),), ("request.{e}",), ("options.{e}",)),
        Skeleton("hold", (Step("hold", external=True), Step("check_hold", ("hold.{e}",))), ("options.{e}",),
                 ("hold.{e}",), "compensable"),
        Skeleton("book", (Step("book", external=True), Step("confirm_booking", ("booking.{e}",))), ("hold.{e}",),
                 ("booking.{e}",), "irreversible"),
        Skeleton("itinerary", (Step("itinerary", ("options.{e}",)),), ("booking.{e}", "options.{e}"),
                 ("itinerary.{e}",)),
    ),
    ("request.{e}",),
    {"clean": None, "ordinary": Fault("hold", -1, "tool_error"), "committed": Fault("search", -1, "contract_violation"),
     "irreversible": Fault("book", -1, "timeout")},
)

ETL = Domain(
    "etl", "extract, transform, load and audit each table, stage it, then build the report",
    ("orders", "refunds", "customers", "invoices", "payments"),
    (
        Skeleton("extract", (Step("extract"),), ("source.{e}",), ("raw.{e}",)),
        Skeleton("transform", (Step("transform"), Step("validate", ("clean.{e}",))), ("raw.{e}",), ("clean.{e}",)),
        Skeleton("load", (Step("load", external=True),), ("clean.{e}",), ("warehouse.{e}",), "irreversible"),
        Skeleton("audit", (Step("audit", ("raw.{e}", "warehouse.{e}")),), ("warehouse.{e}", "raw.{e}"),
                 ("audit.{e}",)),
        Skeleton("stage", (Step("stage"),), ("clean.{e}",), ("staging",)),
    ),
    ("source.{e}",),
    {"clean": None, "ordinary": Fault("transform", -1, "tool_error"),
     "committed": Fault("extract", -1, "contract_violation"), "ambiguous": Fault("stage", -1, "contract_violation")},
    final=(Skeleton("report", (Step("report", ("staging",)),), ("staging",), ("report",)),),
)

DOMAINS = {domain.name: domain for domain in (SCHEDULE_FORM, TRAVEL, ETL)}
