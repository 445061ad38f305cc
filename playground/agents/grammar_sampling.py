"""Greedy decoding under a grammar that checks the model's own choice first (llama.cpp's `common` sampler does the
same), for the embedded model's constrained replies.

llama-cpp-python applies a grammar to every token of the vocabulary (49,152 for SmolLM2) before the greedy pick,
at every step: 17 ms a token against 11 ms unconstrained on these cores. Greedy decoding needs less. If the
highest-scoring token is one the grammar admits, it is also the highest-scoring admissible token, so only that
token is checked; when the grammar refuses it, the 64 highest-scoring tokens are checked together; only when it
refuses them all is the grammar applied to the whole vocabulary, as before. The reply is the same token for
token (`tests/test_grammar_sampling.py` compares the two paths); only greedy decoding (temperature 0, no logits
processor) takes this path, any other sampling keeps llama-cpp-python's.
"""

from __future__ import annotations

import ctypes
import functools
import math
from typing import Any

import numpy as np

from playground.agents.lookup_decoding import LookupGuesser, generate_in_batches

TOP = 64  # the highest-scoring tokens checked together when the grammar refuses the highest
VERSIONS = ("0.3.",)  # llama-cpp-python releases whose sampler chain this extends (the lock pins 0.3.36)


class GrammarFirstCheck:
    """A llama.cpp sampler (for a sampler chain, before the greedy pick) that holds a grammar sampler of its own:
    it lets the best-scoring token the grammar admits through alone, looking at the highest first, then the TOP
    highest, else applies the grammar to every candidate; every accepted token advances the grammar. `checks`
    counts the tokens decoded, `fallbacks` those that needed the whole vocabulary."""

    def __init__(self, llama_cpp: Any, vocab: Any, grammar: Any) -> None:
        self.llama_cpp = llama_cpp
        self.grammar = llama_cpp.llama_sampler_init_grammar(vocab, grammar._grammar.encode("utf-8"),
                                                            grammar._root.encode("utf-8"))
        self.checks = self.fallbacks = 0
        self._some = (llama_cpp.llama_token_data * TOP)()
        self._some_array = llama_cpp.llama_token_data_array(data=self._some, size=TOP, selected=-1, sorted=False)
        interface = llama_cpp.llama_sampler_i()
        self._callbacks = (llama_cpp.llama_sampler_i_apply(self._apply),  # kept: ctypes must not free them
                           llama_cpp.llama_sampler_i_accept(self._accept))
        interface.apply, interface.accept = self._callbacks
        interface.name = llama_cpp.llama_sampler_i_name(0)
        interface.reset = llama_cpp.llama_sampler_i_reset(0)
        interface.clone = llama_cpp.llama_sampler_i_clone(0)
        interface.free = llama_cpp.llama_sampler_i_free(0)
        self._interface = interface
        self.sampler = llama_cpp.llama_sampler()
        self.sampler.iface = ctypes.pointer(interface)
        self.sampler.ctx = None

    def _apply(self, sampler: Any, candidates: Any) -> None:
        array = candidates.contents
        logits = np.ctypeslib.as_array(array.data, shape=(array.size,))["logit"]
        self.checks += 1
        # the highest-scoring token alone, then the TOP highest (ties by index, as llama.cpp's greedy pick takes the
        # first of equal maxima): the best of them the grammar admits is the best admissible token, unless it ties
        # the lowest score among them (a token left out might tie it and come first)
        for count in (1, min(TOP, array.size - 1)):
            if count == 1:
                order = [int(np.argmax(logits))]
            else:
                top = np.argpartition(-logits, count)[:count]
                order = [int(i) for i in top[np.lexsort((top, -logits[top]))]]
            for slot, index in enumerate(order):
                self._some[slot] = array.data[index]
            self._some_array.size, self._some_array.selected = len(order), -1
            self.llama_cpp.llama_sampler_apply(self.grammar, ctypes.byref(self._some_array))
            admitted = next((slot for slot in range(len(order)) if self._some[slot].logit != -math.inf), None)
            if admitted is not None and (count == 1 or logits[order[admitted]] > logits[order[-1]]):
                array.data[0] = self._some[admitted]  # it alone goes on to the greedy pick
                array.size, array.selected = 1, -1
                return
        self.fallbacks += 1
        self.llama_cpp.llama_sampler_apply(self.grammar, candidates)

    def _accept(self, sampler: Any, token: int) -> None:
        self.llama_cpp.llama_sampler_accept(self.grammar, token)

    def free(self) -> None:
        """Free the grammar sampler (the chain that held this one must have let it go first)."""
        if self.grammar is not None:
            self.llama_cpp.llama_sampler_free(self.grammar)
            self.grammar = None


@functools.cache
def greedy_grammar_llama(llama_class: type) -> type:
    """A subclass of llama-cpp-python's `Llama` whose greedy decoding under a grammar checks the model's own choice
    first (`GrammarFirstCheck`); every other sampling is the base class's."""

    class GreedyGrammarLlama(llama_class):
        """`Llama`, with `GrammarFirstCheck` in the sampler chain of greedy decoding under a grammar, and greedy
        decoding checking guessed tokens in batches (`lookup_decoding`) while `lookup_decoding` is true."""

        lookup_decoding = True

        def _init_sampler(self, *args: Any, **kwargs: Any) -> Any:
            grammar, temp = kwargs.get("grammar"), kwargs.get("temp", 0.8)
            if grammar is None or temp != 0.0 or kwargs.get("logits_processor") is not None or args:
                return super()._init_sampler(*args, **kwargs)
            import llama_cpp
            from llama_cpp import _internals

            if not llama_cpp.__version__.startswith(VERSIONS):  # its sampler internals are what this builds on
                return super()._init_sampler(*args, **kwargs)
            chain = _internals.LlamaSampler()
            chain.add_penalties(n_vocab=self._n_vocab, penalty_last_n=self.last_n_tokens_size,
                                penalty_repeat=kwargs.get("repeat_penalty", 1.0),
                                penalty_freq=kwargs.get("frequency_penalty", 0.0),
                                penalty_present=kwargs.get("presence_penalty", 0.0))
            check = GrammarFirstCheck(llama_cpp, self._model.vocab, grammar)
            llama_cpp.llama_sampler_chain_add(chain.sampler, ctypes.pointer(check.sampler))
            # the chain must let go of it before it is freed (as llama-cpp-python's own custom samplers)
            chain.custom_samplers.append((llama_cpp.llama_sampler_chain_n(chain.sampler) - 1, check))  # type: ignore[arg-type]
            chain._exit_stack.callback(check.free)
            chain.add_greedy()
            self.grammar_checks = check
            return chain

        def generate(self, tokens: Any, *args: Any, **kwargs: Any) -> Any:
            """`Llama.generate`; greedy decoding (temperature 0, no logits processor), with or without a grammar,
            evaluates every token in a batch of two or more and checks guessed tokens in batches
            (`lookup_decoding`) while `lookup_decoding` is true."""
            import llama_cpp

            if (args or kwargs.get("temp", 0.8) != 0.0 or kwargs.get("logits_processor") is not None
                    or self.draft_model is not None or not self.lookup_decoding or not kwargs.get("reset", True)
                    or not llama_cpp.__version__.startswith(VERSIONS) or self._is_recurrent or self._is_hybrid):
                self.batched_tokens = 0  # what this leaves in the context was evaluated one token at a time
                return super().generate(tokens, *args, **kwargs)
            if not hasattr(self, "lookup"):
                self.lookup = LookupGuesser()
            return generate_in_batches(self, tokens, self.lookup, **kwargs)

    return GreedyGrammarLlama
