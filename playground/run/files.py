"""Safe writes of user-named output files, and paths confined to a root.

Every file a command writes to a path the user named goes through `check_output` first
(nothing is overwritten without `force`, never one of the command's own inputs, never a
folder) and is then written by `atomic_write`: to a temporary file in the same folder,
flushed and renamed over the target only once it is complete, the temporary file removed
when anything fails. A path built from user input under a root folder (a harness or task
name used as a file name) goes through `safe_file_name` and `confined`. A small JSON file the user names (a
policy, a prompt) is read into an object by `json_object`, with a size bound.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import secrets
import stat
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO

from playground.core.errors import PlaygroundError
from playground.run.paths import URLPathError, plain_path


class OutputError(PlaygroundError):
    """An output path that must not be written: it exists, is a folder, or is one of the inputs."""


class PathEscapeError(PlaygroundError):
    """A path derived from user input would leave the folder it belongs in."""


# How every text file a run or a command writes encodes what UTF-8 cannot (a lone surrogate from a model's reply, an
# undecodable byte of a path read with surrogateescape): as its escape `\udcff`, never an error. One policy for the
# traces, the reports and every `atomic_write` in text.
TEXT_ERRORS = "backslashreplace"

# What a run directory holds of its own at its top (`playground.run.rundir`); every folder in it is the run's too
# (traces, playbooks, and those plugins write). A command never writes over one of them.
RUN_OWN_FILES = frozenset({"config.json", "lock.json", "episodes.jsonl", "episodes.quarantine.jsonl", "summary.json",
                           ".lock", "unfinished.jsonl", "traces-left-out.txt"})


def is_run_dir(folder: str | os.PathLike) -> bool:
    """Whether `folder` is a run directory, known by its records (episodes.jsonl) or by its config beside the lock
    file a run takes from its first moment; never by a folder name (a source tree may hold a `playbooks/`)."""
    folder = Path(folder)
    try:
        return (folder / "episodes.jsonl").is_file() or ((folder / "config.json").is_file()
                                                          and (folder / ".lock").is_file())
    except OSError:
        return False


def enclosing_runs(target: str | os.PathLike) -> list[Path]:
    """The run directories (`is_run_dir`) among the folders that hold `target`, nearest first."""
    resolved = Path(target).resolve()
    return [folder for folder in resolved.parents if is_run_dir(folder)]


def check_output(path: str | os.PathLike, *, force: bool = False, inputs: Iterable[str | os.PathLike] = (),
                 runs: Iterable[str | os.PathLike] = (), what: str = "output", option: str = "--force") -> Path:
    """Return `path` after checking that it may be written; OutputError says why not.

    Refused, `force` or not: an empty name; a URL (`scheme://...`, `playground.run.paths`); a folder; any of
    `inputs` (the same file, through links too, with SQLite's `-wal`/`-shm`/`-journal` side files); one of the own
    files of a run directory in `runs`, or of any run directory that holds the path (`enclosing_runs`): its records,
    config, lock, summary, unfinished log, or anything in one of its folders.
    Refused without `force`: an existing file. Always: a path under a file, or in a folder where no file can be
    created (tried with a temporary file, removed at once), so a command fails before its work, not after it.
    """
    if not str(path).strip():
        raise OutputError(f"the {what} path is empty")
    try:  # a URL is no path: `s3://b/k` would make a folder `s3:` (issue 56; `playground.run.paths`)
        plain_path(path, what)
    except URLPathError as exc:
        raise OutputError(str(exc)) from None
    try:
        return _checked_output(Path(path), force, inputs, runs, what, option)
    except OSError as exc:  # a name too long for the file system, a folder we may not read, ...
        raise OutputError(f"{what} {str(path)!r}: {exc.strerror or exc}") from None


def _checked_output(target: Path, force: bool, inputs: Iterable[str | os.PathLike],
                    runs: Iterable[str | os.PathLike], what: str, option: str) -> Path:
    """`check_output`'s checks (OSError from the file system passes through to it)."""
    if target.is_dir():
        raise OutputError(f"{what} {str(target)!r} is a folder; name a file inside it")
    for run in [*runs, *enclosing_runs(target)]:
        try:
            inside = target.resolve().relative_to(Path(run).resolve()).parts
        except ValueError:
            continue
        if len(inside) > 1 or (len(inside) == 1 and inside[0] in RUN_OWN_FILES):
            raise OutputError(f"{what} {str(target)!r} is one of the run {str(run)!r}'s own files; refusing to "
                              "overwrite it, with --force too (name a file outside them)")
    for source in inputs:
        source = Path(source)
        for protected in (source, *(source.with_name(source.name + s) for s in ("-wal", "-shm", "-journal"))):
            if _same_file(target, protected):
                raise OutputError(f"{what} {str(target)!r} is the input {str(protected)!r}; "
                                  "refusing to overwrite it (name another file)")
    if target.exists() and not force:
        raise OutputError(f"{what} {str(target)!r} already exists; pass {option} to replace it")
    existing = next(folder for folder in (target.parent, *target.parent.parents) if folder.exists())
    if not existing.is_dir():
        raise OutputError(f"{what} {str(target)!r}: {str(existing)!r} is not a folder")
    try:
        tempfile.TemporaryFile(dir=existing).close()
    except OSError as exc:
        raise OutputError(f"{what} {str(target)!r}: cannot write in {str(existing)!r} ({exc.strerror or exc})") \
            from None
    return target


def _same_file(a: Path, b: Path) -> bool:
    try:
        if a.exists() and b.exists():
            return os.path.samefile(a, b)
        return a.resolve() == b.resolve()
    except OSError:
        return False


def atomic_write(path: str | os.PathLike, write: Callable[[IO], object], *, binary: bool = False) -> Path:
    """Write `path` through `write(handle)` into a temporary file beside it, then rename it into place.

    The target is replaced only by a complete file; on any error the temporary file is
    removed and the target left as it was. The file gets the mode `open()` would give it: a
    new one 0666 less the umask (0644 under umask 022), one written over its old mode.
    OutputError names a folder that cannot be written and a target that cannot be replaced
    (a folder, say).
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = _open_beside(path, binary)
    except OSError as exc:
        raise OutputError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
    try:
        with handle:
            try:  # as with open(), a file written over keeps its mode
                os.fchmod(handle.fileno(), stat.S_IMODE(os.stat(path).st_mode) & 0o777)
            except FileNotFoundError:
                pass
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException as exc:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        if isinstance(exc, OSError) and not isinstance(exc, PlaygroundError):
            raise OutputError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None
        raise
    return path


def _open_beside(path: Path, binary: bool) -> tuple[IO, Path]:
    """A new temporary file beside `path`, open for writing, and its path; made as `open()` makes a file (mode 0666
    less the umask), not private as `tempfile` makes it."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        name = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
        try:
            descriptor = os.open(name, flags, 0o666)
        except FileExistsError:
            continue
        return (os.fdopen(descriptor, "wb" if binary else "w", encoding=None if binary else "utf-8",
                          errors=None if binary else TEXT_ERRORS), name)
    raise FileExistsError(errno.EEXIST, f"no free temporary name beside {str(path)!r}")


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    """Write `text` to `path` atomically (see `atomic_write`)."""
    return atomic_write(path, lambda handle: handle.write(text))


MAX_KEPT_NAME = 200  # characters of a safe name kept whole as a file name; a longer one is cut and hashed


def safe_file_name(name: str) -> str:
    """Return `name` as one safe file name: letters, digits and `-_.:` only, no leading dot.

    A name that had to be changed gets a short hash of the original appended, so two
    different names never share a file (`a/b` and `a_b` differ). So does a name of more than
    MAX_KEPT_NAME characters, cut to a readable prefix: a file system takes 255 bytes a name,
    suffixes (`.trial2.jsonl`) included. Shorter safe names are kept as they are, so the files
    of old run directories keep their names.
    """
    cleaned = "".join(c if (c.isascii() and c.isalnum()) or c in "-_.:" else "_" for c in name).lstrip(".")
    if cleaned == name and name and len(name) <= MAX_KEPT_NAME:
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{cleaned[:80] or '_'}-{digest}"


def confined(root: str | os.PathLike, relative: str | os.PathLike, what: str = "path") -> Path:
    """Return `root / relative` after checking it stays inside `root` (PathEscapeError otherwise)."""
    root_path = Path(root).resolve()
    candidate = (Path(root) / relative)
    resolved = candidate.resolve()
    if Path(relative).is_absolute() or not resolved.is_relative_to(root_path):
        raise PathEscapeError(f"{what} {str(relative)!r} is outside {str(root)!r}; refusing to use it")
    return candidate


class JSONFileError(PlaygroundError, ValueError):
    """A file that is not one JSON object; the message names the file (`where`) and what is wrong."""


def json_object(data: bytes, where: str, max_bytes: int) -> dict:
    """The JSON object in `data` (the bytes of the file `where` names); JSONFileError when it is larger than
    `max_bytes`, not UTF-8, not JSON, or not an object."""
    if len(data) > max_bytes:
        raise JSONFileError(f"{where} is {len(data):,} bytes, more than {max_bytes:,}")
    try:
        value = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise JSONFileError(f"{where} is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise JSONFileError(f"{where} is not JSON: {exc.msg} (line {exc.lineno})") from None
    except (ValueError, RecursionError) as exc:
        raise JSONFileError(f"{where} is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise JSONFileError(f"{where} must be a JSON object, got {type(value).__name__}")
    return value
