"""What DARC's tests share: the runs DARC's commands read are played by the host (`playground run`), as a user
plays them, then the command reads the run directory."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import cli


def play(capsys, out: Path, options: list[str], harnesses: list[str]) -> Path:
    """`playground run OPTIONS --harness H ... --out OUT`, which must succeed; the run directory."""
    code, _, err = cli(capsys, "run", *options, *(x for h in harnesses for x in ("--harness", h)), "--out", str(out))
    assert code == 0, err
    return out


def profile(capsys, out: Path, options: list[str], *diagnose: str, detectors: str = "sentry") -> dict:
    """Play the profiling run in OUT/profile-run (the base agent watched by `detectors`), diagnose it there
    (OUT/profile-run/diagnosis.json) with the `darc diagnose` options `diagnose`; the diagnosis."""
    run_dir = play(capsys, out / "profile-run", options, [f"darc-profile:{detectors}"])
    code, _, err = cli(capsys, "darc", "diagnose", str(run_dir), *diagnose)
    assert code == 0, err
    return json.loads((run_dir / "diagnosis.json").read_text())


def evidence_run(capsys, out: Path, options: list[str], interventions: list[str]) -> Path:
    """Play base and each intervention alone (`darc-eval:NAME`) in OUT; the run directory."""
    return play(capsys, out, options, ["base", *(f"darc-eval:{name}" for name in interventions)])
