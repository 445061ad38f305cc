"""Named things the plugins register: envs, agents, interventions, harnesses, observers."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Iterator, Mapping, TypeVar

from playground.core.env import EnvProvider
from playground.core.errors import PlaygroundError

# The built-in cascade verifier: the env's own grade (the benchmark's verifier, which a deployed agent lacks).
GRADE_VERIFIER = "env:won"


@dataclass(frozen=True)
class AgentSpec:
    """An agent factory and what it needs from the env."""

    name: str
    factory: Callable[..., Any]
    description: str = ""
    needs_expert: bool = False
    plugin: str = ""
    default: bool = False  # played by `playground run` when no --agent is given
    default_options: Mapping[str, Any] = field(default_factory=dict)  # its options then (--agent-option overrides)


@dataclass(frozen=True)
class InterventionSpec:
    """An intervention: a factory of per-episode plugin objects, with the metadata methods choose by
    (modes, cost, envs)."""

    name: str
    factory: Callable[..., Any]  # factory(params, services), or factory(dict) the older way (run.services)
    description: str = ""
    modes: tuple[str, ...] = ()
    cost_unit: str = "steps"
    plugin: str = ""
    cost: float | None = None  # a fixed cost per attempt (e.g. a retrieval budget k), else derived from the unit
    envs: tuple[str, ...] = ()  # the envs it works with; empty: any env
    candidate: bool = True  # False: a point of comparison, left out of the libraries methods choose interventions from
    # The parameters it reads, declared: a pydantic model (names, types, ranges, defaults); None: undeclared (opaque)
    params_model: Any = None
    # The Decision effects it may take ("reask", "replace", "rollback", "stop"), or a function of its parameters
    # returning them, declared so that a stack of harnesses (`--harness A+B`) can refuse two interventions that
    # both rewrite the action or both roll back
    effects: tuple[str, ...] | Callable[[Mapping[str, Any]], Any] = ()

    def works_with(self, env: str) -> bool:
        """True when the intervention can be used on `env`."""
        return not self.envs or env in self.envs

    def effects_with(self, params: Mapping[str, Any]) -> tuple[str, ...]:
        """The Decision effects it may take under these parameters."""
        return tuple(self.effects(params) if callable(self.effects) else self.effects)


@dataclass(frozen=True)
class HarnessSpec:
    """A harness: a named list of interventions plus parameters (`base` has none), or a cascade."""

    name: str
    interventions: tuple[str, ...] = ()
    params: Mapping[str, Any] = field(default_factory=dict)
    description: str = ""
    plugin: str = ""
    # A cascade: try the task with cascade[0] alone; if the attempt fails by `verifier`,
    # reset to the same initial state and try cascade[1], and so on (a harness loader such as a
    # method's frozen policy builds these).
    cascade: tuple[str, ...] = ()
    verifier: str = "env:won"  # GRADE_VERIFIER, or a registered attempt verifier
    default: bool = False  # run by `playground run` when no --harness is given
    # A stack's (`A+B`) parameters of each intervention: those its own part sets, which reach no other part's
    scoped: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def params_for(self, intervention: str) -> dict[str, Any]:
        """The parameters `intervention` is built with (before the run's --param values override them)."""
        return {**self.params, **self.scoped.get(intervention, {})}

    @property
    def attempts(self) -> tuple[tuple[str, ...], ...]:
        """The interventions of each attempt: one attempt with all of them, or one per cascade step (the step's
        intervention first, then any `interventions` stacked beside every step, as `--harness CASCADE+OTHER` does)."""
        if self.cascade:
            return tuple((name, *self.interventions) for name in self.cascade)
        return (self.interventions,)


@dataclass(frozen=True)
class AttemptVerifierSpec:
    """A deployment verifier a cascade harness may name: `factory(params)` -> callable(AttemptView) -> verdict."""

    name: str
    factory: Callable[[dict], Any]
    description: str = ""
    plugin: str = ""


@dataclass(frozen=True)
class ObserverSpec:
    """An observer: a factory of per-episode plugin objects that only watch."""

    name: str
    factory: Callable[[], Any]
    plugin: str = ""


@dataclass(frozen=True)
class HarnessLoaderSpec:
    """Builds harnesses from names with a prefix (`PREFIX:FILE`): `loader(name, rest) -> HarnessSpec`."""

    prefix: str
    loader: Callable[[str, str], HarnessSpec]
    description: str = ""
    plugin: str = ""


@dataclass(frozen=True)
class InterventionLoaderSpec:
    """Builds interventions from names with a prefix (`PREFIX:REST`): `loader(name, rest, lookup) -> InterventionSpec`,
    where `lookup(name)` returns any other intervention (registered or built by a loader)."""

    prefix: str
    loader: Callable[[str, str, Callable[[str], "InterventionSpec"]], InterventionSpec]
    description: str = ""
    plugin: str = ""


@dataclass(frozen=True)
class StudySpec:
    """A study file a plugin ships (`register_studies`): its name, path and title."""

    name: str
    path: str
    title: str = ""
    plugin: str = ""


@dataclass(frozen=True)
class EnvSpec:
    """A registered env provider and the plugin it came from."""

    name: str
    provider: EnvProvider
    plugin: str = ""

    @property
    def description(self) -> str:
        return self.provider.description


T = TypeVar("T")


class RegistrationError(PlaygroundError):
    """A plugin registered something invalid (e.g. a name already taken)."""


class Registry(Generic[T]):
    """A name → spec table for one kind of thing, remembering which plugin added what."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._items: dict[str, T] = {}

    def add(self, name: str, spec: T) -> None:
        """Add `spec` under `name`; a name may be registered only once."""
        if not isinstance(name, str) or not name:
            raise RegistrationError(f"{self.kind} name must be a non-empty string, got {name!r}")
        if name in self._items:
            owner = getattr(self._items[name], "plugin", "?")
            raise RegistrationError(f"{self.kind} {name!r} is already registered by plugin {owner!r}")
        self._items[name] = spec

    def remove(self, name: str) -> None:
        """Forget `name`."""
        del self._items[name]

    def remove_from_plugin(self, plugin: str) -> None:
        """Forget everything `plugin` registered (used when a plugin fails half-way)."""
        for name in [n for n, s in self._items.items() if getattr(s, "plugin", None) == plugin]:
            self.remove(name)

    def get(self, name: str) -> T:
        """Return the spec named `name`; KeyError names the valid choices."""
        try:
            return self._items[name]
        except KeyError:
            raise KeyError(f"unknown {self.kind} {name!r}; choose from: "
                           f"{', '.join(self.names()) or '(none loaded)'}") from None

    def names(self) -> list[str]:
        """Return the registered names, sorted."""
        return sorted(self._items)

    def __contains__(self, name: object) -> bool:
        return name in self._items

    def __iter__(self) -> Iterator[T]:
        return iter(self._items[n] for n in self.names())

    def __len__(self) -> int:
        return len(self._items)
