"""The built-in agents plugin: registers random, expert, noisy, llm and local like any third-party plugin.

`local` is the default agent of `playground run`: the embedded SmolLM2, decoding constrained to the valid actions.
"""

from __future__ import annotations

from playground.agents.base import ExpertAgent, RandomAgent
from playground.agents.llm import make_llm_agent, make_local_agent
from playground.agents.noisy import NoisyAgent
from playground.core.hookspecs import hookimpl


@hookimpl
def register_agents(register) -> None:
    """Register the built-in agents."""
    register("random", RandomAgent, description="a random admissible action each step")
    register("expert", ExpertAgent, description="follows the env's expert plan", needs_expert=True)
    register("noisy", NoisyAgent, needs_expert=True,
             description="failure-injection instrument: the expert plus invalid actions, loops, stalls, drift, "
                         "early stops")
    register("llm", make_llm_agent,
             description="ReAct agent over an OpenAI-compatible endpoint (--llm-base-url, --model)")
    register("local", make_local_agent, default=True, default_options={"constrained": True},
             description="ReAct agent over a local GGUF model (SmolLM2-135M by default; extra 'local')")
