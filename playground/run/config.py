"""What a run was asked to do (`RunConfig`), its errors, and the names derived from it: each episode's seed and
id, each harness's playbook path."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from playground.core.errors import PlaygroundError
from playground.run.files import confined, safe_file_name


class RunConfigError(PlaygroundError, ValueError):
    """The run was asked for something that does not exist; the message lists the choices."""


class AgentUnavailable(RunConfigError):
    """The agent's factory refused its options or cannot start here (e.g. a missing optional package)."""


DEFAULT_MAX_STEPS = 40  # the step budget of a task set that sets none (`TaskSet.default_max_steps`)


@dataclass
class RunConfig:
    """Everything `playground run` was asked to do."""

    env: str
    task_set: str
    split: str
    tasks: list[str]
    agent: str
    harnesses: list[str]
    out: str
    seed: int = 0
    max_steps: int = DEFAULT_MAX_STEPS
    agent_options: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    playbook: str | None = None
    strict: bool = False
    trials: int = 1  # each task is played this many times per harness, trial N with its own derived seed
    # An episode that ends in an error (the endpoint, the disk, the env or a plugin failed: never the agent's own
    # outcome) is left unfinished, for the next run to play again, unless `record_errors` records it as it ended.
    record_errors: bool = False
    max_consecutive_errors: int = 5  # the circuit breaker: stop handing out work after this many in a row (0: never)
    hook_deadline: float = 600.0  # seconds one plugin hook call may take (0: no limit)
    episode_deadline: float = 14_400.0  # seconds one episode (one attempt) may take (0: no limit)
    # The run-wide token budget (`playground.run.budget`): no new episode once the recorded ones spent this many tokens
    # (agent and model roles, prompt and completion); None: no budget. Not part of what the run plays: a rerun may
    # change it and resumes the same run.
    max_tokens_total: int | None = None


def episode_seed(run_seed: int, task_id: str, trial: int = 1) -> int:
    """Return the seed of a task's episodes in one trial: the same for every harness of a run, another for
    each trial (trial 1 keeps the seed runs had before trials existed)."""
    text = f"{run_seed}:{task_id}" + (f":trial{trial}" if trial > 1 else "")
    digest = hashlib.sha256(text.encode()).digest()
    return int.from_bytes(digest[:4], "big")


def episode_id(run_id: str, harness: str, task_id: str, trial: int = 1) -> str:
    """The id of a (task, harness, trial) episode of a run: the same on every resume (the run id is kept in
    config.json); trials after the first carry `#trial`."""
    return f"{run_id}:{harness}:{task_id}" + (f"#{trial}" if trial > 1 else "")


def playbook_path(config: RunConfig, harness: str) -> str:
    """The playbook a harness uses: `--playbook` for all, else its own under DIR/playbooks/.

    The harness name becomes one safe file name (`prefix:../x/p.json` or an absolute policy
    path never leads out of DIR/playbooks/).
    """
    if config.playbook:
        return config.playbook
    root = Path(config.out) / "playbooks"
    return str(confined(root, safe_file_name(harness) + ".sqlite", what=f"playbook of harness {harness!r}"))
