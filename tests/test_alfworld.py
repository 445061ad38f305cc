"""The alfworld env plugin on the real engine: generator, official-layout loader, env, guard, runs.

Games are generated once per session into a temporary PLAYGROUND_CACHE (one valid_unseen
game per task type, six train games for the priors). A fake ALFWORLD_DATA tree in the
official layout is built from generated games and the hand-written sample in
../shared/data/alfworld (tests that need the sample skip when it is absent).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import cli, require_extra  # noqa: E402
from tests.darc_runs import evidence_run, profile  # noqa: E402
from tests.darc_runs import play as play_run  # noqa: E402

require_extra("alfworld", "alfworld")  # skips for users without the extra; fails in CI

from playground.envs.alfworld.data import LAYOUT_DIR, TASK_TYPES, is_playable, list_tasks, parse_task_folder  # noqa: E402
from playground.host.manager import Host  # noqa: E402
from playground.run.config import RunConfig  # noqa: E402
from playground.run.runner import run  # noqa: E402
from playground.testing import ScriptedAgent, play  # noqa: E402

SAMPLES = Path(__file__).resolve().parents[2] / "shared" / "data" / "alfworld"
HANDMADE = SAMPLES / "handmade_fridge"
PDDL_TEST = SAMPLES / "textworld_pddl_test"
HANDMADE_ID = "valid_unseen/pick_and_place_simple-Apple-None-Fridge-1/trial_T20190000_000000_handmade"
PRIOR_GAMES = 6

pytestmark = pytest.mark.slow


def load_host() -> Host:
    """The real host with the alfworld plugin (given explicitly while it is not a built-in)."""
    return Host(strict=True).load()


@pytest.fixture(scope="session")
def cache(tmp_path_factory):
    """A session PLAYGROUND_CACHE holding one valid_unseen game per task type and six train games."""
    from playground.envs.alfworld.generate import list_generated

    root = tmp_path_factory.mktemp("alfworld-cache")
    before = os.environ.get("PLAYGROUND_CACHE")
    os.environ["PLAYGROUND_CACHE"] = str(root)
    try:
        games = list_generated("valid_unseen", len(TASK_TYPES))
        list_generated("train", PRIOR_GAMES)
        yield {"root": root, "valid_unseen": games}
    finally:
        if before is None:
            os.environ.pop("PLAYGROUND_CACHE", None)
        else:
            os.environ["PLAYGROUND_CACHE"] = before


@pytest.fixture
def provider(cache):
    from playground.envs.alfworld.provider import AlfWorldProvider

    return AlfWorldProvider()


@pytest.fixture
def fake_data(tmp_path, cache, monkeypatch):
    """A fake ALFWORLD_DATA in the official layout: the generated games, plus the hand-written sample if present."""
    from playground.envs.alfworld.generate import generated_root

    root = tmp_path / "alfworld-data"
    shutil.copytree(generated_root() / LAYOUT_DIR / "valid_unseen", root / LAYOUT_DIR / "valid_unseen")
    if HANDMADE.is_dir():
        shutil.copytree(HANDMADE, root / LAYOUT_DIR / HANDMADE_ID)
    monkeypatch.setenv("ALFWORLD_DATA", str(root))
    return root


def by_type(cache) -> dict[str, str]:
    return {parse_task_folder(t.split("/")[1]).task_type: t for t in cache["valid_unseen"]}


# -- the generator --------------------------------------------------------------------


@pytest.mark.parametrize("task_type", TASK_TYPES)
def test_the_planner_expert_wins_a_generated_game_of_each_task_type(provider, cache, task_type):
    task = by_type(cache)[task_type]
    result = play(provider.make("generated", expert=True), ScriptedAgent(), task=task, max_steps=50)
    assert result.result.status == "won", result.of("step")[-3:]


def test_generated_games_are_an_official_layout_tree(cache):
    from playground.envs.alfworld.generate import generated_root

    assert sorted(by_type(cache)) == sorted(TASK_TYPES)
    assert list_tasks(generated_root(), "valid_unseen") == cache["valid_unseen"]  # one loader, the same order
    for task in cache["valid_unseen"]:
        trial = generated_root() / LAYOUT_DIR / task
        assert {p.name for p in trial.iterdir()} == {"game.tw-pddl", "initial_state.pddl", "traj_data.json"}
        game = json.loads((trial / "game.tw-pddl").read_text())
        traj = json.loads((trial / "traj_data.json").read_text())
        assert game["solvable"] is True and is_playable(trial)
        assert game["pddl_problem"] == (trial / "initial_state.pddl").read_text()
        assert "UNKNOWN GOAL" not in game["grammar"] and traj["turk_annotations"]["anns"][0]["task_desc"] in game["grammar"]
        assert traj["task_type"] == parse_task_folder(task.split("/")[1]).task_type
        assert traj["playground"]["expert_plan"]


def test_generation_is_deterministic_by_seed(cache, tmp_path, monkeypatch):
    from playground.envs.alfworld.generate import game_dir, generate
    from playground.envs.alfworld.problems import sample_problem

    problem = sample_problem(20000, "valid_unseen")
    first = game_dir(problem)
    monkeypatch.setenv("PLAYGROUND_CACHE", str(tmp_path))
    assert generate(problem)
    second = game_dir(problem)
    assert first != second
    for name in ("game.tw-pddl", "initial_state.pddl", "traj_data.json"):
        assert (first / name).read_bytes() == (second / name).read_bytes()
    assert not list((second.parents[3] / "tmp").iterdir())  # nothing half-written left behind


def test_valid_unseen_combinations_never_occur_in_train(cache):
    from playground.envs.alfworld.problems import is_unseen, sample_problem

    def combos(split, start):
        return {(p.task_type, p.object_target, p.parent_target or p.toggle_target)
                for p in (sample_problem(seed, split) for seed in range(start, start + 120))}

    train, unseen = combos("train", 0), combos("valid_unseen", 20000)
    assert not train & unseen
    assert all(is_unseen(*c) for c in unseen) and not any(is_unseen(*c) for c in train)
    rooms = {sample_problem(seed, "train").room for seed in range(60)}
    assert rooms == {"Kitchen", "LivingRoom", "Bedroom", "Bathroom"}


# -- the env --------------------------------------------------------------------------


def test_reset_gives_the_same_state_and_snapshots_replay(provider, cache):
    task = by_type(cache)["pick_heat_then_place_in_recep"]
    env = provider.make("generated", expert=True)
    first = env.reset(options={"task": task})
    again = env.reset(options={"task": task})
    assert first == again
    obs, info = first
    assert info["goal"] and obs.endswith(f"Your task is to: {info['goal']}")
    assert info["admissible_actions"] == sorted(info["admissible_actions"])
    assert info["task_type"] == "pick_heat_then_place_in_recep"
    plan = info["expert_plan"]
    env.step(plan[0])
    snapshot = env.snapshot()
    after = env.step(plan[1])
    env.step(plan[2])
    env.restore(snapshot)
    assert env.step(plan[1]) == after


def test_invalid_actions_never_reach_the_engine(provider, cache):
    env = provider.make("generated")
    _, info = env.reset(options={"task": cache["valid_unseen"][0]})
    assert "expert_plan" not in info  # no expert unless asked for
    text, reward, terminated, truncated, after = env.step("fly to the moon")
    assert (text, reward, terminated, after["valid_action"]) == ("Nothing happens.", 0.0, False, False)
    assert after["admissible_actions"] == info["admissible_actions"]
    assert env.snapshot().actions == ()
    go = next(a for a in info["admissible_actions"] if a.startswith("go to"))
    assert env.step("  " + go.upper())[4]["valid_action"]  # case and spaces do not matter


def test_bad_task_ids_are_named(provider, cache):
    from playground.core.env import UnknownTaskError

    env = provider.make("generated")
    for bad in ("valid_unseen/pick_and_place_simple-Apple-None-Fridge-1/trial_20000", "nonsense", "train/x/trial_1"):
        with pytest.raises(UnknownTaskError, match=f"alfworld: unknown task '{bad}' in task set 'generated'; expected"):
            env.reset(options={"task": bad})


# -- real data in the official layout -------------------------------------------------


def test_alfworld_data_in_the_official_layout_is_played(provider, fake_data, cache):
    assert provider.default_task_set == "official"
    tasks = provider.task_sets()["official"].tasks("valid_unseen", 20)
    assert sorted(tasks) == sorted(cache["valid_unseen"] + ([HANDMADE_ID] if HANDMADE.is_dir() else []))
    assert {parse_task_folder(t.split("/")[1]).task_type for t in tasks[:6]} == set(TASK_TYPES)  # round-robin
    unsolvable = fake_data / LAYOUT_DIR / "valid_unseen" / "pick_and_place_simple-Mug-None-Desk-301" / "trial_x"
    unsolvable.mkdir(parents=True)
    (unsolvable / "game.tw-pddl").write_text(json.dumps({"solvable": False}))
    (unsolvable / "traj_data.json").write_text("{}")
    assert provider.task_sets()["official"].tasks("valid_unseen", 20) == tasks


@pytest.mark.skipif(not HANDMADE.is_dir(), reason="sample ../shared/data/alfworld/handmade_fridge is absent")
def test_the_handmade_sample_is_won_by_the_expert(provider, fake_data):
    result = play(provider.make("official", expert=True), ScriptedAgent(), task=HANDMADE_ID, max_steps=20)
    assert result.result.status == "won"
    assert result.of("reset")[0]["goal"] in ("put a apple in fridge.", "put some apple on fridge.")


@pytest.mark.skipif(not PDDL_TEST.is_dir(), reason="sample ../shared/data/alfworld/textworld_pddl_test is absent")
def test_names_without_alfred_ids_play_too(tmp_path, provider, monkeypatch):
    """textworld's alfred-domain test game has plain ids ('Desk'); alfworld's demangler leaves 'desk ' behind."""
    game = json.loads((PDDL_TEST / "game.tw-pddl").read_text()) | {"solvable": True}
    trial = tmp_path / LAYOUT_DIR / "valid_seen" / "look_at_obj_in_light-CD-None-DeskLamp-301" / "trial_sample"
    trial.mkdir(parents=True)
    (trial / "game.tw-pddl").write_text(json.dumps(game))
    (trial / "traj_data.json").write_text(json.dumps({"task_type": "look_at_obj_in_light", "pddl_params": {
        "object_target": "CD", "parent_target": "", "toggle_target": "DeskLamp", "mrecep_target": "",
        "object_sliced": False}}))
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path))
    result = play(provider.make("official", expert=True), ScriptedAgent(), task=list_tasks(tmp_path, "valid_seen")[0])
    assert result.result.status == "won"
    assert "go to desk" in [s["action"] for s in result.of("step")]


# -- the guard on real games ----------------------------------------------------------


def test_guard_recall_on_expert_trajectories(provider, cache):
    from playground.envs.alfworld.guard import Guard
    from playground.envs.alfworld.priors import load_priors, priors_path

    guard = Guard(load_priors(PRIOR_GAMES))
    assert priors_path(PRIOR_GAMES).is_file()
    env = provider.make("generated", expert=True)
    hits = steps = 0
    for task in cache["valid_unseen"]:
        obs, info = env.reset(options={"task": task})
        first, history = obs, []
        while not info["won"]:
            expert = info["expert_plan"][0]
            hits += expert in guard.top(info["goal"], info["admissible_actions"], history, obs, first)
            steps += 1
            obs, _, _, _, info = env.step(expert)
            history.append((expert, obs, True))
    assert hits / steps >= 0.9


def test_action_pruning_offers_the_top_12_with_a_phase_prompt(provider, cache):
    from playground.envs.alfworld.interventions import ActionPruning

    agent = ScriptedAgent(["take the apple please"])
    task = by_type(cache)["pick_and_place_simple"]
    result = play(provider.make("generated", expert=True), agent, plugins=[ActionPruning({"prior_games": PRIOR_GAMES})],
                  task=task, max_steps=30)
    assert result.result.status == "won" and result.count("intervention") == 1
    message = agent.views[1].message
    assert message.kind == "hard_repair" and 1 <= len(message.actions) <= 12
    assert set(message.actions) <= set(agent.views[0].admissible_actions)
    assert agent.views[1].extras["expert_plan"][0] in message.actions
    assert "You are looking for a" in message.text
    assert all(s["valid_action"] for s in result.of("step"))


def test_type_saturation_and_loop_fallback(provider, cache):
    from playground.envs.alfworld.interventions import LoopFallback, TypeSaturation

    task = by_type(cache)["pick_cool_then_place_in_recep"]
    agent = ScriptedAgent(["inventory"])
    result = play(provider.make("generated", expert=True), agent, plugins=[TypeSaturation({"prior_games": 0})], task=task)
    assert result.of("intervention")[0]["kind"] == "type_saturation"
    assert all(a.split()[0] in ("go", "open") for a in agent.views[1].message.actions)

    agent = ScriptedAgent(["look", "look", "look"])
    result = play(provider.make("generated", expert=True), agent, plugins=[LoopFallback({"prior_games": 0})], task=task)
    replaced = result.of("intervention")
    assert replaced and replaced[0]["kind"] == "loop_fallback" and replaced[0]["action"] != "look"
    assert result.result.status == "won"


# -- end to end through the host and the runner ----------------------------------------


def test_run_on_generated_games_with_every_harness(cache, tmp_path):
    """base, sentry and every harness the alfworld plugin registers (alfworld-guard and alfworld-sentry)."""
    host = load_host()
    own = sorted(h.name for h in host.harnesses if h.plugin == "alfworld")
    assert own == ["alfworld-guard", "alfworld-sentry"]
    assert {"action_pruning", "type_saturation", "loop_fallback"} <= set(host.interventions.names())
    assert all(host.interventions.get(n).modes == ("action_validity",)
               for n in ("action_pruning", "type_saturation", "loop_fallback"))
    harnesses = ["base", "sentry", *own]
    tasks = cache["valid_unseen"][:3]
    config = RunConfig(env="alfworld", task_set="generated", split="valid_unseen", tasks=tasks,
                       agent="noisy", harnesses=harnesses, out=str(tmp_path / "run"),
                       max_steps=30, params={"prior_games": PRIOR_GAMES}, strict=True,
                       agent_options={"invalid": 0.3})
    summary = run(host, config)
    assert list(summary["harnesses"]) == harnesses
    for name in harnesses:
        figures = summary["harnesses"][name]
        assert figures["episodes"] == len(tasks) and figures["errors"] == 0, name
        headers = [json.loads(p.read_text().splitlines()[0]) for p in (tmp_path / "run" / "traces" / name).glob("*.jsonl")]
        assert len(headers) == len(tasks)
        assert all(h["interventions"] == list(host.harnesses.get(name).interventions) for h in headers), name
    assert summary["harnesses"]["base"]["invalid_actions_per_episode"] > 0
    for name in own:  # both put the guard's pruning before anything else: no invalid action reaches the engine
        guarded = summary["harnesses"][name]
        assert guarded["invalid_actions_per_episode"] == 0 and guarded["interventions"].get("hard_repair", 0) > 0, name
    header = json.loads((tmp_path / "run" / "traces" / "base").glob("*.jsonl").__next__().read_text().splitlines()[0])
    assert header["env"] == "alfworld" and header["generator_hash"] and header["version"]


def test_run_on_official_layout_data(fake_data, tmp_path):
    from playground.run.validation import resolve_tasks

    host = load_host()
    task_set, split, tasks = resolve_tasks(host, "alfworld", None, "valid_unseen", 2)
    assert task_set == "official"
    summary = run(host, RunConfig(env="alfworld", task_set=task_set, split=split, tasks=tasks, agent="noisy",
                                  harnesses=["base", "sentry"], out=str(tmp_path / "run"), max_steps=30, strict=True))
    assert summary["harnesses"]["base"]["episodes"] == 2 and summary["harnesses"]["sentry"]["episodes"] == 2


def test_alfworld_meets_the_env_contract(provider):
    from playground.testing import check_env

    check_env(provider, "generated", split="valid_unseen", tasks=2)


# -- DARC on generated games: the search spaces of Table 14 and the factorial of Table 13 -----
# DARC's runs are the host's (`playground run` with DARC's harness names); its commands read the run directories.


def _darc(capsys, *args):
    """`playground ARGS` in-process, which must succeed; its stdout."""
    code, out, err = cli(capsys, *args)
    assert code == 0, err
    return out


def _library(env: str) -> list[str]:
    """The whole intervention library DARC evaluates on `env` (the no-diagnosis control)."""
    from playground.plugins.darc.profile import library

    return sorted(spec.name for spec in library(load_host(), env))


def test_darc_counts_40_diagnosed_and_400_full_chains_from_evaluate_evidence(cache, tmp_path, capsys):
    common = ["--env", "alfworld:generated", "--split", "valid_unseen", "--agent", "noisy", "--episodes", "2",
              "--max-steps", "20", "--quiet", "--agent-option", "invalid=0.5"]
    p = tmp_path / "darc"
    diagnosis = profile(capsys, p, common)
    assert diagnosis["mode"] == "action_validity"
    assert diagnosis["admissible_interventions"] == ["action_pruning", "loop_fallback", "type_saturation",
                                                     "validity-guard"]
    # the evidence run of the diagnosed interventions, then the same run grown to the whole library
    evaluate = [*common, "--param", f"prior_games={PRIOR_GAMES}"]
    run_dir = evidence_run(capsys, p / "evaluate-run", evaluate, diagnosis["admissible_interventions"])
    _darc(capsys, "darc", "evidence", str(run_dir), "--diagnosis", str(p / "profile-run" / "diagnosis.json"),
          "--out", str(p / "diagnosed"))
    names = _library("alfworld")
    assert len(names) == 8 and set(diagnosis["admissible_interventions"]) < set(names)
    evidence_run(capsys, run_dir, evaluate, names)
    _darc(capsys, "darc", "evidence", str(run_dir), "--out", str(p / "full"))
    diagnosed = _darc(capsys, "darc", "distill", "--evidence", str(p / "diagnosed" / "evidence.csv"), "--count-only")
    full = _darc(capsys, "darc", "distill", "--evidence", str(p / "full" / "evidence.csv"), "--count-only")
    assert (diagnosed.strip(), full.strip()) == ("40", "400")
    out = _darc(capsys, "darc", "distill", "--evidence", str(p / "full" / "evidence.csv"))
    policy = json.loads((p / "full" / "policy.json").read_text())
    assert "search space: 400 chains over 8 interventions" in out and policy["tau_free"] > 0
    assert set(policy["cost_units"].values()) == {"steps"}


FACTORIAL = ["darc-factorial:action_pruning-full-off", "darc-factorial:action_pruning-full-always",
             "darc-factorial:action_pruning-top-off", "darc-factorial:action_pruning-top-always",
             "darc-factorial:action_pruning-random-off"]


def test_darc_factorial_on_generated_games(cache, tmp_path, capsys):
    """Table 13 as darc-table13 plays it: the five factorial cells in one run (grid `cells`), the forced top-1 agent
    under `base` in another (grid `forced-top1`); the study's table reads them."""
    common = ["--env", "alfworld:generated", "--split", "valid_unseen", "--episodes", "2", "--max-steps", "20",
              "--quiet"]
    f = tmp_path / "f"
    play_run(capsys, f / "cells", [*common, "--agent", "noisy", "--agent-option", "invalid=0.5",
                               "--param", f"prior_games={PRIOR_GAMES}"], FACTORIAL)
    play_run(capsys, f / "forced-top1", [*common, "--agent", "guard-top1", "--agent-option",
                                     f"prior_games={PRIOR_GAMES}"], ["base"])
    rows = json.loads(_darc(capsys, "study", "table", "darc-table13", "--out", str(f), "--json"))
    assert [(r["grid"], r["harness"]) for r in rows] == [*(("cells", h) for h in FACTORIAL), ("forced-top1", "base")]
    assert all(r["episodes"] == 2 for r in rows)
    trace = next((f / "cells" / "traces").glob("darc-factorial*top-off/*.jsonl"))
    assert trace.read_text()


