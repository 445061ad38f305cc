"""The four-method stack's published table (docs/results/instrument.md, "The four methods in one stack") re-derives
from the committed run of the `stack-workflow` study (docs/runs/stack-workflow): every domain's DARC pipeline chose the
validity guard, and the test grids' wins and AED's replayed pairs, pooled over the five domains, are the figures
the table quotes (which the earlier script-driven run of the same tasks and seeds gave)."""

from __future__ import annotations

import json
import re
from pathlib import Path

DOCS = Path(__file__).resolve().parent.parent / "docs"
RUN = DOCS / "runs" / "stack-workflow"
DOMAINS = ("schedule-form", "travel", "etl", "navigation", "diagnosis")
# harness -> (wins of 225, AED pairs replayed), pooled over the domains
PUBLISHED = {"base": (25, 333), "sentry": (42, 285), "dart": (63, 195), "darc": (29, 209), "sentry+dart": (130, 113),
             "darc+dart": (80, 52), "darc+sentry-no-hard": (42, 285), "darc+sentry-no-hard+dart": (130, 113)}


def short(harness: str) -> str:
    """A test grid's harness with its domain's frozen policy (`darc:{out}/DOMAIN-av/policy.json`) named `darc`."""
    return re.sub(r"darc:\{out\}/[a-z-]+-av/policy\.json", "darc", harness)


def test_the_stack_table_re_derives_from_the_committed_study_run():
    from playground.core.study_file import load_study
    from playground.host.manager import get_host
    from playground.run.study import study_table

    host = get_host()
    study = load_study(host.studies.get("stack-workflow").path)
    cells = study_table(study, RUN, {f.name: f for f in host.figures})
    wins: dict[str, int] = {}
    episodes: dict[str, int] = {}
    pairs: dict[str, float] = {}
    for cell in cells:
        harness = short(cell.harness)
        if cell.grid in DOMAINS:
            wins[harness] = wins.get(harness, 0) + cell.wins
            episodes[harness] = episodes.get(harness, 0) + cell.episodes
        if cell.grid.endswith("-aed"):
            pairs[harness] = pairs.get(harness, 0) + cell.figures["aed_pairs_replayed"]
    assert {h: (wins[h], pairs[h]) for h in wins} == PUBLISHED
    assert set(episodes.values()) == {225}
    for domain in DOMAINS:
        assert json.loads((RUN / f"{domain}-diagnosed" / "diagnosis.json").read_text())["mode"] == "action_validity"
        assert json.loads((RUN / f"{domain}-av" / "policy.json").read_text())["chain"] == ["validity-guard"]
    # DARC's policy with Sentry's hard repair off plays Sentry's episodes exactly (the validity guard is that repair)
    by_cell = {(c.grid, short(c.harness)): c for c in cells}
    for domain in DOMAINS:
        for alone, stacked in (("sentry", "darc+sentry-no-hard"), ("sentry+dart", "darc+sentry-no-hard+dart")):
            assert (by_cell[(domain, alone)].wins, by_cell[(domain, alone)].steps) == (
                by_cell[(domain, stacked)].wins, by_cell[(domain, stacked)].steps), (domain, stacked)


def test_the_pooled_paired_tests_against_base_are_the_published_ones():
    """The table's "vs base (paired)" column: exact McNemar over the 225 paired episodes pooled over the domains."""
    from playground.run.rundir import load_records
    from playground.run.stats import compare

    records: dict[str, list] = {}
    for domain in DOMAINS:
        for record in load_records(RUN / domain):
            name = re.sub(r"darc:[^+]*-av/policy\.json", "darc", record.harness)
            records.setdefault(name, []).append(record.model_copy(update={"harness": name}))
    published = {"sentry": 7.6e-05, "dart": 7.3e-12, "darc": 0.12, "sentry+dart": 1.3e-30, "darc+dart": 5.6e-17}
    for harness, p in published.items():
        success = compare(records["base"], records[harness], label_a="base", label_b=harness).metric("success")
        assert float(f"{success.p_value:.2g}") == p, harness
        assert round(success.diff * 225) == PUBLISHED[harness][0] - PUBLISHED["base"][0], harness
