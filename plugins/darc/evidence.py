"""The DARC evidence table: one row per (task, intervention) with its success and cost.

File format: a CSV file whose header is exactly `task_id,intervention,success,cost`;
`success` is 0 or 1, `cost` a finite non-negative number; every task has exactly one row
for every intervention (the table is complete).
"""

from __future__ import annotations

import csv
import hashlib
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Sequence

import numpy as np

from playground.core.errors import PlaygroundError

HEADER = ("task_id", "intervention", "success", "cost")


class EvidenceError(PlaygroundError, ValueError):
    """An evidence table that cannot be used; the message names the file, line or value at fault."""


@dataclass(frozen=True, eq=False)
class Evidence:
    """A complete evidence table as matrices over tasks (rows) and interventions (columns).

    `success[i, r]` is True when intervention `interventions[r]` solved task `task_ids[i]`;
    `cost[i, r]` is what that attempt cost.
    """

    task_ids: tuple[str, ...]
    interventions: tuple[str, ...]
    success: np.ndarray
    cost: np.ndarray

    def __post_init__(self) -> None:
        object.__setattr__(self, "task_ids", tuple(self.task_ids))
        object.__setattr__(self, "interventions", tuple(self.interventions))
        success = np.asarray(self.success)
        cost = np.asarray(self.cost, dtype=float)
        shape = (len(self.task_ids), len(self.interventions))
        if success.shape != shape or cost.shape != shape:
            raise EvidenceError(f"evidence matrices must have shape {shape} (tasks x interventions), "
                                f"got success {success.shape} and cost {cost.shape}")
        if not np.isin(success, (0, 1)).all():
            raise EvidenceError("evidence success values must be 0 or 1")
        if not np.isfinite(cost).all() or (cost < 0).any():
            raise EvidenceError("evidence costs must be finite and non-negative")
        _check_unique(self.task_ids, "task id")
        _check_unique(self.interventions, "intervention")
        object.__setattr__(self, "success", success.astype(bool))
        object.__setattr__(self, "cost", cost)

    @property
    def n_tasks(self) -> int:
        """The number of tasks."""
        return len(self.task_ids)

    def restrict(self, interventions: Sequence[str]) -> Evidence:
        """Return the table limited to `interventions`, in that order (unknown names raise EvidenceError)."""
        names = select_interventions(self.interventions, interventions)
        columns = [self.interventions.index(name) for name in names]
        return Evidence(self.task_ids, tuple(names), self.success[:, columns], self.cost[:, columns])

    def rows(self) -> Iterator[dict[str, Any]]:
        """Yield the table as row dicts (task-major), as `write_evidence` takes them."""
        for i, task_id in enumerate(self.task_ids):
            for r, name in enumerate(self.interventions):
                yield {"task_id": task_id, "intervention": name,
                       "success": int(self.success[i, r]), "cost": float(self.cost[i, r])}


def select_interventions(available: Sequence[str], wanted: Sequence[str]) -> list[str]:
    """Return `wanted` as a list after checking it is non-empty, duplicate-free and within `available`."""
    names = list(wanted)
    if not names:
        raise EvidenceError("the intervention restriction list is empty")
    _check_unique(names, "intervention in the restriction list")
    unknown = [name for name in names if name not in available]
    if unknown:
        raise EvidenceError(f"unknown intervention(s) {', '.join(map(repr, unknown))}; "
                            f"the evidence has: {', '.join(available)}")
    return names


def _check_unique(names: Sequence[str], what: str) -> None:
    seen = set()
    for name in names:
        if name in seen:
            raise EvidenceError(f"duplicate {what} {name!r}")
        seen.add(name)


