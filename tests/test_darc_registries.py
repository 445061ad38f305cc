"""DARC reaches the host only through registration hooks: the profiling, evidence, factorial and control harnesses
(and the detect-only twins) are built by loaders, and leave the host's registries as they were; its commands read
the runs the host played."""

from __future__ import annotations

import json

from playground.host.manager import Host
from playground.run.config import RunConfig
from playground.run.runner import run


def names(host: Host) -> tuple[list[str], list[str]]:
    return host.interventions.names(), host.harnesses.names()


def test_profiling_and_evidence_runs_leave_the_host_registries_unchanged(tmp_path):
    from playground.plugins.darc.evaluate import eval_harnesses, gather_evidence
    from playground.plugins.darc.profile import diagnose_run, profile_harness_name

    host = Host(strict=True).load()
    before = names(host)
    tasks = [f"tiny-{i}" for i in range(100, 102)]
    config = RunConfig(env="tiny", task_set="default", split="dev", tasks=tasks, agent="expert",
                       harnesses=[profile_harness_name(["validity-guard"])], out=str(tmp_path / "profile-run"),
                       strict=True)
    run(host, config)
    result = diagnose_run(host, tmp_path / "profile-run")
    assert result["episodes"] == 2 and result["detectors"] == ["validity-guard"]
    assert names(host) == before
    harnesses = eval_harnesses(["validity-guard"])
    assert harnesses == ["base", "darc-eval:validity-guard"]
    run(host, RunConfig(env="tiny", task_set="default", split="dev", tasks=tasks, agent="expert",
                        harnesses=harnesses, out=str(tmp_path / "evidence-run"), strict=True))
    path, interventions, n = gather_evidence(host, tmp_path / "evidence-run")
    assert (interventions, n) == (["validity-guard"], 2) and path == tmp_path / "evidence-run" / "evidence.csv"
    played = sorted(json.loads(line)["harness"]
                    for line in (tmp_path / "evidence-run" / "episodes.jsonl").read_text().splitlines())
    assert played == ["base", "base", "darc-eval:validity-guard", "darc-eval:validity-guard"]
    assert names(host) == before


def test_the_loaders_build_what_darc_used_to_register():
    from playground.plugins.darc.factorial import cell_harness, cell_harnesses
    from playground.plugins.darc.profile import DetectOnly, profile_harness_name
    from playground.run.harnesses import resolve_harness, resolve_intervention
    from playground.run.services import Services, build_intervention

    host = Host(strict=True).load()
    before = names(host)
    spec = resolve_harness(host, "darc-eval:validity-guard")
    assert (spec.interventions, spec.description, dict(spec.params)) == (("validity-guard",), "validity-guard alone",
                                                                          {})
    spec = resolve_harness(host, profile_harness_name(["validity-guard", "sentry"]))
    assert spec.interventions == ("detect-only:validity-guard", "detect-only:sentry")
    assert dict(spec.params) == {"hard_repair": False, "soft_repair": False}
    twin = resolve_intervention(host, "detect-only:validity-guard")  # typed: (params, services)
    assert twin.modes == () and twin.cost_unit == host.interventions.get("validity-guard").cost_unit
    assert isinstance(build_intervention(twin, {}, Services("", "tiny", "h", 0, None, "/tmp")), DetectOnly)
    cells = cell_harnesses("action_pruning")
    assert cell_harness("action_pruning", "top", "off") in cells and len(cells) == 5
    spec = resolve_harness(host, cell_harness("action_pruning", "top", "off"))
    assert spec.interventions == ("action_pruning",)
    assert dict(spec.params) == {"view": "top", "recovery_prompt": "off", "repair": False}
    spec = resolve_harness(host, "darc-info:label:action_validity")
    assert spec.interventions == ("diagnosis-note",) and dict(spec.params) == {"mode": "action_validity"}
    spec = resolve_harness(host, "darc-info:random:action_pruning")
    assert spec.interventions == ("action_pruning",) and dict(spec.params) == {"view": "random"}
    assert names(host) == before


def test_the_table13_study_plays_every_cell_and_the_forced_top1_with_its_own_agent():
    """What `darc factorial` ran is the darc-table13 study: the five cells, then the model-free forced top-1."""
    from playground.core.study_file import load_study
    from playground.plugins.darc.factorial import cell_harnesses

    study = load_study(Host().load().studies.get("darc-table13").path)
    cells, forced = study.grids
    assert cells.harnesses == cell_harnesses("action_pruning") and cells.agent == "noisy"
    assert (forced.agent, forced.keep_agent, forced.harnesses) == ("guard-top1", True, ["base"])
    assert (cells.env, cells.split, cells.episodes) == (forced.env, forced.split, forced.episodes)
