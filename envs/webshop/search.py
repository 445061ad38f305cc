"""WebShop's search engine: BM25 (bm25s) over each product's text, top 50, deterministic.

WebShop indexes products with Lucene; this index covers the same text (title, bullet
points, description, attributes, option values, category path) with BM25 and returns
at most 50 products, best first; the same query always gives the same list.
"""

from __future__ import annotations

from dataclasses import dataclass

from playground.envs.webshop.catalogue import Catalogue, Product
from playground.host_api import TextIndex, built_once

SEARCH_RETURN_N = 50


def product_text(product: Product) -> str:
    """The text of a product that search sees."""
    options = " ".join(v for values in product.options.values() for v in values)
    return " ".join([product.title, product.product_category, " ".join(product.bullets), product.description,
                     " ".join(product.attributes), options])


@dataclass
class SearchIndex:
    """A BM25 index over a catalogue's products."""

    asins: list[str]
    index: TextIndex

    def search(self, query: str, k: int = SEARCH_RETURN_N) -> list[str]:
        """Return the ASINs of the best `k` products for `query` (empty when no query word is known)."""
        return [self.asins[i] for i, score in self.index.search(query, k) if score > 0]


def build_index(catalogue: Catalogue) -> SearchIndex:
    """Index every product of `catalogue`."""
    return SearchIndex([p.asin for p in catalogue.products], TextIndex([product_text(p) for p in catalogue.products]))


def index_for(catalogue: Catalogue) -> SearchIndex:
    """Return the (per-process cached) index of `catalogue`."""
    return built_once(catalogue, "products", lambda: build_index(catalogue))