def test_distillation_on_action_validity_evidence_can_select_the_ranked_view_operator(cache, tmp_path, capsys):
    """Issue 37: the paper's ALFWorld operator (the guard's top-12 view with the recovery prompt every step) is
    `action_pruning` in the library, so profile -> diagnose -> evidence -> distill evaluates it and can choose it."""
    common = ["--env", "alfworld:generated", "--split", "valid_unseen", "--agent", "noisy", "--episodes", "6",
              "--max-steps", "30", "--quiet", "--agent-option", "invalid=0.3", "--agent-option", "drift=0.3"]
    p = tmp_path / "darc"
    diagnosis = profile(capsys, p, common)
    assert diagnosis["mode"] == "action_validity" and "action_pruning" in diagnosis["admissible_interventions"]
    run_dir = evidence_run(capsys, p / "av" / "evaluate-run", [*common, "--param", f"prior_games={PRIOR_GAMES}"],
                           diagnosis["admissible_interventions"])
    _darc(capsys, "darc", "evidence", str(run_dir), "--diagnosis", str(p / "profile-run" / "diagnosis.json"))
    # what the agent saw under the evaluated operator: at most 12 commands, and the phase prompt every step
    traces = (run_dir / "traces" / "darc-eval:action_pruning").glob("*.jsonl")
    events = [json.loads(line) for path in traces for line in path.read_text().splitlines()]
    proposals = [e for e in events if e["type"] == "proposal" and e["attempt"] == 0]
    assert proposals and all(len(e["admissible_actions"]) <= 12 and e["notes"] for e in proposals)
    assert any(len(e.get("env_admissible_actions") or []) > 12 for e in proposals)
    _darc(capsys, "darc", "distill", "--evidence", str(run_dir / "evidence.csv"),
          "--interventions", "action_pruning,loop_fallback,validity-guard", "--out", str(tmp_path / "policy.json"))
    assert json.loads((tmp_path / "policy.json").read_text())["chain"][0] == "action_pruning"


