"""Issue 16, item 8: the parsers of user files, fed random and mutated input, give a correct result or a
named error (a PlaygroundError), never a traceback, and write nothing."""

from __future__ import annotations

import json
import re
import tempfile
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from playground.core.errors import PlaygroundError
from playground.core.records import record_problem
from playground.plugins.darc.evidence import load_evidence
from playground.plugins.darc.policy import parse_policy
from playground.plugins.playbook.io import MAX_CLOCK_SKEW_S, MAX_COUNTER, read_ace
from playground.plugins.playbook.io import read_jsonl as read_lessons
from playground.plugins.playbook.store import Playbook
from playground.run.rundir import read_config, read_episodes
from playground.run.traces import read_trace


def read_ace_strictly(path, *args, **kwargs):
    """`read_ace` refusing any unusable line (the fuzz tests check that each is named)."""
    return read_ace(path, *args, strict=True, **kwargs)


FUZZ = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12)

EPISODE = {"key": "base/tiny-1", "harness": "base", "task_id": "tiny-1", "status": "won", "won": True, "steps": 3,
           "invalid_actions": 0, "interventions": {"hard_repair": 1}, "trace": "traces/base/tiny-1.jsonl",
           "score": None, "max_score": None, "seconds": 0.1}
SAMPLES = {
    "episodes": (json.dumps(EPISODE) + "\n") * 2,
    "config": json.dumps({"env": "tiny", "harnesses": ["base"], "tasks": ["tiny-1"], "run_id": "abc"}),
    "trace": '{"type": "header", "t": 1.0, "env": "tiny"}\n{"type": "end", "t": 2.0, "status": "won"}\n',
    "lessons": json.dumps({"failure_type": "progress", "labels": ["planning_stall"], "trigger": "idles",
                           "principle": "act", "provenance": {"run": "r"}, "created_at": 1.0}) + "\n",
    "ace": "## STRATEGIES AND HARD RULES\n[str-1] helpful=2 harmful=0 :: When stuck, re-read the task.\n",
    "evidence": "task_id,intervention,success,cost\nt1,a,1,2\nt1,b,0,1\nt2,a,0,3\nt2,b,1,1\n",
    "policy": json.dumps({"chain": ["sentry", "validity-guard"], "verifier": "env:won", "params": {"k": 3}}),
}


@st.composite
def mutated(draw, sample: str):
    """The sample's bytes with random flips, insertions, deletions and line shuffles."""
    data = bytearray(sample.encode())
    for _ in range(draw(st.integers(0, 6))):
        kind = draw(st.sampled_from(["flip", "insert", "delete", "dup_line", "truncate"]))
        position = draw(st.integers(0, max(len(data) - 1, 0)))
        if kind == "flip" and data:
            data[position] = draw(st.integers(0, 255))
        elif kind == "insert":
            data[position:position] = draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete" and data:
            del data[position:position + draw(st.integers(1, 8))]
        elif kind == "dup_line":
            lines = bytes(data).split(b"\n")
            line = draw(st.sampled_from(lines))
            lines.insert(draw(st.integers(0, len(lines))), line)
            data = bytearray(b"\n".join(lines))
        elif kind == "truncate":
            del data[position:]
    return bytes(data)


def inputs(sample: str):
    """Random bytes, random JSON lines, or a mutated valid sample."""
    lines = st.lists(json_values.map(lambda v: json.dumps(v)), max_size=4).map(
        lambda ls: "".join(line + "\n" for line in ls).encode())
    return st.one_of(st.binary(max_size=300), lines, mutated(sample))


