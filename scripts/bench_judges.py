"""The usable-reply rate of each LLM judge role with the embedded SmolLM2-135M, in-process and through llama.cpp's
own OpenAI-compatible server.

Realistic inputs: the `noisy` agent plays `textworld:easy` under `base` (failures injected, nothing repaired)
through the real runner; Sentry's rules are replayed offline over its traces from the blind view
(`replayed_steps`), and the roles are asked about what that gives:

- `sentry.detector`: each step the judge would be asked about (no validity failure), its window and proposal;
- `sentry.need_check`: each step where a rule detected a progress or grounding failure, with that detection;
- `sentry.verifier`: a repair watched from each such step, with the outcomes of the steps after it;
- `sentry.summariser`: a lesson from each such repair;
- `darc.diagnoser`: each episode's trace cut after 3, 4, ... steps, asked for its failure mode;
- `aed.diagnoser`: the same cuts written as traces, asked for an error-diagnosis record.

Each role is asked `--calls` times (its inputs in turn, from the start again if there are fewer) on two paths,
side by side: `LocalChatModel` in-process (decoding under the schema's grammar: mode `grammar`), and
`python -m llama_cpp.server` started on a free port with the same GGUF (`HTTPChatModel`: json_schema, refused
there, falls back to json_object with the schema); `--paths prompt` adds the in-process model without any
constraint (mode `prompt`: the schema stated in the prompt only). A reply counts as usable when it is one JSON
object valid under the role's schema, exactly as `judge_replies` counts it in a run. Needs the `local` and
`server` extras.

    python scripts/bench_judges.py [--calls 100] [--episodes 60] [--paths local,server[,prompt]]
        [--roles sentry.detector,...] [--out FILE.json] [--run-dir DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from playground.agents.http_model import HTTPChatModel
from playground.agents.judge_calls import judge_calls_reported
from playground.agents.local_model import LocalChatModel, default_gguf_path
from playground.core.events import EndEvent, JudgeCallEvent, StepEvent, to_record
from playground.core.payloads import Proposal
from playground.host.manager import Host
from playground.plugins.aed.diagnose import llm_diagnoses
from playground.plugins.darc.llm_diagnosis import LLMDiagnoser
from playground.plugins.sentry.blind import BlindOutcome, BlindView, blind_view
from playground.plugins.sentry.detectors import make_window, named_detections
from playground.plugins.sentry.judges import LLMDetector, LLMNeedCheck, LLMSummariser, LLMVerifier
from playground.plugins.sentry.verifier import Verdict, Watch
from playground.run.config import RunConfig
from playground.run.forks import EpisodeTrace, load_episode, replay_contexts
from playground.run.rundir import load_records, record_trace
from playground.run.runner import run
from playground.run.traces import read_events
from playground.run.validation import resolve_tasks

ROLES = ("sentry.detector", "sentry.need_check", "sentry.verifier", "sentry.summariser", "darc.diagnoser",
         "aed.diagnoser")
WINDOW = 5
NOISY = {"repeat": 0.15, "stall": 0.15, "drift": 0.1, "stop": 0.05, "invalid": 0.05}
Call = Callable[[Any], Any]  # one judge call with the model it is given


def play(host: Host, episodes: int, max_steps: int, out: Path) -> None:
    """The noisy agent on `episodes` test games of textworld:easy under `base`, into `out` (resumable)."""
    task_set, split, tasks = resolve_tasks(host, "textworld", "easy", None, episodes)
    run(host, RunConfig(env="textworld", task_set=task_set, split=split, tasks=tasks, agent="noisy",
                        agent_options=dict(NOISY), harnesses=["base"], out=str(out), max_steps=max_steps))


@dataclass
class ReplayedStep:
    """One step as Sentry's detectors receive it: the blind view and the proposal's thought, action and finish."""

    step: int
    view: BlindView
    proposal: Proposal
    first_observation: str
    invalid: bool  # the validity rule fired (then Sentry asks no judge)


def base_episodes(run_dir: Path) -> list[EpisodeTrace]:
    """The finished `base` episodes of the run."""
    return [load_episode(record_trace(run_dir, r)) for r in load_records(run_dir)
            if r.harness == "base" and r.status != "error"]


def replayed_steps(host: Host, episode: EpisodeTrace) -> list[ReplayedStep]:
    """The episode's steps replayed from reset (observations through the env's `remove_grade_text`, as Sentry reads
    them live), each first proposal without its injection."""
    remove_grade_text = host.grade_text_remover(episode.header.env)
    first = remove_grade_text(episode.reset.observation)
    steps = []
    path = [*episode.steps, *([episode.tail] if episode.tail is not None else [])]
    for recorded, context in zip(path, replay_contexts(host, episode)):
        if not recorded.proposals:
            continue
        event = recorded.proposals[0]
        proposal = Proposal(event.thought, event.action, event.finish)
        view = blind_view(context, remove_grade_text=remove_grade_text)
        found = named_detections(view, proposal, WINDOW, first_observation=first)
        steps.append(ReplayedStep(recorded.step, view, proposal, first,
                                  any(d.failure_type == "action_validity" for _, d in found)))
    return steps


def sentry_inputs(host: Host, episodes: list[EpisodeTrace]) -> dict[str, list[Call]]:
    """The Sentry roles' calls, from Sentry's rules replayed over the episodes."""
    calls: dict[str, list[Call]] = {role: [] for role in ROLES[:4]}
    for episode in episodes:
        steps = replayed_steps(host, episode)
        for index, step in enumerate(steps):
            if step.invalid:
                continue
            window = make_window(step.view, WINDOW, step.first_observation)
            calls["sentry.detector"].append(
                lambda model, s=step, w=window: LLMDetector(model).detect(s.view, s.proposal, w))
            found = [d for _, d in named_detections(step.view, step.proposal, WINDOW,
                                                    first_observation=step.first_observation)
                     if d.failure_type in ("progress", "grounding")]
            if not found:
                continue
            detection = found[0]
            calls["sentry.need_check"].append(
                lambda model, s=step, d=detection, w=window: LLMNeedCheck(model).decide(s.view, d, s.proposal, w))
            after = steps[index + 1: index + 1 + WINDOW]
            outcomes = [_outcome(s, nxt) for s, nxt in zip([step, *after], after)]
            watch = Watch(step.step, detection, (), failing_action=step.proposal.action or "(stop)",
                          progress_action=next((s.proposal.action for s in after
                                                if s.proposal.action and s.proposal.action != step.proposal.action),
                                               None))
            calls["sentry.verifier"].append(lambda model, o=outcomes, wt=watch: _verify(model, o, wt))
            calls["sentry.summariser"].append(
                lambda model, wt=watch: LLMSummariser(model).summarise(
                    Verdict(wt, True, "rules: the failure stopped and progress resumed"), wt.failing_action or ""))
    return calls


def _outcome(step: ReplayedStep, following: ReplayedStep) -> BlindOutcome:
    """The outcome of `step`, as the next step's view shows it."""
    return BlindOutcome(step.view, step.proposal.thought, step.proposal.action, step.proposal.finish,
                        following.view.observation, True, following.view.admissible_actions)


