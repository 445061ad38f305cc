"""WebShop's reward for a purchase, as the paper defines it.

    r = r_type * (matched attributes + matched options + [price <= price_upper])
               / (n_goal_attributes + n_goal_options + 1)

- Attributes: a goal attribute matches when some product attribute has a token-set
  ratio above 85 with it (rapidfuzz), or, failing that, when it is a substring of the
  title, bullet points or description.
- Options: each chosen option value (colour-normalised) matches when it equals a goal
  option (for `size`, exactly) or has a token-set ratio above 85 with one (other
  options), or, failing that, is a substring of the title, bullets or description.
- r_type: 1 when the product shares the goal's search query, two levels of its category
  path, or more than 20% of its title nouns; 0.5 when none of these hold; 0.1 when the
  title-noun overlap is under 10%; 0 when it is nil. WebShop tags nouns with spaCy;
  `title_nouns` is a documented pure-Python stand-in: lowercase alphabetic words of
  three letters or more that are not stop words, colours, sizes, quantities or common
  product adjectives, and do not end like adjectives or adverbs (-ly, -ous, -ful, -able,
  -ible, -less, -ive). A title with no such word scores 0.2, as WebShop does for a goal
  name with no noun.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rapidfuzz import fuzz

from playground.envs.webshop.catalogue import Goal, Product

MATCH_THRESHOLD = 85
EXACT_OPTIONS = ("size",)

# WebShop normalises option colours to a base colour word contained in the value.
BASE_COLOURS = (
    "alabaster", "apricot", "aqua", "beige", "black", "blue", "blush", "bronze", "brown", "burgundy", "camel", "camo",
    "caramel", "champagne", "charcoal", "chocolate", "coffee", "copper", "coral", "cream", "denim", "espresso",
    "fuchsia", "gold", "green", "grey", "gray", "indigo", "ivory", "khaki", "lavender", "leopard", "lilac", "lime",
    "magenta", "maroon", "mint", "mocha", "mustard", "navy", "nude", "olive", "orange", "peach", "pink", "plum",
    "purple", "red", "rose", "rust", "sage", "salmon", "silver", "tan", "taupe", "teal", "turquoise", "violet",
    "walnut", "white", "wine", "yellow",
)
STOP_WORDS = frozenset(
    "a an and the of for with in on to by from at or as is are be it its this that these those your our my you we i "
    "pack set piece pcs count ounce ounces oz fl inch inches ft feet cm mm lb lbs pound pounds ml liter gallon x "
    "size color colour new".split())
ADJECTIVES = frozenset(
    "small medium large extra big mini little long short tall wide slim thin thick light dark heavy soft hard high low "
    "easy quick fast natural organic free premium best great good fine pure fresh classic modern original vintage "
    "portable adjustable waterproof durable wireless electric digital professional compatible universal multi double "
    "single full half dry wet hot cold warm cool clean clear sweet plain non anti super ultra deluxe".split())
ADJECTIVE_ENDINGS = ("ly", "ous", "ful", "able", "ible", "less", "ive")


def normalize_color(value: str) -> str:
    """Reduce an option value to the base colour it names, if any (WebShop's colour normalisation)."""
    lowered = value.lower()
    for colour in BASE_COLOURS:
        if re.search(rf"\b{colour}\b", lowered):
            return colour
    return lowered


def title_nouns(title: str) -> set[str]:
    """The words of a title taken as its nouns (see module docstring: a spaCy stand-in)."""
    nouns = set()
    for word in re.findall(r"[a-z]+", title.lower()):
        if (len(word) < 3 or word in STOP_WORDS or word in ADJECTIVES or word in BASE_COLOURS
                or word.endswith(ADJECTIVE_ENDINGS)):
            continue
        nouns.add(word)
    return nouns


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
    wanted = title_nouns(goal.name)
    title_score = len(title_nouns(product.title) & wanted) / len(wanted) if wanted else 0.2
    r_type = 1.0 if (query_match or category_match or title_score > 0.2) else 0.5
    if title_score < 0.1:
        r_type = 0.1
    if title_score == 0.0:
        r_type = 0.0
    return r_type, query_match, category_match, title_score


def _in_text(needle: str, product: Product) -> bool:
    needle = needle.lower()
    return (needle in product.title.lower() or needle in " ".join(product.bullets).lower()
            or needle in product.description.lower())


def attributes_matched(product: Product, goal: Goal) -> int:
    """How many goal attributes the product has (fuzzy on its attributes, else a text substring)."""
    count = 0
    for wanted in goal.attributes:
        if (any(fuzz.token_set_ratio(have, wanted) > MATCH_THRESHOLD for have in product.attributes)
                or _in_text(wanted, product)):
            count += 1
    return count


def options_matched(product: Product, goal: Goal, chosen: dict[str, str]) -> int:
    """How many chosen option values match a goal option (see module docstring)."""
    wanted = [normalize_color(v) for v in goal.options]
    count = 0
    for name, value in chosen.items():
        value = normalize_color(value)
        if name.lower() in EXACT_OPTIONS:
            matched = value in wanted
        else:
            matched = any(fuzz.token_set_ratio(w, value) > MATCH_THRESHOLD for w in wanted)
        if matched or _in_text(value, product):
            count += 1
    return count


def purchase_reward(product: Product, goal: Goal, chosen: dict[str, str], price: float | None = None) -> Reward:
    """The reward for buying `product` with the `chosen` options (name -> value) for `goal`."""
    price = product.price if price is None else price
    r_type, query_match, category_match, title_score = type_reward(product, goal)
    n_attr = attributes_matched(product, goal)
    # WebShop counts matches over the chosen options; capped here so r never exceeds 1
    # when more option groups are chosen than the goal names.
    n_opt = min(options_matched(product, goal, chosen), len(goal.options))
    price_ok = price <= goal.price_upper
    total = (n_attr + n_opt + int(price_ok)) / (len(goal.attributes) + len(goal.options) + 1)
    return Reward(total * r_type, r_type, n_attr, n_opt, price_ok, query_match, category_match, title_score)