def _check(parse, data: bytes, name: str):
    """Parse `data` written to a fresh folder; return the result or the named error, and check nothing was written."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_bytes(data)
        try:
            result = parse(path)
        except PlaygroundError as error:
            result = error
        assert sorted(p.name for p in Path(folder).iterdir()) == [name]
        assert path.read_bytes() == data
        return result


@FUZZ
@given(inputs(SAMPLES["episodes"]))
def test_episodes_jsonl(data):
    result = _check(read_episodes, data, "episodes.jsonl")
    if not isinstance(result, PlaygroundError):
        records, problems = result
        assert all(record_problem(r) is None for r in records)
        assert all(isinstance(n, int) and why for n, why, _ in problems)


@FUZZ
@given(inputs(SAMPLES["config"]))
def test_config_json(data):
    result = _check(read_config, data, "config.json")
    assert isinstance(result, PlaygroundError) or isinstance(result.get("harnesses"), list)


@FUZZ
@given(inputs(SAMPLES["trace"]))
def test_traces(data):
    result = _check(read_trace, data, "t.jsonl")
    assert isinstance(result, PlaygroundError) or all(isinstance(e["type"], str) for e in result)


@FUZZ
@given(inputs(SAMPLES["lessons"]))
def test_playbook_jsonl(data):
    result = _check(read_lessons, data, "lessons.jsonl")
    assert isinstance(result, PlaygroundError) or all(r["trigger"] for r in result)


@FUZZ
@given(inputs(SAMPLES["ace"]))
def test_ace_playbook(data):
    result = _check(read_ace_strictly, data, "ace.txt")
    assert isinstance(result, PlaygroundError) or all(r["failure_type"] == "procedure" for r in result)


@FUZZ
@given(inputs(SAMPLES["lessons"]))
def test_an_import_is_all_or_nothing(data):
    with tempfile.TemporaryDirectory() as folder:
        source = Path(folder) / "lessons.jsonl"
        source.write_bytes(data)
        with Playbook(Path(folder) / "pb.sqlite") as playbook:
            try:
                report = playbook.import_jsonl(source)
                assert len(playbook) == report.imported
            except PlaygroundError:
                assert len(playbook) == 0


counters = st.integers(min_value=-2**70, max_value=2**80) | st.sampled_from([0, 1, MAX_COUNTER, MAX_COUNTER + 1])
timestamps = (st.floats(allow_nan=False, allow_infinity=False) | st.integers(-2**64, 2**64)
              | st.sampled_from([0.0, 1e300, -1.0, 1.7e9, 4e9]))


def _valid_lesson(record: dict) -> bool:
    """A record a parser returned: non-empty texts, counters in range, a creation time in range."""
    latest = time.time() + MAX_CLOCK_SKEW_S
    return (record["trigger"].strip() != "" and record["principle"].strip() != ""
            and all(0 <= record[name] <= MAX_COUNTER for name in ("retrieved", "verified", "helped"))
            and 0 <= record["created_at"] <= latest)


@FUZZ
@given(st.lists(st.fixed_dictionaries({
    "failure_type": st.just("progress"), "labels": st.just(["planning_stall"]), "trigger": st.text(max_size=5),
    "principle": st.text(max_size=5)}, optional={"created_at": timestamps, "retrieved": counters,
                                                 "verified": counters, "helped": counters}), min_size=1, max_size=3))
def test_playbook_jsonl_fields(records):
    """Issue 16: counters and creation times out of range (1e22, -1, 1e300) are refused by line, never stored."""
    data = "".join(json.dumps(record) + "\n" for record in records).encode()
    result = _check(read_lessons, data, "lessons.jsonl")
    in_range = all(_valid_lesson({"retrieved": 0, "verified": 0, "helped": 0, "created_at": 0, **r}) for r in records)
    assert isinstance(result, PlaygroundError) == (not in_range)
    if isinstance(result, PlaygroundError):
        assert "lessons.jsonl" in str(result) and "line " in str(result)
    else:
        assert len(result) == len(records) and all(_valid_lesson(r) for r in result)
    with tempfile.TemporaryDirectory() as folder:  # importing never fails with anything but a named error
        source = Path(folder) / "lessons.jsonl"
        source.write_bytes(data)
        with Playbook(Path(folder) / "pb.sqlite") as playbook:
            try:
                playbook.import_jsonl(source)
                assert all(_valid_lesson(lesson.to_dict()) for lesson in playbook.all())
            except PlaygroundError:
                assert len(playbook) == 0


ace_counter = counters.map(str) | st.text(alphabet="0123456789-+.xe ", max_size=6)


@FUZZ
@given(st.lists(st.tuples(st.text(alphabet="abc-1", min_size=1, max_size=4), ace_counter, ace_counter,
                          st.text(max_size=8).filter(lambda t: "\n" not in t and "\r" not in t)),
                min_size=1, max_size=3))
def test_ace_bullets(bullets):
    """Issue 16: an ACE bullet with counters that are not 0..MAX_COUNTER is a named error (issue 56: one with no text
    is a bullet, as in ACE)."""
    data = ("## OTHERS\n" + "".join(f"[{i}] helpful={h} harmful={k} :: {text}\n" for i, h, k, text in bullets)).encode()
    result = _check(read_ace_strictly, data, "ace.txt")

    def counter_ok(text: str) -> bool:  # whitespace after a counter only separates it from what follows
        text = text.rstrip()
        return re.fullmatch("[0-9]+", text) is not None and int(text) <= MAX_COUNTER

    valid = all(counter_ok(h) and counter_ok(k) for _, h, k, _ in bullets)
    assert isinstance(result, PlaygroundError) == (not valid)
    if isinstance(result, PlaygroundError):
        assert "ace.txt" in str(result) and "line " in str(result)
    else:
        assert [(r["helped"], r["provenance"]["harmful"]) for r in result] == [(int(h), int(k)) for _, h, k, _ in bullets]
        assert all(_valid_lesson(r) for r in result)


@FUZZ
@given(inputs(SAMPLES["evidence"]))
def test_evidence_csv(data):
    result = _check(load_evidence, data, "evidence.csv")
    assert isinstance(result, PlaygroundError) or result.success.shape == result.cost.shape


@FUZZ
@given(inputs(SAMPLES["policy"]))
def test_policy(data):
    result = _check(lambda path: parse_policy(path.read_bytes(), path), data, "policy.json")
    assert isinstance(result, PlaygroundError) or result["chain"]
