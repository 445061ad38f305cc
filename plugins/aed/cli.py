"""`playground aed ...`: export; a diagnosis dataset, training and its evaluation. `aed diagnose` and `aed replay`
are AED's pipeline steps mounted as commands (`PipelineStep.command`); AED's figures (correction against retry,
evidence grades) are study columns (`figures.py`)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import click

from playground.host_api import CLIError, pass_host, path_callback

if TYPE_CHECKING:
    from playground.host_api import Host


@click.group("aed")
def aed_group() -> None:
    """AED: error-diagnosis pairs from traces, matched replay from the same state, training views."""


@aed_group.command("export")
@click.argument("run_dir")
@click.option("--view", type=click.Choice(["diagnosis", "actor", "adp"]), required=True)
@click.option("--out", callback=path_callback, required=True, help="JSONL file to write")
@click.option("--min-grade", type=click.Choice(["none", "E1", "E2"]), default=None,
              help="keep only pairs whose replay reached this evidence grade [default: E1 for the actor view (a "
                   "recovery target needs an executed passing continuation), none for the diagnosis view]; "
                   "'none' admits every pair")
@click.option("--proposal", type=click.Choice(["first", "selected"]), default="first", show_default=True,
              help="which proposal of a pair the diagnosis and actor rows carry: the diagnoser's first, or the "
                   "search-selected candidate of its replay (aed diagnose --proposals N, aed replay), with its grade")
@click.option("--force", is_flag=True, help="replace OUT if it exists")
def export_command(run_dir: str, view: str, out: str, min_grade: str | None, proposal: str, force: bool) -> None:
    """Export a training view, every record validated against its shipped JSON Schema."""
    from playground.host_api import check_output
    from playground.plugins.aed.views import DEFAULT_MIN_GRADE, ExportError, below_grade, export

    check_output(out, force=force, runs=[run_dir], what="export file (--out)")
    try:
        count = export(run_dir, view, out, min_grade, proposal)
    except ExportError as exc:
        raise CLIError(str(exc)) from None
    click.echo(f"{count} {view} record(s) -> {out}")
    bar = DEFAULT_MIN_GRADE[view] if min_grade is None else min_grade
    left_out = below_grade(run_dir, view, bar, proposal) if view != "adp" else 0
    if left_out:
        click.echo(f"note: {left_out} pair(s) left out: their replay did not reach {bar} (not replayed, or the "
                   "correction did not beat the retry); `playground aed replay` replays them, --min-grade none "
                   "admits them", err=True)


@aed_group.command("dataset")
@click.argument("run_dirs", nargs=-1, required=True, metavar="RUN_DIR...")
@click.option("--out", callback=path_callback,
              required=True, help="dataset folder to write (train.jsonl, holdout.jsonl, dataset.json)")
@click.option("--holdout", type=float, default=0.3, show_default=True, help="share of the tasks held out")
@click.option("--seed", type=int, default=0, show_default=True, help="seed of the split by task")
@click.option("--force", is_flag=True, help="write a new split over an existing dataset (its holdout changes)")
@pass_host
def dataset_command(host: Host, run_dirs: tuple[str, ...], out: str, holdout: float, seed: int, force: bool) -> None:
    """A diagnosis dataset from runs (noisy ground truth, kept diagnoses), split by task into a frozen holdout."""
    from playground.plugins.aed.train import build_dataset

    # never train on observations whose grade text could not be removed: the host refuses an env it has not loaded
    click.echo(json.dumps(build_dataset(list(run_dirs), out, holdout=holdout, seed=seed,
                                        grade_text_remover=host.grade_text_remover, force=force), indent=2))


@aed_group.command("train")
@click.argument("dataset")
@click.option("--out", callback=path_callback,
              required=True, help="folder for the LoRA adapter (OUT/adapter) and OUT/train.json")
@click.option("--model", default=None, help="a .gguf file or a Hugging Face model folder [default: the embedded "
                                            "SmolLM2-135M-Instruct GGUF]")
@click.option("--steps", type=click.IntRange(min=1), default=200, show_default=True, help="training examples seen")
@click.option("--lr", type=float, default=2e-4, show_default=True)
@click.option("--rank", type=click.IntRange(min=1), default=8, show_default=True, help="LoRA rank")
@click.option("--threads", type=click.IntRange(min=1), default=2, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
def train_command(dataset: str, out: str, model: str | None, steps: int, lr: float, rank: int, threads: int,
                  seed: int) -> None:
    """Fine-tune a causal LM with LoRA on a diagnosis dataset's training half, on the CPU (extra 'train')."""
    from playground.plugins.aed.train import train

    def progress(step: int, loss: float) -> None:
        if step == 1 or step % 10 == 0 or step == steps:
            click.echo(f"step {step}/{steps}  loss {loss:.4f}", err=True)

    record = train(dataset, out, model=model, steps=steps, lr=lr, rank=rank, seed=seed, threads=threads,
                   progress=progress)
    click.echo(json.dumps(record, indent=2))


@aed_group.command("eval")
@click.argument("dataset")
@click.option("--adapter", callback=path_callback, default=None,
              help="a LoRA adapter folder (aed train's OUT/adapter) [default: the base model alone]")
@click.option("--model", default=None, help="the base model the adapter was trained on [default: embedded SmolLM2]")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="only the first N holdout examples")
@click.option("--threads", type=click.IntRange(min=1), default=2, show_default=True)
@click.option("--max-new-tokens", type=click.IntRange(min=1), default=48, show_default=True,
              help="tokens decoded after the answer's prefix (the step comes first; the correction needs ~20 more)")
@click.option("--out", callback=path_callback, default=None, help="JSON file for the figures and every prediction")
def eval_command(dataset: str, adapter: str | None, model: str | None, limit: int | None, threads: int,
                 max_new_tokens: int, out: str | None) -> None:
    """Exact-step agreement and correction exact match on a dataset's frozen holdout (extra 'train')."""
    from playground.host_api import atomic_write_text, check_output
    from playground.plugins.aed.train import evaluate

    if out is not None:
        check_output(out, force=True, runs=[], what="eval file (--out)")
    def progress(done: int, total: int) -> None:
        if done % 10 == 0 or done == total:
            click.echo(f"evaluated {done}/{total}", err=True)

    result = evaluate(dataset, model=model, adapter=adapter, limit=limit, threads=threads,
                      max_new_tokens=max_new_tokens, progress=progress)
    if out is not None:
        atomic_write_text(out, json.dumps(result, indent=2) + "\n")
    click.echo(json.dumps({k: v for k, v in result.items() if k != "predictions"}, indent=2))
