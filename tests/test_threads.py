"""The embedded model's `threads=auto`: the usable cores, shared among a run's worker processes."""

from __future__ import annotations

import pytest

from playground.agents.base import AgentConfigError
from playground.agents.llm import local_threads
from playground.processes import RUN_PROCESSES_ENV, cores_per_process, usable_cores
from playground.run.executors import local as local_executor


def test_auto_takes_every_usable_core_alone_and_a_share_beside_other_workers(monkeypatch):
    monkeypatch.delenv(RUN_PROCESSES_ENV, raising=False)
    assert local_threads("auto") == cores_per_process() == usable_cores()
    monkeypatch.setenv(RUN_PROCESSES_ENV, "2")
    assert local_threads("auto") == max(1, usable_cores() // 2)
    monkeypatch.setenv(RUN_PROCESSES_ENV, str(usable_cores() * 4))  # more workers than cores: still one thread each
    assert local_threads("auto") == 1
    monkeypatch.setenv(RUN_PROCESSES_ENV, "many")  # a garbled value counts as one process, not an error
    assert local_threads("auto") == usable_cores()


def test_a_given_count_wins_and_a_bad_one_is_named(monkeypatch):
    monkeypatch.setenv(RUN_PROCESSES_ENV, "2")
    assert local_threads("3") == 3 and local_threads(1) == 1
    for bad in ("0", "-2", "two", ""):
        with pytest.raises(AgentConfigError, match="'threads' expects 'auto' or a whole number"):
            local_threads(bad)


def test_worker_processes_are_told_how_many_share_the_cores():
    # The pool hands its size to each worker it starts; the worker puts it where `cores_per_process` reads it.
    started = []

    class Context:
        def Pipe(self):  # noqa: N802 - multiprocessing's name
            return _End(), _End()

        def Process(self, target, args):  # noqa: N802
            started.append(args)
            return _Started()

    pool = local_executor._Pool(False, work=None, size=3)
    pool.context = Context()
    local_executor._Worker(pool.context, False, None, False, pool.size)
    assert started[0][-1] == 3


class _End:
    def close(self):
        pass


class _Started:
    def start(self):
        pass
