"""WebShop's records (products and goals) and the embedded catalogue the project generates.

A `Product` has the fields WebShop's engine derives from its product file: title,
category, search query, category path, bullet points, description, attributes, options
(name -> values), reviews and a price. A `Goal` is what WebShop's goal builder produces:
the target product, the instruction text, the goal attributes, the goal options and a
price bound.

The embedded catalogue is built the way WebShop's data was: products grouped by a
search query (a product type) inside five categories, each with attributes, option
groups and a price range; goals are made from a product the way WebShop's synthetic
goals are (a subset of its attributes, one value per option group, and a price bound
drawn from the next 10-dollar steps above its price). Everything is deterministic by seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

PRICE_STEPS = tuple(10.0 * i for i in range(1, 100))  # WebShop's PRICE_RANGE
NO_PRICE_BOUND = 1_000_000.0  # a price above every step: the goal names no bound


@dataclass(frozen=True)
class Product:
    """One product page of the shop."""

    asin: str
    title: str
    category: str
    query: str
    product_category: str  # "A › B › C"
    bullets: tuple[str, ...]
    description: str
    attributes: tuple[str, ...]
    options: dict[str, tuple[str, ...]]  # option name -> values, as shown on the page
    price: float
    rating: str = "N.A."
    reviews: tuple[tuple[int, str], ...] = ()  # (stars, text)

    @property
    def price_text(self) -> str:
        """The price as the page shows it."""
        return f"${self.price:.2f}"


@dataclass(frozen=True)
class Goal:
    """One shopping task: buy `asin` (or anything as good) with these attributes and options."""

    asin: str
    instruction: str
    attributes: tuple[str, ...]
    options: tuple[str, ...]  # goal option values
    price_upper: float
    # the target product's fields that the type reward compares against
    query: str = ""
    product_category: str = ""
    name: str = ""
    option_names: tuple[str, ...] = field(default=())  # option group of each goal value, where known


@dataclass(frozen=True)
class Catalogue:
    """Products (in a fixed order) and the goals over them."""

    name: str
    products: tuple[Product, ...]
    goals: tuple[Goal, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_asin", {p.asin: p for p in self.products})

    def product(self, asin: str) -> Product:
        """Return the product with this ASIN (KeyError names it if absent)."""
        try:
            return self.by_asin[asin]  # type: ignore[attr-defined]
        except KeyError:
            raise KeyError(f"webshop catalogue {self.name!r} has no product {asin!r}") from None


def price_upper_for(price: float, rng: random.Random) -> float:
    """WebShop's price bound: the larger of two of the next four 10-dollar steps above `price`."""
    steps = [p for p in PRICE_STEPS if p > price][:4]
    if len(steps) < 2:
        return NO_PRICE_BOUND
    return max(rng.sample(steps, 2))


def price_clause(upper: float) -> str:
    """The end of a goal instruction that states its price bound ("" when there is none)."""
    return f", and price lower than {upper:.2f} dollars" if upper < NO_PRICE_BOUND else ""


# -- the embedded catalogue ------------------------------------------------------------

# category -> (top of the category path,
#              {query: (subcategory, nouns for titles, attribute pool, option groups, price range)})
OPTION_GROUPS = {
    "color": ("black", "white", "navy blue", "light grey", "red", "rose gold", "green", "beige", "pink", "brown"),
    "size": ("small", "medium", "large", "x-large", "xx-large"),
    "shoe size": ("6", "7", "8", "9", "10", "11"),
    "flavor name": ("original", "vanilla", "chocolate", "strawberry", "sea salt", "honey", "mint"),
    "item package quantity": ("1", "2", "4", "6", "12"),
    "scent": ("lavender", "unscented", "citrus", "coconut", "eucalyptus"),
    "style": ("modern", "classic", "rustic", "minimalist"),
    "capacity": ("16 ounce", "32 ounce", "64 ounce"),
    "pattern name": ("solid", "striped", "floral", "plaid"),
}

