"""MIPROv2 and GEPA on the agent's prompt, with DSPy's own optimisers (extra `prompt-opt`).

The DSPy program is one predictor, `goal, question -> answer`, whose prompt is the LLM
agent's own first-step prompt (`playground.agents.llm.render_prompt`): the agent's system
prompt, the goal, the question as the observation, and one standing note made of the
predictor's instructions and demos (`prompt_opt.render_note`); the reply is read as the
agent reads it (`parse_reply`: the `Action:` line is the answer). So what the optimisers
change (the instructions, and for MIPROv2 the few-shot demos) is exactly the note that
`--harness prompt-opt:PROMPT.json` shows the agent later. The metric is the env's own
scorer: the answer is played in a fresh env on the same task (`score / max_score`, else
`won`); GEPA's feedback adds the env's reply, whether the answer was well-formed and the
expected answer. Only the split named (dev) is graded; test splits are refused.

The env must end an episode after one answer (Finance); a task that does not is an error.
DSPy is imported only when an optimisation runs.
"""

from __future__ import annotations

import importlib
import os
import time
from dataclasses import asdict, dataclass
from typing import Any, Callable

from playground import PlaygroundError
from playground.core.payloads import AgentView
from playground.host_api import parse_reply, redact_url, render_prompt
from playground.plugins.baselines.prompt_opt import FORMAT, render_note

OPTIMIZERS = ("miprov2", "gepa")
SEED_INSTRUCTIONS = "Read the goal and the question, then give the answer exactly as the goal asks."


class PromptSearchError(PlaygroundError):
    """An optimisation that cannot run (a multi-step env, a test split, no tasks); the message says why."""


@dataclass(frozen=True)
class Budget:
    """The optimisers' budgets, explicit and small by default."""

    trials: int = 4         # MIPROv2: Bayesian-search trials over (instruction, demo set) pairs
    candidates: int = 3     # MIPROv2: instruction candidates and demo-set candidates
    demos: int = 2          # MIPROv2: at most this many bootstrapped and this many labelled demos
    metric_calls: int = 30  # GEPA: its whole budget, in metric calls (rollouts)
    threads: int = 1        # the optimisers' evaluation threads
    lean_proposer: bool = False  # MIPROv2: propose without its dataset and program summaries (two long LM calls)
    raw_proposals: bool = False  # a proposer's or reflector's reply DSPy cannot parse is taken whole as the instruction


@dataclass(frozen=True)
class DevTask:
    """One task of the optimisation split: what the agent sees first, and the env's expert answer."""

    task_id: str
    goal: str
    question: str
    gold: str


class Grader:
    """The env's own scorer: play one answer on a task in a fresh env and read the score."""

    def __init__(self, provider, task_set: str) -> None:
        self.provider, self.task_set = provider, task_set

    def grade(self, task: DevTask, answer: str) -> tuple[float, str]:
        """Return (score in [0, 1], feedback text) for `answer` on `task`."""
        env = self.provider.make(self.task_set)
        try:
            env.reset(seed=0, options={"task": task.task_id})
            observation, _, terminated, truncated, info = env.step(answer)
        finally:
            env.close()
        if not (terminated or truncated):
            raise PromptSearchError(f"task {task.task_id!r} did not end after one answer: prompt optimisation here "
                                    "takes one-step envs only (Finance)")
        max_score = float(info.get("max_score") or 0)
        score = float(info.get("score", 0)) / max_score if max_score else float(bool(info.get("won")))
        well_formed = "yes" if info.get("valid_action", True) else "no"
        feedback = (f"The environment replied: {observation} Well-formed answer: {well_formed}. "
                    f"The expected answer: {task.gold}.")
        return score, feedback


def load_tasks(provider, task_set: str, task_ids: list[str]) -> list[DevTask]:
    """Reset an env with its expert on each task and keep the goal, the question and the expert's answer."""
    env = provider.make(task_set, expert=True)
    tasks = []
    try:
        for task_id in task_ids:
            observation, info = env.reset(seed=0, options={"task": task_id})
            plan = info.get("expert_plan") or [""]
            tasks.append(DevTask(task_id, str(info.get("goal", "")), str(observation), str(plan[0])))
    finally:
        env.close()
    return tasks


