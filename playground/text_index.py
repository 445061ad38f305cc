"""A BM25 index over short texts (bm25s, English stop words), built once per owner.

Env search engines (a shop's product search) and retrieval interventions (over
API docs) use it; `bm25s` is imported only when an index is built.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Hashable, Sequence


class TextIndex:
    """BM25 over `texts`; `search` returns (position, score) pairs, best first."""

    def __init__(self, texts: Sequence[str]) -> None:
        import bm25s
        from bm25s.tokenization import Tokenizer

        self.size = len(texts)
        self.tokenizer = Tokenizer(stopwords="en")
        self.retriever = bm25s.BM25()
        if texts:
            corpus = self.tokenizer.tokenize(list(texts), return_as="ids", show_progress=False)
            self.retriever.index(corpus, show_progress=False)

    def search(self, query: str, k: int) -> list[tuple[int, float]]:
        """Up to `k` (position, score) pairs for `query`, best first; none when no query word is indexed."""
        if not self.size:
            return []
        tokens = self.tokenizer.tokenize([query], update_vocab=False, return_as="ids", show_progress=False)
        if not tokens or not len(tokens[0]):
            return []
        found, scores = self.retriever.retrieve(tokens, k=min(k, self.size), show_progress=False)
        return list(zip(found[0].tolist(), scores[0].tolist()))


_BUILT: dict[tuple[int, Hashable], tuple[Any, Any]] = {}
_LOCK = threading.Lock()


def built_once(owner: object, variant: Hashable, build: Callable[[], Any]) -> Any:
    """`build()`'s result for `owner` (by identity) and `variant`, built once per process."""
    key = (id(owner), variant)
    with _LOCK:
        entry = _BUILT.get(key)
        if entry is not None and entry[0] is owner:
            return entry[1]
    value = build()
    with _LOCK:
        _BUILT[key] = (owner, value)
    return value
