"""`playground baselines optimise`: MIPROv2 or GEPA on the agent's prompt, written as a prompt file for
`--harness prompt-opt:PROMPT.json` (see prompt_search and prompt_opt)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from playground.host_api import CLIError, nonempty, pass_host, path_callback

if TYPE_CHECKING:
    from playground.host_api import Host


@click.group("baselines")
def baselines_group() -> None:
    """Baselines with a command of their own: MIPROv2 and GEPA prompt optimisation (the others are harnesses)."""


@baselines_group.command("optimise")
@click.option("--optimizer", type=click.Choice(["miprov2", "gepa"]), required=True, help="DSPy's optimiser to run")
@click.option("--env", "env_name", required=True, help="env:task_set of a one-step env (e.g. finance:formula)")
@click.option("--split", default="dev", show_default=True,
              help="the split whose tasks are optimised on and graded (never a test split)")
@click.option("--train", type=click.IntRange(min=1), default=8, show_default=True,
              help="the first N tasks of the split: the optimisers' train set (demos, reflection minibatches)")
@click.option("--val", type=click.IntRange(min=1), default=8, show_default=True,
              help="the next N tasks of the split: the optimisers' validation set (candidates are scored on it)")
@click.option("--llm-base-url", required=True, help="OpenAI-compatible endpoint of the agent's model")
@click.option("--model", required=True, help="model name sent to the endpoint (the agent's)")
@click.option("--api-key-env", default="OPENAI_API_KEY", show_default=True,
              help="environment variable holding the endpoint's key (not needed for local servers)")
@click.option("--reflection-base-url", default="",
              help="endpoint of the model that proposes instructions (MIPROv2) or reflects (GEPA) "
                   "[default: the agent's]")
@click.option("--reflection-model", default="", help="its model name [default: the agent's]")
@click.option("--trials", type=click.IntRange(min=1), default=4, show_default=True, help="MIPROv2: search trials")
@click.option("--candidates", type=click.IntRange(min=1), default=3, show_default=True,
              help="MIPROv2: instruction candidates and demo-set candidates")
@click.option("--demos", type=click.IntRange(min=0), default=2, show_default=True,
              help="MIPROv2: at most N bootstrapped and N labelled demos")
@click.option("--lean-proposer", is_flag=True,
              help="MIPROv2: propose instructions without its dataset and program summaries (for a slow model)")
@click.option("--raw-proposals", is_flag=True,
              help="take a reply of MIPROv2's proposer or GEPA's reflector that DSPy cannot parse, whole, as the "
                   "instruction (a deviation, for a model that answers in prose)")
@click.option("--metric-calls", type=click.IntRange(min=1), default=30, show_default=True,
              help="GEPA: the budget in metric calls")
@click.option("--threads", type=click.IntRange(min=1), default=1, show_default=True, help="evaluation threads")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--max-obs-chars", type=click.IntRange(min=1), default=800, show_default=True,
              help="the question's cut in the prompt: the llm agent's max_obs_chars (pass the run's value)")
@click.option("--max-tokens", type=click.IntRange(min=1), default=256, show_default=True,
              help="reply cap: the llm agent's max_tokens")
@click.option("--out", required=True, callback=path_callback, help="the prompt file to write (JSON)")
@pass_host
def optimise_command(host: Host, optimizer, env_name, split, train, val, llm_base_url, model, api_key_env,
                     reflection_base_url, reflection_model, trials, candidates, demos, lean_proposer, raw_proposals,
                     metric_calls, threads, seed, max_obs_chars, max_tokens, out) -> None:
    """Optimise the agent's prompt on a dev split with MIPROv2 or GEPA (DSPy; extra `prompt-opt`), then deploy it
    frozen with `playground run --agent llm ... --harness prompt-opt:OUT`."""
    from playground.host_api import RunConfigError, check_output, resolve_tasks
    from playground.plugins.baselines.prompt_search import Budget, Grader, PromptSearchError, load_tasks, optimise

    check_output(nonempty(out, "--out"), force=True, what="prompt file (--out)")  # never a run's own file
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
        raise CLIError(f"{env}:{task_set} split {split} has {len(task_ids)} tasks; --train {train} needs at least "
                       f"{train + 1} (one left for --val)")
    budget = Budget(trials=trials, candidates=candidates, demos=demos, metric_calls=metric_calls, threads=threads,
                    lean_proposer=lean_proposer, raw_proposals=raw_proposals)
    try:
        provider.prepare(task_set, task_ids, click.echo)
        tasks = load_tasks(provider, task_set, task_ids)
        result = optimise(optimizer, tasks[:train], tasks[train:], Grader(provider, task_set), base_url=llm_base_url,
                          model=model, reflection_base_url=reflection_base_url, reflection_model=reflection_model,
                          api_key_env=api_key_env, budget=budget, seed=seed, max_obs_chars=max_obs_chars,
                          max_tokens=max_tokens, progress=click.echo)
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
