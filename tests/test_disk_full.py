"""Issue 38: a disk that fills during a run, then frees. Each fill level ends with a named error (exit 2) or
unfinished episodes (exit 3), never a traceback; after space is freed, the same command ends with the records and
lessons of an undisturbed run.

The disk is a small tmpfs (mounting one needs root; the test is skipped where it cannot), filled with a file
leaving a few kilobytes free, so that the run meets a full disk at different points: creating the run directory,
the playbook, a trace, a record, the summary.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from playground.plugins.playbook.store import Playbook

pytestmark = pytest.mark.slow
DISK_KB = 1024
RUN = ["--env", "tiny", "--agent", "noisy", "--agent-option", "repeat=0.3", "--harness", "sentry",
       "--episodes", "8", "--quiet"]


@pytest.fixture(scope="module")
def disk(tmp_path_factory):
    """A 1 MB tmpfs, unmounted afterwards."""
    root = tmp_path_factory.mktemp("disk")
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_KB}k", "tmpfs", str(root)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    yield root
    subprocess.run(["umount", str(root)], check=False)


def playground(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "playground.cli.main", "run", *RUN, *args],
                          capture_output=True, text=True, timeout=300)


def state(run) -> tuple[list, list]:
    """The run's records (outcome fields) and its playbook's lessons (text, labels and counters)."""
    lines = (run / "episodes.jsonl").read_text().splitlines()
    records = sorted((r["key"], r["status"], r["won"], r["steps"], r["lessons_added"], r["detected_failures"])
                     for r in map(json.loads, lines))
    with Playbook(run / "playbooks" / "sentry.sqlite", read_only=True) as playbook:
        lessons = sorted((l.trigger, l.principle, l.labels, l.retrieved, l.verified, l.helped) for l in playbook.all())
    return records, lessons


@pytest.fixture(scope="module")
def undisturbed(tmp_path_factory):
    run = tmp_path_factory.mktemp("clean") / "run"
    done = playground("--out", str(run))
    assert done.returncode == 0, done.stderr
    return state(run)


@pytest.mark.parametrize("free_kb", [8, 24, 48, 80, 120, 160])
def test_a_full_disk_then_freed_ends_as_an_undisturbed_run(disk, undisturbed, free_kb):
    for entry in disk.iterdir():
        subprocess.run(["rm", "-rf", str(entry)], check=True)
    used = os.statvfs(disk)
    filler = disk / "filler"
    free_now = used.f_bavail * used.f_frsize // 1024
    filler.write_bytes(b"\0" * max(0, (free_now - free_kb) * 1024))
    run = disk / "run"
    first = playground("--out", str(run))
    assert first.returncode in (0, 2, 3), first.stderr
    assert "Traceback" not in first.stderr
    if first.returncode == 2:
        assert "the disk is full" in first.stderr and "rerun the same command" in first.stderr
    filler.unlink()
    second = playground("--out", str(run))
    assert second.returncode == 0, second.stderr
    assert state(run) == undisturbed
