"""WebShop env: the reward on hand-made product/goal pairs, pages and transitions, search,
the expert, the real-data loader, and Sentry's detectors on WebShop's failures."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from playground.envs.webshop import data
from playground.envs.webshop.catalogue import Catalogue, Goal, Product, generate_catalogue, goal_for, price_upper_for
from playground.envs.webshop.env import WebShopEnv, WebShopProvider, expert_query
from playground.envs.webshop.reward import normalize_color, purchase_reward, title_nouns
from playground.core.actions import fill_template, is_admissible, kind_of, match_admissible
from playground.core.env import UnknownTaskError
from playground.core.payloads import EpisodeIds, Proposal, StepContext, Turn
from playground.plugins.sentry.detectors import run_detectors

SAMPLES = Path(__file__).resolve().parents[2] / "shared" / "data" / "webshop"

SHAMPOO = Product(
    asin="B000SHAMP1", title="Aurelia Argan Oil Shampoo, Sulfate Free", category="beauty", query="shampoo",
    product_category="Beauty & Personal Care › Hair Care › Shampoo",
    bullets=("Sulfate free formula for dry hair.",), description="A gentle shampoo.",
    attributes=("sulfate free", "paraben free"), options={"scent": ("lavender", "citrus"), "size": ("small", "large")},
    price=12.5)
RUG = Product(
    asin="B000RUG001", title="Greystone Area Rug, Non Slip", category="furniture", query="area rug",
    product_category="Home & Kitchen › Home Décor › Rugs › Area Rug", bullets=("Non slip backing.",),
    description="A rug.", attributes=("non slip",), options={"color": ("navy blue", "beige")}, price=40.0)


def shampoo_goal(**changes) -> Goal:
    goal = Goal("B000SHAMP1", "i need sulfate free and paraben free shampoo, with scent: lavender, and size: large",
                ("sulfate free", "paraben free"), ("lavender", "large"), 20.0, "shampoo",
                SHAMPOO.product_category, SHAMPOO.title, ("scent", "size"))
    return Goal(**{**goal.__dict__, **changes})


# -- reward ------------------------------------------------------------------------------


def test_reward_exact_match_is_one():
    r = purchase_reward(SHAMPOO, shampoo_goal(), {"scent": "lavender", "size": "large"})
    assert (r.reward, r.r_type, r.attributes_matched, r.options_matched, r.price_ok) == (1.0, 1.0, 2, 2, True)


def test_reward_partial_attributes():
    goal = shampoo_goal(attributes=("sulfate free", "cruelty free", "vegan formula"))
    r = purchase_reward(SHAMPOO, goal, {"scent": "lavender", "size": "large"})
    assert r.attributes_matched == 1
    assert r.reward == pytest.approx((1 + 2 + 1) / (3 + 2 + 1))


def test_reward_attribute_found_in_text_counts():
    goal = shampoo_goal(attributes=("dry hair",))  # not an attribute, but in the bullet points
    assert purchase_reward(SHAMPOO, goal, {"scent": "lavender", "size": "large"}).attributes_matched == 1


def test_reward_wrong_option_and_missing_option():
    wrong = purchase_reward(SHAMPOO, shampoo_goal(), {"scent": "citrus", "size": "large"})
    assert wrong.options_matched == 1 and wrong.reward == pytest.approx(4 / 5)
    missing = purchase_reward(SHAMPOO, shampoo_goal(), {"scent": "lavender"})
    assert missing.options_matched == 1 and missing.reward == pytest.approx(4 / 5)


def test_reward_size_is_matched_fuzzily_as_upstream():
    goal = shampoo_goal(options=("lavender", "large"))
    assert purchase_reward(SHAMPOO, goal, {"size": "x-large"}).options_matched == 1
    assert purchase_reward(SHAMPOO, goal, {"size": "small"}).options_matched == 0


def test_reward_over_price():
    r = purchase_reward(SHAMPOO, shampoo_goal(price_upper=10.0), {"scent": "lavender", "size": "large"})
    assert not r.price_ok and r.reward == pytest.approx(4 / 5)


def test_reward_wrong_type_scales_down_to_zero():
    goal = shampoo_goal()
    r = purchase_reward(RUG, goal, {"color": "beige"})
    assert (r.query_match, r.category_match, r.title_score, r.r_type, r.reward) == (False, False, 0.0, 0.0, 0.0)


def test_type_reward_levels():
    # same query -> 1; no query/category match and a small title overlap -> 0.5 or 0.1
    similar = Product(**{**SHAMPOO.__dict__, "asin": "B2", "query": "conditioner",
                         "product_category": "Beauty › Conditioner", "title": "Argan Oil Conditioner Shampoo Bar Soap Kit"})
    goal = shampoo_goal(name="Argan Oil Shampoo Bottle Refill Pump Travel Gift")
    r = purchase_reward(similar, goal, {"scent": "lavender", "size": "large"})
    nouns = title_nouns(goal.name)
    assert r.title_score == pytest.approx(len(set(title_nouns(similar.title)) & set(nouns)) / len(nouns))
    assert r.r_type == (1.0 if r.title_score > 0.2 else 0.5 if r.title_score >= 0.1 else 0.1)


def test_colour_normalisation_and_title_nouns():
    assert normalize_color("navy blue") == "blue" and normalize_color("light grey") == "grey"
    assert normalize_color("32 ounce") == "32 ounce"
    # capitalised words in a title are nouns, as en_core_web_sm tags them ("Organic", "Free")
    assert title_nouns("Aurelia Organic Argan Oil Shampoo, Sulfate Free, 16 fl oz") == [
        "aurelia", "organic", "argan", "oil", "shampoo", "sulfate", "free", "fl", "oz"]


def test_price_bound_follows_webshop():
    rng = random.Random(0)
    for price in (3.0, 12.5, 99.0, 985.0):
        upper = price_upper_for(price, rng)
        steps = [p for p in (10.0 * i for i in range(1, 100)) if p > price][:4]
        assert upper == 1_000_000.0 if len(steps) < 2 else upper in steps[1:]


# -- pages, actions, search -----------------------------------------------------------------


def small_shop() -> tuple[WebShopEnv, Goal]:
    catalogue = Catalogue("hand", (SHAMPOO, RUG), ())
    goal = shampoo_goal()
    return WebShopEnv(catalogue, lambda task: goal, expert=True), goal


def test_page_transitions_and_admissible_actions():
    env, goal = small_shop()
    obs, info = env.reset(options={"task": "t"})
    assert "[Search]" in obs and info["admissible_actions"] == ["search[...]"]
    assert info["action_kinds"] == {"search[...]": "search"} and info["max_score"] == 1.0

    obs, _, done, _, info = env.step("search[sulfate free shampoo]")
    assert not done and "Page 1 (Total results: 1)" in obs and "[B000SHAMP1]" in obs
    assert "click[B000SHAMP1]" in info["admissible_actions"] and "click[Next >]" not in info["admissible_actions"]

    obs, *_, info = env.step("CLICK[b000shamp1]")  # labels match case-insensitively
    assert "scent: [lavender] [citrus]" in obs and "[Buy Now]" in obs
    assert info["open_choices"] == ["scent", "size"] and info["action_kinds"]["click[Buy Now]"] == "finish"

    obs, *_, info = env.step("click[Reviews]")
    assert obs.splitlines()[3] == "Reviews:" and info["admissible_actions"] == ["click[< Prev]", "click[Back to Search]"]
    env.step("click[< Prev]")
    obs, *_, info = env.step("click[lavender]")
    assert "(selected: lavender)" in obs and info["open_choices"] == ["size"]

    obs, _, done, _, info = env.step("click[< Prev]")
    assert "Page 1" in obs and not done  # back to the results; the choice is forgotten
    env.step("click[B000SHAMP1]")
    env.step("click[lavender]")
    env.step("click[large]")
    obs, reward, done, truncated, info = env.step("click[Buy Now]")
    assert (reward, done, truncated, info["won"], info["score"]) == (1.0, True, False, True, 1.0)
    assert info["reward_info"]["options"] == {"scent": "lavender", "size": "large"}
    with pytest.raises(RuntimeError, match="episode is over"):
        env.step("click[Buy Now]")


def test_invalid_actions_change_nothing():
    env, _ = small_shop()
    obs, _ = env.reset(options={"task": "t"})
    for bad in ("click[Buy Now]", "search[]", "buy it", "click[B000RUG001]"):
        again, reward, done, _, info = env.step(bad)
        assert (again, reward, done, info["valid_action"]) == (obs, 0.0, False, False)
    env.step("search[shampoo]")
    _, _, _, _, info = env.step("search[rug]")  # no search bar on the results page
    assert not info["valid_action"]


def test_back_to_search_and_paging_on_generated_catalogue():
    env = WebShopProvider().make("generated")
    env.reset(options={"task": "generated-20000"})
    obs, *_, info = env.step("search[olive oil organic]")
    assert "Page 1 (Total results: 50)" in obs and "click[Next >]" in info["admissible_actions"]
    assert info["action_kinds"]["click[Next >]"] == "page"
    first_page = [a for a in info["admissible_actions"] if a.startswith("click[G")]
    obs, *_, info = env.step("click[Next >]")
    assert "Page 2" in obs and "click[< Prev]" in info["admissible_actions"]
    assert not set(first_page) & set(info["admissible_actions"])
    for _ in range(3):
        env.step("click[Next >]")
    _, *_, info = env.step("click[Next >]")
    assert not info["valid_action"]  # page 5 of 5 is the last
    obs, *_, info = env.step("click[Back to Search]")
    assert info["admissible_actions"] == ["search[...]"]


def test_search_is_deterministic_and_ranks_by_relevance():
    catalogue = data.generated_catalogue()
    env = WebShopProvider().make("generated")
    first = env.index.search("wireless earbuds noise cancelling")
    assert first == env.index.search("wireless earbuds noise cancelling") and 0 < len(first) <= 50
    assert all(catalogue.product(a).query == "wireless earbuds" for a in first[:10])
    assert env.index.search("zzzz qqqq") == []


def test_snapshot_restore():
    env, _ = small_shop()
    env.reset(options={"task": "t"})
    env.step("search[shampoo]")
    saved = env.snapshot()
    env.step("click[B000SHAMP1]")
    env.restore(saved)
    assert "Page 1" in env.render()


def test_expert_reaches_reward_one_on_generated_goals():
    provider = WebShopProvider()
    env = provider.make("generated", expert=True)
    for task in provider.task_sets()["generated"].tasks("dev", 60):
        _, info = env.reset(options={"task": task})
        assert info["expert_plan"][0] == f"search[{expert_query(env.goal)}]"
        for _ in range(20):
            _, reward, done, _, info = env.step(info["expert_plan"][0])
            assert info["valid_action"]
            if done:
                break
        assert reward == 1.0, (task, info.get("reward_info"))


def test_expert_plan_recovers_from_a_detour():
    env, _ = small_shop()
    env.reset(options={"task": "t"})
    env.step("search[rug]")
    _, *_, info = env.step("click[B000RUG001]")
    assert info["expert_plan"][0] == "click[Back to Search]"
    env.step("click[< Prev]")
    _, *_, info = env.step("click[Back to Search]")
    assert info["expert_plan"][-1] == "click[Buy Now]"


def test_generated_catalogue_is_deterministic_and_goals_are_satisfiable():
    a, b = generate_catalogue(200, seed=3), generate_catalogue(200, seed=3)
    assert a.products == b.products and len({p.asin for p in a.products}) == 200
    assert len({p.category for p in a.products}) == 5
    rng = random.Random(1)
    for product in a.products[:50]:
        goal = goal_for(product, rng)
        assert set(goal.attributes) <= set(product.attributes) and goal.price_upper > product.price
        assert "price lower than" in goal.instruction or goal.price_upper == 1_000_000.0


def test_unknown_task_id_is_named():
    env = WebShopProvider().make("generated")
    with pytest.raises(UnknownTaskError, match=r"webshop: unknown task 'data-3' in task set 'generated'; "
                                               r"expected 'generated-<n>' with n in 0-9999 \(train\)"):
        env.reset(options={"task": "data-3"})


# -- templates (shared helpers) --------------------------------------------------------------


def test_template_helpers():
    admissible = ["click[Buy Now]", "search[...]"]
    assert is_admissible("search[red shoes]", admissible) and is_admissible("click[buy now]", admissible)
    assert not is_admissible("search[]", admissible) and not is_admissible("search[...]", admissible)
    assert not is_admissible("click[Sell]", admissible)
    assert match_admissible("CLICK[buy  now]", admissible) == "click[Buy Now]"
    assert match_admissible("search[red shoes]", admissible) == "search[red shoes]"
    assert fill_template("search[...]", "red [big] shoes\nnow") == "search[red big shoes now]"
    assert kind_of("search[x]", {"search[...]": "search"}) == "search" and kind_of("look", {}) == ""


# -- real data ---------------------------------------------------------------------------------


def write_products(directory: Path, asins: list[str]) -> None:
    records = [{"asin": asin, "name": f"Product {i} Tea Tree Body Scrub", "full_description": "A scrub.",
                "small_description": ["Tea tree oil."], "pricing": "$10.99 - $15.99" if i % 2 else "$7.50",
                "customization_options": {"Size": [{"value": "8 oz", "image": None}, {"value": "16 oz", "image": None}]},
                "category": "beauty", "query": "body scrub ", "product_category": "Beauty › Bath › Scrubs",
                "images": ["x.jpg"]}
               for i, asin in enumerate(asins)]
    records.append({"asin": "nan", "name": "skipped"})
    (directory / "items_shuffle_1000.json").write_text(json.dumps(records))


def test_real_data_loader_with_synthetic_goals(tmp_path, monkeypatch):
    attributes = {"B07DJJXGB5": {"attributes": ["tea tree", "natural ingredients"], "instruction": "Find me a tea tree scrub",
                                 "instruction_attributes": ["tea tree"]}, "B0MISSING": {"attributes": []}}
    (tmp_path / "items_ins_v2_1000.json").write_text(json.dumps(attributes))
    write_products(tmp_path, ["B07DJJXGB5", "B0MISSING"])
    monkeypatch.setenv("WEBSHOP_DATA", str(tmp_path))
    catalogue = data.load_real(str(tmp_path))
    assert [p.asin for p in catalogue.products] == ["B07DJJXGB5", "B0MISSING"]
    product = catalogue.product("B07DJJXGB5")
    assert product.options == {"size": ("8 oz", "16 oz")} and product.query == "body scrub" and product.price == 7.5
    assert catalogue.product("B0MISSING").attributes == ("DUMMY_ATTR",)
    assert 10.99 <= catalogue.product("B0MISSING").price <= 15.99
    assert sorted(g.options for g in catalogue.goals) == [("16 oz",), ("8 oz",)]  # one goal per option combination
    provider = WebShopProvider()
    assert provider.task_sets()["data"].tasks("test", 5) == ["data-0", "data-1"]
    env = provider.make("data", expert=True)
    _, info = env.reset(options={"task": "data-0"})
    for _ in range(10):
        _, reward, done, _, info = env.step(info["expert_plan"][0])
        if done:
            break
    assert reward == 1.0


def test_real_data_loader_names_missing_and_broken_files(tmp_path):
    with pytest.raises(data.WebShopDataError, match="needs one of items_shuffle.json or items_shuffle_1000.json"):
        data.load_real(str(tmp_path / "empty"))
    (tmp_path / "items_shuffle_1000.json").write_text("[{")
    (tmp_path / "items_ins_v2_1000.json").write_text("{}")
    with pytest.raises(data.WebShopDataError, match="items_shuffle_1000.json: not valid JSON"):
        data.load_real(str(tmp_path))


@pytest.mark.skipif(not (SAMPLES / "items_ins_v2_1000.json").is_file(), reason="sample ../shared/data/webshop is absent")
def test_real_attribute_file_with_generated_product_records(tmp_path):
    attributes = json.loads((SAMPLES / "items_ins_v2_1000.json").read_text())
    with_instructions = [a for a, v in attributes.items() if v.get("instruction") and v.get("instruction_attributes")]
    (tmp_path / "items_ins_v2_1000.json").write_text((SAMPLES / "items_ins_v2_1000.json").read_text())
    write_products(tmp_path, with_instructions[:20])
    catalogue = data.load_real(str(tmp_path))
    assert len(catalogue.products) == 20 and len(catalogue.goals) == 40  # 20 products x 2 sizes
    goal = catalogue.goals[0]
    assert goal.instruction.startswith(attributes[goal.asin]["instruction"])
    assert set(goal.attributes) == set(attributes[goal.asin]["instruction_attributes"])


# -- Sentry's detectors on WebShop ---------------------------------------------------------------


def context_at(env: WebShopEnv, history: list[Turn], info: dict) -> StepContext:
    return StepContext(EpisodeIds("r", "e", "webshop", "t", "sentry"), len(history), env.goal.instruction, env.render(),
                       tuple(info["admissible_actions"]), tuple(history), info["score"], info["max_score"],
                       action_kinds=info["action_kinds"], open_choices=tuple(info["open_choices"]),
                       action_format=info["action_format"])


def play(env: WebShopEnv, actions: list[str], task: str = "t") -> tuple[list[Turn], dict, str]:
    obs, info = env.reset(options={"task": task})
    first, history = obs, []
    for action in actions:
        kind = kind_of(action, info["action_kinds"])
        obs, reward, _, _, info = env.step(action)
        history.append(Turn(len(history), "", action, obs, info["valid_action"], reward, info["score"], kind))
    return history, info, first


def labels(env, actions, proposed, task: str = "t") -> set[tuple[str, str]]:
    history, info, first = play(env, actions, task)
    found = run_detectors(context_at(env, history, info), Proposal("", proposed), 5, first_observation=first)
    return {(d.labels[0], d.subtype) for d in found}


def test_detects_repeated_identical_searches():
    env, _ = small_shop()
    assert labels(env, ["search[shampoo]", "click[Back to Search]"], "search[shampoo]") == {("repetition_or_looping", "repeat")}


def test_detects_paging_without_inspecting():
    env = WebShopProvider().make("generated")
    found = labels(env, ["search[olive oil]", "click[Next >]", "click[Next >]", "click[Next >]"], "click[Next >]",
                   task="generated-20000")
    assert ("over_exploration", "paging") in found


def test_detects_inspection_after_everything_is_chosen():
    env, _ = small_shop()
    ready = ["search[shampoo]", "click[B000SHAMP1]", "click[lavender]", "click[large]", "click[Features]", "click[< Prev]"]
    assert ("planning_stall", "inspect_when_ready") in labels(env, ready, "click[Reviews]")
    assert labels(env, ready[:4], "click[Reviews]") == set()  # a first look is fine
    assert labels(env, ready[:3] + ["click[Features]", "click[< Prev]"], "click[Reviews]") == set()  # size still open


def test_detects_buying_before_choosing_options():
    env, _ = small_shop()
    found = labels(env, ["search[shampoo]", "click[B000SHAMP1]", "click[lavender]"], "click[Buy Now]")
    assert found == {("termination_miscalibration", "finish_with_open_choices")}
    assert labels(env, ["search[shampoo]", "click[B000SHAMP1]", "click[lavender]", "click[large]"], "click[Buy Now]") == set()


def test_search_template_is_valid_and_long_queries_are_not_unparseable():
    env, _ = small_shop()
    long_query = "search[i need sulfate free and paraben free shampoo with scent lavender and size large under twenty dollars]"
    assert labels(env, [], long_query) == set()
    assert labels(env, ["search[shampoo]"], "click[Next >]") == {("invalid_action", "bad_argument")}


# -- the noisy agent's failures on WebShop ----------------------------------------------------


def noisy_proposal(mode: str, env: WebShopEnv, actions: list[str], **options) -> Proposal:
    from playground.agents.noisy import NoisyAgent
    from playground.core.payloads import AgentView

    agent = NoisyAgent(**{m: float(m == mode) for m in ("invalid", "malformed", "repeat", "stall", "drift", "stop")})
    agent.reset("t", 0)
    history, info, _ = play(env, actions)
    view = AgentView(env.goal.instruction, env.render(), tuple(history), tuple(info["admissible_actions"]), len(history),
                     extras={key: info[key] for key in ("expert_plan", "action_kinds", "action_format")})
    return agent.propose(view)


def test_noisy_agent_makes_webshop_failures_with_valid_actions():
    env, _ = small_shop()
    on_item = ["search[shampoo]", "click[B000SHAMP1]"]
    assert noisy_proposal("stop", env, on_item).action == "click[Buy Now]"  # buys before choosing options
    assert noisy_proposal("stall", env, on_item).action in {f"click[{p}]" for p in ("Description", "Features", "Reviews", "Attributes")}
    assert noisy_proposal("drift", env, on_item).action in {"click[citrus]", "click[small]", "click[large]", "click[lavender]"}
    # on the search page the only failure a repeat can make is the same search again; with none yet it stays on plan
    assert noisy_proposal("repeat", env, []).action.startswith("search[")


# -- through the command line --------------------------------------------------------------------


def test_cli_runs_noisy_under_base_and_sentry(capsys, tmp_path):
    from playground.cli.main import main

    out = tmp_path / "run"
    code = main(["run", "--env", "webshop", "--agent", "noisy", "--harness", "base", "--harness", "sentry",
                 "--episodes", "12", "--max-steps", "15", "--agent-option", "stop=0.1", "--agent-option", "invalid=0.2",
                 "--out", str(out), "--quiet"])
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["env"] == "webshop:generated" and set(summary["harnesses"]) == {"base", "sentry"}
    sentry = summary["harnesses"]["sentry"]
    assert sentry["episodes"] == 12 and sentry["detected_failures"] > 0 and 0.0 <= sentry["mean_score"] <= 1.0
    records = [json.loads(line) for line in (out / "episodes.jsonl").read_text().splitlines()]
    assert all(r["status"] in {"won", "lost", "truncated", "stopped"} for r in records)
    trace = [json.loads(line) for line in (out / records[0]["trace"]).read_text().splitlines()]
    assert trace[0]["env"] == "webshop" and trace[0]["products"] == 1000
    capsys.readouterr()
    code = main(["envs"])
    assert code == 0 and "webshop:generated" in capsys.readouterr().out


def test_webshop_meets_the_env_contract():
    from playground.testing import check_env

    check_env(WebShopProvider(), "generated", tasks=3, steps=6)
