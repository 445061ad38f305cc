"""The plugin host: loads built-in and third-party plugins and collects what they register.

Built-in plugins are loaded exactly like third-party ones (entry-point group
`playground`), through the same manager and the same failure isolation:

* a plugin that fails to import or whose registration hook raises is reported by name
  and skipped; `PLAYGROUND_STRICT_PLUGINS=1` (or `strict=True`) makes that fatal;
* `PLAYGROUND_PLUGINS=a,b` loads only the plugins with those names;
* `PLAYGROUND_TRACE_HOOKS=1` prints every hook call to stderr.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import sys
from dataclasses import dataclass, replace
from typing import Any, Callable

from playground.core.env import EnvProvider
from playground.core.episode_hooks import PluginError
from playground.core.errors import PlaygroundError
from playground.core.figures import Figure
from playground.core.instrument import JUDGE_KINDS, InstrumentJudgeSpec
from playground.core.labels import FailureLabel, FailureType, LabelRegistry
from playground.core.payloads import EFFECTS
from playground.core.pipeline_step import PipelineStep
from playground.core.plugin_manager import env_flag, implemented_hooks, new_plugin_manager
from playground.core.study_file import StudyError, load_study
from playground.host.registry import (
    GRADE_VERIFIER,
    AgentSpec,
    AttemptVerifierSpec,
    EnvSpec,
    HarnessLoaderSpec,
    HarnessSpec,
    InterventionLoaderSpec,
    InterventionSpec,
    ObserverSpec,
    RegistrationError,
    Registry,
    StudySpec,
)

ENTRY_POINT_GROUP = "playground"
DISTRIBUTION = "playground"


def _is_model_class(value: Any) -> bool:
    """Whether `value` is a pydantic model class (pydantic imported only when a plugin declares parameters)."""
    from pydantic import BaseModel

    return isinstance(value, type) and issubclass(value, BaseModel)


def _entry_points() -> list[importlib.metadata.EntryPoint]:
    """The plugins' entry points: playground's own built-ins first (in pyproject order), then the rest."""
    found = list(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))
    return sorted(found, key=lambda ep: ep.dist is None or ep.dist.name != DISTRIBUTION)



class PluginLoadError(PlaygroundError):
    """A plugin could not be loaded and strict mode is on."""


class GradeTextUnremovable(PlaygroundError, KeyError):
    """No loaded plugin provides the env a run played, so the grade text it prints cannot be removed from what a
    judge, a diagnoser or a training view would read: refused (a KeyError too, as a registry lookup is)."""

    def __str__(self) -> str:
        return str(self.args[0])  # the message as written (a KeyError would print it quoted)


@dataclass
class PluginRecord:
    """What `playground plugins` shows about one plugin."""

    name: str
    source: str  # "builtin: module" or "entry point: dist==version"
    status: str  # "loaded", "failed", "skipped"
    error: str = ""
    hooks: tuple[str, ...] = ()


class Host:
    """Loaded plugins plus the registries they filled."""

    def __init__(self, strict: bool | None = None, allow: list[str] | None = None) -> None:
        self.strict = env_flag("PLAYGROUND_STRICT_PLUGINS") if strict is None else strict
        if allow is None:
            allow_env = os.environ.get("PLAYGROUND_PLUGINS", "").strip()
            allow = [a.strip() for a in allow_env.split(",") if a.strip()] if allow_env else None
        self.allow = allow
        self.pm = new_plugin_manager()
        self.records: list[PluginRecord] = []
        self.envs: Registry[EnvSpec] = Registry("env")
        self.agents: Registry[AgentSpec] = Registry("agent")
        self.interventions: Registry[InterventionSpec] = Registry("intervention")
        self.harnesses: Registry[HarnessSpec] = Registry("harness")
        self.observers: Registry[ObserverSpec] = Registry("observer")
        self.harness_loaders: Registry[HarnessLoaderSpec] = Registry("harness prefix")
        self.intervention_loaders: Registry[InterventionLoaderSpec] = Registry("intervention prefix")
        self.attempt_verifiers: Registry[AttemptVerifierSpec] = Registry("attempt verifier")
        # how the failure-injection instrument answers each model role's requests (`register_instrument_judges`)
        self.instrument_judges: Registry[InstrumentJudgeSpec] = Registry("instrument judge role")
        self.studies: Registry[StudySpec] = Registry("study")  # study files the plugins ship (`register_studies`)
        self.figures: Registry[Figure] = Registry("figure")  # study table columns (`register_figures`)
        # what a study's pipelines run over a copy of a grid's run (`register_pipeline_steps`)
        self.pipeline_steps: Registry[PipelineStep] = Registry("pipeline step")
        self.labels = LabelRegistry()  # the failure types and labels the plugins declared
        self.commands_added = False

    # -- loading -------------------------------------------------------------------------

    def load(self, extra: dict[str, Any] | None = None) -> "Host":
        """Load built-ins, entry points, and `extra` plugins (name -> module name, module or object)."""
        entry_points = _entry_points()
        for ep in entry_points:
            if ep.dist is not None and ep.dist.name == DISTRIBUTION:
                source = f"builtin: {ep.value}"
            else:
                source = (f"entry point: {ep.dist.name}=={ep.dist.version} ({ep.value})" if ep.dist
                          else f"entry point: {ep.value}")
            self._load_one(ep.name, source, ep.load)
        self._report_unknown_allowed({ep.name for ep in entry_points} | set(extra or {}))
        for name, plugin in (extra or {}).items():
            loader = ((lambda plugin=plugin: importlib.import_module(plugin)) if isinstance(plugin, str)
                      else (lambda plugin=plugin: plugin))
            self._load_one(name, f"given: {plugin if isinstance(plugin, str) else type(plugin).__name__}", loader)
        self._check_harnesses()
        self._check_labels()
        return self

    def _report_unknown_allowed(self, known: set[str]) -> None:
        """Name each plugin that PLAYGROUND_PLUGINS asks for but no entry point or given plugin provides."""
        for name in sorted(set(self.allow or ()) - known):
            self._fail(PluginRecord(name, "PLAYGROUND_PLUGINS", "failed"),
                       f"no such plugin; choose from: {', '.join(sorted(known))}")

    def _load_one(self, name: str, source: str, loader: Callable[[], Any]) -> None:
        if self.allow is not None and name not in self.allow:
            self.records.append(PluginRecord(name, source, "skipped", "not in PLAYGROUND_PLUGINS"))
            return
        if any(r.name == name and r.status == "loaded" for r in self.records):
            self._fail(PluginRecord(name, source, "failed"), "a plugin with this name is already loaded")
            return
        record = PluginRecord(name, source, "loaded")
        try:
            plugin = loader()
            self.pm.register(plugin, name=name)
        except Exception as exc:  # noqa: BLE001 - any failure of a plugin is isolated
            self._fail(record, f"import failed: {type(exc).__name__}: {exc}")
            return
        record.hooks = implemented_hooks(self.pm, plugin)
        self.records.append(record)
        registrars = self._registrars(name)
        for hook_name, register in registrars.items():
            for impl in getattr(self.pm.hook, hook_name).get_hookimpls():
                if impl.plugin is plugin and not self._register_from(name, hook_name, impl.function, register):
                    return

    def _register_from(self, plugin_name: str, hook_name: str, function: Callable, register: Callable) -> bool:
        try:
            function(register=register)
            return True
        except Exception as exc:  # noqa: BLE001
            for registry in (self.envs, self.agents, self.interventions, self.harnesses, self.observers,
                             self.harness_loaders, self.intervention_loaders, self.attempt_verifiers,
                             self.instrument_judges, self.studies, self.figures, self.pipeline_steps):
                registry.remove_from_plugin(plugin_name)
            self.labels.remove_from_plugin(plugin_name)
            self.pm.unregister(name=plugin_name)
            record = next(r for r in self.records if r.name == plugin_name and r.status == "loaded")
            self.records.remove(record)
            self._fail(record, f"{hook_name} failed: {type(exc).__name__}: {exc}")
            return False

    def _fail(self, record: PluginRecord, error: str) -> None:
        record.status, record.error = "failed", error
        self.records.append(record)
        if self.strict:
            raise PluginLoadError(f"plugin {record.name!r} ({record.source}): {error}")
        print(f"playground: plugin {record.name!r} skipped: {error}", file=sys.stderr)

    def _registrars(self, plugin: str) -> dict[str, Callable[..., None]]:
        """Return the `register` callable handed to each registration hook of `plugin`."""

        def env(provider: EnvProvider) -> None:
            if not isinstance(provider, EnvProvider):
                raise RegistrationError(f"register_envs expects an EnvProvider, got {type(provider).__name__}")
            self.envs.add(provider.name, EnvSpec(provider.name, provider, plugin))

        def agent(name, factory, description="", needs_expert=False, default=False, default_options=None) -> None:
            self.agents.add(name, AgentSpec(name, factory, description, needs_expert, plugin, default=bool(default),
                                            default_options=dict(default_options or {})))

        def intervention(name, factory, description="", modes=(), cost_unit="steps", cost=None, envs=(),
                         candidate=True, params_model=None, effects=()) -> None:
            unknown = [] if callable(effects) else sorted(set(effects) - set(EFFECTS))
            if isinstance(effects, str) or unknown:
                raise RegistrationError(f"intervention {name!r}: effects must be a list drawn from "
                                        f"{', '.join(EFFECTS)}, got {effects!r}")
            if params_model is not None and not _is_model_class(params_model):
                raise RegistrationError(f"intervention {name!r}: params_model must be a pydantic model class, "
                                        f"got {params_model!r}")
            self.interventions.add(name, InterventionSpec(name, factory, description, tuple(modes), cost_unit, plugin,
                                                          None if cost is None else float(cost), tuple(envs),
                                                          bool(candidate), params_model,
                                                          effects if callable(effects) else tuple(effects)))

        def harness(name, interventions=(), params=None, description="", default=False, cascade=(),
                    verifier="env:won") -> None:
            if cascade and interventions:
                raise RegistrationError(f"harness {name!r}: give interventions or a cascade, not both")
            if isinstance(cascade, str):
                raise RegistrationError(f"harness {name!r}: cascade must be a list of intervention names")
            self.harnesses.add(name, HarnessSpec(name, tuple(interventions), dict(params or {}), description, plugin,
                                                 cascade=tuple(cascade), verifier=str(verifier),
                                                 default=bool(default)))

        def observer(name, factory) -> None:
            self.observers.add(name, ObserverSpec(name, factory, plugin))

        def harness_loader(prefix, loader, description="") -> None:
            self.harness_loaders.add(prefix, HarnessLoaderSpec(prefix, loader, description, plugin))

        def intervention_loader(prefix, loader, description="") -> None:
            self.intervention_loaders.add(prefix, InterventionLoaderSpec(prefix, loader, description, plugin))

        def attempt_verifier(name, factory, description="") -> None:
            if name == GRADE_VERIFIER:
                raise RegistrationError(f"{GRADE_VERIFIER!r} is the built-in grade verifier; choose another name")
            self.attempt_verifiers.add(name, AttemptVerifierSpec(name, factory, description, plugin))

        def instrument_judge(role, answer, kind) -> None:
            if kind not in JUDGE_KINDS:
                raise RegistrationError(f"instrument judge {role!r}: kind must be one of {', '.join(JUDGE_KINDS)}, "
                                        f"got {kind!r}")
            if not callable(answer):
                raise RegistrationError(f"instrument judge {role!r}: answer must be callable, got {answer!r}")
            self.instrument_judges.add(role, InstrumentJudgeSpec(role, answer, kind, plugin))

        def study(path) -> None:
            try:
                found = load_study(path)
            except StudyError as exc:
                raise RegistrationError(str(exc)) from None
            self.studies.add(found.name, StudySpec(found.name, str(path), found.title, plugin))

        def figure(declared) -> None:
            if not isinstance(declared, Figure) or not callable(declared.of or declared.of_folder):
                raise RegistrationError(f"register_figures expects a Figure with a callable `of` or `of_folder`, "
                                        f"got {declared!r}")
            self.figures.add(declared.name, replace(declared, plugin=plugin))

        def pipeline_step(declared) -> None:
            if not isinstance(declared, PipelineStep) or not callable(declared.run) \
                    or not _is_model_class(declared.params_model):
                raise RegistrationError(f"register_pipeline_steps expects a PipelineStep with a callable `run` and a "
                                        f"pydantic `params_model`, got {declared!r}")
            self.pipeline_steps.add(declared.name, replace(declared, plugin=plugin))

        def failure_label(declaration) -> None:
            if not isinstance(declaration, (FailureType, FailureLabel)):
                raise RegistrationError(f"register_failure_labels expects a FailureType or FailureLabel, "
                                        f"got {type(declaration).__name__}")
            self.labels.add(replace(declaration, plugin=plugin))

        return {"register_envs": env, "register_agents": agent, "register_interventions": intervention,
                "register_harnesses": harness, "register_observers": observer,
                "register_harness_loaders": harness_loader, "register_intervention_loaders": intervention_loader,
                "register_failure_labels": failure_label, "register_attempt_verifiers": attempt_verifier,
                "register_instrument_judges": instrument_judge, "register_studies": study,
                "register_figures": figure, "register_pipeline_steps": pipeline_step}

    def _check_harnesses(self) -> None:
        """Drop harnesses that name interventions no loaded plugin provides."""
        for spec in list(self.harnesses):
            names = dict.fromkeys(n for attempt in spec.attempts for n in attempt)
            missing = [i for i in names if i not in self.interventions
                       and not any(i.startswith(loader.prefix) for loader in self.intervention_loaders)]
            if missing:
                self.harnesses.remove(spec.name)
                self._fail(
                    PluginRecord(f"{spec.plugin}:{spec.name}", f"harness from {spec.plugin}", "failed"),
                    f"harness {spec.name!r} needs unknown intervention(s) {', '.join(missing)}",
                )

    def _check_labels(self) -> None:
        """Drop failure labels whose type no loaded plugin declares."""
        for label in self.labels.orphans():
            self.labels.remove_label(label.name)
            self._fail(PluginRecord(f"{label.plugin}:{label.name}", f"failure label from {label.plugin}", "failed"),
                       f"failure label {label.name!r} has undeclared failure type {label.failure_type!r}; "
                       f"declared: {', '.join(self.labels.types()) or '(none)'}")

    def grade_text_remover(self, env: str) -> Callable[[str], str]:
        """The `remove_grade_text` of env `env`'s provider: what anything that shows observations to a judge, a
        diagnoser or a training view applies first, so that no grade text the env prints reaches it.
        GradeTextUnremovable (naming the loaded envs) when no loaded plugin provides `env`: the text cannot be
        cleaned, and nothing may read it uncleaned."""
        try:
            return self.envs.get(env).provider.remove_grade_text
        except KeyError as exc:
            raise GradeTextUnremovable(f"the grade text env {env!r} prints cannot be removed from what a judge, a "
                                       f"diagnoser or a training view reads: {exc.args[0]}") from None

    def call_plugins(self, hook: str, **kwargs: Any) -> list[Any]:
        """Call a run hook (`check_playbook`, `discard_episodes`) on every loaded plugin that implements it, in
        load order, and return the results that are not None; a plugin that raises is named (PluginError)."""
        results = []
        for impl in getattr(self.pm.hook, hook).get_hookimpls():
            try:
                result = impl.function(**{name: kwargs[name] for name in impl.argnames})
            except Exception as exc:  # noqa: BLE001 - named, whatever it is
                raise PluginError(impl.plugin_name, hook, exc) from exc
            if result is not None:
                results.append(result)
        return results

    def add_commands(self, cli) -> None:
        """Let plugins add CLI subcommands (once); a failing plugin is reported, not fatal."""
        if self.commands_added:
            return
        self.commands_added = True
        for impl in self.pm.hook.register_commands.get_hookimpls():
            try:
                impl.function(cli=cli)
            except Exception as exc:  # noqa: BLE001
                name = self.pm.get_name(impl.plugin)
                if self.strict:
                    raise PluginLoadError(f"plugin {name!r}: register_commands failed: {exc}") from exc
                print(f"playground: plugin {name!r} commands skipped: {exc}", file=sys.stderr)


_HOST: Host | None = None


def get_host() -> Host:
    """Return the process-wide host, loading plugins on first use."""
    global _HOST
    if _HOST is None:
        _HOST = Host().load()
    return _HOST


def default_labels() -> LabelRegistry:
    """The process-wide host's failure labels, for code that has no host at hand (e.g. a `Playbook`)."""
    return get_host().labels


def reset_host() -> None:
    """Forget the process-wide host (tests use this after changing the environment)."""
    global _HOST
    _HOST = None
