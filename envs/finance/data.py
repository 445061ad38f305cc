"""Finance tasks and task sets: generated ones, and the benchmark's JSONL files.

Generated task sets (no download): `formula` and `finer`. Task ids are `formula-<seed>`
and `finer-<seed>`; the seed's range is the split: train 0-9999, dev 10000-19999,
test 20000 and up.

Benchmark files: `FINANCE_DATA` names directories or `.jsonl` files (several joined with
the path separator, ":" on Linux). Each file holds one `{"context": ..., "target": ...}`
object per line and becomes a split named by its file stem; files whose stem starts with
`formula` form the task set `formula-data`, those starting with `finer` form
`finer-data` (other names are sorted by their first record: a numeric target is Formula).
Task ids are `<file stem>:<line number>`, e.g. `formula_val_subset_300:17`, stable as
long as the file is. The splits whose name contains `train` are the retrieval pool for
demonstrations.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from playground.core.errors import PlaygroundError
from playground.core.task_sets import TaskSet, seed_range

DATA_VARIABLE = "FINANCE_DATA"
FAMILIES = ("formula", "finer")
SPLIT_STARTS = {"train": 0, "dev": 10_000, "test": 20_000}
SPLIT_SIZE = 10_000
SEEDS_TEXT = "train 0-9999, dev 10000-19999, test 20000+"
_GENERATED_ID = re.compile(r"(formula|finer)-(0|[1-9][0-9]*)")
_DATA_ID = re.compile(r"(.+):([1-9][0-9]*)")


class FinanceDataError(PlaygroundError, ValueError):
    """A Finance data file or task id is malformed or missing; the message names it."""


@dataclass(frozen=True)
class Task:
    """One Finance task: its id, family ("formula" or "finer"), question context and gold answer."""

    id: str
    family: str
    context: str
    target: str


# -- generated tasks -------------------------------------------------------------------


def generated_task(family: str, seed: int) -> Task:
    """Return the generated task of `family` with this seed."""
    if family == "formula":
        from playground.envs.finance.formulas import formula_task

        _, context, target = formula_task(seed)
    else:
        from playground.envs.finance.tagging import tagging_task

        context, target = tagging_task(seed)
    return Task(f"{family}-{seed}", family, context, target)


# -- benchmark files -------------------------------------------------------------------

_FILE_CACHE: dict[tuple[str, int, int], list[tuple[int, str, str]]] = {}
_WARNED: set[str] = set()


def read_jsonl(path: Path) -> list[tuple[int, str, str]]:
    """Return (line number, context, target) for every record of a `{"context", "target"}` JSONL file."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    if key not in _FILE_CACHE:
        records = []
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise FinanceDataError(f"{path}:{number}: not valid JSON ({exc.msg})") from None
                if not isinstance(record, dict) or not all(isinstance(record.get(k), str)
                                                           for k in ("context", "target")):
                    raise FinanceDataError(f"{path}:{number}: expected an object with string fields "
                                           "'context' and 'target'")
                records.append((number, record["context"], record["target"]))
        _FILE_CACHE[key] = records
    return _FILE_CACHE[key]


def _warn(message: str) -> None:
    if message not in _WARNED:
        _WARNED.add(message)
        print(f"playground: finance: {message}", file=sys.stderr)


def _family_of(path: Path) -> str | None:
    for family in FAMILIES:
        if path.stem.lower().startswith(family):
            return family
    records = read_jsonl(path)
    if not records:
        return None
    try:
        float(records[0][2])
        return "formula"
    except ValueError:
        return "finer"


def data_files() -> dict[str, dict[str, Path]]:
    """Return the benchmark files named by `FINANCE_DATA`: family -> split (file stem) -> path."""
    found: dict[str, dict[str, Path]] = {family: {} for family in FAMILIES}
    setting = os.environ.get(DATA_VARIABLE, "").strip()
    for entry in filter(None, (e.strip() for e in setting.split(os.pathsep))):
        root = Path(entry).expanduser()
        if root.is_dir():
            paths = sorted(root.glob("*.jsonl"))
        elif root.is_file():
            paths = [root]
        else:
            _warn(f"{DATA_VARIABLE} entry {entry!r} is neither a directory nor a file; ignored")
            continue
        if not paths:
            _warn(f"{DATA_VARIABLE} entry {entry!r} holds no .jsonl files")
        for path in paths:
            try:
                family = _family_of(path)
            except (FinanceDataError, OSError, UnicodeDecodeError) as exc:
                _warn(f"{exc}; file skipped")
                continue
            if family is None:
                _warn(f"{path} is empty; ignored")
            elif path.stem in found[family]:
                _warn(f"{path} has the same name as {found[family][path.stem]}; ignored")
            else:
                found[family][path.stem] = path
    return found


