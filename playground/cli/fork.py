"""`playground fork`: rebuild the state before a recorded action and play on from it under an agent."""

from __future__ import annotations

import hashlib
import json

import click

from playground.cli.options import CLIError, parse_pairs


@click.command("fork")
@click.argument("run_dir")
@click.option("--episode", required=True, help="episode key HARNESS/TASK, or a trace path inside RUN_DIR")
@click.option("--step", "position", type=click.IntRange(min=0), required=True,
              help="fork point T: the state before the T-th kept action (the step number, without rollbacks)")
@click.option("--agent", default="expert", show_default=True, help="agent that plays on from the fork point")
@click.option("--agent-option", "agent_options", multiple=True, metavar="KEY=VALUE", help="option of that agent")
@click.option("--action", default=None, help="action sent at T [default: the agent chooses]")
@click.option("--seed", type=int, default=None, help="the agent's seed [default: the episode's]")
def fork_command(run_dir: str, episode: str, position: int, agent: str, agent_options: tuple[str, ...],
                 action: str | None, seed: int | None) -> None:
    """Rebuild the state before action T of an episode, check it against the trace, play on; trace in RUN_DIR/forks/."""
    from playground.host.manager import get_host
    from playground.run.forks import ForkError, find_episode, fork, fork_path, load_episode

    options = parse_pairs(agent_options, "--agent-option")
    try:
        recorded = load_episode(find_episode(run_dir, episode))
        tag = hashlib.sha256(json.dumps([action, options, seed]).encode()).hexdigest()[:8]
        out = fork_path(run_dir, recorded, position, f"{agent}.{tag}")
        result = fork(get_host(), recorded, position, out, agent=agent, agent_options=options, action=action,
                      seed=seed)
    except ForkError as exc:
        raise CLIError(str(exc)) from None
    click.echo(json.dumps(result.as_json(), indent=2))
