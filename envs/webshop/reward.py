"""WebShop's reward for a purchase, as upstream `web_agent_site/engine/goal.py` computes it.

    r = r_type * (matched attributes + matched options + [price <= price_upper])
               / (n_goal_attributes + n_goal_options + 1)

Every fuzzy comparison is thefuzz's `token_set_ratio` (lowercased, punctuation read as
spaces, characters 128-255 dropped, rounded to an integer), and a match needs more than 85.

- Attributes (`get_attribute_reward`): a goal attribute matches when some product attribute
  matches it fuzzily, or, failing that, when it occurs as written in the lowercased title,
  bullet points (joined by spaces) or description.
- Options (`get_option_reward`): both sides are colour-normalised (the first word of
  upstream's colour list found inside the value, as a substring); a goal option counts
  when some chosen option value matches it fuzzily. There is no exact rule for sizes and
  no fallback to the page text: "large" counts for "x-large", "1" for "pack of 1".
- r_type (`get_type_reward`): 1 when the product shares the goal's search query, two
  levels of its category path, or more than 20% of the goal name's nouns; 0.5 when none of
  these hold; 0.1 when the noun overlap is under 10%; 0 when it is nil. The overlap is
  |nouns(product) ∩ nouns(goal)| / (number of noun tokens in the goal name, repeats
  counted), 0.2 when the goal name has none. Upstream tags nouns with spaCy's
  `en_core_web_sm` (goal.py's `spacy.load("en_core_web_sm")`); by default `title_nouns` is
  the stand-in below, and with `WEBSHOP_NOUN_TAGGER=en_core_web_sm` (or another spaCy model,
  installed) spaCy tags them as upstream does.

The stand-in's rules, in order, for each token:
1. Tokens as spaCy's English tokenizer splits the name on the cases that matter here:
   hyphens and slashes between words, brackets, trailing punctuation, and a unit after a
   number ("4K" -> "4" "K", "16oz" -> "16" "oz"; spaCy's unit list, case as written).
2. Not nouns: numbers (any digit), punctuation, function words (any case) and past
   participles (-ed, not -eed; any case: "UL Listed" stays a verb).
3. A capitalised word (first letter upper case) is a noun: en_core_web_sm tags most
   capitalised words inside a title as PROPN, adjectives included ("Non Slip", "Easy
   Clean", "Sulfate Free", "Quick Dry", "Off White" -> non, slip, easy, clean, free,
   quick, dry, white).
4. A lower-case word is a noun unless it is a common product adjective (`ADJECTIVES`).
It passes upstream's reward tests but one (tests/test_webshop_upstream.py; the xfail case
there names the difference). It was not measured against en_core_web_sm itself (the model
is not on PyPI), so on other names it can still differ from spaCy.
"""

from __future__ import annotations

import functools
import os
import re
from dataclasses import dataclass

from thefuzz import fuzz

from playground.envs.webshop.catalogue import Goal, Product

MATCH_THRESHOLD = 85
NOUN_TAGGER_ENV = "WEBSHOP_NOUN_TAGGER"
STAND_IN = "stand-in"
UPSTREAM_SPACY_MODEL = "en_core_web_sm"  # the model upstream goal.py loads

# Upstream's COLOR_SET (web_agent_site/engine/normalize.py), in its order.
COLOR_SET = (
    "alabaster", "apricot", "aqua", "ash", "asphalt", "azure", "banana", "beige", "black", "blue", "blush", "bordeaux",
    "bronze", "brown", "burgundy", "camel", "camo", "caramel", "champagne", "charcoal", "cheetah", "chestnut",
    "chocolate", "christmas", "coffee", "cognac", "copper", "coral", "cranberry", "cream", "crystal", "dark", "denim",
    "eggplant", "elephant", "espresso", "fuchsia", "gold", "granite", "grape", "graphite", "grass", "gray", "green",
    "grey", "heather", "indigo", "ivory", "ivy", "khaki", "lavender", "lemon", "leopard", "light", "lilac", "lime",
    "magenta", "maroon", "mauve", "merlot", "midnight", "mint", "mocha", "multicolor", "mushroom", "mustard",
    "natural", "navy", "nude", "olive", "orange", "peach", "pewter", "pink", "plum", "purple", "rainbow", "red",
    "rose", "royal", "rust", "sand", "sapphire", "seashell", "silver", "skull", "slate", "steel", "stone",
    "stonewash", "sunflower", "tan", "taupe", "teal", "tiger", "turquoise", "violet", "walnut", "wheat", "white",
    "wine", "yellow",
)