def data_task_ids(path: Path) -> tuple[str, ...]:
    """Return the task ids of a benchmark file: `<stem>:<line number>` for each record."""
    return tuple(f"{path.stem}:{number}" for number, _, _ in read_jsonl(path))


def _default_split(splits: list[str]) -> str:
    for word in ("test", "val", "dev"):
        for split in splits:
            if word in split.lower():
                return split
    return splits[0]


# -- task sets and tasks ---------------------------------------------------------------


def task_sets() -> dict[str, TaskSet]:
    """Return the task sets: the generated `formula` and `finer`, plus `*-data` sets when FINANCE_DATA has files."""
    sets = {
        "formula": TaskSet("formula", "generated financial-formula questions (45 formulas), answer one number",
                           {s: seed_range("formula", start, SPLIT_SIZE) for s, start in SPLIT_STARTS.items()},
                           params={"family": "formula", "generated": True}),
        "finer": TaskSet("finer", "generated XBRL tagging questions (45 tags, 4 values per task), answer 4 tags",
                         {s: seed_range("finer", start, SPLIT_SIZE) for s, start in SPLIT_STARTS.items()},
                         params={"family": "finer", "generated": True}),
    }
    for family, files in data_files().items():
        if files:
            name = f"{family}-data"
            splits = {}
            for stem, path in sorted(files.items()):
                try:
                    splits[stem] = data_task_ids(path)
                except (FinanceDataError, OSError, UnicodeDecodeError) as exc:
                    _warn(f"{exc}; file skipped")
            if not splits:
                continue
            sets[name] = TaskSet(name, f"{family} benchmark files from {DATA_VARIABLE} (splits named by file)", splits,
                                 default_split=_default_split(list(splits)),
                                 params={"family": family, "generated": False,
                                         "files": {stem: str(files[stem]) for stem in splits}})
    return sets


def task_set_of(task_id: str) -> str:
    """Return the name of the task set a task id belongs to."""
    generated = _GENERATED_ID.fullmatch(task_id)
    if generated:
        return generated.group(1)
    data = _DATA_ID.fullmatch(task_id)
    if data:
        for family, files in data_files().items():
            if data.group(1) in files:
                return f"{family}-data"
    raise FinanceDataError(f"finance: unknown task id {task_id!r} (expected 'formula-<seed>', 'finer-<seed>' or "
                           f"'<file stem>:<line>' for a file under {DATA_VARIABLE})")


def get_task(task_id: str) -> Task:
    """Return the task with this id (generated, or read from a FINANCE_DATA file)."""
    generated = _GENERATED_ID.fullmatch(task_id)
    if generated:
        return generated_task(generated.group(1), int(generated.group(2)))
    data = _DATA_ID.fullmatch(task_id)
    if data:
        stem, line = data.group(1), int(data.group(2))
        for family, files in data_files().items():
            if stem in files:
                for number, context, target in read_jsonl(files[stem]):
                    if number == line:
                        return Task(task_id, family, context, target)
                raise FinanceDataError(f"finance: {files[stem]} has no record on line {line}")
    task_set_of(task_id)  # raises, naming the expected forms
    raise FinanceDataError(f"finance: no file for task {task_id!r} under {DATA_VARIABLE}")


def train_pool(task_set: str, splits: list[str] | None = None, size: int = 500) -> list[Task]:
    """Return the tasks demonstrations may be drawn from for `task_set`.

    Generated sets: the first `size` tasks of their train split. File sets: every task of
    the splits named `splits`, by default those whose name contains "train" (none: empty).
    """
    if task_set in FAMILIES:
        if splits not in (None, ["train"]):
            raise FinanceDataError(f"finance: generated task set {task_set!r} draws demonstrations from 'train' only")
        return [generated_task(task_set, seed) for seed in range(size)]
    family = task_set.removesuffix("-data")
    files = data_files().get(family, {})
    chosen = splits if splits is not None else [stem for stem in files if "train" in stem.lower()]
    unknown = [s for s in chosen if s not in files]
    if unknown:
        raise FinanceDataError(f"finance: no split {', '.join(map(repr, unknown))} in {task_set}; "
                               f"choose from: {', '.join(sorted(files)) or '(none)'}")
    return [Task(f"{stem}:{number}", family, context, target)
            for stem in chosen for number, context, target in read_jsonl(files[stem])]


def data_hash(task_set: TaskSet) -> str:
    """Return a short sha256 over the bytes of a file task set's files ("" for generated sets)."""
    files = task_set.params.get("files") or {}
    digest = hashlib.sha256()
    for stem in sorted(files):
        digest.update(stem.encode())
        digest.update(Path(files[stem]).read_bytes())
    return digest.hexdigest()[:12] if files else ""