def _dspy():
    """Import DSPy (extra `prompt-opt`), with litellm kept off the network and DSPy's disk cache off."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        dspy = importlib.import_module("dspy")  # untyped: imported by name, so type checks pass without it too
    except ImportError as exc:
        raise PromptSearchError(f"MIPROv2 and GEPA need DSPy: pip install -e '.[prompt-opt]' ({exc})") from None
    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=True)
    return dspy


def make_lm(dspy, base_url: str, model: str, api_key_env: str = "OPENAI_API_KEY", max_tokens: int = 256):
    """A DSPy LM on an OpenAI-compatible endpoint, with the agent's defaults (temperature 0, seed 0).

    litellm's provider for a generic OpenAI-compatible server (`hosted_vllm/`) sends the cap as `max_tokens`, as the
    agent's own client does; its `openai/` provider sends `max_completion_tokens`, which llama.cpp's server ignores,
    so a reply that never stops ran to the end of the context (minutes per call with SmolLM2)."""
    return dspy.LM(f"hosted_vllm/{model}", api_base=base_url, api_key=os.environ.get(api_key_env) or "not-needed",
                   temperature=0.0, max_tokens=max_tokens, seed=0, num_retries=3)


def answers(base_url: str, model: str, api_key_env: str, role: str) -> None:
    """Whether the endpoint answers, before the optimiser starts: PromptSearchError naming it when it cannot be
    reached or refuses the model (the optimisers would log each failed example and go on for minutes, then stop
    with a traceback)."""
    from playground.host_api import LLMError, endpoint_answers

    try:
        endpoint_answers(base_url, model, os.environ.get(api_key_env) or None)
    except LLMError as exc:
        raise PromptSearchError(f"{role} endpoint does not answer ({exc}); start it or check its URL and model "
                                "name") from None


def raw_reply_adapter(dspy, base):
    """DSPy's adapter `base`, except that a reply it cannot parse for a one-field signature (MIPROv2's instruction
    proposal and summaries with the chat adapter, GEPA's reflection with the JSON adapter) is taken whole as that
    field; `taken` counts those replies. A deviation from both optimisers (`--setting raw_proposals=true`), for a
    model that answers in prose instead of DSPy's reply formats; the prompts are unchanged."""

    class RawReplyAdapter(base):
        taken = 0

        def parse(self, signature, completion):
            try:
                return super().parse(signature, completion)
            except dspy.utils.exceptions.AdapterParseError:
                if len(signature.output_fields) != 1 or not completion.strip():
                    raise
                self.taken += 1
                return {next(iter(signature.output_fields)): completion.strip()}

    return RawReplyAdapter()


def build_program(dspy, max_obs_chars: int = 800):
    """The DSPy program: one predictor whose prompt is the agent's first-step prompt (see module docstring)."""

    class AgentPromptAdapter(dspy.Adapter):
        """Formats a call as the LLM agent's prompt, with the instructions and demos as its standing note."""

        def format(self, signature, demos, inputs):
            pairs = [{"question": str(d.get("question", "")), "answer": str(d.get("answer", ""))}
                     for d in demos if d.get("question") is not None and d.get("answer") is not None]
            note = render_note(signature.instructions, pairs)
            view = AgentView(str(inputs["goal"]), str(inputs["question"]), (), None, 0, notes=(note,) if note else ())
            return render_prompt(view, window=5, max_chars=max_obs_chars)

        def parse(self, signature, completion):
            parsed = parse_reply(completion, None)
            answer = parsed[1] if parsed else (completion.strip().splitlines() or [""])[0][:200]
            return {"answer": answer}

    class AgentPrompt(dspy.Module):
        """The agent answering one question under an optimisable note."""

        def __init__(self) -> None:
            super().__init__()
            self.adapter = AgentPromptAdapter()
            self.answer = dspy.Predict(dspy.Signature("goal, question -> answer", SEED_INSTRUCTIONS))

        def forward(self, goal, question):
            with dspy.context(adapter=self.adapter):
                return self.answer(goal=goal, question=question)

    return AgentPrompt()


def mean_score(program, tasks: list[DevTask], grader: Grader) -> float:
    """The program's mean score over `tasks` (its LM calls are cached, so a repeat costs nothing)."""
    if not tasks:
        return 0.0
    return sum(grader.grade(t, str(program(goal=t.goal, question=t.question).answer))[0] for t in tasks) / len(tasks)