INFO_CONTROLS = ["darc-eval:action_pruning", "darc-info:random:action_pruning", "darc-info:label:action_validity",
                 "darc-info:metadata:task_type", "base"]


def test_darc_controls_run_from_the_cli(cache, tmp_path, capsys):
    """Issue 37: Tables 5, 6 and 7's controls, on generated games with the noisy instrument: the policies from
    the `darc.policy_controls` step (the darc-table6 study's), every row a harness of `playground run`."""
    common = ["--env", "alfworld:generated", "--agent", "noisy", "--episodes", "3", "--max-steps", "20", "--quiet",
              "--agent-option", "invalid=0.5"]
    p = tmp_path / "darc"
    assert profile(capsys, p, [*common, "--split", "valid_unseen"])["mode"] == "action_validity"
    common += ["--param", f"prior_games={PRIOR_GAMES}"]
    dev = [*common, "--split", "valid_unseen"]
    run_dir = evidence_run(capsys, p / "evaluate-run", dev, _library("alfworld"))
    _darc(capsys, "darc", "evidence", str(run_dir), "--out", str(p / "full"))
    # Table 6: correct (action validity) against generic (sentry) and mismatched (procedure breadth) policies
    from playground.plugins.darc.steps import ControlsParams, policy_controls

    controls = (p / "full" / "evidence.csv", tmp_path / "t6" / "policies",
                ControlsParams(diagnosis=str(p / "profile-run" / "diagnosis.json")))
    _, policies = policy_controls(*controls)
    assert sorted(policies) == ["correct", "generic", "mismatched"]
    written = {name: path.read_text() for name, path in policies.items()}
    correct, generic, mismatched = (json.loads(policies[n].read_text()) for n in ("correct", "generic", "mismatched"))
    validity = {"action_pruning", "loop_fallback", "type_saturation", "validity-guard"}
    assert set(correct["chain"]) <= validity and correct["mode"] == "action_validity"
    assert mismatched["mode"] == "procedure_breadth" and not set(mismatched["chain"]) & validity
    assert generic["chain"] == ["sentry"]
    # the same step again writes the same policies in place
    assert {name: path.read_text() for name, path in policy_controls(*controls)[1].items()} == written
    deployed = [f"darc:{policies[n]}" for n in ("correct", "generic", "mismatched")]
    t6 = play_run(capsys, tmp_path / "t6" / "run", dev, ["base", *deployed])
    rows = json.loads(_darc(capsys, "study", "table", str(t6), "--reference", deployed[0], "--json"))
    assert [r["harness"] for r in rows] == ["base", *deployed] and all(r["episodes"] == 3 for r in rows)
    # Table 5: the frozen correct policy deployed on another split beside the bare agent, paired by task
    t5 = play_run(capsys, tmp_path / "t5", [*common, "--split", "train"], ["base", deployed[0]])
    cascade = json.loads((t5 / "summary.json").read_text())["harnesses"][deployed[0]]
    assert cascade["episodes"] == 3 and cascade["mean_attempts"] >= 1
    out = _darc(capsys, "compare", str(t5), str(t5), "--harness-a", "base", "--harness-b", deployed[0])
    assert "McNemar" in out and "3 paired tasks" in out
    # Table 7: the operator against matched information
    t7 = play_run(capsys, tmp_path / "t7" / "run", dev, INFO_CONTROLS)
    rows = json.loads(_darc(capsys, "study", "table", str(t7), "--json"))
    assert [r["harness"] for r in rows] == INFO_CONTROLS
    traces = t7 / "traces"

    def first_proposals(harness):
        """The first proposal of every step, with its notes' texts (traces keep a note once, by hash)."""
        proposals = []
        for path in (traces / harness).glob("*.jsonl"):
            events = [json.loads(line) for line in path.read_text().splitlines()]
            texts = {e["hash"]: e["text"] for e in events if e["type"] == "prompt"}
            proposals += [dict(e, task=path.stem, notes=[texts[h] for h in e.get("notes", [])])
                          for e in events if e["type"] == "proposal" and e["attempt"] == 0]
        return proposals

    label = first_proposals("darc-info:label:action_validity")
    assert label and all(e["notes"] == ["Diagnosed failure mode for these tasks: action_validity (commands the "
                                        "environment does not accept (not among the admissible commands, or "
                                        "malformed))."] for e in label)
    metadata = first_proposals("darc-info:metadata:task_type")
    assert metadata and all(len(e["notes"]) == 1 and e["notes"][0].startswith("Task metadata: task_type: ")
                            for e in metadata)
    assert all(len(e["admissible_actions"]) <= 12 for e in first_proposals("darc-info:random:action_pruning"))
    # the random view is a draw, not the operator's ranking
    operator = {(e["task"], e["step"]): e["admissible_actions"] for e in first_proposals("darc-eval:action_pruning")}
    random_view = {(e["task"], e["step"]): e["admissible_actions"]
                   for e in first_proposals("darc-info:random:action_pruning")}
    shared = set(operator) & set(random_view)
    assert shared and any(operator[k] != random_view[k] for k in shared)
