"""playground's envs in gymnasium's registry: `gymnasium.make("playground/TextWorld-v0", task_set="easy")`.

`register_envs()` registers one id per built-in env (`IDS`); it runs when `playground.envs`
is imported (as loading any built-in env plugin does), and it is the `gymnasium.envs`
entry point in pyproject.toml (gymnasium 1.x no longer loads those entry points itself,
so `import playground.envs` is what registers). This
module imports nothing but gymnasium: `make_env` loads a plugin host and the env's
engine (textworld, alfworld, ...) only when an env is made.

gymnasium calls `make_env` from outside any playground host, so no host is handed to it:
it builds its own through the plugin API (`Host().load()`, the plugins the environment
allows, as `playground` itself loads them) and takes the env's provider from it.

`make_env` builds the env exactly as the runner does, through the env provider's
`make(task_set, expert=...)`; `split` picks the split that `reset()` without a task plays.
See docs/gymnasium.md.
"""

from __future__ import annotations

from typing import Any

import gymnasium

NAMESPACE = "playground"
VERSION = 0
# gymnasium name -> playground env name
IDS = {"Tiny": "tiny", "TextWorld": "textworld", "ALFWorld": "alfworld", "WebShop": "webshop",
       "Finance": "finance", "AppWorld": "appworld", "Workflow": "workflow",
       "ScienceWorld": "scienceworld"}
ENTRY_POINT = "playground.envs.gymnasium_registry:make_env"


def env_id(name: str) -> str:
    """The gymnasium id of a gymnasium name in `IDS`: `playground/<name>-v0`."""
    return f"{NAMESPACE}/{name}-v{VERSION}"


def register_envs() -> None:
    """Register `playground/<Name>-v0` for every built-in env (again: no-op)."""
    for name, env in IDS.items():
        if env_id(name) not in gymnasium.registry:
            gymnasium.register(id=env_id(name), entry_point=ENTRY_POINT, kwargs={"playground_env": env})


def make_env(playground_env: str, task_set: str | None = None, split: str | None = None, expert: bool = False,
             render_mode: str | None = None, **options: Any):
    """The env `playground_env` on `task_set` (default: the env's default task set), built by its provider.

    `split` is the split `reset()` plays when it names no task (default: the task set's
    default split); `expert=True` adds `info["expert_plan"]`; other keyword arguments go to
    the provider's `make`. There are no render modes (`render_mode` must be None).
    """
    from playground.host_api import Host

    if render_mode is not None:
        raise ValueError(f"{playground_env}: no render modes (observations are the text); "
                         f"got render_mode={render_mode!r}")
    provider = Host().load().envs.get(playground_env).provider  # gymnasium hands no host: load one
    task_set = task_set or provider.default_task_set
    sets = provider.task_sets()
    if task_set not in sets:
        raise ValueError(f"{playground_env}: unknown task set {task_set!r}; choose from: {', '.join(sorted(sets))}")
    env = provider.make(task_set, expert=expert, **options)
    if split is not None:
        env.use_split(split)
    return env
