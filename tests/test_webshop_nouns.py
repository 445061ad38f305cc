"""The default noun tagger's rules for title-case WebShop names (envs/webshop/reward.py).

Upstream's `get_type_reward` keeps the tokens spaCy's `en_core_web_sm` tags PNOUN, NOUN or
PROPN. That model is not installable here (not on PyPI), so these cases are ones where the earlier
stand-in differed from spaCy (reported from a machine that had the model), not a measurement against spaCy.
"""

from __future__ import annotations

import sys
import types

import pytest

from playground.envs.webshop import reward
from playground.envs.webshop.catalogue import Goal, Product
from playground.envs.webshop.reward import purchase_reward, title_nouns, type_reward


@pytest.mark.parametrize("title, words", [
    ("Kestrel Sneakers, Non Slip", ["kestrel", "sneakers", "non", "slip"]),
    ("Brightway Area Rug, Easy Clean", ["brightway", "area", "rug", "easy", "clean"]),
    ("Juniper Granola, Gluten Free", ["juniper", "granola", "gluten", "free"]),
    ("Zephyr Towel, Quick Dry", ["zephyr", "towel", "quick", "dry"]),
])
def test_capitalised_words_are_nouns_as_en_core_web_sm_tags_them(title, words):
    assert title_nouns(title) == words


def test_lower_case_adjectives_function_words_and_participles_stay_out():
    assert title_nouns("non slip easy clean rug") == ["slip", "rug"]
    assert title_nouns("Saireed UL Listed Cord for JBL, Off White") == ["saireed", "ul", "cord", "jbl", "white"]


def test_units_after_numbers_split_as_spacy_tokenizes():
    assert title_nouns("Channel 4K Ultra HD") == ["channel", "k", "ultra", "hd"]
    assert title_nouns("Cup 16oz, 2 Pack") == ["cup", "oz", "pack"]
    assert title_nouns("Screen 4k") == ["screen"]  # spaCy's units are case-sensitive: "4k" stays one token


def _product(title, query, category, attributes, options, price):
    return Product(asin="B0", title=title, category="", query=query, product_category=category, bullets=(),
                   description="", attributes=attributes, options=options, price=price)


def test_kestrel_goal_ironwood_purchase_scores_as_upstream():
    # an env purchase where the stand-ins differed: upstream's reward 0.2 (r_type 1: "non" is 1 of the goal's 4 nouns > 0.2);
    # the earlier stand-in dropped "Non" and gave r_type 0, reward 0
    wanted = Goal("G1", "", ("non slip", "rubber sole", "lightweight"), ("black",), 120.0, "running shoes",
                  "Clothing, Shoes & Jewelry › Men › Shoes › Sneakers", "Kestrel Sneakers, Non Slip", ("color",))
    bought = _product("Ironwood Nut Mix, Non Gmo", "trail mix", "Grocery & Gourmet Food › Snack Foods › Nut Mix",
                      ("gluten free", "low sodium", "non gmo", "plant based"),
                      {"flavor name": ("honey",), "item package quantity": ("1",)}, 18.2)
    assert type_reward(bought, wanted) == (1.0, False, False, 0.25)
    r = purchase_reward(bought, wanted, {"flavor name": "honey", "item package quantity": "1"})
    assert r.reward == pytest.approx(0.2)


class _Token:
    def __init__(self, text, pos):
        self.text, self.pos_ = text, pos


def _fake_spacy(monkeypatch, load):
    monkeypatch.setitem(sys.modules, "spacy", types.SimpleNamespace(load=load))
    reward._spacy_model.cache_clear()


def test_spacy_path_accepts_upstreams_model(monkeypatch):
    loaded = []

    def load(name):
        loaded.append(name)
        return lambda text: [_Token(w, "PROPN" if w[0].isupper() else "ADJ") for w in text.split()]

    _fake_spacy(monkeypatch, load)
    monkeypatch.setenv(reward.NOUN_TAGGER_ENV, reward.UPSTREAM_SPACY_MODEL)
    try:
        assert reward.UPSTREAM_SPACY_MODEL == "en_core_web_sm"
        assert reward.noun_tagger() == "en_core_web_sm"
        assert reward.name_nouns("Kestrel Sneakers non Slip") == ["kestrel", "sneakers", "slip"]
        assert loaded == ["en_core_web_sm"]
    finally:
        reward._spacy_model.cache_clear()


def test_spacy_path_without_the_model_says_how_to_install_it(monkeypatch):
    def load(name):
        raise OSError(f"[E050] Can't find model '{name}'")

    _fake_spacy(monkeypatch, load)
    monkeypatch.setenv(reward.NOUN_TAGGER_ENV, "en_core_web_sm")
    try:
        with pytest.raises(RuntimeError, match="python -m spacy download en_core_web_sm"):
            reward.name_nouns("Kestrel Sneakers")
    finally:
        reward._spacy_model.cache_clear()
