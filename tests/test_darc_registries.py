"""DARC reaches the host only through registration hooks: profiling, evaluating and the factorial build their
harnesses (and the detect-only twins) through loaders, and leave the host's registries as they were."""

from __future__ import annotations

import json

from playground.host.manager import Host
from playground.run.config import RunConfig


def names(host: Host) -> tuple[list[str], list[str]]:
    return host.interventions.names(), host.harnesses.names()


def test_profile_and_evaluate_leave_the_host_registries_unchanged(tmp_path):
    from playground.plugins.darc.evaluate import eval_harnesses, evaluate
    from playground.plugins.darc.profile import profile

    host = Host(strict=True).load()
    before = names(host)
    tasks = [f"tiny-{i}" for i in range(100, 102)]
    config = RunConfig(env="tiny", task_set="default", split="dev", tasks=tasks, agent="expert", harnesses=["base"],
                       out=str(tmp_path / "unused"), strict=True)
    result = profile(host, config, ["validity-guard"], tmp_path / "darc")
    assert result["episodes"] == 2 and result["detectors"] == ["validity-guard"]
    assert names(host) == before
    evaluate(host, config, ["validity-guard"], tmp_path / "darc")
    assert names(host) == before
    harnesses = sorted(json.loads(line)["harness"]
                       for line in (tmp_path / "darc" / "evaluate-run" / "episodes.jsonl").read_text().splitlines())
    assert harnesses == ["base", "base", "darc-eval:validity-guard", "darc-eval:validity-guard"]
    assert eval_harnesses(host, ["validity-guard"]) == ["base", "darc-eval:validity-guard"]
    assert names(host) == before


def test_the_loaders_build_what_darc_used_to_register():
    from playground.plugins.darc.factorial import cell_harness, register_cells
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
    cells = register_cells(host, "action_pruning")
    assert cell_harness("action_pruning", "top", "off") in cells
    spec = resolve_harness(host, cell_harness("action_pruning", "top", "off"))
    assert spec.interventions == ("action_pruning",)
    assert dict(spec.params) == {"view": "top", "recovery_prompt": "off", "repair": False}
    assert names(host) == before
