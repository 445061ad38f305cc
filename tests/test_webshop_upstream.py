"""WebShop's own reward test cases, run against this project's port of the reward.

The cases are those of upstream's `tests/web-agent-site/engine/test_goal.py`
(github.com/princeton-nlp/WebShop, MIT licence, Copyright (c) 2022 Princeton Natural
Language Processing; the version on its default branch `master`, whose goal.py loads
`en_core_web_sm`), written afresh for this project's `Product`/`Goal` records. Each
test keeps upstream's inputs and expected values; only the calling convention differs.
One title-score case is a strict xfail: the project's default noun tagger is a stand-in
for spaCy and does not reach upstream's value there (its reason says how it differs).
Upstream's `get_reward` test passes the goal's options as a dict; the port compares
their values, which is what upstream's expected totals assume.
"""

from __future__ import annotations

from math import isclose

import pytest

from playground.envs.webshop.catalogue import Goal, Product
from playground.envs.webshop.reward import (
    STAND_IN,
    attributes_matched,
    fuzzy_match,
    normalize_color,
    noun_tagger,
    options_matched,
    purchase_reward,
    title_nouns,
    type_reward,
)


def product(**fields) -> Product:
    """A product with upstream's field values mapped onto the project's record."""
    base = dict(asin="B0", title="", category="", query="", product_category="", bullets=(), description="",
                attributes=(), options={}, price=0.0)
    return Product(**{**base, **fields})


def goal(**fields) -> Goal:
    """A goal with upstream's field values mapped onto the project's record."""
    base = dict(asin="B0", instruction="", attributes=(), options=(), price_upper=1_000_000.0)
    return Goal(**{**base, **fields})


def r_type(bought: Product, wanted: Goal) -> dict:
    value, query_match, category_match, title_score = type_reward(bought, wanted)
    return {"r_type": value, "query_match": query_match, "category_match": category_match, "title_score": title_score}


def test_get_type_reward():
    wanted = goal(query="Query 1", product_category="a › b › c", name="Name 1")
    bought = product(query="Query 1", product_category="a › b › c", title="Name 1")
    assert r_type(bought, wanted) == {"r_type": 1.0, "query_match": True, "category_match": True, "title_score": 1}

    bought = product(query="Query 2", product_category="a › b › c", title="Name 1")
    assert r_type(bought, wanted)["query_match"] is False

    for path, matches in (("b › c › a", True), ("d › e › f", False), ("a › d › b", True), ("a › a › b", True),
                          ("a › a › d", False)):
        assert r_type(product(query="Query 2", product_category=path, title="Name 1"), wanted)["category_match"] \
            is matches, path


SAIREED = "Saireed UL Listed 2 Prong Power Cord for JBL Bar 3.1 Bar 2.1 Channel 4K Ultra HD Soundbar"
BRST = "BRST AC Power Cord Outlet Socket Cable Plug Lead for Panasonic SC-HT830V DVD/VCR Combo Home Theater System"


@pytest.mark.parametrize("goal_name, bought_name, score", [
    pytest.param(
        "Mens D.O.N. Issue 2 Gca Basketball Sneakers Shoes Casual - Off White",
        "PEAK High Top Mens Basketball Shoes Lou Williams Streetball Master Breathable Non Slip Outdoor Sneakers",
        0.333, marks=pytest.mark.xfail(noun_tagger() == STAND_IN, strict=True, reason=(
            "noun tagger: upstream's en_core_web_sm gives 1/3; the default stand-in tags the four shared words "
            "(mens, basketball, shoes, sneakers) nouns on both sides, of 9 goal nouns (mens d.o.n. issue gca "
            "basketball sneakers shoes casual white): 4/9 = 0.444"))),
    (SAIREED + " Home Theater System Subwoofer", BRST, 0.3),
    (SAIREED, BRST, 0.15),
])
def test_get_type_reward_title_scores(goal_name, bought_name, score):
    wanted = goal(query="Query 1", product_category="a › b › c", name=goal_name)
    bought = product(query="Query 2", product_category="a › a › d", title=bought_name)
    assert isclose(r_type(bought, wanted)["title_score"], score, abs_tol=1e-2)


def test_get_type_reward_different_names():
    wanted = goal(name="Rusticware 921ORB Kitchen and Bath Cabinet Knob")
    bought = product(title="Minkissy 2pcs Stainless Steel Eyebrow Tweezers Blackhead Acne Remover Portable Makeup "
                           "Tweezers (Silver)")
    assert r_type(bought, wanted)["title_score"] < 0.05


ATTRIBUTES = ("tea tree", "essential oils", "natural ingredients")


