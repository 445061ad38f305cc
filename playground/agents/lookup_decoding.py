"""Greedy decoding that guesses the next tokens from text the model has already seen and checks each guess in one
batch (prompt-lookup speculative decoding, as llama.cpp's `lookup` example and llama-cpp-python's
`LlamaPromptLookupDecoding`), with every token evaluated in a batch of at least two, for the embedded model.

A judge's replies repeat themselves: a detection is `{"failure": true, "failure_type": "progress", "labels": [...`
with the same keys and mostly the same labels every time, and its quotes come from the prompt. Decoding one token
per forward pass costs about 9 ms for SmolLM2-135M on 2 cores; a batch of ten costs about 45. So after each token,
`LookupGuesser` proposes the tokens that followed the reply's last tokens where they occurred before (this context's
earlier replies, the newest first, then the prompt), and `generate_in_batches` evaluates the token and the guess in
one batch, with logits at each of its positions. The sampler (the grammar's, if any, then the greedy pick) picks at
each position in turn: a guessed token is kept while the pick equals it; the first pick that differs is kept
instead, and the guessed tokens after it leave the KV cache.

Why at least two: llama.cpp (this build, on these CPUs) evaluates a batch of one token on another kernel path
whose results differ from a batch's by up to about one logit, while batches of two or more give the same logits
bit for bit however the tokens are grouped (measured; `tests/test_lookup_decoding.py` checks it). Evaluating every
token in a batch of two or more (the prompt's last tokens included, and a one-token guess at least after each pick)
makes the reply the greedy reply of one batch evaluation of the prompt and the reply together: it does not depend on
what a context held before, nor on what was guessed. Guesses change the cost only. The reply can differ, at a
near-tie, from llama-cpp-python's own one-token-at-a-time decoding. llama-cpp-python's draft path is not used: it
keeps logits for every position of the context (`logits_all`), 1.6 GB per context at 8,192 tokens.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from typing import Any

GUESS = 10  # tokens guessed at most per batch
NGRAM = 3  # the longest run of the reply's last tokens looked up
REPLIES_KEPT = 8  # earlier replies of one context looked in
START = -1  # stands before each reply, so that a reply's first tokens match other replies' first tokens
SAMPLING = ("top_k", "top_p", "min_p", "typical_p", "temp", "repeat_penalty", "frequency_penalty",
            "presence_penalty", "tfs_z", "mirostat_mode", "mirostat_tau", "mirostat_eta", "penalize_nl",
            "logits_processor", "grammar")  # `Llama.generate`'s arguments that make its sampler


class LookupGuesser:
    """Proposes the tokens that followed the reply's last tokens where they occurred before: in the context's
    earlier replies (the newest first), then in the prompt (its last occurrence first). A run of one token is looked
    up in the prompt only when nothing longer was found, and then for one token (a batch needs two anyway).
    `guesses` and `kept` count guessed tokens and those the greedy pick confirmed."""

    def __init__(self, replies_kept: int = REPLIES_KEPT) -> None:
        self.replies: deque[list[int]] = deque(maxlen=replies_kept)
        self.guesses = self.kept = 0

    def remember(self, reply: list[int]) -> None:
        """Keep a finished reply to look in."""
        if reply:
            self.replies.append([START, *reply])

    def guess(self, prompt: Sequence[int], reply: list[int], limit: int) -> list[int]:
        """At least one token (unless `limit` is 0) and at most `limit` to follow `reply`, the reply's tokens so far
        after `prompt`; where nothing matches, the reply's last token again."""
        if limit < 1:
            return []
        sequence = [START, *reply]
        for size in range(min(NGRAM, len(sequence)), 0, -1):
            key = sequence[-size:]
            for source in reversed(self.replies):
                found = _after_last(source, key, limit)
                if found:
                    return found
            found = _after_last(prompt, key, limit if size > 1 else 1)
            if found:
                return found
        return reply[-1:]


