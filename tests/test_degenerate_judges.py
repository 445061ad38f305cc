"""Issue 56, item 7: judgments that are empty are flagged, not only tallied.

A run whose LLM judges answer constants (every detection's evidence "no", every verdict's reason the schema's own
wording "a string of at most 160 characters", every lesson "over_exploration" / "inventory") still counts
detections, verified repairs, a resolved share and lessons; the run table, the summary, the HTML report and the
episode view say those judgments look empty. A run whose judges answer varied, sensible replies shows no flag.
Sentry's judges are scripted by a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from playground.core.events import DetectionEvent, EndEvent, JudgeCallEvent, VerificationEvent
from playground.core.records import new_record
from playground.run.event_text import describe_event
from playground.testing.openai_server import ScriptedChatServer
from tests.conftest import cli, run_cli

AGENT = "Thought: look around\nAction: look"


def _with_judgments(judgments: dict):
    """An episode record carrying `judgments` (what `JudgmentTally.as_record` gives)."""
    return new_record(harness="h", task_id="t", status="won", judgments=judgments)


def _constant_judge(body: dict) -> str:
    """Sentry's judges answering constants, as a small model under a grammar may."""
    system = body["messages"][0]["content"]
    if "needs an intervention" in system:
        return '{"intervene": true, "why": "no"}'
    if "recovered" in system:
        return '{"resolved": true, "evidence": "a string of at most 160 characters"}'
    if "diagnose" in system:
        return json.dumps({"failure": True, "failure_type": "progress", "labels": ["planning_stall"],
                           "confidence": 0.9, "evidence": "no"})
    return json.dumps({"trigger": "over_exploration", "principle": "inventory"})


def _varied_judge():
    """Sentry's judges answering varied replies that say something (each one different)."""
    counts: dict[str, itertools.count] = {}

    def answer(body: dict) -> str:
        system = body["messages"][0]["content"]
        k = next(counts.setdefault(system, itertools.count(1)))  # each role's calls numbered apart
        if "needs an intervention" in system:
            return json.dumps({"intervene": k % 2 == 1, "why": f"the agent has looked {k} times without moving"})
        if "recovered" in system:
            return json.dumps({"resolved": k % 2 == 1,
                               "evidence": f"after the repair it looked again at call {k} and saw the same room"})
        if "diagnose" in system:
            return json.dumps({"failure": True, "failure_type": "progress", "labels": ["planning_stall"],
                               "confidence": 0.7, "evidence": f"the proposed look repeats observation number {k}"})
        return json.dumps({"trigger": f"when looking {k} times in a row shows the same room",
                           "principle": f"take an exit or an object instead of looking (case {k})"})
    return answer


def _run(capsys, tmp_path: Path, judge) -> tuple[str, dict, Path]:
    run = tmp_path / "run"
    with ScriptedChatServer(default=AGENT) as agent, ScriptedChatServer(default=judge) as judges:
        code, out, err = cli(capsys, "run", "--env", "tiny", "--agent", "llm", "--llm-base-url", agent.base_url,
                             "--model", "m", "--harness", "base", "--harness", "sentry-llm",
                             "--param", f"judge_base_url={judges.base_url}", "--param", "judge_model=m",
                             "--param", "cooldown=0", "--episodes", "2", "--max-steps", "10", "--quiet",
                             "--out", str(run))
    assert code == 0, err
    return out, json.loads((run / "summary.json").read_text()), run


def _report(capsys, run: Path, tmp_path: Path) -> str:
    code, _, err = cli(capsys, "report", str(run), "--out", str(tmp_path / "report.html"))
    assert code == 0, err
    return (tmp_path / "report.html").read_text()