def optimise(optimizer: str, train: list[DevTask], val: list[DevTask], grader: Grader, *, base_url: str, model: str,
             reflection_base_url: str = "", reflection_model: str = "", api_key_env: str = "OPENAI_API_KEY",
             budget: Budget = Budget(), seed: int = 0, max_obs_chars: int = 800, max_tokens: int = 256,
             progress: Callable[[str], None] = lambda message: None) -> dict[str, Any]:
    """Run MIPROv2 or GEPA on the agent's prompt; return the prompt file's object (instructions, demos, record)."""
    if optimizer not in OPTIMIZERS:
        raise PromptSearchError(f"unknown optimiser {optimizer!r}; choose from: {', '.join(OPTIMIZERS)}")
    if not train or not val:
        raise PromptSearchError("prompt optimisation needs at least one train and one val task")
    endpoints = {(base_url, model): "the agent's"}
    endpoints.setdefault((reflection_base_url or base_url, reflection_model or model), "the proposer's")
    for (url, name), role in endpoints.items():
        answers(url, name, api_key_env, role)
    dspy = _dspy()
    lm = make_lm(dspy, base_url, model, api_key_env, max_tokens)
    proposer = make_lm(dspy, reflection_base_url or base_url, reflection_model or model, api_key_env, max_tokens)
    by_id = {t.task_id: t for t in train + val}

    def example(task: DevTask):
        return dspy.Example(goal=task.goal, question=task.question, answer=task.gold,
                            task_id=task.task_id).with_inputs("goal", "question")

    trainset, valset = [example(t) for t in train], [example(t) for t in val]
    program = build_program(dspy, max_obs_chars)
    started = time.monotonic()
    # MIPROv2's proposer uses the default (chat) adapter: the program sets its own, so this one reaches only the
    # proposer; GEPA's reflector (DSPy's InstructionProposer) takes its adapter, JSON by default, as an argument
    raw = (raw_reply_adapter(dspy, dspy.ChatAdapter if optimizer == "miprov2" else dspy.JSONAdapter)
           if budget.raw_proposals else None)
    with dspy.context(lm=lm, adapter=raw if optimizer == "miprov2" else None):
        if optimizer == "miprov2":
            def score_metric(gold, pred, trace=None):
                return grader.grade(by_id[gold.task_id], str(pred.answer))[0]

            tuner = dspy.MIPROv2(metric=score_metric, prompt_model=proposer, task_model=lm, auto=None,
                                 num_candidates=budget.candidates, max_bootstrapped_demos=budget.demos,
                                 max_labeled_demos=budget.demos, num_threads=budget.threads, seed=seed,
                                 verbose=False, track_stats=False)
            progress(f"MIPROv2: {budget.candidates} candidates, {budget.trials} trials, "
                     f"{len(trainset)} train and {len(valset)} val tasks")
            try:
                best = tuner.compile(program, trainset=trainset, valset=valset, num_trials=budget.trials,
                                     minibatch=False, seed=seed, data_aware_proposer=not budget.lean_proposer,
                                     program_aware_proposer=not budget.lean_proposer)
            except dspy.utils.exceptions.AdapterParseError as exc:
                # MIPROv2 does not catch a proposer reply it cannot parse (GEPA skips such a reflection)
                raise PromptSearchError(f"MIPROv2's proposer ({reflection_model or model}) gave a reply DSPy cannot "
                                        f"parse ({str(exc).splitlines()[0]}); name a stronger proposer with "
                                        "--setting reflection_base_url=URL --setting reflection_model=NAME, or take "
                                        "its replies whole with --setting raw_proposals=true (a deviation)") from None
        else:
            InstructionProposer = importlib.import_module("dspy.teleprompt.gepa").InstructionProposer  # noqa: N806

            def feedback_metric(gold, pred, trace=None, pred_name=None, pred_trace=None):
                score, feedback = grader.grade(by_id[gold.task_id], str(pred.answer))
                return dspy.Prediction(score=score, feedback=feedback)

            tuner = dspy.GEPA(metric=feedback_metric, max_metric_calls=budget.metric_calls, reflection_lm=proposer,
                              reflection_minibatch_size=min(3, len(trainset)), num_threads=budget.threads,
                              seed=seed, use_merge=False, track_stats=False,
                              instruction_proposer=InstructionProposer(adapter=raw) if raw else None)
            progress(f"GEPA: {budget.metric_calls} metric calls, {len(trainset)} train and {len(valset)} val tasks")
            best = tuner.compile(program, trainset=trainset, valset=valset)
        seconds = time.monotonic() - started
        before, after = mean_score(program, val, grader), mean_score(best, val, grader)
    predictor = best.answer
    demos = [{"question": str(d.get("question")), "answer": str(d.get("answer"))} for d in predictor.demos
             if d.get("question") is not None and d.get("answer") is not None]
    return {"format": FORMAT, "optimizer": optimizer, "instructions": predictor.signature.instructions,
            "demos": demos, "seed_instructions": SEED_INSTRUCTIONS,
            "dev_score": {"seed": round(before, 4), "optimised": round(after, 4), "val_tasks": len(val)},
            "train_tasks": [t.task_id for t in train], "val_tasks": [t.task_id for t in val],
            "model": model, "base_url": redact_url(base_url),
            "reflection_model": reflection_model or model,
            "reflection_base_url": redact_url(reflection_base_url or base_url),
            "budget": asdict(budget), "seed": seed, "max_obs_chars": max_obs_chars, "max_tokens": max_tokens,
            "lm_calls": len(lm.history), "proposer_calls": len(proposer.history),
            "raw_proposals_taken": raw.taken if raw else 0,
            "seconds": round(seconds, 1), "dspy": getattr(dspy, "__version__", "")}