def _after_last(source: Sequence[int], key: list[int], limit: int) -> list[int]:
    """The tokens after the last occurrence of `key` in `source` that has some (at most `limit`); [] when none."""
    size, first = len(key), key[0]
    for start in range(len(source) - size - 1, -1, -1):
        if source[start] == first and list(source[start:start + size]) == key:
            return list(source[start + size:start + size + limit])
    return []


def generate_in_batches(llm: Any, tokens: Sequence[int], guesser: LookupGuesser, **kwargs: Any) -> Iterator[int]:
    """The greedy tokens after `tokens` (the prompt), evaluated as the module says; `llm` is a llama-cpp-python
    `Llama` (not a recurrent model: guesses leave its cache), `kwargs` the arguments `Llama.generate` was given for
    greedy decoding, its `stopping_criteria` asked before each token as `Llama.generate` asks it."""
    llm._sampler = llm._init_sampler(**{key: value for key, value in kwargs.items() if key in SAMPLING})
    stopping_criteria = kwargs.get("stopping_criteria")
    prompt = list(tokens)
    _evaluate_prompt(llm, prompt)
    start, outputs = llm.n_tokens - 1, [-1]  # the prompt's last position gives the first pick
    guess: list[int] = []
    reply: list[int] = []
    try:
        while True:
            for index, output in enumerate(outputs):
                pick = llm._sampler.sample(llm._ctx, output)  # the grammar's and the greedy pick; it accepts it
                if stopping_criteria is not None and stopping_criteria(llm.input_ids[:start + index + 1],
                                                                       llm.scores[0, :]):
                    return
                reply.append(pick)
                yield pick
                if index < len(guess) and pick == guess[index]:
                    guesser.kept += 1
                    continue
                llm.n_tokens = start + index + 1  # the guessed tokens after this position leave the cache
                llm._ctx.kv_cache_seq_rm(-1, llm.n_tokens, -1)
                llm.batched_tokens = min(llm.batched_tokens, llm.n_tokens)
                break
            guess = guesser.guess(prompt, reply, min(GUESS, llm.n_ctx() - llm.n_tokens - 1))
            guesser.guesses += len(guess)
            start = llm.n_tokens
            _evaluate(llm, [reply[-1], *guess], every_position=True)
            outputs = list(range(len(guess) + 1))
    finally:
        guesser.remember(reply)
        llm._requires_eval = True  # the last logits may be a dropped guess's: `Llama.generate` must evaluate again


def _evaluate_prompt(llm: Any, prompt: list[int]) -> None:
    """Evaluate the prompt after the longest prefix the context holds that was evaluated in batches of two or more
    (`batched_tokens`: a request decoded otherwise, at a temperature, sets it to 0), at least its last two tokens."""
    held = llm.input_ids[:min(llm.n_tokens, getattr(llm, "batched_tokens", 0))].tolist()
    reused = llm.longest_token_prefix(held, prompt)
    llm.n_tokens = max(0, min(reused, len(prompt) - 2))
    llm._ctx.kv_cache_seq_rm(-1, llm.n_tokens, -1)
    rest = prompt[llm.n_tokens:]
    size = llm.n_batch
    while rest:
        # batches of n_batch tokens, the last two at least: one token alone takes the other kernel path
        cut = len(rest) if len(rest) <= size else size - 1 if len(rest) == size + 1 else size
        _evaluate(llm, rest[:cut], every_position=False)
        rest = rest[cut:]


def _evaluate(llm: Any, batch: list[int], every_position: bool) -> None:
    """Evaluate `batch` after the context's tokens, with logits at each of its positions or at its last only."""
    start = llm.n_tokens
    llm._ctx.kv_cache_seq_rm(-1, start, -1)
    llm._batch.set_batch(batch=batch, n_past=start, logits_all=every_position)
    llm._ctx.decode(llm._batch)
    llm.input_ids[start:start + len(batch)] = batch
    llm.n_tokens = start + len(batch)
    # the leading tokens evaluated in batches of two or more (a batch of one: only at the context's very end)
    llm.batched_tokens = llm.n_tokens if len(batch) > 1 else start
