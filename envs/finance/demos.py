"""Retrieval demonstrations: the k most similar solved train questions, shown before the agent answers.

An index per task set is built once per process over its train pool (BM25, `bm25s`,
imported on first use) and kept in a module-level cache. Retrieval never returns the
query itself (the same task id, or a question with the same text) and never the same
question twice (the pool is deduplicated by question text). FiNER questions are indexed
and shown without their tag list, which every question repeats.

Each of `demos-k1`, `demos-k2`, `demos-k4`, `demos-k8`, `demos-k16` is its own
intervention (DARC's Finance family); its `agent_notes` hook renders the demonstrations
as question -> answer pairs, computed once per episode. Harness parameters:
`demo_pool` (comma-separated split names to draw from, for file task sets without a
train file) and `demo_pool_size` (train tasks of a generated task set, default 500).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any, Mapping

from playground.core.hookspecs import hookimpl
from playground.core.payloads import EpisodeStart, StepContext
from playground.envs.finance import data
from playground.envs.finance.params import DemosParams

HEADER = "Solved examples of similar questions (question -> answer):"
ANSWER_PREFIX = "Answer: "
EXAMPLE_PREFIX = "Example "
_TAG_LIST = re.compile(r"[A-Z][A-Za-z0-9]*(?:[ \t]*,[ \t]*[A-Z][A-Za-z0-9]*){4,}")
_SPACE = re.compile(r"\s+")
_TRAILING_ANSWER = re.compile(r"\s*Answer:\s*$")


def normalise(text: str) -> str:
    """Return `text` with runs of whitespace collapsed, for comparing questions."""
    return _SPACE.sub(" ", text).strip()


def question_text(context: str) -> str:
    """Return the question as indexed and shown: a FiNER tag list is replaced by a placeholder."""
    runs = list(_TAG_LIST.finditer(context))
    if not runs:
        return context
    longest = max(runs, key=lambda m: len(m.group(0)))
    return context[: longest.start()] + "[the tag list, as in your question]" + context[longest.end():]


@dataclass
class _Index:
    """A BM25 index over a deduplicated pool of tasks."""

    tasks: list[data.Task]
    keys: list[str]
    retriever: Any
    tokenizer: Any


_INDEXES: dict[tuple, _Index] = {}
_LOCK = threading.Lock()


def pool_key(task_set: str, splits: list[str] | None, size: int) -> tuple:
    """Return the cache key of a task set's pool (files are keyed by their path, time and size)."""
    if task_set in data.FAMILIES:
        return (task_set, size)
    files = data.data_files().get(task_set.removesuffix("-data"), {})
    stamp = tuple(sorted((stem, str(p), p.stat().st_mtime_ns, p.stat().st_size) for stem, p in files.items()))
    return (task_set, tuple(splits) if splits is not None else None, stamp)


def build_index(tasks: list[data.Task]) -> _Index:
    """Index `tasks` with BM25 after dropping repeated questions (first occurrence kept)."""
    import bm25s
    from bm25s.tokenization import Tokenizer

    unique: dict[str, data.Task] = {}
    for task in tasks:
        unique.setdefault(normalise(task.context), task)
    kept = list(unique.values())
    tokenizer = Tokenizer(stopwords="en")
    retriever = bm25s.BM25()
    if kept:
        corpus = tokenizer.tokenize([question_text(t.context) for t in kept], return_as="ids", show_progress=False)
        retriever.index(corpus, show_progress=False)
    return _Index(kept, list(unique), retriever, tokenizer)


def get_index(task_set: str, splits: list[str] | None = None, size: int = 500) -> _Index:
    """Return the (cached) index over the train pool of `task_set`."""
    key = pool_key(task_set, splits, size)
    with _LOCK:
        if key not in _INDEXES:
            _INDEXES[key] = build_index(data.train_pool(task_set, splits, size))
        return _INDEXES[key]


def retrieve(index: _Index, query_id: str, query: str, k: int) -> list[data.Task]:
    """Return up to `k` pool tasks most similar to `query`, never the query itself."""
    if k <= 0 or not index.tasks:
        return []
    query_key = normalise(query)
    wanted = min(len(index.tasks), k + 1)  # at most one pool entry can be the query (the pool is deduplicated)
    tokens = index.tokenizer.tokenize([question_text(query)], update_vocab=False, return_as="ids", show_progress=False)
    found, _ = index.retriever.retrieve(tokens, k=wanted, show_progress=False)
    chosen = [index.tasks[i] for i in found[0].tolist()
              if index.tasks[i].id != query_id and index.keys[i] != query_key]
    return chosen[:k]


def render(demos: list[data.Task]) -> str:
    """Render demonstrations as numbered question -> answer pairs."""
    blocks = [HEADER]
    for number, task in enumerate(demos, 1):
        question = _TRAILING_ANSWER.sub("", question_text(task.context)).strip()
        blocks.append(f"{EXAMPLE_PREFIX}{number}\nQuestion: {question}\n{ANSWER_PREFIX}{task.target}")
    return "\n\n".join(blocks)


def count_demos(notes: tuple[str, ...] | list[str]) -> int:
    """Return how many demonstrations `render` put into these agent notes."""
    return sum(note.count(f"\n\n{EXAMPLE_PREFIX}") for note in notes if note.startswith(HEADER))


class RetrievalDemos:
    """Episode plugin: shows the k nearest solved train questions with every proposal of the episode."""

    def __init__(self, k: int, params: DemosParams | Mapping[str, Any]) -> None:
        """`params`: a `DemosParams` (the host validated it), or a dict validated by it (strictly)."""
        if not isinstance(params, DemosParams):
            params = DemosParams.model_validate(dict(params), strict=True)
        self.k = k
        pool = params.demo_pool
        self.splits = [s.strip() for s in pool.split(",") if s.strip()] if pool else None
        self.size = params.demo_pool_size
        self.notes: str | None = None
        self.done = False

    @hookimpl
    def episode_started(self, start: EpisodeStart) -> None:
        """Forget the previous episode's demonstrations."""
        self.done, self.notes = False, None

    @hookimpl
    def agent_notes(self, context: StepContext) -> str | None:
        """Return the rendered demonstrations for this episode's question (retrieved on the first call)."""
        if not self.done:
            task_set = data.task_set_of(context.ids.task_id)
            index = get_index(task_set, self.splits, self.size)
            if not index.tasks:
                raise data.FinanceDataError(f"demos-k{self.k}: task set {task_set!r} has no train split to retrieve "
                                            f"from (add a *train*.jsonl file, or pass --param demo_pool=<split>)")
            demos = retrieve(index, context.ids.task_id, context.observation, self.k)
            self.notes, self.done = (render(demos) if demos else None), True
        return self.notes
