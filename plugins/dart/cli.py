"""`playground dart bench`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

MODEL_AGENTS = ("local", "llm")
AGENTS = ("expert", "noisy", *MODEL_AGENTS)


@click.group("dart")
def dart_group() -> None:
    """DART: admissible rollback for structured tool agents."""


@dart_group.command("bench")
@click.option("--domain", "domains", multiple=True, help="workflow task set (default: every domain)")
@click.option("--harness", "harnesses", multiple=True,
              help="harnesses to compare, `langgraph` included (default: all of them)")
@click.option("--agent", type=click.Choice(AGENTS), default="expert", show_default=True,
              help="expert or noisy (no model); local (the embedded SmolLM2) or llm (an endpoint: --llm-base-url, "
                   "--model)")
@click.option("--agent-option", "agent_options", multiple=True, metavar="KEY=VALUE",
              help="option of a model agent (repeatable; docs/models.md)")
@click.option("--llm-base-url", default=None, help="OpenAI-compatible endpoint for --agent llm")
@click.option("--model", default=None, help="model name for --agent llm")
@click.option("--per-variant", type=click.IntRange(min=1), default=None,
              help="play only the first N tasks of each fault variant [default: all]")
@click.option("--split", default="test", show_default=True)
@click.option("--max-steps", default=80, show_default=True, help="env steps per episode")
@click.option("--repeats", default=7, show_default=True, type=click.IntRange(min=0),
              help="timing rounds per harness (median of them; 0: no timing; none with a model agent)")
def bench_command(domains: tuple[str, ...], harnesses: tuple[str, ...], agent: str, agent_options: tuple[str, ...],
                  llm_base_url: str | None, model: str | None, per_variant: int | None, split: str,
                  max_steps: int, repeats: int) -> None:
    """Print one table per workflow domain: DART, its ablations and the baselines on the same cases, then the
    paired latency tests of DART against the others."""
    from playground.api import ScriptedAgent, get_host, parse_pairs
    from playground.plugins.dart import graph
    from playground.plugins.dart.bench import GRAPH, HARNESSES, bench, format_tables

    provider = get_host().envs.get("workflow").provider
    known = [*HARNESSES, GRAPH]
    unknown = [h for h in harnesses if h not in known]
    if unknown:
        raise click.UsageError(f"unknown harness {', '.join(unknown)}; choose from: {', '.join(known)}")
    chosen = list(harnesses) or known
    unknown_domains = [d for d in domains if d not in provider.task_sets()]
    if unknown_domains:
        raise click.UsageError(f"unknown domain {', '.join(unknown_domains)}; "
                               f"choose from: {', '.join(provider.task_sets())}")
    skipped = None
    if GRAPH in chosen and not graph.available():
        skipped = f"{GRAPH}: skipped, langgraph is not installed ({graph.INSTALL})"
    elif GRAPH in chosen and agent != "expert":
        skipped = f"{GRAPH}: skipped, its graph runs the declared plan (only with --agent expert)"
    if skipped and GRAPH in harnesses:
        raise click.UsageError(skipped)
    if skipped:
        chosen.remove(GRAPH)
    make_agent: Callable[[], Any] = ScriptedAgent
    note = None
    if agent == "noisy":
        from playground.api import NoisyAgent

        make_agent = NoisyAgent
    elif agent in MODEL_AGENTS:  # the agent as `playground run --agent` builds it, with its default options
        spec = get_host().agents.get(agent)
        options = {**spec.default_options, **parse_pairs(agent_options, "--agent-option")}
        options.update({k: v for k, v in (("base_url", llm_base_url), ("model", model)) if v})
        try:
            spec.factory(**options)  # a missing extra or endpoint setting fails here, once, with its reason
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None

        def make_agent() -> Any:
            return spec.factory(**options)

        if repeats:
            note = "no step timing with a model agent: its wall seconds per episode are the figure"
        repeats = 0
    tables = bench(provider, list(domains) or list(provider.task_sets()), chosen, make_agent, split, max_steps,
                   repeats, per_variant)
    click.echo(format_tables(tables))
    for line in (skipped, note):
        if line:
            click.echo(line)
