"""AET's training half on a CPU: a diagnosis dataset with a frozen holdout split by task, LoRA fine-tuning of a
causal LM on it, and exact-step agreement before and after.

Examples come from two kinds of run directory:

- runs of the `noisy` instrument (ground truth): each failed episode whose trace records an injected failure
  (`Proposal.injected`) gives one example labelled with the *first* injected step (the attributed step), the
  expert's action that failure replaced (`injected["planned"]`, the correction) and the failure's label;
- diagnosed runs (`playground aed diagnose`): each kept pair of `aed/diagnoses.jsonl` gives one example labelled
  with its attributed step and correction (source `diagnosis:<producer>`; a producer's label, not ground truth).

The model reads a compact trace (goal, start, each step's action and result; every observation without the
grade text its env prints) and answers one JSON object: `{"step": N, "correction": ..., "explanation": ...}`,
the attributed step first. The split is by task (a hash of the task id), so no task is in both halves; the
dataset is written once (`dataset.json` records its sources and the split) and is not rewritten without --force,
so the holdout stays frozen across training runs.

Training is LoRA (peft) on the answer's tokens only, batch 1, AdamW, in plain torch on the CPU. The default
model is the embedded SmolLM2-135M-Instruct, read from the GGUF the `local` extra ships (transformers
dequantizes a llama-architecture GGUF); any Hugging Face model directory works too. Evaluation decodes greedily
after the prefix `{"step": ` (the same for the base model and the trained one, so both are asked for a step
number in the same way) and scores exact-step agreement (the predicted step equals the label) and correction
exact match, beside the majority-step baseline of the training half.
"""

from __future__ import annotations

import hashlib
import json
import re
import resource
import time
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from playground.core.errors import MissingExtra, PlaygroundError
from playground.core.payloads import keep_text
from playground.host_api import EpisodeTrace, RunDirError, confined, load_episode, read_config
from playground.plugins.aed.diagnose import failed_episodes, read_jsonl_file, write_json, write_jsonl

SYSTEM = ("You diagnose why an agent failed a task in a text environment. Read the trace of one failed episode and "
          "answer with one JSON object: the step whose action caused the failure, the action that should have been "
          'taken there instead (or null), and a short explanation: {"step": <int>, "correction": "..." or null, '
          '"explanation": "..."}')
ANSWER_PREFIX = '{"step": '
MAX_RESULT = 160  # characters of each step's result shown
TRAIN_EXTRA_HINT = "pip install -e '.[train]'  (torch, transformers, peft, gguf)"


class TrainingError(PlaygroundError):
    """A dataset, training or evaluation cannot proceed (bad input, a missing file); the message says what."""


# --- the dataset ----------------------------------------------------------------------------------------------

def compact_trace(episode: EpisodeTrace, remove_grade_text: Callable[[str], str] = keep_text) -> str:
    """The trace as the diagnosis model reads it: goal, start, and each step's action and result (cut to
    MAX_RESULT characters), grade text removed; a finish appears as the agent declaring the task done."""
    start = remove_grade_text(episode.reset.observation)
    lines = [f"Goal: {episode.reset.goal}", f"Start: {start[:MAX_RESULT * 2]}"]
    for step in episode.steps:
        result = remove_grade_text(step.observation).strip()[:MAX_RESULT]
        lines.append(f"Step {step.position}: > {step.action}{'' if step.valid else ' (rejected)'}\n  {result}")
    if episode.tail is not None and any(p.finish for p in episode.tail.proposals):
        lines.append(f"Step {episode.tail.position}: the agent declared the task done")
    lines.append(f"Episode status: {episode.status}")
    return "\n".join(lines)


def injected_label(episode: EpisodeTrace) -> dict | None:
    """The ground truth of a noisy episode: the first step whose executed proposal was injected, with the expert's
    action it replaced and the failure's label; None when the trace records no injected failure."""
    for step in [*episode.steps, *([episode.tail] if episode.tail is not None else [])]:
        if not step.proposals:
            continue
        mark = step.proposals[-1].injected
        if isinstance(mark, dict):
            planned = mark.get("planned")
            return {"step": step.position, "correction": planned if isinstance(planned, str) and planned else None,
                    "label": str(mark.get("label", "")), "action": step.action or None}
    return None


def target_text(label: dict) -> str:
    """The answer the model is trained to give for `label` (attributed step first)."""
    what = label.get("label", "").replace("_", " ") or "failure"
    action = label.get("action")
    explanation = (f"The agent's action {action!r} at step {label['step']} began the failure ({what})."
                   if action else f"At step {label['step']} the agent stopped before the task was done ({what}).")
    return json.dumps({"step": int(label["step"]), "correction": label.get("correction"),
                       "explanation": explanation}, ensure_ascii=False)


