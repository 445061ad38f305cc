"""Resolves the names a run uses to what the registries hold or their loaders build: harnesses, interventions and
a cascade's deployment verifier; and fingerprints a harness, so a resumed run notices one that changed."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Callable

from playground.core.payloads import AttemptView
from playground.host.manager import Host
from playground.host.registry import HarnessSpec, InterventionSpec


def resolve_harness(host: Host, name: str) -> HarnessSpec:
    """Return the harness called `name`: a registered one, or one a harness loader builds (`PREFIX:REST`).

    KeyError or ValueError names what is wrong.
    """
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
    built = any(name.startswith(loader.prefix) for loader in host.harness_loaders)
    what = {"attempts": spec.attempts, "params": dict(spec.params), "cascade": spec.cascade,
            "verifier": spec.verifier, "description": spec.description if built else None}
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:16]


def attempt_verifier(host: Host, spec: HarnessSpec, params: dict) -> Callable[[AttemptView], Any]:
    """The cascade's deployment verifier built with the harness parameters (KeyError when none is registered)."""
    return host.attempt_verifiers.get(spec.verifier).factory(params)
