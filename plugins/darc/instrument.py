"""How the failure-injection instrument answers DARC's diagnoser role (`register_instrument_judges`).

DARC's LLM diagnoser (`llm_diagnosis.py`, role `darc.diagnoser`) asks, for each failed profiling episode, which
candidate failure mode explains the failure. The answerer below reads that request (the schema's candidate modes)
and the instrument's state for the episode (its steps, with the failures the `noisy` agent injected), and returns
the answer key (`JudgeAnswer`). It runs on the instrument's side only: the diagnoser's code never sees the state.

The truth for one episode is the failure mode its injected failures count towards: each injected step's
`failure_type` maps to its mode through the label registry (`mode_of`), and the mode of the most injected steps
wins, a tie going to the mode injected latest. A right judge names that mode when it is one of the candidates,
else "none" (no injected failure, or a mode DARC is not choosing among); a mistake names another candidate or
"none", drawn with the request's rng. A reply is right when it names the right mode.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from playground.core.instrument import InstrumentState, JudgeAnswer, JudgeRequest
from playground.core.labels import LabelRegistry
from playground.host_api import default_labels

NONE = "none"  # the reply naming no mode


def injected_mode(state: InstrumentState, labels: LabelRegistry | None = None) -> str | None:
    """The failure mode of the most injected steps of the episode (ties: the one injected latest), or None when
    the instrument injected no failure. Each step counts once (its last proposal, as played)."""
    labels = labels or default_labels()
    counts: Counter[str] = Counter()
    latest: dict[str, int] = {}
    for record in state.steps:
        if not record.injected or not record.injected.get("failure_type"):
            continue
        mode = labels.mode_of(str(record.injected["failure_type"]))
        counts[mode] += 1
        latest[mode] = record.step
    if not counts:
        return None
    return max(counts, key=lambda mode: (counts[mode], latest[mode]))


def _choices(schema: Mapping[str, Any]) -> list[str]:
    """The replies the diagnoser's schema allows for `mode`: the candidate modes and "none"."""
    return list(schema["properties"]["mode"]["enum"])


def answer_diagnosis(request: JudgeRequest) -> JudgeAnswer:
    """DARC's diagnoser: which candidate mode explains this failed episode? The mode of its injected failures."""
    choices = _choices(request.schema)
    mode = injected_mode(request.state)
    right = mode if mode is not None and mode in choices and mode != NONE else NONE
    others = [choice for choice in choices if choice != right] or [right]
    wrong = request.rng.choice(others)

    def reply(named: str) -> dict[str, str]:
        why = ("no failure mode among the candidates explains it" if named == NONE
               else f"most failing steps show {named.replace('_', ' ')}")
        return {"mode": named, "why": why}

    return JudgeAnswer(reply(right), reply(wrong), {"mode": right, "injected_mode": mode},
                       lambda answer: answer["mode"] == right)
