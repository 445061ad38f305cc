"""`playground baselines optimise`: MIPROv2 or GEPA on the agent's prompt, written as a prompt file for
`--harness prompt-opt:PROMPT.json` (see prompt_search and prompt_opt)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from playground.host_api import CLIError, nonempty, pass_host, path_callback
from playground.plugins.baselines.optimise_settings import SettingsCommand, parse_settings

if TYPE_CHECKING:
    from playground.host_api import Host


@click.group("baselines")
def baselines_group() -> None:
    """Baselines with a command of their own: MIPROv2 and GEPA prompt optimisation (the others are harnesses)."""


@baselines_group.command("optimise", cls=SettingsCommand)
@click.option("--optimizer", type=click.Choice(["miprov2", "gepa"]), required=True, help="DSPy's optimiser to run")
@click.option("--env", "env_name", required=True, help="env:task_set of a one-step env (e.g. finance:formula)")
@click.option("--split", default="dev", show_default=True,
              help="the split whose tasks are optimised on and graded (never a test split)")
@click.option("--llm-base-url", required=True, help="OpenAI-compatible endpoint of the agent's model")
@click.option("--model", required=True, help="model name sent to the endpoint (the agent's)")
@click.option("--setting", "settings", multiple=True, metavar="KEY=VALUE",
              help="an optimiser setting (repeatable; the settings and their defaults are listed below)")
@click.option("--out", required=True, callback=path_callback, help="the prompt file to write (JSON)")
@pass_host
def optimise_command(host: Host, optimizer, env_name, split, llm_base_url, model, settings, out) -> None:
    """Optimise the agent's prompt on a dev split with MIPROv2 or GEPA (DSPy; extra `prompt-opt`), then deploy it
    frozen with `playground run --agent llm ... --harness prompt-opt:OUT`."""
    from playground.host_api import RunConfigError, check_output, resolve_tasks
    from playground.plugins.baselines.prompt_search import Budget, Grader, PromptSearchError, load_tasks, optimise

    s = parse_settings(settings)
    check_output(nonempty(out, "--out"), force=True, what="prompt file (--out)")  # never a run's own file
    train, val = s.train, s.val
    if "test" in split.lower():
        raise CLIError(f"--split {split!r} looks like a test split; optimise on a dev split, never on test tasks")
    env, _, task_set = env_name.partition(":")
    if env not in host.envs.names():
        raise CLIError(f"unknown env {env!r}; choose from: {', '.join(host.envs.names())}")
    provider = host.envs.get(env).provider
    try:
        task_set, split, task_ids = resolve_tasks(host, env, task_set or None, split, train + val)
    except RunConfigError as exc:
        raise CLIError(str(exc)) from None
    if len(task_ids) < train + 1:
        raise CLIError(f"{env}:{task_set} split {split} has {len(task_ids)} tasks; --setting train={train} needs "
                       f"at least {train + 1} (one left for val)")
    budget = Budget(trials=s.trials, candidates=s.candidates, demos=s.demos, metric_calls=s.metric_calls,
                    threads=s.threads, lean_proposer=s.lean_proposer, raw_proposals=s.raw_proposals)
    try:
        provider.prepare(task_set, task_ids, click.echo)
        tasks = load_tasks(provider, task_set, task_ids)
        result = optimise(optimizer, tasks[:train], tasks[train:], Grader(provider, task_set), base_url=llm_base_url,
                          model=model, reflection_base_url=s.reflection_base_url, reflection_model=s.reflection_model,
                          api_key_env=s.api_key_env, budget=budget, seed=s.seed, max_obs_chars=s.max_obs_chars,
                          max_tokens=s.max_tokens, progress=click.echo)
    except PromptSearchError as exc:
        raise CLIError(str(exc)) from None
    result = {**result, "env": env, "task_set": task_set, "split": split}
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    score = result["dev_score"]
    click.echo(f"{optimizer}: dev score {score['seed']:.3f} (seed prompt) -> {score['optimised']:.3f} (optimised) "
               f"on {score['val_tasks']} val tasks; {len(result['demos'])} demos; {result['seconds']} s; wrote {path}")
    click.echo(f"deploy it: playground run --env {env}:{task_set} --agent llm --llm-base-url URL --model {model} "
               f"--harness base --harness prompt-opt:{path}")