def _verify(model: Any, outcomes: list[BlindOutcome], watch: Watch) -> Verdict:
    verifier = LLMVerifier(model)
    verifier.outcomes = list(outcomes)
    return verifier._ask(Verdict(watch, True, "rules"))


def diagnoser_inputs(host: Host, run_dir: Path, episodes: list[EpisodeTrace], scratch: Path) -> dict[str, list[Call]]:
    """DARC's and AED's calls: each episode's trace cut after 3, 4, ... steps."""
    modes = sorted({host.labels.mode_of(t) for t in host.labels.types()})
    calls: dict[str, list[Call]] = {"darc.diagnoser": [], "aed.diagnoser": []}
    for number, episode in enumerate(episodes):
        events = read_events(Path(episode.path))
        positions = [i for i, e in enumerate(events) if isinstance(e, StepEvent)]
        for cut in range(3, len(positions) + 1):
            kept = [e for e in events[: positions[cut - 1] + 1] if not isinstance(e, EndEvent)]
            kept.append(EndEvent(status="truncated", won=False, steps=cut))
            calls["darc.diagnoser"].append(
                lambda model, ev=kept: LLMDiagnoser(model, host.labels).diagnose_episode(modes, ev))
            path = scratch / f"{number}-{cut}.jsonl"
            path.write_text("".join(json.dumps(to_record(e)) + "\n" for e in kept), encoding="utf-8")
            calls["aed.diagnoser"].append(
                lambda model, p=path: llm_diagnoses(load_episode(p), p.name, model))
    return calls


def measure(model: Any, inputs: dict[str, list[Call]], roles: list[str], n: int, label: str) -> dict[str, dict]:
    """Ask each role `n` times; per role: calls, usable replies, modes, seconds (from the judge_call events)."""
    results = {}
    for role in roles:
        events: list[JudgeCallEvent] = []
        started = time.perf_counter()
        available = inputs.get(role) or []
        with judge_calls_reported(events.append):
            for i in range(n if available else 0):
                available[i % len(available)](model)
        mine = [e for e in events if e.role == role]
        usable = sum(1 for e in mine if e.usable)
        results[role] = {"calls": len(mine), "usable": usable, "rate": usable / len(mine) if mine else None,
                         "modes": dict(Counter(e.mode for e in mine)), "inputs": len(available),
                         "seconds": round(time.perf_counter() - started, 1),
                         "completion_tokens": sum(e.completion_tokens for e in mine)}
        print(f"{label} {role}: {usable}/{len(mine)} usable in {results[role]['seconds']:.0f} s", file=sys.stderr)
    return results


