"""`scienceworld`: ScienceWorld's 30 science tasks on its real engine (a JVM, via the `scienceworld` extra).

Task sets: `all` (default; every task, variations interleaved) and one per task
("boil", "find-animal", ...); splits `train`, `dev`, `test` are ScienceWorld's own
variation splits. Ids are `<task>-<variation>` ("boil-21"). `scienceworld` and the JVM
are only touched when an env is made. See docs/envs/scienceworld.md.
"""

from __future__ import annotations

import importlib.metadata
from typing import Any, Callable, Mapping

from playground.core.env import EnvProvider, TextEnv
from playground.core.hookspecs import hookimpl
from playground.core.task_sets import TaskSet
from playground.envs.scienceworld.tasks import ALL, TASK_SETS


class ScienceWorldProvider(EnvProvider):
    """Provides ScienceWorld: task sets `all` and one per task, splits train/dev/test."""

    name = "scienceworld"
    thread_safe = False  # a JVM behind py4j; not checked with several threads
    description = "ScienceWorld's 30 science tasks on the real engine (Java; pip install 'playground[scienceworld]')"
    default_task_set = ALL

    def missing(self) -> str | None:
        """The install command when the `scienceworld` package is absent, or what is wrong with Java."""
        import importlib.util

        from playground.envs.scienceworld.engine import INSTALL_HINT, ScienceWorldUnavailable, check_java

        if importlib.util.find_spec("scienceworld") is None:
            return f"the env needs the `scienceworld` package: {INSTALL_HINT}"
        try:
            check_java()
        except ScienceWorldUnavailable as exc:
            return str(exc)
        return None

    def task_sets(self) -> Mapping[str, TaskSet]:
        """Return the task sets, by name."""
        return TASK_SETS

    def make(self, task_set: str, *, expert: bool = False, **options: Any) -> TextEnv:
        """Build a `ScienceWorldEnv` on `task_set`; checks the extra and Java (`ScienceWorldUnavailable`)."""
        from playground.envs.scienceworld.engine import check_java, scienceworld_module
        from playground.envs.scienceworld.env import ScienceWorldEnv

        if task_set not in TASK_SETS:
            raise ValueError(f"scienceworld: unknown task set {task_set!r}; choose from: {', '.join(TASK_SETS)}")
        scienceworld_module()
        check_java()
        return ScienceWorldEnv(TASK_SETS[task_set], expert=expert, **options)

    def prepare(self, task_set: str, task_ids: list[str], progress: Callable[[str], None] | None = None) -> None:
        """Check, before a run plays anything, that the engine can start: the extra and Java."""
        from playground.envs.scienceworld.engine import check_java, scienceworld_module

        scienceworld_module()
        check_java()

    def describe(self, task_set: str) -> dict:
        """Return the env, task set and the scienceworld version."""
        try:
            version = importlib.metadata.version("scienceworld")
        except importlib.metadata.PackageNotFoundError:
            version = "not installed"
        return {"env": self.name, "task_set": task_set, "version": version}


@hookimpl
def register_envs(register) -> None:
    """Register the `scienceworld` env."""
    register(ScienceWorldProvider())
