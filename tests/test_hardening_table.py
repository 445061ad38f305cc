"""Issue 16, item 9: the run table explains itself; `playground harnesses` is aligned and lists prefixes."""

from __future__ import annotations

import re

from playground.cli.main import main
from playground.run.report import format_table


def _summary(**extra):
    base = {"episodes": 2, "success_rate": 0.5, "success_ci95": [0.1, 0.9], "mean_steps": 3.0,
            "invalid_actions_per_episode": 0.0, "detected_failures": 1, "interventions": {"x": 2},
            "verified_recoveries": 1, "lessons_added": 0, "errors": 0, "mean_score": None, "resolved_share": None}
    return {"harnesses": {"base": base, "other": {**base, **extra}}}


def test_the_table_has_a_legend_and_shows_score_and_resolved_share_only_when_known():
    plain = format_table(_summary())
    assert "score" not in plain.splitlines()[0] and "resolved" not in plain.splitlines()[0]
    assert "success: share of episodes won" in plain
    table = format_table(_summary(mean_score=0.75, resolved_share=0.5))
    header, _, base, other = table.splitlines()[:4]
    assert "score" in header and "resolved" in header
    assert "75%" in other and "50%" in other and " - " in base + " "
    assert "resolved: verified / (verified + unresolved) repairs" in table


def test_harnesses_listing_is_aligned_and_names_the_prefixes(capsys):
    assert main(["harnesses"]) == 0
    out = capsys.readouterr().out
    assert "harness prefixes" in out and "darc:" in out
    rows = out.split("harness prefixes")[0].splitlines()[1:]
    starts = {re.match(r"  \S+\s+", line).end() for line in rows}
    assert len(rows) > 1 and len(starts) == 1  # descriptions start in one column


def _record(task, won, score, max_score, status=None):
    from playground.core.records import new_record

    return new_record(harness="h", task_id=task, won=won, steps=3, score=score, max_score=max_score,
                      status=status or ("won" if won else "truncated"))


def test_the_mean_score_counts_episodes_the_env_did_not_score_as_0_and_the_table_says_how_many_it_scored():
    from playground.run.report import summarise_harness

    # two won and scored in full; one the env never evaluated (no max score), one errored: AppWorld's pattern
    records = [_record("a", True, 3.0, 3.0), _record("b", True, 5.0, 5.0), _record("c", False, 0.0, None),
               _record("d", False, None, None, "error")]
    figures = summarise_harness(records)
    assert figures["success_rate"] == 0.5 and figures["mean_score"] == 0.5 and figures["scored_episodes"] == 2
    header, _, row = format_table({"harnesses": {"h": figures}}).splitlines()[:3]
    assert "score" in header.split() and "scored" in header.split()
    assert "50%" in row.split() and "2/4" in row.split()
    assert "one the env did not score (not evaluated, errored) counts 0" in format_table({"harnesses": {"h": figures}})

    every = summarise_harness(records[:2])  # all scored: no count to show
    assert every["mean_score"] == 1.0 and "scored" not in format_table({"harnesses": {"h": every}}).split()
    none = summarise_harness([_record("c", False, 0.0, None)])  # the env reports no score at all
    assert none["mean_score"] is None and none["scored_episodes"] == 0
    assert "score" not in format_table({"harnesses": {"h": none}}).splitlines()[0].split()
