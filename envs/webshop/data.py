"""Where WebShop's products and goals come from: the embedded catalogue, or the real files.

- `generated`: the embedded catalogue (1,000 products, see `catalogue.py`); task
  `generated-<n>` is the goal made from seed n. Splits train/dev/test are disjoint
  seed ranges.
- `data`: the real WebShop files in the directory named by `WEBSHOP_DATA`:
  `items_shuffle_1000.json` (or the full `items_shuffle.json`) for products,
  `items_ins_v2_1000.json` (or `items_ins_v2.json`) for attributes and synthetic
  instructions, and, when present, `items_human_ins.json` for the human instructions
  (then goals are the human ones, as in WebShop's default). Products are read the way
  WebShop's engine reads them; goals are shuffled with seed 233 and split as WebShop's
  text env splits them: test = goals 0-499, dev = 500-1499, train = the rest.
"""

from __future__ import annotations

import itertools
import json
import random
import re
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from pathlib import Path

from playground.core.errors import PlaygroundError
from playground.core.task_sets import path_from_env
from playground.envs.webshop.catalogue import (
    Catalogue,
    Goal,
    Product,
    generate_catalogue,
    goal_for,
    price_clause,
    price_upper_for,
)

DATA_ENV = "WEBSHOP_DATA"
PRODUCT_FILES = ("items_shuffle.json", "items_shuffle_1000.json")
ATTRIBUTE_FILES = ("items_ins_v2.json", "items_ins_v2_1000.json")
HUMAN_FILE = "items_human_ins.json"
SPLITS = {"test": (0, 500), "dev": (500, 1500), "train": (1500, None)}


class WebShopDataError(PlaygroundError, ValueError):
    """A WebShop data file is missing or malformed (the message names the file and the record)."""


@lru_cache(maxsize=2)
def generated_catalogue(n_products: int = 1000, seed: int = 0) -> Catalogue:
    """The embedded catalogue (cached per process)."""
    return generate_catalogue(n_products, seed)


def generated_goal(catalogue: Catalogue, n: int) -> Goal:
    """Goal number `n` over `catalogue`: a product drawn by seed n, then `goal_for` it."""
    rng = random.Random(f"webshop-goal:{n}")
    return goal_for(catalogue.products[rng.randrange(len(catalogue.products))], rng)


def data_dir() -> Path | None:
    """The directory `WEBSHOP_DATA` names, or None when unset."""
    return path_from_env(DATA_ENV)


def _first_existing(directory: Path, names: tuple[str, ...]) -> Path | None:
    return next((directory / n for n in names if (directory / n).is_file()), None)


def _read_json(path: Path):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except json.JSONDecodeError as exc:
        raise WebShopDataError(f"{path}: not valid JSON ({exc})") from None


def parse_pricing(text, where: str) -> list[float]:
    """WebShop's price field ("$12.99" or "$10.99 - $15.99") as one or two floats; none means $100."""
    if not text:
        return [100.0]
    try:
        prices = [float(Decimal(re.sub(r"[^\d.]", "", part))) for part in str(text).split("$")[1:]]
    except InvalidOperation:
        raise WebShopDataError(f"{where}: unreadable pricing {text!r}") from None
    return prices[:2] or [100.0]


def product_from_record(record: dict, attributes: dict, where: str) -> Product:
    """Build a `Product` from one record of WebShop's product file (as its engine does)."""
    try:
        asin = str(record["asin"])
        bullets = record.get("small_description") or []
        options = {}
        for name, contents in (record.get("customization_options") or {}).items():
            if contents:
                options[name.lower()] = tuple(c["value"].strip().replace("/", " | ").lower() for c in contents)
        pricing = parse_pricing(record.get("pricing"), where)
        # WebShop draws the price once per load inside the range; here it is drawn by ASIN so it is stable.
        price = pricing[0] if len(pricing) == 1 else round(random.Random(f"webshop-price:{asin}").uniform(*pricing), 2)
        attrs = (attributes.get(asin) or {}).get("attributes") or ["DUMMY_ATTR"]
        return Product(asin=asin, title=str(record["name"]), category=str(record.get("category", "")),
                       query=str(record.get("query", "")).lower().strip(),
                       product_category=str(record.get("product_category", "")),
                       bullets=tuple(bullets if isinstance(bullets, list) else [bullets]),
                       description=str(record.get("full_description") or ""), attributes=tuple(attrs),
                       options=options, price=price)
    except (KeyError, TypeError, AttributeError) as exc:
        raise WebShopDataError(f"{where}: malformed product record ({type(exc).__name__}: {exc})") from None


