"""The run lockfile: DIR/lock.json is written with what a run depends on, and `--check-lock` refuses a run whose
lock differs (exit 2, naming the field); `compare` warns when two runs' locks differ."""

from __future__ import annotations

import hashlib
import json

from playground.host.manager import get_host
from playground.run.lock import lock_differences, playbook_hash
from tests.conftest import cli, write_plugin_dist

TINY = ("--env", "tiny", "--agent", "noisy", "--episodes", "3", "--quiet")
KEYS = {"lock_version", "created", "playground", "python", "distributions", "env", "data_files", "tasks", "agent",
        "run", "trials", "playbooks"}

PLUGIN = """
import os
from playground.agents.base import ExpertAgent
from playground.core.hookspecs import hookimpl
from playground.testing.tiny import TinyProvider


class WeightsExpert(ExpertAgent):
    # The expert, run "from" a weights file: exposes its path as model_file, as a model-backed agent does.
    def __init__(self, weights="", threads=""):
        super().__init__()
        self.model_file = weights
        # and, as the local model's agent does, the threads it computes with and why
        self.thread_choice = {"count": int(threads), "reason": "given"} if threads else None


class FiledTiny(TinyProvider):
    # The tiny env whose task set is "defined" by a data file.
    name = "filed-tiny"

    def data_files(self, task_set):
        return {"tasks": os.environ["FILED_TINY_DATA"]}


@hookimpl
def register_agents(register):
    register("weights-expert", WeightsExpert, needs_expert=True)


@hookimpl
def register_envs(register):
    register(FiledTiny())
"""


def test_lock_json_is_written_with_the_expected_keys(capsys, tmp_path):
    out = tmp_path / "run"
    code, _, err = cli(capsys, "run", *TINY, "--harness", "base", "--harness", "sentry", "--out", str(out))
    assert code == 0, err
    lock = json.loads((out / "lock.json").read_text())
    assert set(lock) == KEYS
    assert lock["playground"]["version"] and "playground" in lock["distributions"]
    assert lock["env"]["name"] == "tiny" and lock["env"]["version"] == "1"
    assert lock["tasks"]["count"] == 3 and len(lock["tasks"]["sha256"]) == 64
    assert lock["agent"] == {"name": "noisy", "options": {}, "model_file": None}
    assert set(lock["run"]["harnesses"]) == {"base", "sentry"}
    config = json.loads((out / "config.json").read_text())
    assert lock["run"]["harnesses"] == config["harness_fingerprints"]
    sentry = lock["playbooks"]["sentry"]
    assert sentry["before"] is None  # a fresh run starts with no playbook
    assert sentry["after"] == playbook_hash(out / "playbooks" / "sentry.sqlite", get_host()) is not None


def test_a_run_with_the_same_lock_passes_the_check(capsys, tmp_path):
    assert cli(capsys, "run", *TINY, "--harness", "base", "--out", str(tmp_path / "a"))[0] == 0
    code, _, err = cli(capsys, "run", *TINY, "--harness", "base", "--out", str(tmp_path / "b"),
                       "--check-lock", str(tmp_path / "a" / "lock.json"))
    assert code == 0, err
    assert lock_differences(json.loads((tmp_path / "a" / "lock.json").read_text()),
                            json.loads((tmp_path / "b" / "lock.json").read_text())) == []


def test_a_mismatch_is_refused_with_exit_2_naming_the_field_and_nothing_is_written(capsys, tmp_path):
    assert cli(capsys, "run", *TINY, "--harness", "base", "--out", str(tmp_path / "a"))[0] == 0
    lock_path = tmp_path / "a" / "lock.json"
    code, _, err = cli(capsys, "run", *TINY, "--harness", "base", "--seed", "5", "--out", str(tmp_path / "b"),
                       "--check-lock", str(lock_path))
    assert code == 2 and "run.seed: 0 -> 5" in err and "refusing to run" in err
    assert not (tmp_path / "b").exists()
    lock = json.loads(lock_path.read_text())
    lock["distributions"]["playground"] = "0.0.1"
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(lock))
    code, _, err = cli(capsys, "run", *TINY, "--harness", "base", "--out", str(tmp_path / "c"),
                       "--check-lock", str(edited))
    assert code == 2 and "distributions.playground: '0.0.1' -> " in err
    assert not (tmp_path / "c").exists()


