"""Child processes that die with the run: parent-death signal, identity by start time, bounded stop.

A run killed with SIGKILL cannot clean up after itself, so everything it starts must go
by itself: worker processes and engine servers call `die_with_parent()` first thing,
which asks the Linux kernel to SIGKILL them when their parent dies
(`prctl(PR_SET_PDEATHSIG, SIGKILL)`; a no-op elsewhere). A process recorded in a file
(e.g. an engine server's pid file) is named by its pid and its start time, so a pid
the system has since given to another process is never mistaken for it
(`process_start_time`, `is_running`). `stop_process_group` stops a process group with
SIGTERM and, after a short grace, SIGKILL.

Processes that others start on the run's behalf (a local Ray's raylet starts workers and
agents, which it does not tie to itself) are out of the parent-death signal's reach: the
run marks them through a variable in the environment they inherit and starts a `Reaper`,
a watchdog in its own session that notes the marked processes and their descendants while
the run lives and, once the run ends (however it ends), SIGKILLs them and then exits.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


RUN_PROCESSES_ENV = "PLAYGROUND_RUN_PROCESSES"  # how many worker processes of one run share this machine's cores


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity where the system says, else the machine's count)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def run_processes() -> int:
    """How many of the run's worker processes share this machine's cores (`RUN_PROCESSES_ENV`; 1 when unset or
    garbled)."""
    try:
        return max(1, int(os.environ.get(RUN_PROCESSES_ENV, "1")))
    except ValueError:
        return 1


def cores_per_process() -> int:
    """This process's fair share of the usable cores: all of them, divided by the run's worker processes when it is
    one of several (a worker process is told their number through `RUN_PROCESSES_ENV`); at least 1."""
    return max(1, usable_cores() // run_processes())


def machine_load() -> float | None:
    """The machine's 1-minute load average, or None where the system does not say."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def threads_by_contention(affinity: int | None = None, processes: int | None = None, load: float | None = None,
                          machine_cores: int | None = None) -> tuple[int, str]:
    """The compute threads for this process now, and why: its share of the cores it may run on (`affinity`: the
    affinity mask's size; `processes`: the run's worker processes), less the cores other processes keep busy.

    Those come from the 1-minute load average (`load`), scaled from the machine's cores (`machine_cores`) to this
    process's, less what the run's other workers account for (up to their share each); a core counts as busy once
    the load on it reaches half a core past the whole cores already counted (on 2 cores at load 1.5 or more: 1
    thread). A thread on a core something else holds stalls the others at every synchronisation, which on shared
    cores costs more than the thread adds. Every value left None is read from this process and machine; at least 1.
    """
    cores = usable_cores() if affinity is None else max(1, affinity)
    processes = run_processes() if processes is None else max(1, processes)
    share = max(1, cores // processes)
    where = f"{cores} usable core{'s' * (cores != 1)}, {processes} worker process{'es' * (processes != 1)}"
    load = machine_load() if load is None else load
    if load is None:
        return share, f"{share}: {where}, load unknown"
    machine_cores = max(1, machine_cores or os.cpu_count() or cores)
    others = max(0.0, load * cores / max(machine_cores, cores) - (processes - 1) * share)
    busy = max(0, math.floor(others - 0.5 + 1e-9))
    threads = max(1, min(share, (cores - busy) // processes))
    return threads, (f"{threads}: {where}, 1-minute load {load:.2f} ({busy} core{'s' * (busy != 1)} "
                     f"busy with other work)")


def die_with_parent(parent_pid: int | None = None) -> bool:
    """Have the kernel SIGKILL this process when its parent dies (Linux; elsewhere nothing, False).

    The signal is tied to the thread that started this process, so start children from the
    thread that lives as long as they should. With `parent_pid`, a process whose parent died
    before this call (and was reparented already) kills itself at once.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
            return False
    except (OSError, AttributeError):
        return False
    if parent_pid is not None and os.getppid() != parent_pid:
        os.kill(os.getpid(), signal.SIGKILL)
    return True


def process_start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux /proc), or None (no such process, or not Linux)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()  # the name in parentheses may hold spaces
    return fields[19] if len(fields) > 19 else None  # field 22 of stat(5); fields[0] is field 3


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2:].startswith("Z")


def is_running(pid: int, start_time: str | None = None) -> bool:
    """True when process `pid` exists, is not a zombie and, when `start_time` is given (and /proc can
    tell), started then: the same process, not a later one that got its pid."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # it exists, owned by someone else
    if _zombie(pid):
        return False
    if start_time is not None:
        now = process_start_time(pid)
        if now is not None and now != start_time:
            return False
    return True


def _leads_group(pid: int) -> bool:
    try:
        return os.getpgid(pid) == pid
    except (ProcessLookupError, PermissionError):
        return False


def _signal(pid: int, sig: int, group: bool) -> None:
    """Send `sig` to the process group `pid` leads (`group`), or to `pid` alone."""
    try:
        if group:
            os.killpg(pid, sig)  # reaches the group's members even after its leader is gone
        else:
            os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _exited_child(pid: int) -> bool:
    """True when `pid` is a child of ours that has exited (not reaped: its status stays for its owner)."""
    waitid = getattr(os, "waitid", None)
    if waitid is None:
        return False
    try:
        return waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except (ChildProcessError, OSError):
        return False  # not our child: /proc or kill(0) tells


def wait_gone(pid: int, timeout: float, start_time: str | None = None) -> bool:
    """Wait up to `timeout` seconds for `pid` to end; True when it did. A child of ours is left for its
    owner (e.g. its Popen) to reap, with its exit status."""
    deadline = time.monotonic() + timeout
    while True:
        if _exited_child(pid) or not is_running(pid, start_time):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


def stop_process_group(pid: int, grace: float = 2.0, start_time: str | None = None) -> bool:
    """Stop the process group led by `pid` (or `pid` alone): SIGTERM, then SIGKILL after `grace` seconds.

    With `start_time`, a pid now held by another process is left alone. True when it is gone.
    """
    if not is_running(pid, start_time):
        return True
    group = _leads_group(pid)
    _signal(pid, signal.SIGTERM, group)
    gone = wait_gone(pid, grace, start_time)
    _signal(pid, signal.SIGKILL, group)  # the leader after its grace, or anything left in its group
    return gone or wait_gone(pid, 5.0, start_time)


def marked_processes(name: str, value: str) -> list[int]:
    """This user's live processes, other than this one, whose environment holds `name=value` (Linux /proc; elsewhere
    none)."""
    needle = f"{name}={value}".encode()
    found = []
    for entry in Path("/proc").iterdir() if sys.platform.startswith("linux") else ():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environment = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in environment.split(b"\0") and is_running(int(entry.name)):
            found.append(int(entry.name))
    return found


class Reaper:
    """A watchdog for the processes marked with `name=value` in their environment (set it in `os.environ` before
    starting whatever starts them, so they inherit it) and for their descendants: once this process ends, or `stop()`
    is called, it SIGKILLs every one of them and exits. While the run lives it notes them every `every` seconds, with
    their start times, because a process may rewrite the memory its environment is read from (Ray's agents do, to
    set their titles) or lose its parent before the sweep. It runs in its own session without the mark, so neither
    the run's death nor its own sweep takes it along. Linux only (elsewhere it does nothing)."""

    def __init__(self, name: str, value: str, every: float = 2.0) -> None:
        self.name, self.value = name, value
        self._process: subprocess.Popen | None = None
        if sys.platform.startswith("linux"):
            environment = {k: v for k, v in os.environ.items() if k != name}
            self._process = subprocess.Popen([sys.executable, "-m", "playground.processes", "reap", name, value,
                                              str(every)],
                                             stdin=subprocess.PIPE, env=environment, start_new_session=True)

    def stop(self, timeout: float = 15.0) -> bool:
        """Sweep now: the reaper kills what is left of the marked processes and ends; True when it did in time."""
        if self._process is None:
            return True
        if self._process.stdin is not None:
            self._process.stdin.close()
        try:
            self._process.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        return True


def _children() -> dict[int, list[int]]:
    """Every live process's children, by parent pid (/proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        children.setdefault(int(stat[stat.rfind(")") + 2:].split()[1]), []).append(int(entry.name))
    return children


def _family(name: str, value: str) -> set[int]:
    """The marked processes and all their descendants."""
    children = _children()
    found: set[int] = set()
    todo = marked_processes(name, value)
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, []))
    found.discard(os.getpid())
    return found


def _reap(name: str, value: str, every: float = 2.0, rounds: int = 200) -> None:
    """The reaper's work: note the marked processes and their descendants every `every` seconds until its parent ends
    (end of file on stdin), then SIGKILL all it noted that still run (the same process: pid and start time) and the
    marked ones, until none is left (a process may start another while it goes), at most `rounds` sweeps 50 ms apart."""
    import select

    noted: dict[int, str | None] = {}

    def note() -> None:
        for pid in _family(name, value):
            noted[pid] = process_start_time(pid)

    while True:
        note()
        if select.select([sys.stdin], [], [], every)[0] and not os.read(sys.stdin.fileno(), 4096):
            break
    for _ in range(rounds):
        note()
        left = [pid for pid, start in noted.items() if is_running(pid, start)]
        if not left:
            return
        for pid in left:
            _signal(pid, signal.SIGKILL, group=False)
        time.sleep(0.05)


if __name__ == "__main__" and len(sys.argv) == 5 and sys.argv[1] == "reap":
    _reap(sys.argv[2], sys.argv[3], float(sys.argv[4]))