def holdout_task(task_id: str, fraction: float, seed: int) -> bool:
    """Whether `task_id` belongs to the holdout: a stable hash of (seed, task id) under `fraction`."""
    digest = hashlib.sha256(f"{seed}:{task_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2 ** 64 < fraction


def _examples_of_run(run_dir: Path, remover: Callable[[str], str], counts: Counter) -> Iterable[dict]:
    """The labelled examples of one run directory (noisy ground truth, then kept diagnoses)."""
    diagnoses = read_jsonl_file(run_dir / "aed" / "diagnoses.jsonl")
    screened: Counter = Counter()  # the diagnoser's own screen: won, errored and unreadable episodes left out
    for relative, episode in failed_episodes(run_dir, screened):
        label = injected_label(episode)
        if label is None:
            counts["no_injected_failure"] += 1
            continue
        counts["noisy"] += 1
        yield _example(run_dir, relative, episode, label, "noisy", remover)
    if screened["screened:unreadable_trace"]:
        counts["unreadable_trace"] += screened["screened:unreadable_trace"]
    episodes: dict[str, EpisodeTrace] = {}
    for record in diagnoses:
        trace = str(record["trace"])
        if trace not in episodes:
            episodes[trace] = load_episode(confined(run_dir, trace, what="diagnosed trace"))
        label = {"step": int(record["step"]), "correction": record.get("correction"),
                 "label": ",".join(record.get("labels") or []) or str(record.get("failure_type", "")),
                 "action": record.get("attributed_action")}
        counts[f"diagnosis:{record.get('producer', '')}"] += 1
        yield _example(run_dir, trace, episodes[trace], label, f"diagnosis:{record.get('producer', '')}", remover)


def _example(run_dir: Path, trace: str, episode: EpisodeTrace, label: dict, source: str,
             remover: Callable[[str], str]) -> dict:
    task_id = episode.header.task_id
    return {"id": f"{run_dir.name}/{trace}#{label['step']}", "task_id": task_id,
            "env": episode.header.env, "source": source,
            "messages": [{"role": "system", "content": SYSTEM},
                         {"role": "user", "content": compact_trace(episode, remover)}],
            "target": target_text(label), "label": {"step": int(label["step"]), "correction": label.get("correction")}}


def build_dataset(run_dirs: list[str | Path], out: str | Path, *, holdout: float = 0.3, seed: int = 0,
                  grade_text_remover: Callable[[str], Callable[[str], str]] | None = None,
                  force: bool = False) -> dict:
    """Write OUT/train.jsonl, OUT/holdout.jsonl (split by task) and OUT/dataset.json from the runs; return the
    counts. `grade_text_remover(env)` gives the env's `remove_grade_text` (None: text unchanged). Refuses an
    existing dataset unless `force`: the holdout is frozen once written."""
    out = Path(out)
    if (out / "dataset.json").exists() and not force:
        raise TrainingError(f"{out}: a dataset is there already (its holdout is frozen); use another folder, or "
                            "--force to write a new split")
    if not 0.0 < holdout < 1.0:
        raise TrainingError(f"--holdout must be between 0 and 1 (a fraction of the tasks), got {holdout}")
    counts: Counter = Counter()
    examples: list[dict] = []
    for run_dir in map(Path, run_dirs):
        if not (run_dir / "episodes.jsonl").exists():
            raise TrainingError(f"{run_dir}: not a run directory (no episodes.jsonl)")
        env = _run_env(run_dir)
        remover = grade_text_remover(env) if grade_text_remover is not None else keep_text
        examples.extend(_examples_of_run(run_dir, remover, counts))
    if not examples:
        raise TrainingError(f"no labelled example in {', '.join(map(str, run_dirs))}: they hold no failed episode "
                            f"with an injected failure (a `noisy` run) and no kept diagnosis ({dict(counts)})")
    train = [e for e in examples if not holdout_task(e["task_id"], holdout, seed)]
    held = [e for e in examples if holdout_task(e["task_id"], holdout, seed)]
    out.mkdir(parents=True, exist_ok=True)
    write_jsonl(out / "train.jsonl", train)
    write_jsonl(out / "holdout.jsonl", held)
    summary = {"runs": [str(r) for r in run_dirs], "holdout_fraction": holdout, "seed": seed,
               "train": len(train), "holdout": len(held),
               "train_tasks": len({e["task_id"] for e in train}), "holdout_tasks": len({e["task_id"] for e in held}),
               "by_source": dict(sorted(counts.items()))}
    write_json(out / "dataset.json", summary)
    return summary


def _run_env(run_dir: Path) -> str:
    try:
        return str(read_config(run_dir / "config.json").get("env", ""))
    except RunDirError:
        return ""


def read_split(dataset: str | Path, split: str) -> list[dict]:
    """The examples of one split (`train` or `holdout`) of a dataset folder."""
    path = Path(dataset) / f"{split}.jsonl"
    if not path.exists():
        raise TrainingError(f"{path}: no such split; write the dataset first (playground aed dataset RUN ... --out "
                            f"{dataset})")
    return read_jsonl_file(path)


# --- the model ------------------------------------------------------------------------------------------------

def _libraries() -> tuple[Any, Any, Any]:
    """torch, transformers and peft, or MissingExtra naming the install command."""
    try:
        import peft
        import torch
        import transformers
    except ImportError as exc:
        raise MissingExtra(f"AED training needs the 'train' extra ({exc.name} is not installed): "
                           f"{TRAIN_EXTRA_HINT}") from None
    return torch, transformers, peft


def model_source(model: str | None) -> tuple[str, str | None]:
    """(folder, gguf file name or None) of a model: a GGUF file, a Hugging Face model folder, or (None) the
    embedded SmolLM2 GGUF."""
    if model is None:
        from playground.host_api import default_gguf_path

        path = default_gguf_path()
    else:
        path = Path(model)
    if not path.exists():
        raise TrainingError(f"--model {model}: no such file or folder (a .gguf file or a Hugging Face model folder)")
    if path.is_file():
        return str(path.parent), path.name
    return str(path), None


def load_model(model: str | None, adapter: str | Path | None = None, threads: int = 2) -> tuple[Any, Any]:
    """(tokenizer, model) in float32 on the CPU, with the LoRA `adapter` folder applied when given."""
    torch, transformers, peft = _libraries()
    torch.set_num_threads(max(1, threads))
    folder, gguf = model_source(model)
    extra = {"gguf_file": gguf} if gguf else {}
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, **extra)
    network = transformers.AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32, **extra)
    if adapter is not None:
        network = peft.PeftModel.from_pretrained(network, str(adapter))
    network.eval()
    return tokenizer, network


