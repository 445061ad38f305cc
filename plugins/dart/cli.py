"""`playground dart bench`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click


@click.group("dart")
def dart_group() -> None:
    """DART: admissible rollback for structured tool agents."""


@dart_group.command("bench")
@click.option("--domain", "domains", multiple=True, help="workflow task set (default: every domain)")
@click.option("--harness", "harnesses", multiple=True,
              help="harnesses to compare, `langgraph` included (default: all of them)")
@click.option("--agent", type=click.Choice(["expert", "noisy"]), default="expert", show_default=True)
@click.option("--split", default="test", show_default=True)
@click.option("--max-steps", default=80, show_default=True, help="env steps per episode")
@click.option("--repeats", default=7, show_default=True, type=click.IntRange(min=0),
              help="timing rounds per harness (median of them; 0: no timing)")
def bench_command(domains: tuple[str, ...], harnesses: tuple[str, ...], agent: str, split: str,
                  max_steps: int, repeats: int) -> None:
    """Print one table per workflow domain: DART, its ablations and the baselines on the same cases."""
    from playground.host.manager import get_host
    from playground.plugins.dart import graph
    from playground.plugins.dart.bench import GRAPH, HARNESSES, bench, format_tables
    from playground.testing import ScriptedAgent

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
    if agent == "noisy":
        from playground.agents.noisy import NoisyAgent

        make_agent = NoisyAgent
    tables = bench(provider, list(domains) or list(provider.task_sets()), chosen, make_agent, split, max_steps,
                   repeats)
    click.echo(format_tables(tables))
    if skipped:
        click.echo(skipped)