CATEGORIES: dict[str, tuple[str, dict[str, tuple[str, tuple[str, ...], tuple[str, ...], tuple[str, ...],
                                                 tuple[float, float]]]]] = {
    "beauty": ("Beauty & Personal Care", {
        "shampoo": ("Hair Care", ("Shampoo", "Hair Shampoo"),
                    ("sulfate free", "paraben free", "natural ingredients", "dry hair", "long lasting", "cruelty free"),
                    ("scent", "capacity"), (6, 40)),
        "face moisturizer": ("Skin Care", ("Face Moisturizer", "Moisturizing Cream"),
                             ("dry skin", "anti aging", "fragrance free", "hyaluronic acid", "oil free",
                              "sensitive skin"),
                             ("size", "scent"), (8, 60)),
        "lip balm": ("Lip Care", ("Lip Balm", "Lip Butter"),
                     ("long lasting", "natural ingredients", "easy carry", "cruelty free", "shea butter"),
                     ("flavor name", "item package quantity"), (3, 20)),
        "makeup brush set": ("Tools & Accessories", ("Makeup Brush Set", "Brush Kit"),
                             ("easy clean", "high quality", "travel size", "synthetic hair", "rose gold"),
                             ("color",), (7, 45)),
        "nail polish": ("Nail Care", ("Nail Polish", "Gel Polish"),
                        ("long lasting", "quick dry", "non toxic", "high gloss"),
                        ("color", "item package quantity"), (4, 25)),
    }),
    "grocery": ("Grocery & Gourmet Food", {
        "protein bar": ("Snack Foods", ("Protein Bar", "Protein Bars"),
                        ("gluten free", "low sugar", "high protein", "keto friendly", "non gmo"),
                        ("flavor name", "item package quantity"), (9, 45)),
        "herbal tea": ("Beverages", ("Herbal Tea", "Tea Bags"),
                       ("caffeine free", "organic", "non gmo", "individually wrapped", "decaffeinated"),
                       ("flavor name", "item package quantity"), (5, 30)),
        "coffee beans": ("Beverages", ("Coffee Beans", "Whole Bean Coffee"),
                         ("dark roast", "fair trade", "organic", "low acid", "single origin"),
                         ("flavor name", "capacity"), (9, 50)),
        "trail mix": ("Snack Foods", ("Trail Mix", "Nut Mix"),
                      ("gluten free", "non gmo", "resealable bag", "low sodium", "plant based"),
                      ("flavor name", "item package quantity"), (6, 35)),
        "olive oil": ("Pantry Staples", ("Olive Oil", "Extra Virgin Olive Oil"),
                      ("cold pressed", "organic", "non gmo", "first harvest"),
                      ("capacity", "item package quantity"), (8, 55)),
    }),
    "fashion": ("Clothing, Shoes & Jewelry", {
        "running shoes": ("Men › Shoes", ("Running Shoes", "Sneakers"),
                          ("non slip", "breathable", "lightweight", "memory foam", "rubber sole"),
                          ("color", "shoe size"), (25, 120)),
        "hoodie": ("Men › Clothing", ("Hoodie", "Hooded Sweatshirt"),
                   ("machine wash", "long sleeve", "soft fabric", "relaxed fit", "cotton blend"),
                   ("color", "size"), (18, 70)),
        "yoga pants": ("Women › Clothing", ("Yoga Pants", "Leggings"),
                       ("high waist", "tummy control", "quick dry", "four way stretch", "machine wash"),
                       ("color", "size"), (15, 60)),
        "dress shirt": ("Men › Clothing", ("Dress Shirt", "Button Down Shirt"),
                        ("slim fit", "wrinkle free", "long sleeve", "easy care", "cotton blend"),
                        ("color", "size"), (20, 75)),
        "sandals": ("Women › Shoes", ("Sandals", "Slide Sandals"),
                    ("non slip", "arch support", "open toe", "lightweight", "rubber sole"),
                    ("color", "shoe size"), (14, 65)),
    }),
    "furniture": ("Home & Kitchen", {
        "office chair": ("Furniture › Home Office", ("Office Chair", "Desk Chair"),
                         ("lumbar support", "height adjustable", "easy assemble", "mesh back", "heavy duty"),
                         ("color", "style"), (60, 260)),
        "bookshelf": ("Furniture › Living Room", ("Bookshelf", "Bookcase"),
                      ("easy assemble", "solid wood", "space saving", "storage space", "heavy duty"),
                      ("color", "style"), (40, 200)),
        "area rug": ("Home Décor › Rugs", ("Area Rug", "Rug"),
                     ("easy clean", "non slip", "machine washable", "living room", "stain resistant"),
                     ("color", "pattern name", "size"), (25, 180)),
        "throw pillow cover": ("Home Décor › Pillows", ("Throw Pillow Cover", "Cushion Cover"),
                               ("double sided", "machine wash", "hidden zipper", "living room", "soft fabric"),
                               ("color", "pattern name", "item package quantity"), (8, 40)),
        "nightstand": ("Furniture › Bedroom", ("Nightstand", "Bedside Table"),
                       ("easy assemble", "storage space", "solid wood", "drawer", "space saving"),
                       ("color", "style"), (35, 160)),
    }),
    "electronics": ("Electronics", {
        "wireless earbuds": ("Headphones", ("Wireless Earbuds", "Bluetooth Earbuds"),
                             ("noise cancelling", "long battery life", "water resistant", "fast charging",
                              "hands free"),
                             ("color",), (20, 150)),
        "phone case": ("Cell Phone Accessories", ("Phone Case", "Protective Case"),
                       ("shock absorbing", "wireless charging", "slim fit", "easy install", "scratch resistant"),
                       ("color", "pattern name"), (8, 40)),
        "usb c cable": ("Computer Accessories", ("USB C Cable", "Charging Cable"),
                        ("fast charging", "high speed", "durable", "braided nylon"),
                        ("color", "item package quantity"), (6, 25)),
        "bluetooth speaker": ("Portable Audio", ("Bluetooth Speaker", "Portable Speaker"),
                              ("water resistant", "long battery life", "stereo sound", "easy carry", "hands free"),
                              ("color",), (20, 130)),
        "hdmi cable": ("Computer Accessories", ("HDMI Cable", "High Speed HDMI Cable"),
                       ("high speed", "gold plated", "4k", "braided nylon", "durable"),
                       ("item package quantity", "capacity"), (6, 30)),
    }),
}

