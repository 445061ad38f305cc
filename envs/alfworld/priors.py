"""The guard's train priors: estimated once from expert plans of generated train games, cached on disk.

For each of the first N generated `train` games, the expert's recorded steps (commands
and the observations they brought) are replayed through the guard's own `Track`, and
two things are counted: the receptacle kind each target was taken from, and the
expert's verb in each phase of each task type. The counts are written to
`<generated root>/priors-<N>.json` (atomically) and read from there afterwards.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from playground.envs.alfworld.goals import kind_of, parse_goal
from playground.envs.alfworld.guard import Priors, Track, parse_command, phase_of

PRIOR_GAMES = 30
PRIORS_VERSION = 1


def priors_path(games: int) -> Path:
    """Return where the priors from `games` train games are cached."""
    from playground.envs.alfworld.generate import generated_root

    return generated_root() / f"priors-{games}.json"


def estimate(trajectories: list[dict]) -> Priors:
    """Count target locations and verbs by phase over expert trajectories.

    Each trajectory is `{"goal": str, "steps": [[command, observation], ...]}`.
    """
    found_in: dict[str, dict[str, int]] = {}
    verbs: dict[str, dict[str, dict[str, int]]] = {}
    for trajectory in trajectories:
        goal = parse_goal(trajectory["goal"])
        track = Track()
        for command, observation in trajectory["steps"]:
            c = parse_command(command)
            here = [o for o, r in track.seen.items() if r == track.location and kind_of(o) == goal.target
                    and o not in track.placed]
            phase = phase_of(goal, track, here)
            by_phase = verbs.setdefault(goal.task_type, {}).setdefault(phase, {})
            by_phase[c.verb] = by_phase.get(c.verb, 0) + 1
            if c.verb == "take" and kind_of(c.obj) == goal.target:
                counts = found_in.setdefault(goal.target, {})
                counts[kind_of(c.recep)] = counts.get(kind_of(c.recep), 0) + 1
            if c.verb == "go" and goal.is_look and track.holding:
                lamps = found_in.setdefault(goal.destination, {})
                lamps[kind_of(c.recep)] = lamps.get(kind_of(c.recep), 0) + 1
            track.update(goal, command, observation)
    return Priors(found_in, verbs, len(trajectories))


def train_trajectories(games: int) -> list[dict]:
    """Return the expert trajectories of the first `games` generated train games (generating them if needed)."""
    from playground.envs.alfworld.data import LAYOUT_DIR, read_traj
    from playground.envs.alfworld.generate import generated_root, list_generated, stderr_progress

    trajectories = []
    for task_id in list_generated("train", games, stderr_progress):
        traj = read_traj(generated_root() / LAYOUT_DIR / task_id)
        record = traj["playground"]
        trajectories.append({"goal": traj["turk_annotations"]["anns"][0]["task_desc"],
                             "steps": list(zip(record["expert_plan"], record["expert_observations"]))})
    return trajectories


def load_priors(games: int = PRIOR_GAMES) -> Priors:
    """Return the priors from the first `games` generated train games, estimating and caching them on first use."""
    path = priors_path(games)
    if path.is_file():
        data = json.loads(path.read_text())
        if data.get("version") == PRIORS_VERSION:
            return Priors(data["found_in"], data["verbs"], data["games"])
    priors = estimate(train_trajectories(games))
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"version": PRIORS_VERSION, "games": priors.games, "found_in": priors.found_in, "verbs": priors.verbs}
    with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=".priors-", delete=False) as tmp:
        json.dump(payload, tmp, indent=1, sort_keys=True)
    os.replace(tmp.name, path)
    return priors