def test_constant_judges_are_flagged_in_the_table_summary_report_and_view(capsys, tmp_path):
    out, summary, run = _run(capsys, tmp_path, _constant_judge)
    sentry = summary["harnesses"]["sentry-llm"]
    assert sentry["resolved_share"] == 1.0 and sentry["verified_recoveries"] > 0  # tallied as ever
    judgments = sentry["judgments"]
    verdicts, detections, lessons = (judgments["verdict:sentry"], judgments["detection:sentry-llm-judge"],
                                     judgments["lesson"])
    assert verdicts["flags"] == ["constant", "echo"] and verdicts["distinct"] == 1
    assert verdicts["echo"] == verdicts["n"] == sentry["verified_recoveries"]
    assert verdicts["judged"] == verdicts["n"] and verdicts["agree"] == 0  # "resolved" in episodes not won
    assert detections["flags"] == ["constant", "empty"] and detections["top"] == "progress/planning_stall: no"
    assert lessons["flags"] == ["constant", "empty"]
    assert "judgments" not in summary["harnesses"]["base"]  # no judge call, no field

    header, _, base_row, sentry_row = out.splitlines()[:4]
    cells = dict(zip(header.replace("95% CI", "CI").split(), sentry_row.split()))
    assert cells["resolved"] == "100%?" and cells["verified"].endswith("?") and cells["lessons"].endswith("?")
    assert cells["detected"].endswith("?") and "?" not in base_row
    judges = [line for line in out.splitlines() if line.startswith("judges: ")]
    n = verdicts["n"]
    assert (f'judges: sentry-llm: verdicts by sentry constant ({n}/{n} identical), echo the schema or prompt '
            f'({n}/{n}), agree with the outcome 0/{n}: "resolved: judge: a string of at most 160 characters"'
            in judges)
    assert any(line.startswith("judges: sentry-llm: detections by sentry-llm-judge constant") for line in judges)
    assert any(line.startswith("judges: sentry-llm: lessons constant") for line in judges)

    html = _report(capsys, run, tmp_path)
    assert "judgments that look empty" in html and "verdicts by sentry constant" in html

    episode = json.loads((run / "episodes.jsonl").read_text().splitlines()[-1])["key"]
    shown = run_cli("view", str(run), "--episode", episode, "--no-pager", env={"COLUMNS": "200"})
    assert shown.returncode == 0, shown.stderr
    view = shown.stdout
    assert "empty judgment: repeats the schema's wording" in view and "empty judgment: one word" in view


def test_varied_sensible_judges_are_not_flagged(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("PLAYGROUND_RESPONSE_CACHE", "off")  # every call reaches the judges: none answered from disk
    out, summary, run = _run(capsys, tmp_path, _varied_judge())
    sentry = summary["harnesses"]["sentry-llm"]
    assert sentry["detected_failures"] > 0 and sentry["verified_recoveries"] > 0 and sentry["lessons_added"] > 0
    judgments = sentry["judgments"]
    assert judgments["detection:sentry-llm-judge"]["n"] >= 5 and judgments["verdict:sentry"]["n"] >= 2
    assert judgments["lesson"]["n"] == sentry["lessons_added"]
    assert all(item["flags"] == [] for item in judgments.values()), judgments
    assert all(item["echo"] == 0 and item["empty"] == 0 for item in judgments.values())
    assert "judges: " not in out and "?" not in out.split("\n\n")[0]
    assert "judgments that look empty" not in _report(capsys, run, tmp_path)


def test_the_rules_one_source_at_a_time():
    from playground.run.judge_quality import JudgmentTally, echoes, summarise_judgments, terse

    assert echoes("A string of at most 160 characters.") and echoes("judge: a string of at most 160 characters")
    assert echoes("boolean") and echoes("evidence", ["evidence"]) and echoes("planning stall", ["planning_stall"])
    assert not echoes("the agent looked twice and saw the same room") and not echoes("")
    assert terse("no") and terse("  ") and terse("judge: vacuum") and not terse("it left the kitchen")

    def tally(*events) -> dict:
        t = JudgmentTally()
        for event in events:
            t.add(event)
        return t.as_record()

    # four identical detections: too few for "constant" (5), but all one word: "empty"
    four = tally(*[DetectionEvent(step=i, detector="d", failure_type="progress", labels=["x"], evidence="no")
                   for i in range(4)])
    assert summarise_judgments([_with_judgments(four)])["detection:d"]["flags"] == ["empty"]
    # a model role's replies, where the judge_call event carries them (`reply`): constant over 5 calls
    replies = tally(*[JudgeCallEvent(role="r.verifier", extra={"reply": {"resolved": True, "evidence": "moved"}})
                      for _ in range(5)])
    assert summarise_judgments([_with_judgments(replies)])["reply:r.verifier"]["flags"] == ["constant"]
    # verdicts against the outcome: one of two agrees with a won episode
    verdicts = tally(VerificationEvent(plugin="v", verdict="resolved", evidence="it took the key and opened the door"),
                     VerificationEvent(plugin="v", verdict="unresolved", evidence="it kept looking at the same wall"),
                     EndEvent(status="won", won=True))
    summary = summarise_judgments([_with_judgments(verdicts), _with_judgments(verdicts)])["verdict:v"]
    assert (summary["judged"], summary["agree"], summary["outcome_agreement"], summary["flags"]) == (4, 2, 0.5, [])
    # an episode ended by an error has no outcome to agree with
    errored = tally(VerificationEvent(plugin="v", verdict="resolved", evidence="x y"), EndEvent(status="error"))
    assert "judged" not in errored["verdict:v"]
    # the viewer's alert on one judgment; a blank evidence (a rule's) is not flagged
    assert describe_event(DetectionEvent(step=0, detector="d", evidence="planning_stall", labels=["planning_stall"])
                          ).alert.startswith("empty judgment: repeats")
    assert describe_event(DetectionEvent(step=0, detector="d", evidence="")).alert == ""
