"""The harness parameters (`--param KEY=VALUE`) a run may set: the episode loop's own (`LoopParams`) and those each
intervention declares as a pydantic model (`register(..., params_model=MODEL)`). Checks a run's values against the
declarations, and describes a harness's parameters (`playground harnesses --params NAME`).

One harness's parameters are shared by all its interventions (in a stack `A+B`, each part's reach only its own
interventions; `HarnessSpec.params_for`), so each intervention checks only the keys it declares; a key that no
intervention of the run's harnesses declares, nor the loop, is unknown. An intervention registered without a
declaration reads what it likes: a run with one accepts any key (it is opaque).
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from playground.core.loop import LOOP_PARAMS, MAX_REASKS_LIMIT, LoopParams
from playground.host.manager import Host
from playground.host.registry import HarnessSpec
from playground.run.config import RunConfigError
from playground.run.harnesses import resolve_harness, resolve_intervention

LOOP = "the episode loop"  # where the loop's parameters come from, in a listing


def check_loop_params(params: dict, harness: str) -> None:
    """RunConfigError unless the loop's own parameters hold: `max_reasks_per_step` a whole number 0..100 (2.0 will
    do), the others as `LoopParams` declares them."""
    value = params.get("max_reasks_per_step", LoopParams.model_fields["max_reasks_per_step"].default)
    try:
        number = float(value)
        whole = number.is_integer()
    except (TypeError, ValueError, OverflowError):
        whole = False
    if not whole or not 0 <= number <= MAX_REASKS_LIMIT:
        raise RunConfigError(f"harness {harness!r}: max_reasks_per_step must be a whole number from 0 to "
                             f"{MAX_REASKS_LIMIT}, got {value!r}")
    problem = declaration_problem(LOOP, LoopParams, {key: value for key, value in params.items()
                                                     if key != "max_reasks_per_step"})
    if problem:
        raise RunConfigError(f"harness {harness!r}: {problem}")


@dataclass(frozen=True)
class Declared:
    """One intervention of a harness and its parameter declaration (None: it declares none and is opaque)."""

    intervention: str
    model: type[BaseModel] | None


def declarations(host: Host, spec: HarnessSpec) -> list[Declared]:
    """Each intervention a harness uses (every attempt's, in the order first used) with its declaration.

    KeyError or ValueError names an intervention that does not resolve.
    """
    names = dict.fromkeys(name for attempt in spec.attempts for name in attempt)
    return [Declared(name, resolve_intervention(host, name).params_model) for name in names]


def check_params(host: Host, harnesses: list[tuple[str, HarnessSpec]], params: dict[str, Any]) -> None:
    """Check a run's `params` (its --param values) against the declarations of its harnesses' interventions.

    RunConfigError for a key that neither the loop nor any of the run's interventions declares
    (unless one of them is opaque), naming the harnesses and the known keys; then, harness by harness
    (its registered parameters overridden by `params`), for a value that breaks the loop's rules or an
    intervention's declaration, naming the harness, the intervention, the key and the rule.
    """
    known: set[str] = set(LOOP_PARAMS)
    opaque = False
    declared = {harness: declarations(host, spec) for harness, spec in harnesses}
    for found in declared.values():
        for one in found:
            if one.model is None:
                opaque = True
            else:
                known |= set(one.model.model_fields)
    unknown = sorted(set(params) - known)
    if unknown and not opaque:
        raise RunConfigError(f"unknown --param {', '.join(map(repr, unknown))} for harness(es) "
                             f"{', '.join(harness for harness, _ in harnesses)}; known: {', '.join(sorted(known))}")
    for harness, spec in harnesses:
        check_loop_params({**spec.params, **params}, harness)
        for one in declared[harness]:
            if one.model is not None:
                problem = declaration_problem(one.intervention, one.model, {**spec.params_for(one.intervention),
                                                                            **params})
                if problem:
                    raise RunConfigError(f"harness {harness!r}: {problem}")


def declaration_problem(intervention: str, model: type[BaseModel], values: dict[str, Any]) -> str | None:
    """Why `values` (a harness's parameters) break `intervention`'s declaration `model`, or None.

    Only the keys the model declares are checked, strictly (JSON's types: an int is a whole
    number, a bool true or false, a str a string; a float takes a whole number too).
    """
    given = {key: value for key, value in values.items() if key in model.model_fields}
    try:
        model.model_validate(given, strict=True)
    except ValidationError as exc:
        error = exc.errors()[0]
        key = error["loc"][0] if error["loc"] else None
        if not isinstance(key, str) or key not in model.model_fields:
            return f"{intervention} parameters: {error['msg']}"
        rule = field_rule(model.model_fields[key])
        if error["type"] == "missing":
            return f"{intervention} needs the parameter {key!r} ({rule})"
        return f"{intervention} parameter {key!r} must be {rule}, got {given[key]!r}"
    return None


def type_members(annotation: Any) -> tuple[list[Any], bool]:
    """The non-None members of a field's type, and whether None (JSON null) is allowed."""
    if get_origin(annotation) in (Union, types.UnionType):
        members = list(get_args(annotation))
        return [m for m in members if m is not type(None)], type(None) in members
    return [annotation], False


def _bounds(field: FieldInfo) -> dict[str, Any]:
    """A field's numeric bounds: {"ge" | "gt" | "le" | "lt": value}."""
    found: dict[str, Any] = {}
    for item in field.metadata:
        for name, kind in (("ge", annotated_types.Ge), ("gt", annotated_types.Gt), ("le", annotated_types.Le),
                           ("lt", annotated_types.Lt)):
            if isinstance(item, kind):
                found[name] = getattr(item, name)
    return found


def _number_rule(noun: str, bounds: dict[str, Any]) -> str:
    """"a number from 0 to 100", "a non-negative whole number", ... for a numeric field's bounds."""
    if bounds == {"ge": 0}:
        return f"a non-negative {noun}"
    if "ge" in bounds and "le" in bounds and len(bounds) == 2:
        return f"a {noun} from {bounds['ge']} to {bounds['le']}"
    words = {"ge": "of at least", "gt": "greater than", "le": "of at most", "lt": "less than"}
    limits = [f"{words[name]} {value}" for name, value in bounds.items()]
    return f"a {noun}" + (f" {' and '.join(limits)}" if limits else "")


def field_rule(field: FieldInfo) -> str:
    """What a declared parameter takes, in words: "true or false", "one of a, b", "a non-negative number", ..."""
    members, nullable = type_members(field.annotation)
    rules = []
    for member in members:
        if member is bool:
            rules.append("true or false")
        elif get_origin(member) is Literal:
            rules.append(f"one of {', '.join(map(str, get_args(member)))}")
        elif member is int:
            rules.append(_number_rule("whole number", _bounds(field)))
        elif member is float:
            rules.append(_number_rule("number", _bounds(field)))
        elif member is str:
            rules.append("a string")
        else:
            rules.append(f"a {getattr(member, '__name__', str(member))}")
    return " or ".join(rules + (["null"] if nullable else []))


def field_type(field: FieldInfo) -> str:
    """A declared parameter's type for a listing: bool, int, float, str (a choice's values' type), or a union."""
    members, nullable = type_members(field.annotation)
    names = []
    for member in members:
        if get_origin(member) is Literal:
            member = type(get_args(member)[0])
        names.append(getattr(member, "__name__", str(member)))
    return " | ".join(names + (["null"] if nullable else []))


def field_allowed(field: FieldInfo) -> str:
    """A declared parameter's range or choices for a listing ("" when any value of its type will do)."""
    members, _ = type_members(field.annotation)
    choices = [get_args(m) for m in members if get_origin(m) is Literal]
    if choices:
        return "|".join(str(value) for found in choices for value in found)
    bounds = _bounds(field)
    if "ge" in bounds and "le" in bounds and len(bounds) == 2:
        return f"{bounds['ge']}..{bounds['le']}"
    signs = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
    return ", ".join(f"{signs[name]} {value}" for name, value in bounds.items())


@dataclass(frozen=True)
class ParamRow:
    """One parameter of a harness as a listing shows it."""

    source: str  # the intervention that declares it, or LOOP
    key: str
    type: str
    default: str
    allowed: str
    description: str


def param_rows(model: type[BaseModel], source: str) -> list[ParamRow]:
    """The listing rows of one declaration."""
    rows = []
    for key, field in model.model_fields.items():
        default = "(required)" if field.default is PydanticUndefined and field.default_factory is None \
            else repr(field.get_default(call_default_factory=True))
        rows.append(ParamRow(source, key, field_type(field), default, field_allowed(field), field.description or ""))
    return rows


def describe_params(host: Host, name: str) -> list[str]:
    """The lines of `playground harnesses --params NAME`: each parameter of the harness (the loop's, then each
    intervention's) with its type, default, range and meaning, and the values the harness sets itself.

    KeyError or ValueError names a harness or an intervention that does not resolve.
    """
    spec = resolve_harness(host, name)
    lines = [f"harness {name}: --param KEY=VALUE (each intervention reads the keys it declares)"]
    if spec.params:
        lines.append("set by the harness: " + ", ".join(f"{key}={value!r}" for key, value in spec.params.items()))
    for intervention, values in spec.scoped.items():  # a stack: what each part sets for its own interventions
        own = {key: value for key, value in values.items() if key not in spec.params}
        if own:
            lines.append(f"set for {intervention}: " + ", ".join(f"{key}={value!r}" for key, value in own.items()))
    rows = param_rows(LoopParams, LOOP)
    opaque, empty = [], []
    for one in declarations(host, spec):
        if one.model is None:
            opaque.append(one.intervention)
        elif not one.model.model_fields:
            empty.append(one.intervention)
        else:
            rows += param_rows(one.model, one.intervention)
    header = ParamRow("", "key", "type", "default", "range", "meaning")
    widths = [max(len(getattr(row, column)) for row in [header, *rows]) for column in ("key", "type", "default",
                                                                                       "allowed")]
    source = None
    for row in rows:
        if row.source != source:
            source = row.source
            lines.append(f"{source}:" if source == LOOP else f"intervention {source}:")
            lines.append("  " + "  ".join(getattr(header, c).ljust(w) for c, w in
                                          zip(("key", "type", "default", "allowed"), widths)) + "  meaning")
        cells = [getattr(row, c).ljust(w) for c, w in zip(("key", "type", "default", "allowed"), widths)]
        lines.append(("  " + "  ".join(cells) + "  " + row.description).rstrip())
    for intervention in empty:
        lines.append(f"intervention {intervention}: no parameters")
    for intervention in opaque:
        lines.append(f"intervention {intervention}: declares no parameters (it reads what it likes; any key passes)")
    return lines
