"""A git revision of this repository as an importable tree beside the working one, for benchmarks that compare a
base revision with now in one run (`scripts/apparatus_size.py`, `scripts/bench_judge_decoding.py`)."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def worktree(rev: str) -> Path:
    """A detached worktree of `rev` under the temp folder (made once per revision)."""
    path = Path(tempfile.gettempdir()) / f"playground-{rev}"
    if not path.exists():
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(path), rev], check=True,
                       capture_output=True)
    return path


def python_env(tree: Path) -> tuple[dict[str, str], Path]:
    """The environment and working folder in which `python` imports playground from `tree` (the working tree:
    the installed editable copy) instead of the installed one: PYTHONPATH comes before the editable install's
    finder, and the folder is an empty one, so no `playground/` in the caller's folder is imported instead."""
    shim = Path(tempfile.mkdtemp(prefix="playground-tree-"))
    if tree.resolve() == ROOT:
        return {**os.environ}, shim
    (shim / "playground").symlink_to(tree / "playground")
    for name in ("plugins", "envs"):  # laid out as the editable install maps them
        link = tree / "playground" / name
        if not link.exists():
            link.symlink_to(tree / name)
    return {**os.environ, "PYTHONPATH": str(shim)}, shim
