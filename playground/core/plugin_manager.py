"""A pluggy plugin manager that knows the playground hookspecs."""

from __future__ import annotations

import os
import sys
from typing import Any

import pluggy

from playground.core import hookspecs


def env_flag(name: str) -> bool:
    """Return True when environment variable `name` is set to a true value."""
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def new_plugin_manager() -> pluggy.PluginManager:
    """Return a plugin manager with the playground hookspecs (tracing if asked)."""
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    if env_flag("PLAYGROUND_TRACE_HOOKS"):
        pm.trace.root.setwriter(sys.stderr.write)
        pm.enable_tracing()
    return pm


def implemented_hooks(pm: pluggy.PluginManager, plugin: Any) -> tuple[str, ...]:
    """Return the names of the hooks `plugin` implements, sorted."""
    return tuple(sorted(caller.name for caller in pm.get_hookcallers(plugin) or ()))