BRANDS = ("Aurelia", "Brightway", "Cobalt & Co", "Dunmore", "Evergreen", "Foxglove", "Greystone", "Halcyon", "Ironwood",
          "Juniper", "Kestrel", "Lumina", "Meridian", "Northfield", "Oakridge", "Pinecrest", "Quillon", "Redfern",
          "Solstice", "Tidewater", "Umber", "Verdant", "Willowby", "Yarrow", "Zephyr")
REVIEW_LINES = ("Works as described.", "Good value for the price.", "Arrived quickly and well packed.",
                "Not what I expected, but fine.", "Would buy again.", "Quality could be better.")
INSTRUCTION_TEMPLATES = (
    "i need {noun} that is {attrs}{options}",
    "i am looking for {noun} which are {attrs}{options}",
    "find me {attrs} {noun}{options}",
    "i want to buy {noun}, {attrs}{options}",
)


def generate_catalogue(n_products: int = 1000, seed: int = 0, name: str = "generated") -> Catalogue:
    """Build `n_products` products over the five categories (deterministic by seed); goals come from `goal_for`."""
    rng = random.Random(f"webshop-catalogue:{seed}")
    queries = [(cat, top, query, spec) for cat, (top, table) in CATEGORIES.items() for query, spec in table.items()]
    products = []
    for i in range(n_products):
        category, top, query, (sub, nouns, pool, groups, (low, high)) = queries[i % len(queries)]
        brand = rng.choice(BRANDS)
        noun = rng.choice(nouns)
        attributes = tuple(sorted(rng.sample(pool, rng.randint(2, min(4, len(pool))))))
        options = {g: tuple(sorted(rng.sample(OPTION_GROUPS[g], rng.randint(2, min(5, len(OPTION_GROUPS[g]))))))
                   for g in groups[: rng.randint(1, len(groups))]}
        flourish = rng.choice(attributes).title()
        extra = [a for a in pool if a.title() != flourish]
        title = f"{brand} {noun}, {flourish}" + (f" - {rng.choice(extra).title()}" if rng.random() < 0.3 else "")
        bullets = tuple(f"{a.capitalize()}: made to be {a} for everyday use." for a in attributes)
        reviews = tuple((rng.randint(2, 5), rng.choice(REVIEW_LINES)) for _ in range(rng.randint(1, 3)))
        rating = f"{sum(s for s, _ in reviews) / len(reviews):.1f}"
        products.append(Product(
            asin=f"G{seed:02d}{i:07d}"[-10:], title=title, category=category, query=query,
            product_category=f"{top} › {sub} › {noun}", bullets=bullets,
            description=f"The {brand} {noun.lower()} from our {sub.lower()} line. " + " ".join(bullets),
            attributes=attributes, options=options, price=round(rng.uniform(low, high), 2),
            rating=rating, reviews=reviews))
    return Catalogue(name, tuple(products), ())


def goal_for(product: Product, rng: random.Random) -> Goal:
    """A goal for `product` built the way WebShop builds synthetic goals (see module docstring)."""
    attributes = tuple(rng.sample(product.attributes, min(len(product.attributes), rng.randint(1, 3))))
    names = tuple(sorted(product.options))
    values = tuple(rng.choice(product.options[n]) for n in names)
    upper = price_upper_for(product.price, rng)
    noun = product.query
    option_text = "".join(f", and {n}: {v}" if i else f", with {n}: {v}" for i, (n, v) in enumerate(zip(names, values)))
    instruction = rng.choice(INSTRUCTION_TEMPLATES).format(noun=noun, attrs=" and ".join(attributes),
                                                           options=option_text)
    instruction += price_clause(upper)
    return Goal(product.asin, instruction, attributes, values, upper, product.query, product.product_category,
                product.title, names)