def prompt_ids(tokenizer: Any, messages: list[dict]) -> list[int]:
    """The token ids of the chat prompt, the assistant's turn opened."""
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def training_ids(tokenizer: Any, example: dict) -> tuple[list[int], list[int]]:
    """(input ids, labels) of one example: the prompt masked out (-100), the answer and end of turn learned."""
    prompt = prompt_ids(tokenizer, example["messages"])
    answer = list(tokenizer(example["target"] + (tokenizer.eos_token or ""), add_special_tokens=False)["input_ids"])
    return prompt + answer, [-100] * len(prompt) + answer


def peak_rss_mb() -> float:
    """This process's peak resident memory so far, in MB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def train(dataset: str | Path, out: str | Path, *, model: str | None = None, steps: int = 200, lr: float = 2e-4,
          rank: int = 8, seed: int = 0, threads: int = 2, max_tokens: int = 1024,
          progress: Callable[[int, float], None] | None = None) -> dict:
    """Fine-tune `model` with LoRA on the dataset's training half for `steps` examples (cycling, shuffled by
    `seed`); save the adapter to OUT/adapter and OUT/train.json (time, peak memory, losses); return the record.
    Examples longer than `max_tokens` keep their last `max_tokens` tokens of prompt before the answer."""
    torch, _, peft = _libraries()
    examples = read_split(dataset, "train")
    if not examples:
        raise TrainingError(f"{dataset}: the training half is empty")
    if steps < 1:
        raise TrainingError(f"--steps must be at least 1, got {steps}")
    started = time.perf_counter()
    torch.manual_seed(seed)
    tokenizer, network = load_model(model, threads=threads)
    loaded = time.perf_counter() - started
    config = peft.LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0, task_type="CAUSAL_LM",
                             target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])
    network = peft.get_peft_model(network, config)
    network.train()
    optimizer = torch.optim.AdamW([p for p in network.parameters() if p.requires_grad], lr=lr)
    order = torch.randperm(len(examples), generator=torch.Generator().manual_seed(seed)).tolist()
    losses: list[float] = []
    for number in range(steps):
        ids, labels = training_ids(tokenizer, examples[order[number % len(examples)]])
        ids, labels = ids[-max_tokens:], labels[-max_tokens:]
        output = network(input_ids=torch.tensor([ids]), labels=torch.tensor([labels]))
        output.loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(round(float(output.loss.detach()), 4))
        if progress is not None:
            progress(number + 1, losses[-1])
    out = Path(out)
    network.save_pretrained(str(out / "adapter"))
    record = {"dataset": str(dataset), "model": model or "embedded SmolLM2-135M-Instruct (GGUF)", "steps": steps,
              "examples": len(examples), "lr": lr, "rank": rank, "seed": seed, "threads": threads,
              "max_tokens": max_tokens, "trainable_parameters": sum(p.numel() for p in network.parameters()
                                                                    if p.requires_grad),
              "load_seconds": round(loaded, 1), "train_seconds": round(time.perf_counter() - started - loaded, 1),
              "peak_rss_mb": round(peak_rss_mb()), "first_losses": losses[:10], "last_losses": losses[-10:],
              "adapter": str(out / "adapter")}
    write_json(out / "train.json", record)
    return record


# --- evaluation -----------------------------------------------------------------------------------------------

STEP = re.compile(r"\s*(-?\d+)")
CORRECTION = re.compile(r'"correction"\s*:\s*(null|"((?:[^"\\]|\\.)*)")')


def parse_answer(continuation: str) -> tuple[int | None, str | None]:
    """(step, correction) from the text the model wrote after `{"step": `; None where it wrote none."""
    step = STEP.match(continuation)
    found = CORRECTION.search(continuation)
    correction = None
    if found and found.group(1) != "null":
        try:
            correction = json.loads(f'"{found.group(2)}"')
        except ValueError:
            correction = found.group(2)
    return (int(step.group(1)) if step else None), correction


def evaluate(dataset: str | Path, *, model: str | None = None, adapter: str | Path | None = None,
             limit: int | None = None, threads: int = 2, max_new_tokens: int = 48,
             max_tokens: int = 1024, progress: Callable[[int, int], None] | None = None) -> dict:
    """Exact-step agreement and correction exact match of `model` (with `adapter`, if given) on the dataset's
    frozen holdout, beside the majority-step baseline of the training half; per-example predictions kept."""
    torch, _, _ = _libraries()
    held = read_split(dataset, "holdout")[:limit] if limit else read_split(dataset, "holdout")
    if not held:
        raise TrainingError(f"{dataset}: the holdout is empty")
    majority = Counter(e["label"]["step"] for e in read_split(dataset, "train")).most_common(1)
    majority_step = majority[0][0] if majority else 0
    started = time.perf_counter()
    tokenizer, network = load_model(model, adapter, threads)
    prefix = list(tokenizer(ANSWER_PREFIX, add_special_tokens=False)["input_ids"])
    predictions = []
    with torch.no_grad():
        for example in held:
            ids = (prompt_ids(tokenizer, example["messages"]) + prefix)[-max_tokens:]
            output = network.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                      max_new_tokens=max_new_tokens, do_sample=False,
                                      pad_token_id=tokenizer.eos_token_id)
            text = tokenizer.decode(output[0][len(ids):], skip_special_tokens=True)
            step, correction = parse_answer(text)
            predictions.append({"id": example["id"], "source": example["source"], "label": example["label"],
                                "step": step, "correction": correction, "text": text})
            if progress is not None:
                progress(len(predictions), len(held))
    def share(hits: Iterable[bool]) -> float:
        values = list(hits)
        return round(sum(values) / len(values), 4) if values else 0.0

    with_correction = [p for p in predictions if p["label"]["correction"] is not None]
    return {"dataset": str(dataset), "model": model or "embedded SmolLM2-135M-Instruct (GGUF)",
            "adapter": str(adapter) if adapter else None, "examples": len(predictions),
            "exact_step_agreement": share(p["step"] == p["label"]["step"] for p in predictions),
            "step_given": share(p["step"] is not None for p in predictions),
            "correction_exact_match": share(p["correction"] == p["label"]["correction"] for p in with_correction),
            "with_correction": len(with_correction),
            "majority_step_baseline": share(majority_step == p["label"]["step"] for p in predictions),
            "majority_step": majority_step,
            "by_source": {source: share(p["step"] == p["label"]["step"] for p in predictions
                                        if p["source"] == source)
                          for source in sorted({p["source"] for p in predictions})},
            "seconds": round(time.perf_counter() - started, 1), "peak_rss_mb": round(peak_rss_mb()),
            "predictions": predictions}
