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
@click.option("--harness", "harnesses", multiple=True, help="harnesses to compare (default: all of them)")
@click.option("--agent", type=click.Choice(["expert", "noisy"]), default="expert", show_default=True)
@click.option("--split", default="test", show_default=True)
@click.option("--max-steps", default=80, show_default=True, help="env steps per episode")
def bench_command(domains: tuple[str, ...], harnesses: tuple[str, ...], agent: str, split: str,
                  max_steps: int) -> None:
    """Print one table per workflow domain: DART, its ablations and the baselines on the same cases."""
    from playground.host.manager import get_host
    from playground.plugins.dart.bench import HARNESSES, bench, format_tables
    from playground.testing import ScriptedAgent

    provider = get_host().envs.get("workflow").provider
    chosen = list(harnesses) or list(HARNESSES)
    unknown = [h for h in chosen if h not in HARNESSES]
    if unknown:
        raise click.UsageError(f"unknown harness {', '.join(unknown)}; choose from: {', '.join(HARNESSES)}")
    make_agent: Callable[[], Any] = ScriptedAgent
    if agent == "noisy":
        from playground.agents.noisy import NoisyAgent

        make_agent = NoisyAgent
    tables = bench(provider, list(domains) or list(provider.task_sets()), chosen, make_agent, split, max_steps)
    click.echo(format_tables(tables))
