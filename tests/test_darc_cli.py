"""DARC end to end on the tiny env: profiling run → diagnose → evidence run → evidence → distill → deploy as a
cascade → compare. The runs are `playground run`; DARC's commands read their run directories."""

from __future__ import annotations

import json

from playground.host.manager import Host
from playground.plugins.darc.profile import library
from tests.conftest import cli
from tests.darc_runs import evidence_run, play, profile

COMMON = ["--env", "tiny", "--agent", "noisy", "--episodes", "8", "--quiet"]


def test_darc_pipeline_on_tiny(capsys, tmp_path):
    p = tmp_path / "darc"
    diagnosis = profile(capsys, p, [*COMMON, "--split", "dev"])
    # the mode is the one with the most onsets per episode, and the admissible list is its interventions
    per_episode = diagnosis["modes_per_episode"]
    assert diagnosis["mode"] == max(per_episode, key=lambda m: per_episode[m]) and per_episode[diagnosis["mode"]] > 0
    assert diagnosis["episodes"] == 8 and diagnosis["histogram"]
    assert diagnosis["why"].startswith(f"{diagnosis['mode']}: {per_episode[diagnosis['mode']]} failure onsets")
    host = Host().load()
    assert diagnosis["admissible_interventions"] == sorted(
        s.name for s in host.interventions if diagnosis["mode"] in s.modes and s.works_with("tiny"))
    assert "sentry" not in diagnosis["admissible_sets"]["action_validity"]

    names = sorted(spec.name for spec in library(host, "tiny"))  # the whole library
    run_dir = evidence_run(capsys, p / "evidence-run", [*COMMON, "--split", "train"], names)
    code, out, err = cli(capsys, "darc", "evidence", str(run_dir), "--out", str(p / "evidence"))
    assert code == 0, err
    p = p / "evidence"  # a copy of the evidence run, its evidence written into it
    assert json.loads(out) == {"evidence": str(p / "evidence.csv"), "interventions": names, "tasks": 8}
    lines = (p / "evidence.csv").read_text().splitlines()
    assert lines[0] == "task_id,intervention,success,cost"
    interventions = {line.split(",")[1] for line in lines[1:]}
    assert {"sentry", "validity-guard"} <= interventions and interventions == set(names)
    assert len(lines) - 1 == 8 * len(interventions)

    code, out, err = cli(capsys, "darc", "distill", "--evidence", str(p / "evidence.csv"), "--max-len", "2",
                         "--lam", "0.02", "--interventions", "sentry,validity-guard", "--out", str(p / "policy.json"))
    assert code == 0, err
    assert "search space: 4 chains" in out
    policy = json.loads((p / "policy.json").read_text())
    assert policy["chain"] and policy["search_space"] == 4

    code, out, err = cli(capsys, "darc", "distill", "--evidence", str(p / "evidence.csv"), "--max-len", "3",
                         "--count-only", "--interventions", "sentry,validity-guard")
    assert code == 0 and out.strip() == "4"

    run = tmp_path / "deploy"
    code, out, err = cli(capsys, "run", *COMMON, "--harness", "base", "--harness", f"darc:{p / 'policy.json'}",
                         "--out", str(run))
    assert code == 0, err
    summary = json.loads((run / "summary.json").read_text())
    cascade = summary["harnesses"][f"darc:{p / 'policy.json'}"]
    records = [json.loads(line) for line in (run / "episodes.jsonl").read_text().splitlines()]
    deployed = [r for r in records if r["harness"] == f"darc:{p / 'policy.json'}"]
    assert len(deployed) == 8
    for record in deployed:  # each task: the chain in order, up to the first win
        played = [a["interventions"][0] for a in record["attempts"]]
        assert played == policy["chain"][:len(played)]
        assert [a["won"] for a in record["attempts"]][:-1] == [False] * (len(played) - 1)
        assert len(played) == len(policy["chain"]) or record["attempts"][-1]["won"]
    assert cascade["verifier"] == "env:won"
    assert cascade["mean_attempts"] == sum(len(r["attempts"]) for r in deployed) / 8
    assert cascade["mean_cost"] == sum(r["cost"] for r in deployed) / 8 > 0

    code, out, err = cli(capsys, "compare", str(run), str(run), "--harness-a", "base",
                         "--harness-b", f"darc:{p / 'policy.json'}", "--resamples", "500")
    assert code == 0, err
    assert "McNemar" in out and "8 paired tasks" in out


def test_darc_bad_input(capsys, tmp_path):
    code, _, err = cli(capsys, "run", *COMMON, "--harness", "darc-profile:crystal-ball", "--out", str(tmp_path / "p"))
    assert code == 2 and "crystal-ball" in err
    base = play(capsys, tmp_path / "base", COMMON, ["base"])
    code, _, err = cli(capsys, "darc", "diagnose", str(base), "--out", str(tmp_path / "d"))
    assert code == 2 and "no profiling harness" in err and "darc-profile:" in err
    code, _, err = cli(capsys, "darc", "evidence", str(base), "--out", str(tmp_path / "e"))
    assert code == 2 and "darc-eval:" in err
    code, _, err = cli(capsys, "darc", "evidence", str(tmp_path), "--out", str(tmp_path / "e"))
    assert code == 2 and "not a run directory" in err
    bad = tmp_path / "evidence.csv"
    bad.write_text("task_id,intervention,success,cost\nt1,sentry,2,1\n")
    code, _, err = cli(capsys, "darc", "distill", "--evidence", str(bad))
    assert code == 2 and "success" in err
    code, _, err = cli(capsys, "darc", "distill", "--evidence", str(bad), "--max-len", "0")
    assert code == 2 and "--max-len" in err
    policy = tmp_path / "policy.json"
    policy.write_text('{"chain": ["sentry", "no-such-thing"]}')
    code, _, err = cli(capsys, "run", *COMMON, "--harness", f"darc:{policy}", "--out", str(tmp_path / "r"))
    assert code == 2 and "no-such-thing" in err
    code, _, err = cli(capsys, "run", *COMMON, "--harness", f"darc:{tmp_path / 'missing.json'}", "--out", str(tmp_path / "r"))
    assert code == 2 and "cannot read DARC policy" in err
    code, _, err = cli(capsys, "compare", str(tmp_path), str(tmp_path))
    assert code == 2 and "not a run directory" in err