class PromptOnly:
    """The in-process model asked without any constraint (mode `prompt`: the schema is in the prompt only), as a
    server without `response_format` would be, and as every role was asked before the schemas."""

    reply_format = "prompt"

    def __init__(self, model: LocalChatModel) -> None:
        self.model = model

    def complete(self, messages: list[dict], *, json_schema: dict | None = None, **options: Any) -> Any:
        return self.model.complete(messages, **options)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LlamaServer:
    """`python -m llama_cpp.server` with the SmolLM2 GGUF on 127.0.0.1, started and stopped by this script."""

    def __init__(self, gguf: Path, threads: int, log: Path) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.log = open(log, "w")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1",
             "--port", str(self.port), "--n_ctx", "8192", "--n_threads", str(threads), "--n_threads_batch",
             str(threads), "--model_alias", "smollm2"], stdout=self.log, stderr=subprocess.STDOUT)

    def __enter__(self) -> "LlamaServer":
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with {self.process.returncode}; see {self.log.name}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/models", timeout=5):
                    return self
            except OSError:
                time.sleep(1)
        raise RuntimeError(f"llama_cpp.server did not answer within 180 s; see {self.log.name}")

    def __exit__(self, *exc) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()


def table(results: dict[str, dict[str, dict]], roles: list[str]) -> str:
    paths = list(results)
    head = ["role"] + [f"{p} {c}" for p in paths for c in ("calls", "usable", "rate", "mode")]
    rows = [head]
    for role in roles:
        row = [role]
        for path in paths:
            r = results[path].get(role) or {}
            modes = "+".join(sorted(r.get("modes") or {})) or "-"
            rate = "-" if r.get("rate") is None else f"{r['rate']:.0%}"
            row += [str(r.get("calls", 0)), str(r.get("usable", 0)), rate, modes]
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    lines = ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths)))
             for row in rows]
    return "\n".join([lines[0], "  ".join("-" * w for w in widths), *lines[1:]])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100, help="calls per role and path")
    parser.add_argument("--episodes", type=int, default=60, help="textworld:easy games the noisy agent plays")
    parser.add_argument("--max-steps", type=int, default=15)
    parser.add_argument("--paths", default="local,server",
                        help="comma-separated: local (in-process, grammar), server (llama.cpp's server), prompt "
                             "(in-process without a constraint: the schema in the prompt only)")
    parser.add_argument("--roles", default=",".join(ROLES), help="comma-separated roles")
    parser.add_argument("--threads", type=int, default=1,
                        help="CPU threads of each path's model (1: the two paths run side by side, and llama.cpp's "
                             "threads spin-wait badly on busy cores)")
    parser.add_argument("--run-dir", default=None, help="folder for the noisy run (kept; a rerun resumes it)")
    parser.add_argument("--out", default=None, help="also write the results as JSON to this file")
    args = parser.parse_args()
    roles = [r.strip() for r in args.roles.split(",") if r.strip()]
    paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    if args.calls < 1 or not set(roles) <= set(ROLES) or not set(paths) <= {"local", "server", "prompt"}:
        print(f"error: --calls must be at least 1, --roles among {', '.join(ROLES)}, --paths among local, server, "
              "prompt", file=sys.stderr)
        return 2

    host = Host(strict=True).load()
    run_dir = Path(args.run_dir or tempfile.mkdtemp(prefix="bench-judges-"))
    started = time.perf_counter()
    play(host, args.episodes, args.max_steps, run_dir)
    episodes = base_episodes(run_dir)
    scratch = Path(tempfile.mkdtemp(prefix="bench-judges-cuts-"))
    inputs = {**sentry_inputs(host, episodes), **diagnoser_inputs(host, run_dir, episodes, scratch)}
    print(f"{len(episodes)} episodes played and replayed in {time.perf_counter() - started:.0f} s ({run_dir}); "
          "inputs: " + ", ".join(f"{r} {len(inputs[r])}" for r in roles), file=sys.stderr)

    results: dict[str, dict[str, dict]] = {}
    formats: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:
        models: dict[str, Any] = {}
        if "local" in paths:
            models["local"] = LocalChatModel(max_tokens=200, threads=args.threads)
        if "prompt" in paths:
            models["prompt"] = PromptOnly(LocalChatModel(max_tokens=200, threads=args.threads))
        if "server" in paths:
            server = stack.enter_context(LlamaServer(default_gguf_path(), args.threads,
                                                     scratch / "llama_cpp.server.log"))
            models["server"] = HTTPChatModel(server.base_url, "smollm2", max_tokens=200, timeout=600, retries=1)
        # the two paths side by side, each in its own thread (llama.cpp releases the GIL while it computes)
        with ThreadPoolExecutor(max_workers=len(models)) as pool:
            futures = {path: pool.submit(measure, model, inputs, roles, args.calls, path)
                       for path, model in models.items()}
            results = {path: future.result() for path, future in futures.items()}
        if "server" in models:
            formats = {"reply_format": models["server"].reply_format,
                       "json_object_schema": models["server"].json_object_schema}
    print(table(results, roles))
    if args.out:
        report = {"calls_per_role": args.calls, "episodes": len(episodes), "env": "textworld:easy",
                  "agent": {"noisy": NOISY}, "model": default_gguf_path().name, "threads": args.threads,
                  "seconds": round(time.perf_counter() - started, 1), "results": results,
                  **({"server_reply_format": formats} if "server" in paths else {})}
        Path(args.out).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