# Words spaCy tags as determiners, pronouns, adpositions, conjunctions, auxiliaries or particles.
FUNCTION_WORDS = frozenset(
    "a an the this that these those some any each every all both no not my your his her its our their it they we you "
    "i he she them us me for with in on at to by from of into onto over under up down off out about after before "
    "between through during without within per via than and or but nor so yet plus is are was were be been being am "
    "do does did has have had will would can could should may might must shall".split())
# Adjectives common in product names (spaCy tags them ADJ).
ADJECTIVES = frozenset(
    "small medium large extra big mini little long short tall wide slim thin thick heavy soft hard high low easy "
    "quick fast organic free premium best great good fine pure fresh classic modern original vintage portable "
    "adjustable waterproof durable wireless electric electronic digital professional compatible universal multi "
    "double single full half dry wet hot cold warm cool clean clear sweet plain non anti super deluxe new old "
    "stainless black white red blue green yellow pink purple grey gray brown beige "
    "comfortable breathable washable reusable disposable rechargeable lightweight unscented".split())
_TOKEN = re.compile(r"'[sS]\b|[A-Za-z0-9]+(?:\.[A-Za-z0-9]+)*\.?|[^\sA-Za-z0-9]")
# spaCy's English units (spacy.lang.char_classes.UNITS, ASCII ones): split off a number they follow.
_UNITS = ("km m dm cm mm ha nm yd in ft kg g mg t lb oz kmh mph hPa Pa mbar mb MB kb KB gb GB tb TB T G M K").split()
_NUMBER_UNIT = re.compile(r"(.*[0-9])(%s)" % "|".join(sorted(_UNITS, key=len, reverse=True)))


def match_score(a: str, b: str) -> int:
    """thefuzz's token_set_ratio of two strings, as upstream's reward computes it."""
    return fuzz.token_set_ratio(a, b)


def fuzzy_match(a: str, b: str) -> bool:
    """True when `a` and `b` match as upstream's reward requires (score above 85)."""
    return match_score(a, b) > MATCH_THRESHOLD


def normalize_color(value: str) -> str:
    """The first colour of upstream's list found inside `value` (a substring), else `value` itself."""
    for colour in COLOR_SET:
        if colour in value:
            return colour
    return value


def _tokens(title: str) -> list[str]:
    """The name's tokens as spaCy's tokenizer splits them (the cases the stand-in covers)."""
    tokens: list[str] = []
    for token in _TOKEN.findall(title):
        unit = _NUMBER_UNIT.fullmatch(token)
        tokens.extend(unit.groups() if unit else (token,))
    return tokens


def title_nouns(title: str) -> list[str]:
    """The lowercased noun tokens of a product name, repeats kept (the stand-in; module docstring)."""
    nouns = []
    for token in _tokens(title):
        word = token.lower()
        if word.endswith(".") and "." not in word[:-1]:
            word = word[:-1]  # a sentence's full stop; "d.o.n." keeps its dots as spaCy's abbreviations do
        if not word[0].isalpha() or any(c.isdigit() for c in word) or word in FUNCTION_WORDS:
            continue
        if len(word) > 4 and word.endswith("ed") and not word.endswith("eed"):
            continue
        if word in ADJECTIVES and not token[0].isupper():
            continue  # capitalised, en_core_web_sm tags it PROPN ("Non", "Free", "Easy", "Quick", "Dry")
        nouns.append(word)
    return nouns


