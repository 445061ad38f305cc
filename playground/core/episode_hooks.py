"""The runtime hooks of one episode: a fresh plugin manager holding that episode's plugins.

Each episode gets its own manager, so intervention and observer objects built for it
keep their state to themselves; the only thing episodes share is what plugins keep in
external stores (e.g. the playbook database).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from playground.core.deadlines import HookDeadlineExceeded, watch
from playground.core.errors import PlaygroundError, format_exception, traceback_text
from playground.core.labels import LabelRegistry
from playground.core.payloads import Decision, Detection, Verification
from playground.core.plugin_manager import implemented_hooks, new_plugin_manager

OBSERVER_HOOKS = frozenset({"episode_started", "step_completed", "episode_finished"})


# What each runtime hook may return besides None (per item for the fan-out hooks), as the hookspecs say.
RETURNS: dict[str, tuple[tuple[type, ...], str]] = {
    "decide_intervention": ((Decision,), "a Decision"), "want_checkpoint": ((bool,), "true or false"),
    "agent_actions": ((list, tuple), "a list of actions"), "detect_failures": ((Detection,), "Detections"),
    "verify_recovery": ((Verification,), "Verifications"), "verify_at_end": ((Verification,), "Verifications"),
    "agent_notes": ((str,), "strings")}
FAN_OUT = frozenset({"detect_failures", "verify_recovery", "verify_at_end", "agent_notes"})


def _wrong_result(hook: str, result: Any) -> str | None:
    """Why `result` is not what `hook` may return, or None when it is."""
    expected = RETURNS.get(hook)
    if expected is None or result is None:
        return None
    types, what = expected
    if hook == "agent_actions" and isinstance(result, (list, tuple)) and not all(isinstance(a, str) for a in result):
        return "returned a list holding something other than action strings"
    if hook not in FAN_OUT:
        return None if isinstance(result, types) else f"returned {type(result).__name__}, expected {what} or None"
    for item in result:  # pluggy's list: one entry per plugin that answered
        items = item if isinstance(item, (list, tuple)) else [item]
        bad = next((x for x in items if x is not None and not isinstance(x, types)), None)
        if bad is not None:
            return f"returned {type(bad).__name__} among its results, expected {what} or None"
    return None


def wrong_detection(detection: Detection, labels: LabelRegistry | None = None) -> str | None:
    """Why `detection` may not be recorded, or None: a confidence outside [0, 1] (or no finite number), and, given a
    registry that declares types, a failure type or a label no plugin declared."""
    problems = []
    confidence = detection.confidence
    if (isinstance(confidence, bool) or not isinstance(confidence, int | float) or not math.isfinite(confidence)
            or not 0 <= confidence <= 1):
        problems.append(f"confidence {confidence!r}, expected a number in [0, 1]")
    if labels is not None and labels.types():
        if labels.failure_type(detection.failure_type) is None:
            problems.append(f"unknown failure type {detection.failure_type!r} (declared: {', '.join(labels.types())})")
        unknown = [label for label in detection.labels if label not in labels]
        if unknown:
            problems.append(f"undeclared label(s) {', '.join(map(repr, unknown))} (`register_failure_labels` "
                            "declares them)")
    return f"returned a Detection (detector {detection.detector!r}) with {'; '.join(problems)}" if problems else None


_PAYLOAD_TYPES: dict[type, bool] = {}


def _is_payload(kind: type) -> bool:
    """Whether instances of `kind` are dataclass instances with a `__dict__` (what `_fingerprints` records)."""
    known = _PAYLOAD_TYPES.get(kind)
    if known is None:
        known = _PAYLOAD_TYPES[kind] = (hasattr(kind, "__dataclass_fields__") and hasattr(kind, "__dict__")
                                        and "__slots__" not in kind.__dict__ and not issubclass(kind, type))
    return known


def _fingerprints(kwargs: dict[str, Any]) -> list[tuple[str, Any, tuple]]:
    """(path, payload, its field values) for each frozen payload handed to a hook: the arguments, the payloads in
    a list argument (detections) and the payloads held in their fields (an outcome's context and proposal, a
    context's ids), two levels deep; tuples of payloads (a history) are not walked, to keep each call cheap."""
    found: list[tuple[str, Any, tuple]] = []

    def walk(path: str, value: Any, depth: int) -> None:
        if not _is_payload(type(value)):
            return
        fields = value.__dict__
        found.append((path, value, tuple(fields.values())))
        if depth < 2:
            for name, held in fields.items():
                if _is_payload(type(held)):
                    walk(path + "." + name, held, depth + 1)

    for name, value in kwargs.items():
        if isinstance(value, list):
            for i, item in enumerate(value):
                walk(f"{name}[{i}]", item, 1)
        else:
            walk(name, value, 0)
    return found


def _changed(fingerprints: list[tuple[str, Any, tuple]]) -> str | None:
    """Which field of a payload no longer holds what it held before the hook (`_fingerprints`), or None."""
    for path, payload, values in fingerprints:
        now = tuple(payload.__dict__.values())
        if now != values:
            for name, old, new in zip(payload.__dict__, values, now):
                if old is not new and old != new:
                    return f"{path}.{name} was {_short(old)}, is now {_short(new)}"
            return f"{path}: its fields were added or removed"
    return None


def _short(value: Any) -> str:
    """`repr(value)`, cut to 60 characters."""
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."


class PluginError(PlaygroundError):
    """A plugin raised inside a runtime hook; names the plugin and the hook, and the file and line that raised
    (` (at FILE:LINE)`); `traceback` is the plugin's whole traceback (None for a fault the host found, such as a
    result of the wrong type). It crosses to another process (pickle) with its message and traceback intact."""

    def __init__(self, plugin: str, hook: str, error: BaseException) -> None:
        super().__init__(f"plugin {plugin!r} raised in hook {hook!r}: {format_exception(error)}")
        self.plugin, self.hook, self.error = plugin, hook, error
        self.traceback = traceback_text(error)

    def __reduce__(self) -> tuple:
        return _restore_plugin_error, (str(self), self.plugin, self.hook, self.error, self.traceback)


def _restore_plugin_error(message: str, plugin: str, hook: str, error: BaseException,
                          traceback: str | None) -> PluginError:
    """A PluginError unpickled: what it said where it was raised (its error's traceback does not travel)."""
    restored = PluginError.__new__(PluginError)
    PlaygroundError.__init__(restored, message)
    restored.plugin, restored.hook, restored.error, restored.traceback = plugin, hook, error, traceback
    return restored


class EpisodeHooks:
    """Calls runtime hooks on the plugins of one episode; each call within `hook_deadline` seconds (None: no limit).
    Detections are checked against `labels`, the host's label registry, when given (`wrong_detection`)."""

    def __init__(self, interventions: Sequence[tuple[str, Any]] = (),
                 observers: Sequence[tuple[str, Any]] = (), hook_deadline: float | None = None,
                 labels: LabelRegistry | None = None) -> None:
        self.pm = new_plugin_manager()
        self.hook_deadline = hook_deadline
        self.labels = labels
        for name, plugin in observers:
            self.pm.register(plugin, name=f"observer:{name}")
            extra = set(implemented_hooks(self.pm, plugin)) - OBSERVER_HOOKS
            if extra:
                self.pm.unregister(plugin)
                raise ValueError(f"observer {name!r} implements decision hooks {sorted(extra)}; "
                                 "observers may only watch")
        # pluggy calls the plugin registered last first; registering in reverse makes the
        # intervention listed first in a harness the first to be called (and to decide).
        for name, plugin in reversed(list(interventions)):
            self.pm.register(plugin, name=name)
        self.has_checkpoint_hook = bool(self.pm.hook.want_checkpoint.get_hookimpls())
        self.has_actions_hook = bool(self.pm.hook.agent_actions.get_hookimpls())

    def first_impl(self, hook: str) -> str:
        """The name of the plugin called first for `hook` (pluggy calls the last-registered first), or "?"."""
        impls = getattr(self.pm.hook, hook).get_hookimpls()
        return impls[-1].plugin_name if impls else "?"

    def call(self, hook: str, **kwargs: Any) -> Any:
        """Call `hook`; an exception, or a `sys.exit()` inside a plugin, is re-raised as a PluginError naming the
        plugin (Ctrl-C still stops the run). So is a result of the wrong type (`RETURNS`), naming the plugin that
        implements the hook (or, when several do, each of them), and so is a payload handed in that the hook changed
        (`object.__setattr__` on a frozen payload: the trace would then show what was not played)."""
        caller = getattr(self.pm.hook, hook)
        before = _fingerprints(kwargs)
        try:
            with watch(self.hook_deadline, HookDeadlineExceeded):
                result = caller(**kwargs)
        except HookDeadlineExceeded as exc:
            late = TimeoutError(f"no answer within its deadline of {self.hook_deadline:g} s (--hook-deadline)")
            raise PluginError(self._culprit(caller, exc), hook, late) from None
        except (Exception, SystemExit) as exc:
            raise PluginError(self._culprit(caller, exc), hook, exc) from exc
        changed = _changed(before)
        if changed is not None:
            raise PluginError(self._implementers(caller), hook, RuntimeError(
                f"changed the frozen payload it was handed ({changed}); a payload is read-only"))
        wrong = _wrong_result(hook, result)
        kind: type[Exception] = TypeError
        if wrong is None and hook == "detect_failures":
            wrong, kind = next(filter(None, (wrong_detection(d, self.labels) for item in result or ()
                                             for d in (item if isinstance(item, (list, tuple)) else [item])
                                             if d is not None)), None), ValueError
        if wrong is not None:
            raise PluginError(self._implementers(caller), hook, kind(wrong))
        return result

    @staticmethod
    def _implementers(caller) -> str:
        """The plugin that implements the hook, or "one of A, B" when several do."""
        names = [impl.plugin_name for impl in reversed(caller.get_hookimpls())]
        return names[0] if len(names) == 1 else "one of " + ", ".join(names)

    def _culprit(self, caller, exc: BaseException) -> str:
        codes = {impl.function.__code__: impl.plugin_name for impl in caller.get_hookimpls()
                 if hasattr(impl.function, "__code__")}
        tb, culprit = exc.__traceback__, "?"
        while tb is not None:
            culprit = codes.get(tb.tb_frame.f_code, culprit)
            tb = tb.tb_next
        return culprit

    def collect(self, hook: str, **kwargs: Any) -> list:
        """Call a fan-out hook and flatten the results (None dropped, lists spread)."""
        out: list = []
        for result in self.call(hook, **kwargs) or ():
            if result is None:
                continue
            out.extend(result if isinstance(result, (list, tuple)) else [result])
        return out
