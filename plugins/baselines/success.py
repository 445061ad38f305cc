"""How a memory baseline decides whether an episode succeeded (AWM's and ReasoningBank's `*_success`).

- `observed`: a completion message in the last observations (`Trajectory.completed`), the
  rule-based stand-in for the papers' LLM judge;
- `judge`: the judge model reads the trajectory and says (the papers' LLM-as-a-judge; an
  unusable reply falls back to `observed`);
- `env`: the env's success signal (`EpisodeEnd.won`), as the papers' offline settings use
  ground truth;
- `auto` (the default): `judge` when a judge model is configured, else `observed`.
"""

from __future__ import annotations

from playground import EpisodeEnd
from playground.plugins.baselines.judge import Judge, object_schema, string_schema
from playground.plugins.baselines.trajectory import Trajectory

MODES = ("auto", "observed", "judge", "env")
SYSTEM = ("You judge whether an agent completed its task, from its goal and its trajectory (actions and what it "
          'observed). Answer with one JSON object: {"success": true|false, "reason": "a short quote"}.')
SCHEMA = object_schema({"success": {"type": "boolean"}, "reason": string_schema(160)})


def succeeded(mode: str, judge: Judge, trajectory: Trajectory, end: EpisodeEnd) -> tuple[bool, str]:
    """Whether the episode succeeded by `mode`, and which check said so ("observed", "judge" or "env")."""
    if mode == "env":
        return end.won, "env"
    if mode in ("judge", "auto") and judge.configured:
        answer = judge.ask(f"{judge.baseline}.success_judge", SYSTEM,
                           f"Goal: {trajectory.goal}\nTrajectory ({trajectory.summary()}):\n{trajectory.text()}",
                           SCHEMA)
        if answer is not None:
            return answer["success"], "judge"
    return trajectory.completed, "observed"