def test_a_lock_file_that_is_not_one_is_refused(capsys, tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text("{}")
    code, _, err = cli(capsys, "run", *TINY, "--out", str(tmp_path / "run"), "--check-lock", str(bad))
    assert code == 2 and "not a lock file" in err and str(bad) in err
    code, _, err = cli(capsys, "run", *TINY, "--out", str(tmp_path / "run"), "--check-lock", str(tmp_path / "no"))
    assert code == 2 and "cannot read the lock file" in err


def test_a_changed_playbook_before_the_run_is_caught(capsys, tmp_path):
    book = tmp_path / "book.sqlite"
    assert cli(capsys, "run", *TINY, "--harness", "sentry", "--agent-option", "invalid=0.3", "--playbook", str(book),
               "--out", str(tmp_path / "a"))[0] == 0
    lock = json.loads((tmp_path / "a" / "lock.json").read_text())
    assert lock["playbooks"]["sentry"]["before"] is None and lock["playbooks"]["sentry"]["after"]
    code, _, err = cli(capsys, "run", *TINY, "--harness", "sentry", "--agent-option", "invalid=0.3",
                       "--playbook", str(book), "--out", str(tmp_path / "b"), "--check-lock",
                       str(tmp_path / "a" / "lock.json"))
    assert code == 2 and "harness 'sentry' playbook before the run: None -> 'sqlite:" in err


def test_model_file_and_data_files_are_hashed_and_a_changed_file_is_caught(capsys, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(write_plugin_dist(tmp_path / "site", "lock-demo", {"demo": PLUGIN})))
    weights, data = tmp_path / "weights.bin", tmp_path / "tasks.txt"
    weights.write_bytes(b"\x00weights v1")
    data.write_text("tiny tasks v1\n")
    monkeypatch.setenv("FILED_TINY_DATA", str(data))
    args = ("run", "--env", "filed-tiny", "--agent", "weights-expert", "--agent-option", f"weights={weights}",
            "--harness", "base", "--episodes", "2", "--quiet")
    code, _, err = cli(capsys, *args, "--out", str(tmp_path / "a"))
    assert code == 0, err
    lock = json.loads((tmp_path / "a" / "lock.json").read_text())
    assert lock["agent"]["model_file"] == {"path": str(weights), "bytes": weights.stat().st_size,
                                           "sha256": hashlib.sha256(weights.read_bytes()).hexdigest()}
    assert lock["data_files"] == {"tasks": hashlib.sha256(data.read_bytes()).hexdigest()}
    assert lock["distributions"]["lock-demo"] == "0.1"
    weights.write_bytes(b"\x00weights v2")
    code, _, err = cli(capsys, *args, "--out", str(tmp_path / "b"), "--check-lock", str(tmp_path / "a" / "lock.json"))
    assert code == 2 and "agent.model_file.sha256" in err and "data_files.tasks" not in err
    weights.write_bytes(b"\x00weights v1")
    data.write_text("tiny tasks v2\n")
    code, _, err = cli(capsys, *args, "--out", str(tmp_path / "c"), "--check-lock", str(tmp_path / "a" / "lock.json"))
    assert code == 2 and "data_files.tasks" in err and "model_file.sha256" not in err


def test_compare_warns_when_the_runs_locks_differ(capsys, tmp_path):
    assert cli(capsys, "run", *TINY, "--harness", "base", "--out", str(tmp_path / "a"))[0] == 0
    assert cli(capsys, "run", *TINY, "--harness", "base", "--out", str(tmp_path / "b"))[0] == 0
    code, _, err = cli(capsys, "compare", str(tmp_path / "a"), str(tmp_path / "b"), "--resamples", "200")
    assert code == 0 and "warning" not in err
    lock = json.loads((tmp_path / "b" / "lock.json").read_text())
    lock["env"]["version"] = "2"
    (tmp_path / "b" / "lock.json").write_text(json.dumps(lock))
    code, out, err = cli(capsys, "compare", str(tmp_path / "a"), str(tmp_path / "b"), "--resamples", "200")
    assert code == 0 and "warning: the runs' locks differ: env.version: '1' -> '2'" in err and "success" in out
    (tmp_path / "b" / "lock.json").unlink()
    code, _, err = cli(capsys, "compare", str(tmp_path / "a"), str(tmp_path / "b"), "--resamples", "200")
    assert code == 0 and "no lock.json in" in err


def test_a_model_backed_agent_exposes_its_weights_file(tmp_path):
    from playground.agents.llm import LLMAgent

    class FromFile:
        path = tmp_path / "model.gguf"

    class OverHTTP:
        pass

    assert LLMAgent(FromFile()).model_file == str(tmp_path / "model.gguf")
    assert LLMAgent(OverHTTP()).model_file is None


def test_a_playbook_is_hashed_by_content_and_left_untouched(tmp_path):
    import sqlite3

    book = tmp_path / "book.sqlite"
    db = sqlite3.connect(book)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("CREATE TABLE lessons (id INTEGER PRIMARY KEY, text TEXT)")
    db.executemany("INSERT INTO lessons (text) VALUES (?)", [("a" * 500,)] * 50 + [("keep",)])
    db.commit()
    db.execute("DELETE FROM lessons WHERE text != 'keep'")
    db.commit()
    db.close()
    first = playbook_hash(book, get_host())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["book.sqlite"]  # no -wal or -shm left beside it
    size = book.stat().st_size
    db = sqlite3.connect(book)
    db.execute("VACUUM")  # another page layout, the same content
    db.close()
    assert book.stat().st_size < size and playbook_hash(book, get_host()) == first
    db = sqlite3.connect(book)
    db.execute("INSERT INTO lessons (text) VALUES ('new')")
    db.commit()
    db.close()
    assert playbook_hash(book, get_host()) != first
    assert playbook_hash(tmp_path / "none.sqlite", get_host()) is None


def test_the_agents_threads_are_recorded_but_not_compared(capsys, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(write_plugin_dist(tmp_path / "site", "lock-threads", {"demo": PLUGIN})))
    monkeypatch.setenv("FILED_TINY_DATA", str(tmp_path / "absent.txt"))
    code, _, err = cli(capsys, "run", "--env", "filed-tiny", "--agent", "weights-expert", "--agent-option",
                       "threads=1", "--harness", "base", "--episodes", "1", "--quiet", "--out", str(tmp_path / "a"))
    assert code == 0, err
    lock = json.loads((tmp_path / "a" / "lock.json").read_text())
    assert lock["agent"]["threads"] == {"count": 1, "reason": "given"}
    other = json.loads(json.dumps(lock))
    other["agent"]["threads"] = {"count": 2, "reason": "auto: 2: 2 usable cores, 1 worker process, 1-minute load 0.10"}
    assert lock_differences(lock, other) == []
