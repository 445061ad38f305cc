"""The embedded model's `threads=auto`: the usable cores, shared among worker processes, less those the load holds."""

from __future__ import annotations

import pytest

from playground import processes
from playground.agents.base import AgentConfigError
from playground.agents.llm import LLMAgent, local_thread_choice, local_threads
from playground.processes import RUN_PROCESSES_ENV, cores_per_process, threads_by_contention, usable_cores
from playground.run.executors import local as local_executor


def test_auto_takes_every_usable_core_alone_and_a_share_beside_other_workers(monkeypatch):
    monkeypatch.setattr(processes, "machine_load", lambda: 0.0)  # an idle machine
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


def test_contention_takes_cores_the_load_keeps_busy():
    # 2 cores: idle or lightly loaded, both; from load 1.5 (a core held by other work), one.
    for load, want in ((0.0, 2), (0.4, 2), (1.0, 2), (1.49, 2), (1.5, 1), (2.0, 1), (9.5, 1)):
        threads, why = threads_by_contention(affinity=2, processes=1, load=load, machine_cores=2)
        assert threads == want, (load, why)
        assert f"load {load:.2f}" in why and "2 usable cores" in why
    # 8 cores: load 3 keeps 2 busy (half a core of tolerance), 6 left.
    assert threads_by_contention(affinity=8, processes=1, load=3.0, machine_cores=8)[0] == 6


def test_contention_reads_the_affinity_mask_and_scales_the_machine_load():
    # 2 cores allowed of a 16-core machine at load 8: half of every core busy, about 1 of ours: both threads.
    assert threads_by_contention(affinity=2, processes=1, load=8.0, machine_cores=16)[0] == 2
    assert threads_by_contention(affinity=2, processes=1, load=14.0, machine_cores=16)[0] == 1
    assert threads_by_contention(affinity=1, processes=1, load=0.0, machine_cores=16) == (
        1, "1: 1 usable core, 1 worker process, 1-minute load 0.00 (0 cores busy with other work)")


def test_contention_does_not_count_the_runs_own_workers_as_other_work():
    # 8 cores, 4 workers of 2 threads: the 3 siblings' load (up to 6) is theirs, not another program's.
    assert threads_by_contention(affinity=8, processes=4, load=6.0, machine_cores=8)[0] == 2
    assert threads_by_contention(affinity=8, processes=4, load=8.0, machine_cores=8)[0] == 1  # 2 more busy
    assert threads_by_contention(affinity=2, processes=2, load=0.0, machine_cores=2)[0] == 1


def test_unknown_load_falls_back_to_the_share(monkeypatch):
    monkeypatch.setattr(processes, "machine_load", lambda: None)
    assert threads_by_contention(affinity=4, processes=2, machine_cores=4) == (
        2, "2: 4 usable cores, 2 worker processes, load unknown")


def test_auto_reports_its_reason_and_a_given_count_wins_under_load(monkeypatch):
    monkeypatch.delenv(RUN_PROCESSES_ENV, raising=False)
    monkeypatch.setattr(processes, "machine_load", lambda: 50.0)
    threads, why = local_thread_choice("auto")
    assert threads == 1 and why.startswith("auto: 1: ") and "load 50.00" in why
    assert local_thread_choice("4") == (4, "given")


def test_the_agent_exposes_its_models_threads_for_the_lock():
    class Local:
        threads, threads_reason = 1, "auto: 1: 2 usable cores"

    class OverHTTP:
        pass

    assert LLMAgent(Local()).thread_choice == {"count": 1, "reason": "auto: 1: 2 usable cores"}
    assert LLMAgent(OverHTTP()).thread_choice is None