@functools.lru_cache(maxsize=2)
def _spacy_model(name: str):
    try:
        import spacy
    except ImportError as exc:
        raise RuntimeError(f"{NOUN_TAGGER_ENV}={name}: spaCy is not installed (pip install spacy)") from exc
    try:
        return spacy.load(name)
    except OSError as exc:
        raise RuntimeError(f"{NOUN_TAGGER_ENV}={name}: spaCy cannot load the model {name!r}; install it "
                           f"(python -m spacy download {name}) or unset {NOUN_TAGGER_ENV} for the stand-in") from exc


def noun_tagger() -> str:
    """The noun tagger in use: a spaCy model name from WEBSHOP_NOUN_TAGGER (upstream's is
    `en_core_web_sm`), or the stand-in."""
    return os.environ.get(NOUN_TAGGER_ENV, "").strip() or STAND_IN


def name_nouns(name: str) -> list[str]:
    """The lowercased noun tokens of a product name, by the tagger `noun_tagger()` names."""
    tagger = noun_tagger()
    if tagger == STAND_IN:
        return title_nouns(name)
    return [t.text.lower() for t in _spacy_model(tagger)(name) if t.pos_ in ("PNOUN", "NOUN", "PROPN")]


@dataclass(frozen=True)
class Reward:
    """A purchase's reward and its parts."""

    reward: float
    r_type: float
    attributes_matched: int
    options_matched: int
    price_ok: bool
    query_match: bool
    category_match: bool
    title_score: float


def type_reward(product: Product, goal: Goal) -> tuple[float, bool, bool, float]:
    """Return (r_type, query match, category match, title-noun overlap) of `product` for `goal`."""
    query_match = product.query == goal.query
    bought_path = {part.strip() for part in product.product_category.split("›")}
    goal_path = {part.strip() for part in goal.product_category.split("›")}
    category_match = len(bought_path & goal_path) >= 2
    wanted = name_nouns(goal.name)
    title_score = len(set(name_nouns(product.title)) & set(wanted)) / len(wanted) if wanted else 0.2
    r_type = 1.0 if (query_match or category_match or title_score > 0.2) else 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return r_type, query_match, category_match, title_score


def attributes_matched(product: Product, goal: Goal) -> int:
    """How many goal attributes the product has (fuzzy on its attributes, else in its text as written)."""
    title, bullets = product.title.lower(), " ".join(product.bullets).lower()
    description = product.description.lower()
    count = 0
    for wanted in goal.attributes:
        if (any(fuzzy_match(have, wanted) for have in product.attributes)
                or wanted in title or wanted in bullets or wanted in description):
            count += 1
    return count


def options_matched(goal_options: list[str] | tuple[str, ...], chosen_values: list[str] | tuple[str, ...]) -> int:
    """How many goal options some chosen option value matches (both colour-normalised, fuzzy)."""
    chosen = [normalize_color(v) for v in chosen_values]
    return sum(any(fuzzy_match(have, normalize_color(wanted)) for have in chosen) for wanted in goal_options)


def purchase_reward(product: Product, goal: Goal, chosen: dict[str, str], price: float | None = None) -> Reward:
    """The reward for buying `product` with the `chosen` options (name -> value) for `goal`."""
    price = product.price if price is None else price
    r_type, query_match, category_match, title_score = type_reward(product, goal)
    n_attr = attributes_matched(product, goal)
    n_opt = options_matched(goal.options, list(chosen.values()))
    price_ok = price <= goal.price_upper
    total = (n_attr + n_opt + int(price_ok)) / (len(goal.attributes) + len(goal.options) + 1)
    return Reward(total * r_type, r_type, n_attr, n_opt, price_ok, query_match, category_match, title_score)
