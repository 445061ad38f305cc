"""The failure-label registry: what each failure type and label means, declared once.

A failure has a type (`FailureType`, e.g. `progress`) and one or more retrieval labels
(`FailureLabel`, e.g. `planning_stall`). A type says which failure mode it belongs to
(the names interventions give in `modes`); a label says what a repair advises for it,
the trigger of a lesson about it and what counts as resolved. Plugins declare types and
labels through the `register_failure_labels` hook; the host collects them into its
`LabelRegistry`, which detectors, repairs, the playbook and mode diagnosis read.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from playground.core.errors import PlaygroundError


@dataclass(frozen=True)
class FailureType:
    """A failure type and the failure mode it belongs to."""

    name: str
    mode: str  # the failure mode (as in an intervention's `modes`) a failure of this type counts towards
    description: str = ""
    plugin: str = ""  # filled in by the host: the plugin that declared it


@dataclass(frozen=True)
class FailureLabel:
    """A retrieval label of one failure type, and what a repair and a lesson say about it."""

    name: str
    failure_type: str
    advice: str = ""  # the general advice a repair gives for this failure
    trigger: str = ""  # the trigger of a lesson about it; `{verb}` stands for the failing action's verb
    resolved_when: str = ""  # when a repair of it counts as resolved, completing "it counts as resolved when ..."
    plugin: str = ""  # filled in by the host: the plugin that declared it


class UnknownFailure(PlaygroundError, ValueError):
    """A failure type or label that is not in the registry."""


class DuplicateFailure(PlaygroundError, ValueError):
    """A failure type or label declared a second time."""


class LabelRegistry:
    """The failure types and labels the loaded plugins declared; each name is declared once."""

    def __init__(self, declarations: tuple[FailureType | FailureLabel, ...] | list = ()) -> None:
        self._types: dict[str, FailureType] = {}
        self._labels: dict[str, FailureLabel] = {}
        for item in declarations:
            self.add(item)

    def add(self, item: FailureType | FailureLabel) -> None:
        """Declare a type or a label; DuplicateFailure names the plugin that declared it first."""
        if not isinstance(item, (FailureType, FailureLabel)):
            raise TypeError(f"expected a FailureType or FailureLabel, got {type(item).__name__}")
        kind, table = ("failure type", self._types) if isinstance(item, FailureType) else ("failure label",
                                                                                           self._labels)
        if not isinstance(item.name, str) or not item.name:
            raise ValueError(f"{kind} name must be a non-empty string, got {item.name!r}")
        if item.name in table:
            raise DuplicateFailure(f"{kind} {item.name!r} is already declared by plugin {table[item.name].plugin!r}")
        if isinstance(item, FailureType):
            self._types[item.name] = item
        else:
            self._labels[item.name] = item

    def remove_from_plugin(self, plugin: str) -> None:
        """Forget every type and label `plugin` declared."""
        for table in (self._types, self._labels):
            for name in [n for n, item in table.items() if item.plugin == plugin]:
                del table[name]

    def remove_label(self, name: str) -> None:
        """Forget the label `name`."""
        del self._labels[name]

    # -- reading -------------------------------------------------------------------------

    def types(self) -> list[str]:
        """The declared failure types, sorted."""
        return sorted(self._types)

    def labels_of(self, failure_type: str) -> set[str]:
        """The labels of `failure_type`; UnknownFailure names the types when it is not declared."""
        self.check(failure_type)
        return {label.name for label in self._labels.values() if label.failure_type == failure_type}

    def get(self, label: str) -> FailureLabel | None:
        """The label `label`, or None when no plugin declared it."""
        return self._labels.get(label)

    def __contains__(self, label: object) -> bool:
        return label in self._labels

    def __iter__(self):
        """The declared labels, sorted by name."""
        return iter(self._labels[name] for name in sorted(self._labels))

    def failure_type(self, name: str) -> FailureType | None:
        """The declared failure type `name`, or None when no plugin declared it."""
        return self._types.get(name)

    def mode_of(self, failure_type: str) -> str:
        """The failure mode `failure_type` belongs to (the type's own name when it is not declared)."""
        declared = self._types.get(failure_type)
        return declared.mode if declared else failure_type

    def orphans(self) -> list[FailureLabel]:
        """The labels whose failure type no plugin declared."""
        return [label for label in self if label.failure_type not in self._types]

    def check(self, failure_type: str, labels: Iterable[str] = ()) -> None:
        """Raise UnknownFailure naming the unknown type or label and the valid choices."""
        if failure_type not in self._types:
            raise UnknownFailure(f"unknown failure type {failure_type!r}; choose from: {', '.join(self.types())}")
        known = {label.name for label in self._labels.values() if label.failure_type == failure_type}
        unknown = [label for label in labels if label not in known]
        if unknown:
            raise UnknownFailure(f"unknown label(s) {', '.join(map(repr, unknown))} for failure type {failure_type!r}; "
                                 f"choose from: {', '.join(sorted(known))}")