@pytest.mark.parametrize("bought, matches", [
    (product(attributes=("tea tree", "essential oil", "natural ingredients")), 3),
    (product(attributes=("essential oil", "natural ingredients")), 2),
    (product(bullets=("This shampoo has essential oils and smells like lemons",),
             description="Best shampoo on the market, made with natural ingredients"), 2),
    (product(attributes=("tea bag", "earl gray", "lipton"), title="English tea for breakfast",
             bullets=("Soothing aroma", "Calming, great feeling"),
             description="Best tea made by Lipton, great to pair with breakfast"), 0),
])
def test_get_attribute_reward(bought, matches):
    n = attributes_matched(bought, goal(attributes=ATTRIBUTES))
    assert n == matches and n / len(ATTRIBUTES) == matches / 3


@pytest.mark.parametrize("goal_options, chosen, matches", [
    (["grey", "XL", "pack of 12"], ["pack of 12", "grey", "XL"], 3),
    (["grey", "XL", "pack of 12"], ["pack of 12", "blue", "XL"], 2),
    (["cool powder snow", "XL", "pack of 12"], ["pack of 12", "powder snow", "XL"], 3),
    (["goal 1", "goal 2"], [], 0),
])
def test_get_option_reward(goal_options, chosen, matches):
    assert options_matched(goal_options, chosen) == matches


def test_get_option_reward_without_goal_options_counts_nothing():
    assert options_matched([], ["goal 1", "goal 2"]) == 0


def test_get_reward():
    wanted = goal(query="Query 1", product_category="a › b › c",
                  name="Mens D.O.N. Issue 2 Gca Basketball Sneakers Shoes Casual - Off White",
                  attributes=ATTRIBUTES, options=("grey", "XL"), price_upper=40.0)
    chosen = {"color": "grey", "size": "XL"}
    bought = product(query="Query 1", product_category="a › b › c", title=wanted.name,
                     attributes=("tea tree", "essential oil", "natural ingredients"))
    assert purchase_reward(bought, wanted, chosen, price=35).reward == 1

    # upstream sets BulletPoints to a string here, which its join spreads into letters: only the
    # description's attribute is found, so the expected total is (1 + 2 + 1) / 6
    bought = product(query="Query 1", product_category="a › b › c", title=wanted.name,
                     bullets=tuple("This shampoo has essential oils and smells like lemons"),
                     description="Best shampoo on the market, made with natural ingredients")
    assert isclose(purchase_reward(bought, wanted, chosen, price=35).reward, 2 / 3, abs_tol=1e-2)

    wanted = goal(**{**wanted.__dict__, "options": ("grey", "XL", "pack of 12")})
    assert isclose(purchase_reward(bought, wanted, chosen, price=35).reward, 0.5714, abs_tol=1e-2)

    wanted = goal(**{**wanted.__dict__, "name": "Saireed UL Listed 2 Prong Power Cord for JBL Bar 3.1 Bar 2.1 "
                                                "Channel 4K Ultra HD Soundbar"})
    bought = product(**{**bought.__dict__, "query": "Query 2", "product_category": "a › d › e",
                        "title": "BRST AC Power Cord Outlet Socket Cable Plug Lead for Panasonic SC-HT830V DVD/VCR "
                                 "Combo Home Theater System"})
    assert isclose(purchase_reward(bought, wanted, chosen, price=35).reward, 0.2857, abs_tol=1e-2)


# -- what the issue found the earlier port getting wrong (upstream's behaviour, by reading goal.py) ----------


def test_sizes_match_fuzzily_as_upstream():
    assert options_matched(["x-large"], ["large"]) == 1
    assert options_matched(["pack of 1"], ["1"]) == 1


def test_no_substring_fallback_credits_a_wrong_choice():
    bought = product(title="Bluetooth Speaker", options={"color": ("navy blue", "red")})
    wanted = goal(options=("red",), name="Bluetooth Speaker")
    assert purchase_reward(bought, wanted, {"color": "navy blue"}).options_matched == 0


def test_colours_are_normalised_by_upstream_list_and_rule():
    assert normalize_color("navy blue") == "blue"  # "blue" comes first in upstream's list
    assert normalize_color("light grey") == "grey"
    assert normalize_color("washed denim") == "ash"  # a substring, as upstream matches
    assert normalize_color("32 ounce") == "32 ounce"


def test_attributes_ignore_case_and_punctuation():
    assert fuzzy_match("Tea Tree", "tea tree") and fuzzy_match("hands-free", "hands free")
    assert attributes_matched(product(attributes=("Hands-Free",)), goal(attributes=("hands free",))) == 1


@pytest.mark.parametrize("word", ["cable", "table", "olive", "coffee", "cream"])
def test_stand_in_keeps_real_nouns(word):
    assert word in title_nouns(f"Premium {word.title()} Set")