def parse_success(value: Any, where: str) -> int:
    """Return a success value as 0 or 1, or raise EvidenceError naming `where`."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int) and value in (0, 1):
        return value
    if isinstance(value, str) and value.strip() in ("0", "1"):
        return int(value.strip())
    raise EvidenceError(f"{where}: success must be 0 or 1, got {value!r}")


def parse_cost(value: Any, where: str) -> float:
    """Return a cost as a finite non-negative float, or raise EvidenceError naming `where`."""
    try:
        cost = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise EvidenceError(f"{where}: cost must be a number, got {value!r}") from None
    if not math.isfinite(cost):
        raise EvidenceError(f"{where}: cost must be a finite number, got {value!r}")
    if cost < 0:
        raise EvidenceError(f"{where}: cost must be non-negative, got {value!r}")
    return cost


def load_evidence(path: str | os.PathLike, interventions: Sequence[str] | None = None) -> Evidence:
    """Read an evidence CSV file into an `Evidence` table.

    Tasks and interventions keep the order of their first appearance in the file; when
    `interventions` is given, only those columns are kept, in that order, and only they
    must be complete. Any bad input raises EvidenceError naming the file and the line or value.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise EvidenceError(f"cannot read evidence file {str(path)!r}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise EvidenceError(f"evidence file {str(path)!r} is not UTF-8 text") from None
    cells, first_line = _read_cells(text.splitlines(), str(path))
    tasks = list(dict.fromkeys(task for task, _ in cells))
    names = list(dict.fromkeys(name for _, name in cells))
    if interventions is not None:
        try:
            names = select_interventions(names, interventions)
        except EvidenceError as exc:
            raise EvidenceError(f"{path}: {exc}") from None
    task_index = {task: i for i, task in enumerate(tasks)}
    name_index = {name: r for r, name in enumerate(names)}
    kept = [(task_index[task], name_index[name], value) for (task, name), value in cells.items() if name in name_index]
    rows = np.array([i for i, _, _ in kept], dtype=int)
    columns = np.array([r for _, r, _ in kept], dtype=int)
    filled = np.zeros((len(tasks), len(names)), dtype=bool)
    success = np.zeros((len(tasks), len(names)), dtype=bool)
    cost = np.zeros((len(tasks), len(names)), dtype=float)
    filled[rows, columns] = True
    success[rows, columns] = [value[0] for _, _, value in kept]
    cost[rows, columns] = [value[1] for _, _, value in kept]
    if not filled.all():
        i, r = np.argwhere(~filled)[0]
        task, name = tasks[i], names[r]
        raise EvidenceError(f"{path}: missing cell: task {task!r} has no row for intervention {name!r} "
                            f"(task first seen at line {first_line[task]})")
    return Evidence(tuple(tasks), tuple(names), success, cost)


def _read_cells(lines: list[str], source: str) -> tuple[dict[tuple[str, str], tuple[int, float]], dict[str, int]]:
    """Parse and check every row; return {(task, intervention): (success, cost)} and each task's first line."""
    reader = csv.reader(lines)
    header = next(reader, None)
    if header is None:
        raise EvidenceError(f"{source}: empty file; expected the header {','.join(HEADER)}")
    if tuple(field.strip() for field in header) != HEADER:
        raise EvidenceError(f"{source}: line 1: header must be exactly {','.join(HEADER)}, got {','.join(header)}")
    cells: dict[tuple[str, str], tuple[int, float]] = {}
    cell_line: dict[tuple[str, str], int] = {}
    first_line: dict[str, int] = {}
    for row in reader:
        line = reader.line_num
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        where = f"{source}: line {line}"
        if len(row) != len(HEADER):
            raise EvidenceError(f"{where}: expected {len(HEADER)} columns ({','.join(HEADER)}), got {len(row)}")
        task, name = row[0].strip(), row[1].strip()
        if not task:
            raise EvidenceError(f"{where}: empty task_id")
        if not name:
            raise EvidenceError(f"{where}: empty intervention")
        if (task, name) in cells:
            raise EvidenceError(f"{where}: duplicate row for task {task!r} and intervention {name!r} "
                                f"(first at line {cell_line[task, name]})")
        cells[task, name] = (parse_success(row[2], where), parse_cost(row[3], where))
        cell_line[task, name] = line
        first_line.setdefault(task, line)
    if not cells:
        raise EvidenceError(f"{source}: no evidence rows after the header")
    return cells, first_line


def write_evidence(path: str | os.PathLike, rows: Iterable[Mapping[str, Any] | Sequence[Any]]) -> Path:
    """Write evidence rows (dicts with the header's keys, or 4-tuples in header order) as a CSV file.

    Values are checked as `load_evidence` checks them, and the file is replaced only once
    every row is written, so a bad row leaves an existing file untouched.
    """
    path = Path(path)
    lines: list[list[str | int]] = [list(HEADER)]
    seen: set[tuple[str, str]] = set()
    for n, row in enumerate(rows, start=1):
        where = f"evidence row {n}"
        try:
            values = [row[key] for key in HEADER] if isinstance(row, Mapping) else list(row)
        except KeyError as exc:
            raise EvidenceError(f"{where}: missing key {exc.args[0]!r}") from None
        if len(values) != len(HEADER):
            raise EvidenceError(f"{where}: expected {len(HEADER)} values ({','.join(HEADER)}), got {len(values)}")
        task, name = str(values[0]), str(values[1])
        if not task.strip() or not name.strip():
            raise EvidenceError(f"{where}: empty task_id or intervention")
        if (task, name) in seen:
            raise EvidenceError(f"{where}: duplicate row for task {task!r} and intervention {name!r}")
        seen.add((task, name))
        cost = parse_cost(values[3], where)
        lines.append([task, name, parse_success(values[2], where), _format_cost(cost)])
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", newline="", encoding="utf-8") as handle:
        csv.writer(handle, lineterminator="\n").writerows(lines)
    os.replace(tmp, path)
    return path


def _format_cost(cost: float) -> str:
    return str(int(cost)) if cost.is_integer() and abs(cost) < 2**53 else repr(cost)


def evidence_hash(path: str | os.PathLike) -> str:
    """Return the SHA-256 hex digest of the file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


BASE_FILE = "base.csv"
META_FILE = "evidence.json"


def base_tau_free(evidence_path: str | os.PathLike) -> tuple[float, str]:
    """The mean cost of a base attempt (the standard attempt), from `base.csv` next to the evidence, and its source.

    EvidenceError when there is no base file: `darc evidence` writes one; otherwise pass --tau-free.
    """
    path = Path(evidence_path).with_name(BASE_FILE)
    if not path.is_file():
        raise EvidenceError(f"no {BASE_FILE} next to {str(evidence_path)!r} to measure the cost of a standard "
                            f"attempt (darc evidence writes it); pass --tau-free")
    base = load_evidence(path)
    mean = float(base.cost.mean())
    return mean, f"mean cost of a base attempt over {base.n_tasks} tasks ({path})"


def evidence_meta(evidence_path: str | os.PathLike) -> dict[str, Any]:
    """The `evidence.json` darc evidence wrote next to the evidence (cost units, base attempt), or {}."""
    import json

    path = Path(evidence_path).with_name(META_FILE)
    if not path.is_file():
        return {}
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EvidenceError(f"cannot read {str(path)!r}: {exc}") from None
    return meta if isinstance(meta, dict) else {}
