"""Resolves the names a run uses to what the registries hold or their loaders build: harnesses (one, or a stack
`A+B` composed here), interventions and a cascade's deployment verifier; and fingerprints a harness, so a resumed
run notices one that changed."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable

from playground.core.errors import PlaygroundError
from playground.core.loop import LOOP_PARAMS
from playground.core.payloads import AttemptView
from playground.host.manager import Host
from playground.host.registry import GRADE_VERIFIER, HarnessSpec, InterventionSpec

STACK = "+"  # `--harness A+B`: the interventions of A, then those of B, in one episode
EXCLUSIVE_EFFECTS = {"replace": "rewrite the proposed action", "rollback": "roll the env back"}


class HarnessConflict(PlaygroundError, ValueError):
    """A stack of harnesses (`A+B`) that cannot run as one: it names the parts and what they both claim."""


def resolve_harness(host: Host, name: str) -> HarnessSpec:
    """Return the harness called `name`: a registered one, a stack `A+B+...` of others (`stack_harnesses`), or one
    a harness loader builds (`PREFIX:REST`).

    KeyError or ValueError (HarnessConflict for a stack that cannot run as one) names what is wrong.
    """
    if name not in host.harnesses and STACK in name:
        parts = name.split(STACK)
        if not all(part.strip() for part in parts):
            raise ValueError(f"harness stack {name!r} has an empty part; spell it A{STACK}B")
        return stack_harnesses(host, name, [(part, resolve_harness(host, part)) for part in parts])
    for loader in host.harness_loaders:
        if name.startswith(loader.prefix):
            spec = loader.loader(name, name[len(loader.prefix):])
            unknown = [n for attempt in spec.attempts for n in attempt if not _known_intervention(host, n)]
            if unknown:
                raise KeyError(f"harness {name!r} uses unknown intervention(s) {', '.join(unknown)}")
            return spec
    return host.harnesses.get(name)


def resolve_intervention(host: Host, name: str) -> InterventionSpec:
    """Return the intervention called `name`: a registered one, or one an intervention loader builds (`PREFIX:REST`).

    A built intervention is not added to the host's registry. KeyError or ValueError names what is wrong.
    """
    if name in host.interventions:
        return host.interventions.get(name)
    for loader in host.intervention_loaders:
        if name.startswith(loader.prefix):
            spec = loader.loader(name, name[len(loader.prefix):], lambda other: resolve_intervention(host, other))
            if not isinstance(spec, InterventionSpec) or spec.name != name:
                raise ValueError(f"intervention loader {loader.prefix!r} (plugin {loader.plugin}) built "
                                 f"{spec!r} for {name!r}, not an InterventionSpec named {name!r}")
            return spec
    return host.interventions.get(name)  # KeyError naming the registered ones


def stack_harnesses(host: Host, name: str, parts: list[tuple[str, HarnessSpec]]) -> HarnessSpec:
    """One harness running the interventions of `parts` together, in the order given (the first part's decide
    first). Each part's parameters reach its own interventions only (`HarnessSpec.scoped`); the loop's budgets
    (such as `max_rollbacks`) are the stack's, shared. A cascade part (at most one) keeps its attempts and
    verifier; the other parts' interventions join every attempt, after the attempt's own intervention.

    HarnessConflict when the parts cannot run as one: two cascades; an intervention two parts both use; a loop
    budget two parts set to different values; or interventions of two parts that both take an
    exclusive effect under their part's parameters (`effects`: both rewrite the action, or both roll the env
    back), where the one called first would silently overrule the other.
    """
    where = f"harness stack {name!r}"
    cascades = [part for part, spec in parts if spec.cascade]
    if len(cascades) > 1:
        raise HarnessConflict(f"{where}: {' and '.join(cascades)} are both cascades; a stack holds at most one")
    owner: dict[str, str] = {}  # intervention -> the part that brings it
    scoped: dict[str, dict] = {}  # intervention -> the parameters it is built with
    for part, spec in parts:
        for intervention in dict.fromkeys(n for attempt in spec.attempts for n in attempt):
            if intervention in owner:
                raise HarnessConflict(f"{where}: intervention {intervention!r} comes from both {owner[intervention]} "
                                      f"and {part}; stack each intervention once")
            owner[intervention], scoped[intervention] = part, spec.params_for(intervention)
    specs = {intervention: resolve_intervention(host, intervention) for intervention in owner}
    shared: dict = {}  # the loop's budgets
    setter: dict[str, str] = {}  # budget -> the part that sets it
    for part, spec in parts:
        for key, value in _loop(dict(spec.params)).items():
            if key in shared and shared[key] != value:
                raise HarnessConflict(f"{where}: incompatible step budget {key!r}: {shared[key]!r} in {setter[key]} "
                                      f"but {value!r} in {part}; set it once with --param {key}=VALUE")
            shared[key], setter[key] = value, part
    claimed: dict[str, str] = {}  # exclusive effect -> the intervention that claims it first
    for intervention, part in owner.items():
        for effect in sorted(set(specs[intervention].effects_with(scoped[intervention])) & set(EXCLUSIVE_EFFECTS)):
            first = claimed.setdefault(effect, intervention)
            if owner[first] != part:
                raise HarnessConflict(f"{where}: {first} (from {owner[first]}) and {intervention} (from {part}) both "
                                      f"{EXCLUSIVE_EFFECTS[effect]}; the one called first would overrule the other")
    cascade = next((spec for _, spec in parts if spec.cascade), None)
    description = " + ".join(f"{part} ({spec.description})" if spec.description else part for part, spec in parts)
    return HarnessSpec(name, tuple(n for _, spec in parts for n in spec.interventions), shared, description, "stack",
                       cascade=cascade.cascade if cascade else (),
                       verifier=cascade.verifier if cascade else GRADE_VERIFIER,
                       scoped={n: {**shared, **params} for n, params in scoped.items()})


def _loop(params: dict) -> dict:
    """The loop's parameters among `params`: a stack's budgets, the same for every intervention."""
    return {key: value for key, value in params.items() if key in LOOP_PARAMS}


def _known_intervention(host: Host, name: str) -> bool:
    """Whether `name` resolves to an intervention."""
    try:
        resolve_intervention(host, name)
    except (KeyError, ValueError):
        return False
    return True


def harness_fingerprint(host: Host, name: str) -> str:
    """A hash of what a harness does (its attempts, parameters, cascade and verifier), and for a harness
    built by a loader (`PREFIX:REST`, e.g. from a policy file) also its description, which names the
    file's content hash: a resumed run refuses a harness that changed meanwhile."""
    spec = resolve_harness(host, name)
    parts = name.split(STACK) if name not in host.harnesses else [name]
    built = any(part.startswith(loader.prefix) for part in parts for loader in host.harness_loaders)
    what = {"attempts": spec.attempts, "params": dict(spec.params), "cascade": spec.cascade,
            **({"scoped": {n: dict(p) for n, p in spec.scoped.items()}} if spec.scoped else {}),
            "verifier": spec.verifier, "description": spec.description if built else None}
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:16]


def attempt_verifier(host: Host, spec: HarnessSpec, params: dict) -> Callable[[AttemptView], Any]:
    """The cascade's deployment verifier built with the parameters of the cascade's part of the harness, then
    `params` (the harness's and the run's; KeyError when none is registered)."""
    own = spec.params_for(spec.cascade[0]) if spec.cascade else {}
    return host.attempt_verifiers.get(spec.verifier).factory({**own, **params})