def human_goals(products: dict[str, Product], human: dict, where: str) -> list[Goal]:
    """WebShop's human goals: each instruction with attributes of each product that has them."""
    goals = []
    for asin, entries in human.items():
        product = products.get(asin)
        if product is None:
            continue
        for i, entry in enumerate(entries):
            if not entry.get("instruction_attributes"):
                continue  # WebShop skips goals without attributes
            upper = price_upper_for(product.price, random.Random(f"webshop-goal:{asin}:{i}"))
            text = str(entry["instruction"]).strip(".") + price_clause(upper)
            goals.append(Goal(asin, text, tuple(entry["instruction_attributes"]),
                              tuple(entry.get("instruction_options") or ()),
                              upper, product.query, product.product_category, product.title))
    return goals


def synthetic_goals(products: dict[str, Product], attributes: dict) -> list[Goal]:
    """WebShop's synthetic goals: one per combination of a product's option values."""
    goals = []
    for asin, product in products.items():
        entry = attributes.get(asin) or {}
        if not entry.get("instruction") or not entry.get("instruction_attributes"):
            continue
        names = tuple(sorted(product.options))
        upper = price_upper_for(product.price, random.Random(f"webshop-goal:{asin}"))
        price_text = price_clause(upper)
        for combination in itertools.product(*(product.options[n] for n in names)):
            option_text = ", and ".join(f"{n}: {v}" for n, v in zip(names, combination))
            text = entry["instruction"] + (f" with {option_text}" if option_text else "") + price_text
            goals.append(Goal(asin, text, tuple(entry["instruction_attributes"]), tuple(combination), upper,
                              product.query, product.product_category, product.title, names))
    return goals


@lru_cache(maxsize=2)
def load_real(directory: str) -> Catalogue:
    """Load the real WebShop files in `directory` (see module docstring)."""
    root = Path(directory)
    product_file = _first_existing(root, PRODUCT_FILES)
    attribute_file = _first_existing(root, ATTRIBUTE_FILES)
    if product_file is None or attribute_file is None:
        raise WebShopDataError(f"{DATA_ENV}={root}: needs one of {' or '.join(PRODUCT_FILES)} and one of "
                               f"{' or '.join(ATTRIBUTE_FILES)} (from WebShop's setup.sh data download)")
    attributes = _read_json(attribute_file)
    records = _read_json(product_file)
    if not isinstance(records, list) or not isinstance(attributes, dict):
        raise WebShopDataError(f"{product_file} must hold a list of products "
                               f"and {attribute_file} an object keyed by ASIN")
    products: dict[str, Product] = {}
    for i, record in enumerate(records):
        asin = str(record.get("asin", "nan")) if isinstance(record, dict) else "nan"
        if asin == "nan" or len(asin) > 10 or asin in products:
            continue  # WebShop skips these too
        products[asin] = product_from_record(record, attributes, f"{product_file.name} record {i}")
    human_file = root / HUMAN_FILE
    goals = (human_goals(products, _read_json(human_file), str(human_file)) if human_file.is_file()
             else synthetic_goals(products, attributes))
    random.Random(233).shuffle(goals)
    return Catalogue(f"data:{root}", tuple(products.values()), tuple(goals))


def split_range(split: str, total: int) -> range:
    """The goal indices of a WebShop split."""
    start, end = SPLITS[split]
    return range(min(start, total), total if end is None else min(end, total))
