"""WebShop's search engine: BM25 (bm25s) over each product's text, top 50, deterministic.

WebShop indexes products with Lucene; this index covers the same text (title, bullet
points, description, attributes, option values, category path) with BM25 and returns
at most 50 products, best first; the same query always gives the same list.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from playground.envs.webshop.catalogue import Catalogue, Product

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
    retriever: Any
    tokenizer: Any

    def search(self, query: str, k: int = SEARCH_RETURN_N) -> list[str]:
        """Return the ASINs of the best `k` products for `query` (empty when no query word is known)."""
        tokens = self.tokenizer.tokenize([query], update_vocab=False, return_as="ids", show_progress=False)
        if not self.asins or not tokens or not len(tokens[0]):
            return []
        found, scores = self.retriever.retrieve(tokens, k=min(k, len(self.asins)), show_progress=False)
        return [self.asins[i] for i, s in zip(found[0].tolist(), scores[0].tolist()) if s > 0]


def build_index(catalogue: Catalogue) -> SearchIndex:
    """Index every product of `catalogue`."""
    import bm25s
    from bm25s.tokenization import Tokenizer

    tokenizer = Tokenizer(stopwords="en")
    retriever = bm25s.BM25()
    corpus = tokenizer.tokenize([product_text(p) for p in catalogue.products], return_as="ids", show_progress=False)
    retriever.index(corpus, show_progress=False)
    return SearchIndex([p.asin for p in catalogue.products], retriever, tokenizer)


_INDEXES: dict[int, tuple[Catalogue, SearchIndex]] = {}
_LOCK = threading.Lock()


def index_for(catalogue: Catalogue) -> SearchIndex:
    """Return the (per-process cached) index of `catalogue`."""
    with _LOCK:
        entry = _INDEXES.get(id(catalogue))
        if entry is None or entry[0] is not catalogue:
            entry = _INDEXES[id(catalogue)] = (catalogue, build_index(catalogue))
        return entry[1]
