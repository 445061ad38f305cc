"""The run lockfile, DIR/lock.json: what a run's results depend on, so a run can be reproduced and two runs compared.

It records the playground version and git commit (when playground runs from a checkout),
the Python version, the version of every installed distribution that provides playground
plugins, the env's description (its `describe()`, as in trace headers) and the SHA-256 of
each data file the env names (`EnvProvider.data_files`), a hash of the task list, the
agent, its options and the SHA-256 of its model file (an agent that runs from a weights
file exposes its path as `model_file`; one that computes on this machine's cores, its threads and why as
`thread_choice`, recorded not compared), the run's seed, step budget, parameters and
harness fingerprints, each harness's playbook content hash before the run's first
episode and after its last, and how the model roles' replies were constrained
(`judge_reply_modes`, after the run).

`lock_differences` lists the fields of two locks that differ in what matters: everything
but the time it was written and the playbooks' hashes after the run (outcomes, not
inputs). `playground run --check-lock` refuses a run whose lock differs from a given one;
`playground compare` warns when the two runs' software, data, tasks or model differ.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import platform
import re
import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from playground.agents.response_cache import file_sha256
from playground.core.errors import PlaygroundError
from playground.core.records import EpisodeRecord
from playground.run.files import atomic_write_text
from playground.run.paths import url_scheme
from playground.run.report import merge_judge_replies
from playground.run.secrets import redact

LOCK_FILE = "lock.json"
LOCK_VERSION = 1
# Fields that are records, not inputs: never a reason to refuse a run.
NOT_COMPARED = ("created", "trials", "agent.model_file.path", "judge_reply_modes", "run.max_tokens_total",
                "agent.threads")  # threads=auto follows the machine's load: the same replies, another speed
# What `playground compare` warns about: the software, the env's data and tasks, the model.
COMPARE_FIELDS = ("playground", "python", "distributions", "env", "data_files", "tasks", "agent.model_file")


class LockError(PlaygroundError):
    """A lock file that cannot be read, or a run whose lock differs from the one it must match."""


class _Section(BaseModel):
    """A part of the lock: a JSON object whose keys are the env's, the agent's, the run's own."""

    model_config = ConfigDict(extra="allow", strict=True)


class RunLock(BaseModel):
    """The model of lock.json a lock is checked against when it is written and read (version `LOCK_VERSION`): the
    sections below, each a JSON object (the playbooks, data files and judge reply modes where the run has them)."""

    model_config = ConfigDict(extra="allow", strict=True)

    lock_version: StrictInt
    created: StrictStr | None
    playground: _Section
    python: StrictStr
    distributions: dict[str, StrictStr]
    env: _Section
    agent: _Section
    run: _Section
    data_files: dict[str, StrictStr | None] = Field(default_factory=dict)
    tasks: _Section | None = None
    trials: StrictInt = 1
    playbooks: dict[str, _Section] = Field(default_factory=dict)
    judge_reply_modes: dict[str, dict[str, StrictInt]] | None = None


LOCK_UPGRADES: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}  # version -> version + 1 (none older yet)


def checked_lock(lock: Any, where: str) -> dict[str, Any]:
    """`lock` as this version's lock (older versions upgraded), checked against `RunLock`; LockError names `where`
    and what is wrong."""
    if not isinstance(lock, dict) or "lock_version" not in lock:
        raise LockError(f"{where}: not a lock file (no 'lock_version'; a run directory's lock.json is one)")
    version = lock["lock_version"]
    if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= LOCK_VERSION:
        raise LockError(f"{where}: lock_version {version!r} is not one this playground reads (1 to {LOCK_VERSION}); "
                        "a newer one needs a newer playground")
    for old in range(version, LOCK_VERSION):
        lock = LOCK_UPGRADES[old](lock)
    try:
        RunLock.model_validate(lock)
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(part) for part in first["loc"])
        raise LockError(f"{where}: not a lock file: {field!r}: {first['msg']}") from None
    return lock


def playbook_hash(path: str | Path, host=None) -> str | None:
    """A hash of a playbook's content, or None when there is no file yet.

    The plugin that owns the playbook format answers through `playbook_digest` (the same
    content gives the same hash whatever the file's layout); without an answer, or without a
    `host`, the file is hashed by its bytes.
    """
    file = Path(path)
    if host is not None and url_scheme(str(path)) is not None:  # a playbook in a database: only its plugin can hash it
        digest = host.pm.hook.playbook_digest(path=str(path))
        return str(digest) if digest else None
    if not file.is_file():
        return None
    if host is not None:
        digest = host.pm.hook.playbook_digest(path=str(file))
        if digest:
            return str(digest)
    return file_sha256(file)


