"""AED's stages as a study's pipeline steps (`register_pipeline_steps`) and as its commands: `aed.diagnose` turns
the failed episodes of a run into checked error-diagnosis pairs, `aed.replay` plays each correction against a retry
of the original action from the same rebuilt state. `playground aed diagnose` and `aed replay` call the same
functions with the options as parameters, so a study and the commands do one thing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from playground.api import JudgeSettings, PlaygroundError
from playground.core.payloads import keep_text

if TYPE_CHECKING:
    from playground.host_api import Host


class StepError(PlaygroundError, ValueError):
    """AED's stage cannot run as asked: names what is wrong."""


class DiagnoseParams(JudgeSettings):
    """`aed.diagnose`: who diagnoses, and how many candidate corrections per pair."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    producer: Literal["rule", "llm"] | None = Field(
        default=None, description="rule or llm [default: llm when a model is named (judge_* or instrument_accuracy)]")
    instrument_accuracy: float | None = Field(
        default=None, ge=0.0, le=1.0, description="the failure-injection instrument answers as the diagnoser, right "
                                                  "with this probability, from the truth the run's `noisy` traces "
                                                  "recorded (instrument figures, not a model's); its grades go to "
                                                  "aed/instrument.json")
    api_key_env: str = Field(default="OPENAI_API_KEY", description="the environment variable holding the API key")
    proposals: int = Field(default=1, ge=1, description="candidate corrections per pair (distinct, each checked; the "
                                                        "first is the pair's correction): replay plays each and "
                                                        "keeps the one that replays best (search-selected)")


class ReplayParams(BaseModel):
    """`aed.replay`: the continuation policy, trials per arm, the seed and how many pairs."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent: str | None = Field(default=None, description="the continuation agent [default: the diagnosed episode's "
                                                        "own agent and options]; one that follows the expert plan "
                                                        "(expert, noisy) is an oracle continuation, labelled so")
    agent_options: dict[str, Any] = Field(default_factory=dict, description="options of `agent`")
    trials: int = Field(default=2, ge=1, description="trials per arm")
    seed: int = Field(default=0, description="seed of trial 0 (trial i: seed + i, both arms)")
    limit: int | None = Field(default=None, ge=1, description="only the first N pairs with a correction (in "
                                                              "diagnoses.jsonl order) [default: all]")


def diagnose(host: Host, run_dir: Path, params: DiagnoseParams) -> dict:
    """Diagnose RUN_DIR's failed episodes (RUN_DIR/aed/diagnoses.jsonl); return the counts. StepError for a model
    named twice or not at all, or an instrument asked of a run `noisy` did not play."""
    from playground.plugins.aed.diagnose import diagnose_run

    instrument = params.instrument_accuracy is not None
    named = [bool(params.judge_base_url or params.judge_model), params.judge_local, instrument]
    producer = params.producer or ("llm" if any(named) else "rule")
    if producer != "llm" and any(named):
        raise StepError("a diagnoser model (--judge-base-url/--judge-model, --judge-local or --instrument-accuracy) "
                        "needs --producer llm")
    if sum(named) > 1:
        raise StepError("the local model (--judge-local), the instrument (--instrument-accuracy) and an endpoint "
                        "(--judge-base-url/--judge-model) each name a model; two models given, give one")
    chat = None
    if instrument:
        chat = instrument_diagnoser(host, run_dir, float(params.instrument_accuracy or 0.0))
    elif producer == "llm":
        from playground.host_api import build_judge_model

        if not params.judge_local and (not params.judge_base_url or not params.judge_model):
            raise StepError("--producer llm needs an endpoint and a model name (--judge-base-url and "
                            "--judge-model), or the local model (--judge-local)")
        try:
            chat = build_judge_model(params.model_dump(), "aed diagnose", max_tokens=512, retries=4,
                                     api_key=os.environ.get(params.api_key_env) or None)
        except ValueError as exc:
            raise StepError(str(exc)) from None
    # the LLM producer's prompt shows no grade text the env prints (refused for an env no plugin loaded)
    remove_grade_text = host.grade_text_remover(str(run_config(run_dir).get("env", ""))) if producer == "llm" \
        else keep_text
    return diagnose_run(run_dir, producer, chat, remove_grade_text, params.proposals)


def instrument_diagnoser(host: Host, run_dir: Path, accuracy: float):
    """The failure-injection instrument as the diagnoser model (`instrument.GradedTraceJudge`): only for a run the
    `noisy` instrument played (its traces hold the truth), and not to resume a diagnosis begun at another
    accuracy."""
    from playground.plugins.aed.instrument import instrument_diagnoser as diagnoser

    agent = str(run_config(run_dir).get("agent", ""))
    if agent != "noisy":
        raise StepError(f"--llm-instrument answers from the failures the `noisy` instrument injected and recorded; "
                        f"{run_dir} was played by {agent or 'no agent'!r}")
    grades = run_dir / "aed" / "instrument.json"
    if (run_dir / "aed" / "diagnose.partial.json").is_file() and grades.is_file():
        before = json.loads(grades.read_text()).get("accuracy")
        if before != accuracy:
            raise StepError(f"{run_dir}: a diagnosis by the instrument at accuracy {before} was stopped part-way; "
                            f"resume it with --llm-instrument {before}, or diagnose a fresh copy of the run")
    return diagnoser(host, accuracy, grades)


def run_config(run_dir: Path) -> dict:
    """RUN_DIR's config.json; StepError where it cannot be read."""
    from playground.host_api import RunDirError, read_config

    try:
        return read_config(run_dir / "config.json")
    except RunDirError as exc:
        raise StepError(str(exc)) from None


def replay(host: Host, run_dir: Path, params: ReplayParams) -> dict:
    """Replay the kept pairs with a correction (RUN_DIR/aed/replays.jsonl); return the counts. StepError for
    options without an agent, or an agent no plugin registers."""
    from playground.plugins.aed.replay import replay_run

    if params.agent is None and params.agent_options:
        raise StepError("--agent-option needs --agent (without it, the diagnosed episode's own agent and options "
                        "continue)")
    if params.agent is not None and params.agent not in host.agents:
        raise StepError(f"unknown agent {params.agent!r}; choose from: {', '.join(host.agents.names())}")
    counts = replay_run(host, run_dir, agent=params.agent,
                        agent_options=dict(params.agent_options) if params.agent else None, trials=params.trials,
                        seed=params.seed, limit=params.limit)
    if counts["oracle_continuation"]:
        counts["note"] = (f"{counts['oracle_continuation']} pair(s) replayed under an oracle continuation (an agent "
                          "that follows the env's expert plan): their grades say what the correction does with an "
                          "expert finishing the task, not what the policy would do")
    return counts
