"""`playground dart bench`."""

from __future__ import annotations

import json
import platform
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from playground.host_api import pass_host, path_callback

if TYPE_CHECKING:
    from playground.host_api import Host

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
              help="option of a model agent or of noisy (repeatable; docs/models.md)")
@click.option("--llm-base-url", default=None, help="OpenAI-compatible endpoint for --agent llm")
@click.option("--model", default=None, help="model name for --agent llm")
@click.option("--per-variant", type=click.IntRange(min=1), default=None,
              help="play only the first N tasks of each fault variant [default: all]")
@click.option("--split", default="test", show_default=True)
@click.option("--max-steps", default=80, show_default=True, type=click.IntRange(min=1),
              help="env steps per episode; refused below the longest expert plan of the tasks played")
@click.option("--allow-short-budget", is_flag=True,
              help="play a --max-steps below the expert's plan anyway (no fault is reachable: a null run)")
@click.option("--repeats", default=7, show_default=True, type=click.IntRange(min=0),
              help="timing rounds per harness (median of them; 0: no timing; none with a model agent)")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None, callback=path_callback,
              help="also write a run folder: config.json, lock.json, episodes.jsonl, summary.json, traces/ "
                   "(a new or empty folder)")
@pass_host
def bench_command(host: Host, domains: tuple[str, ...], harnesses: tuple[str, ...], agent: str,
                  agent_options: tuple[str, ...], llm_base_url: str | None, model: str | None,
                  per_variant: int | None, split: str, max_steps: int, allow_short_budget: bool, repeats: int,
                  out: Path | None) -> None:
    """Print one table per workflow domain: DART, its ablations and the baselines on the same cases, then the
    paired latency tests of DART against the others."""
    from playground.host_api import ScriptedAgent, parse_pairs
    from playground.plugins.dart import graph
    from playground.plugins.dart.bench import (
        GRAPH,
        HARNESSES,
        bench,
        bench_tasks,
        budget_problem,
        format_tables,
        summary,
    )

    provider = host.envs.get("workflow").provider
    known = [*HARNESSES, GRAPH]
    unknown = [h for h in harnesses if h not in known]
    if unknown:
        raise click.UsageError(f"unknown harness {', '.join(unknown)}; choose from: {', '.join(known)}")
    chosen = list(harnesses) or known
    unknown_domains = [d for d in domains if d not in provider.task_sets()]
    if unknown_domains:
        raise click.UsageError(f"unknown domain {', '.join(unknown_domains)}; "
                               f"choose from: {', '.join(provider.task_sets())}")
    chosen_domains = list(domains) or list(provider.task_sets())
    short = budget_problem(provider, {d: bench_tasks(provider, d, split, per_variant) for d in chosen_domains},
                           max_steps)
    if short and not allow_short_budget:
        raise click.UsageError(short + " (--allow-short-budget plays it anyway)")
    if out is not None and out.exists() and any(out.iterdir()):
        raise click.UsageError(f"--out {out}: not empty (the bench does not resume; choose a new folder)")
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
    options: dict[str, Any] = {}
    if agent == "noisy":
        from playground.host_api import NoisyAgent

        options = parse_pairs(agent_options, "--agent-option")
        try:
            NoisyAgent(**options)
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None

        def make_agent() -> Any:
            return NoisyAgent(**options)

    elif agent in MODEL_AGENTS:  # the agent as `playground run --agent` builds it, with its default options
        spec = host.agents.get(agent)
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
    settings = {"command": "playground dart bench", "domains": chosen_domains, "harnesses": chosen, "agent": agent,
                "agent_options": options, "split": split, "per_variant": per_variant, "max_steps": max_steps,
                "repeats": repeats, "seed": 0, "params": {"max_rollbacks": 10}}
    if out is not None:
        _start_run_folder(out, settings, provider)
    tables = bench(provider, chosen_domains, chosen, make_agent, split, max_steps, repeats, per_variant, out=out)
    text = format_tables(tables)
    click.echo(text)
    for line in (skipped, note, short):
        if line:
            click.echo(line)
    if out is not None:
        from playground.host_api import atomic_write_text

        atomic_write_text(out / "summary.json", json.dumps(summary(tables), indent=1) + "\n")
        atomic_write_text(out / "tables.txt", text + "\n")


def _start_run_folder(out: Path, settings: dict[str, Any], provider: Any) -> None:
    """Write the bench's config.json and lock.json (what its figures depend on) into `out`."""
    from playground.host_api import atomic_write_text, git_state, plugin_distributions, redact_url

    out.mkdir(parents=True, exist_ok=True)
    options = {k: redact_url(v) if isinstance(v, str) else v for k, v in settings["agent_options"].items()}
    config = {**settings, "agent_options": options}
    atomic_write_text(out / "config.json", json.dumps(config, indent=1, default=str) + "\n")
    lock = {"lock_version": 1, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "playground": {"version": plugin_distributions().get("playground"), "git": git_state()},
            "python": ".".join(platform.python_version_tuple()[:2]), "distributions": plugin_distributions(),
            "env": {"name": "workflow", **{d: provider.describe(d) for d in settings["domains"]}},
            "agent": {"name": settings["agent"], "options": config["agent_options"]},
            "run": {"seed": settings["seed"], "max_steps": settings["max_steps"], "params": settings["params"],
                    "harnesses": settings["harnesses"]}}
    atomic_write_text(out / "lock.json", json.dumps(lock, indent=1, default=str) + "\n")
