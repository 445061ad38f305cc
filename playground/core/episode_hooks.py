"""The runtime hooks of one episode: a fresh plugin manager holding that episode's plugins.

Each episode gets its own manager, so intervention and observer objects built for it
keep their state to themselves; the only thing episodes share is what plugins keep in
external stores (e.g. the playbook database).
"""

from __future__ import annotations

from typing import Any, Sequence

from playground.core.errors import PlaygroundError
from playground.core.plugin_manager import implemented_hooks, new_plugin_manager

OBSERVER_HOOKS = frozenset({"episode_started", "step_completed", "episode_finished"})


class PluginError(PlaygroundError):
    """A plugin raised inside a runtime hook; names the plugin and the hook."""

    def __init__(self, plugin: str, hook: str, error: BaseException) -> None:
        super().__init__(f"plugin {plugin!r} raised in hook {hook!r}: {type(error).__name__}: {error}")
        self.plugin, self.hook, self.error = plugin, hook, error


class EpisodeHooks:
    """Calls runtime hooks on the plugins of one episode."""

    def __init__(self, interventions: Sequence[tuple[str, Any]] = (),
                 observers: Sequence[tuple[str, Any]] = ()) -> None:
        self.pm = new_plugin_manager()
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
        plugin (Ctrl-C still stops the run)."""
        caller = getattr(self.pm.hook, hook)
        try:
            return caller(**kwargs)
        except (Exception, SystemExit) as exc:
            raise PluginError(self._culprit(caller, exc), hook, exc) from exc

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