def git_state() -> dict[str, Any] | None:
    """The commit of the git checkout playground runs from, whether tracked files differ from it and a hash of
    that difference, or None when playground does not run from a git checkout."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10)
        diff = subprocess.run(["git", "-C", str(root), "diff", "HEAD", "--no-ext-diff", "--binary"],
                              capture_output=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if commit.returncode != 0:
        return None
    if diff.returncode != 0:
        return {"commit": commit.stdout.strip(), "dirty": None, "diff_sha256": None}
    changes = hashlib.sha256(diff.stdout).hexdigest() if diff.stdout else None
    return {"commit": commit.stdout.strip(), "dirty": bool(diff.stdout), "diff_sha256": changes}


def plugin_distributions() -> dict[str, str]:
    """Name and version of playground, of every installed distribution that provides playground plugins, and of
    the installed distributions these require (an env's engine, a model runtime)."""
    dists = {"playground": importlib.metadata.distribution("playground")} if _version("playground") != "not installed" \
        else {}
    for entry in importlib.metadata.entry_points(group="playground"):
        dist = getattr(entry, "dist", None)
        if dist is not None:
            dists[dist.metadata["Name"] or dist.name] = dist
    found = {name: dist.version for name, dist in dists.items()}
    for dist in dists.values():
        for requirement in dist.requires or []:
            extra = _EXTRA.search(requirement)
            if extra and extra.group(1) in DEV_EXTRAS:
                continue  # test and lint tools do not change results
            match = _REQUIREMENT_NAME.match(requirement)
            version = _version(match.group(0)) if match else "not installed"
            if match and version != "not installed":
                found.setdefault(match.group(0).lower(), version)
    return dict(sorted(found.items()))


_REQUIREMENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_EXTRA = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")
DEV_EXTRAS = {"test", "tests", "dev", "lint", "docs"}


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def model_file(agent: Any) -> dict[str, Any] | None:
    """The agent's model file (`agent.model_file`, a path) with its SHA-256 and size, or None when it has none."""
    path = getattr(agent, "model_file", None)
    if not path:
        return None
    file = Path(path)
    if not file.is_file():
        return {"path": str(file), "sha256": None, "bytes": None}
    return {"path": str(file), "sha256": file_sha256(file), "bytes": file.stat().st_size}


def build_lock(host, config, fingerprints: Mapping[str, str], playbooks: Mapping[str, str],
               previous: Mapping[str, Any] | None = None, agent: Any = None) -> dict[str, Any]:
    """The lock of a run about to play `config` (a RunConfig): see the module docstring.

    `playbooks` maps each harness to its playbook file. With `previous` (the directory's
    lock from an earlier session), the playbooks' hashes before the run are kept from it.
    `agent` is the run's agent as `check_config` built it (None: built here).
    """
    provider = host.envs.get(config.env).provider
    if agent is None:
        agent = host.agents.get(config.agent).factory(**config.agent_options)
    data_files = {}
    for name, path in dict(provider.data_files(config.task_set)).items():
        data_files[str(name)] = file_sha256(path) if Path(path).is_file() else None
    tasks_text = json.dumps([config.task_set, config.split, list(config.tasks)])
    before = {h: (previous or {}).get("playbooks", {}).get(h, {}).get("before", playbook_hash(p, host))
              for h, p in playbooks.items()}
    return {
        "lock_version": LOCK_VERSION,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "playground": {"version": _version("playground"), "git": git_state()},
        "python": ".".join(platform.python_version_tuple()[:2]),
        "distributions": plugin_distributions(),
        "env": {"name": config.env, **json.loads(json.dumps(provider.describe(config.task_set), default=str))},
        "data_files": data_files,
        "tasks": {"task_set": config.task_set, "split": config.split, "count": len(config.tasks),
                  "sha256": hashlib.sha256(tasks_text.encode()).hexdigest()},
        "agent": {"name": config.agent, "options": redact(json.loads(json.dumps(config.agent_options, default=str))),
                  "model_file": model_file(agent),
                  **({"threads": agent.thread_choice} if getattr(agent, "thread_choice", None) else {})},
        "run": {"seed": config.seed, "max_steps": config.max_steps,
                "params": json.loads(json.dumps(config.params, default=str)), "harnesses": dict(fingerprints),
                "max_tokens_total": getattr(config, "max_tokens_total", None)},  # where it stops, not what it plays
        "trials": config.trials,
        "playbooks": {h: {"path": str(p), "before": before[h], "after": None} for h, p in playbooks.items()},
    }


def finish_lock(lock: dict[str, Any], host=None, records: Iterable[EpisodeRecord] = ()) -> dict[str, Any]:
    """The lock with each playbook's hash after the run filled in, and, where the run's model roles made judge
    calls, how their replies were constrained (`judge_reply_modes`: per role, calls per mode, e.g. "grammar",
    "json_schema", or "json_object" after an endpoint refused a schema): learnt while playing, so recorded after."""
    for entry in lock["playbooks"].values():
        entry["after"] = playbook_hash(entry["path"], host)
    replies = merge_judge_replies(records)
    if replies:
        lock["judge_reply_modes"] = {role: counts["modes"] for role, counts in replies.items()}
    return lock


def write_lock(run_path: str | Path, lock: dict[str, Any], previous: Mapping[str, Any] | None = None) -> Path:
    """Write DIR/lock.json atomically; return its path. A lock equal to `previous` but for the time it was made
    keeps that time, so rerunning a finished run leaves the file as it was."""
    written = checked_lock(redact(lock), str(Path(run_path) / LOCK_FILE))  # a URL's credentials never reach it
    if previous is not None and {**written, "created": None} == {**previous, "created": None}:
        lock["created"] = written["created"] = previous.get("created")
    return atomic_write_text(Path(run_path) / LOCK_FILE, json.dumps(written, indent=2, sort_keys=False) + "\n")


def read_lock(path: str | Path) -> dict[str, Any]:
    """A lock file's content; LockError names a file that is missing or not a lock."""
    try:
        lock = json.loads(Path(path).read_bytes().decode("utf-8"))
    except OSError as exc:
        raise LockError(f"{path}: cannot read the lock file ({exc.strerror or exc})") from None
    except (ValueError, RecursionError) as exc:
        raise LockError(f"{path}: not a lock file: not valid JSON ({exc})") from None
    return checked_lock(lock, str(path))


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Nested mappings as one mapping of dotted field names to leaf values."""
    if isinstance(value, Mapping) and value:
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: value}


def _matches(field: str, pattern: str) -> bool:
    parts, wanted = field.split("."), pattern.split(".")
    return len(parts) >= len(wanted) and all(w in ("*", p) for w, p in zip(wanted, parts))


def lock_differences(a: Mapping[str, Any], b: Mapping[str, Any], only: tuple[str, ...] | None = None) -> list[str]:
    """The fields that differ between two locks, as `field: A -> B` lines (empty when they agree).

    `only` limits the comparison to fields under those prefixes. Harness fingerprints and
    playbooks are compared for the harnesses both locks have (harness names may hold dots,
    so they are compared by name, not as dotted fields).
    """
    def values(lock: Mapping[str, Any]) -> dict[str, Any]:
        rest = {key: value for key, value in lock.items() if key != "playbooks"}
        rest["run"] = {key: value for key, value in (lock.get("run") or {}).items() if key != "harnesses"}
        return flatten(rest)

    lines = []
    flat_a, flat_b = values(a), values(b)
    for field in sorted(set(flat_a) | set(flat_b)):
        skipped = any(_matches(field, pattern) for pattern in NOT_COMPARED)
        if skipped or (only is not None and not any(_matches(field, pattern) for pattern in only)):
            continue
        if flat_a.get(field, "(absent)") != flat_b.get(field, "(absent)"):
            lines.append(f"{field}: {flat_a.get(field, '(absent)')!r} -> {flat_b.get(field, '(absent)')!r}")
    if only is None:
        prints_a, prints_b = (lock.get("run", {}).get("harnesses", {}) for lock in (a, b))
        books_a, books_b = (lock.get("playbooks", {}) for lock in (a, b))
        for harness in sorted(set(prints_a) & set(prints_b)):
            if prints_a[harness] != prints_b[harness]:
                lines.append(f"harness {harness!r} fingerprint: {prints_a[harness]!r} -> {prints_b[harness]!r}")
        for harness in sorted(set(books_a) & set(books_b)):
            if books_a[harness].get("before") != books_b[harness].get("before"):
                lines.append(f"harness {harness!r} playbook before the run: {books_a[harness].get('before')!r} -> "
                             f"{books_b[harness].get('before')!r}")
    return lines
