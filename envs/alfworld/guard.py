"""DARC's action-validity guard for ALFWorld: a deterministic scorer over the admissible commands.

    S(a) = S_goal + S_phase + S_search + S_train-prior - S_conflict - S_loop

- The goal sentence gives the task type, the target object and the destination (or lamp).
- The episode so far (actions and observations only) gives a `Track`: where the agent is,
  what it holds, what it cleaned/heated/cooled, what it placed, where it saw what.
- The phase follows search -> take -> transform (clean/heat/cool; for look tasks: light)
  -> place; each phase favours its own commands.
- Search favours unvisited receptacles where the train priors say the target is found,
  and places where a target was already seen.
- Priors (`Priors`) are estimated from expert plans of generated train games.
- Conflicts (a second object, the wrong object, the wrong destination or transformation,
  taking back a placed object) and loops (repeats, and actions already tried from the
  same observation) are penalised.

The guard reads only what the agent sees: goal, observations, history and the
admissible commands. It never reads the expert's plan or any test label.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Iterable, Mapping, Sequence

from playground.envs.alfworld.goals import LAMP_WORDS, Goal, kind_of, parse_goal

TOP_K = 12
LAMP_HOLDERS = ("desk", "sidetable", "dresser")
LOOP_WINDOW = 6

# weights of the score's parts
W_GOAL = 1.0
W_PHASE = {"go_search": 2.0, "open_search": 3.0, "take": 6.0, "go_appliance": 4.0, "transform": 6.0,
           "go_destination": 4.0, "open_destination": 5.0, "move_destination": 6.0, "go_lamp": 5.0,
           "go_lamp_holder": 2.5, "use_lamp": 6.0, "move_clear": 4.0}
W_SEARCH = {"prior": 3.0, "seen_target": 4.0, "visited": 1.5, "destination": 1.0}
W_PRIOR = 0.5
W_CONFLICT = {"second_object": 3.0, "wrong_object": 3.0, "placed_object": 5.0, "wrong_destination": 4.0,
              "untransformed_move": 3.0, "wrong_transform": 3.0, "slice": 3.0, "lamp_off_task": 2.0,
              "lamp_early": 1.0, "close": 2.0, "idle": 1.5}
W_LOOP = {"repeat": 2.0, "same_state": 3.0}

_CONTENTS = re.compile(r"(?:on the ([a-z]+ \d+), you see|the ([a-z]+ \d+) is open\. in it, you see) ([^.]*)\.")
_ARTICLE = re.compile(r"^(?:a|an|some|the) ")


@dataclass(frozen=True)
class Command:
    """An admissible command split into verb, object and receptacle ("take apple 1 from fridge 1")."""

    text: str
    verb: str
    obj: str = ""
    recep: str = ""


def parse_command(text: str) -> Command:
    """Split an ALFWorld command into its verb and arguments."""
    t = " ".join(text.lower().split())
    for pattern, verb in ((r"go to (.+)", "go"), (r"open (.+)", "open"), (r"close (.+)", "close"),
                          (r"examine (.+)", "examine"), (r"use (.+)", "use")):
        m = re.fullmatch(pattern, t)
        if m:
            recep = m.group(1)
            return Command(t, verb, "" if verb in ("go", "open", "close", "examine") else recep,
                           recep if verb != "use" else "")
    m = re.fullmatch(r"take (.+) from (.+)", t)
    if m:
        return Command(t, "take", m.group(1), m.group(2))
    m = re.fullmatch(r"move (.+) to (.+)", t)
    if m:
        return Command(t, "move", m.group(1), m.group(2))
    m = re.fullmatch(r"(clean|heat|cool|slice) (.+) with (.+)", t)
    if m:
        return Command(t, m.group(1), m.group(2), m.group(3))
    return Command(t, t.split(" ", 1)[0] if t else "")


def contents(observation: str) -> dict[str, list[str]]:
    """Return {receptacle: [objects seen in or on it]} from an observation."""
    found: dict[str, list[str]] = {}
    for m in _CONTENTS.finditer(observation.lower()):
        recep = m.group(1) or m.group(2)
        items = [_ARTICLE.sub("", i.strip()) for i in re.split(r",\s*(?:and\s+)?|\s+and\s+", m.group(3))]
        found[recep] = [i for i in items if i and i != "nothing"]
    return found


@dataclass
class Track:
    """What the guard infers from the episode's valid actions and observations."""

    location: str = ""
    holding: str = ""
    transformed: dict[str, set[str]] = field(default_factory=dict)  # object -> verbs applied
    placed: set[str] = field(default_factory=set)  # target objects put at a destination
    visited: set[str] = field(default_factory=set)
    opened: set[str] = field(default_factory=set)
    seen: dict[str, str] = field(default_factory=dict)  # object -> receptacle it was last seen in

    def update(self, goal: Goal, action: str, observation: str, valid: bool = True) -> None:
        """Apply one finished step."""
        if not valid:
            return
        c = parse_command(action)
        if c.verb in ("go", "open", "examine") and c.recep:
            self.visited.add(c.recep)
            if c.verb == "go":
                self.location = c.recep
            if c.verb == "open":
                self.opened.add(c.recep)
        elif c.verb == "close":
            self.opened.discard(c.recep)
        elif c.verb == "take":
            self.holding = c.obj
            self.seen.pop(c.obj, None)
            self.placed.discard(c.obj)
        elif c.verb == "move":
            self.holding = ""
            self.seen[c.obj] = c.recep
            if kind_of(c.obj) == goal.target and kind_of(c.recep) == goal.destination:
                self.placed.add(c.obj)
        elif c.verb in ("clean", "heat", "cool"):
            self.transformed.setdefault(c.obj, set()).add(c.verb)
        for recep, objects in contents(observation).items():
            for obj in objects:
                self.seen[obj] = recep

    def is_ready(self, goal: Goal, obj: str) -> bool:
        """True when `obj` needs no (more) transformation for the goal."""
        return not goal.transform_verb or goal.transform_verb in self.transformed.get(obj, set())


@dataclass(frozen=True)
class Priors:
    """Statistics from expert plans of train games.

    `found_in[target][receptacle kind]`: how often the expert took that target from that
    kind of receptacle; `verbs[task type][phase][verb]`: the expert's verbs by phase.
    """

    found_in: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    verbs: Mapping[str, Mapping[str, Mapping[str, int]]] = field(default_factory=dict)
    games: int = 0

    @cached_property
    def _overall(self) -> dict[str, int]:
        overall: dict[str, int] = {}
        for counts in self.found_in.values():
            for kind, n in counts.items():
                overall[kind] = overall.get(kind, 0) + n
        return overall

    def location(self, target: str, recep_kind: str) -> float:
        """P(found in `recep_kind` | target), smoothed towards the all-targets distribution."""
        overall = self._overall
        total = sum(overall.values())
        p_any = (overall.get(recep_kind, 0) + 0.5) / (total + 0.5 * max(len(overall), 1)) if total else 0.0
        own = self.found_in.get(target, {})
        n = sum(own.values())
        return (own.get(recep_kind, 0) + 2.0 * p_any) / (n + 2.0)

    def verb(self, task_type: str, phase: str, verb: str) -> float:
        """Log-ratio of P(verb | task type, phase) against a uniform verb choice (0 without data)."""
        counts = self.verbs.get(task_type, {}).get(phase, {})
        total = sum(counts.values())
        if not total:
            return 0.0
        vocabulary = max(len(counts), 1) + 1
        return math.log((counts.get(verb, 0) + 0.5) / (total + 0.5 * vocabulary)) - math.log(1 / vocabulary)


NO_PRIORS = Priors()


def phase_of(goal: Goal, track: Track, visible_targets: Sequence[str] = ()) -> str:
    """Return the task phase: search, take, transform, light, place, or clear (holding the wrong thing)."""
    held = track.holding
    if held and kind_of(held) != goal.target:
        return "clear"
    if held:
        if goal.is_look:
            return "light"
        return "transform" if not track.is_ready(goal, held) else "place"
    here = [o for o, r in track.seen.items() if r == track.location and kind_of(o) == goal.target
            and o not in track.placed]
    return "take" if (visible_targets or here) else "search"


def replay(goal: Goal, steps: Iterable[tuple[str, str, bool]]) -> Track:
    """Return the Track after the given (action, observation, valid) steps."""
    track = Track()
    for action, observation, valid in steps:
        track.update(goal, action, observation, valid)
    return track


@dataclass(frozen=True)
class Scored:
    """One admissible command with its total score and the parts it came from."""

    action: str
    score: float
    parts: Mapping[str, float]


class Guard:
    """Scores and ranks the admissible commands of one step (see module docstring)."""

    def __init__(self, priors: Priors = NO_PRIORS, top_k: int = TOP_K) -> None:
        self.priors = priors
        self.top_k = top_k

    def goal(self, goal_text: str, admissible: Sequence[str]) -> Goal:
        """Parse the goal, using the entity kinds in the admissible commands for the fallback."""
        kinds = {kind_of(x) for c in admissible for x in (parse_command(c).obj, parse_command(c).recep) if x}
        return parse_goal(goal_text, kinds)

    def state(self, goal_text: str, admissible: Sequence[str],
              history: Sequence[tuple[str, str, bool]]) -> tuple[Goal, Track, str]:
        """Return the parsed goal, the tracked state and the current phase."""
        goal = self.goal(goal_text, admissible)
        track = replay(goal, history)
        commands = [parse_command(a) for a in admissible]
        visible = [c.obj for c in commands if c.verb == "take" and kind_of(c.obj) == goal.target
                   and c.obj not in track.placed]
        return goal, track, phase_of(goal, track, visible)

    def score(self, goal_text: str, admissible: Sequence[str], history: Sequence[tuple[str, str, bool]],
              observation: str = "", first_observation: str = "") -> list[Scored]:
        """Score every admissible command; best first (ties broken by the command text).

        `history` holds the (action, observation, valid) steps so far; `observation` is the
        current one and `first_observation` the one after reset (for the loop penalty).
        """
        goal, track, phase = self.state(goal_text, admissible, history)
        commands = [parse_command(a) for a in admissible]
        here = {c.recep for c in commands if c.verb in ("open", "close", "take", "examine") and c.recep}
        recent = [a for a, _, _ in history[-LOOP_WINDOW:]]
        before = [history[i - 1][1] if i > 0 else first_observation for i in range(len(history))]
        tried_here = {a for (a, _, _), obs in zip(history, before) if observation and obs == observation}
        scored = []
        for a, c in zip(admissible, commands):
            parts = {
                "goal": self._goal(goal, c, phase),
                "phase": self._phase(goal, track, phase, c, here),
                "search": self._search(goal, track, phase, c),
                "prior": W_PRIOR * self.priors.verb(goal.task_type, phase, c.verb),
                "conflict": self._conflict(goal, track, phase, c),
            }
            # a repeat is a loop unless the phase asks for it (back to a seen target, to the destination again);
            # the same action from the same observation is a loop either way
            purposeful = parts["phase"] > 0 or self._seen_target(goal, track, c)
            parts["loop"] = ((0.0 if purposeful else W_LOOP["repeat"] * recent.count(a))
                             + (W_LOOP["same_state"] if a in tried_here else 0.0))
            total = (parts["goal"] + parts["phase"] + parts["search"] + parts["prior"] - parts["conflict"]
                     - parts["loop"])
            scored.append(Scored(a, round(total, 6), parts))
        return sorted(scored, key=lambda s: (-s.score, s.action))

    def top(self, goal_text: str, admissible: Sequence[str], history: Sequence[tuple[str, str, bool]],
            observation: str = "", first_observation: str = "", k: int | None = None) -> list[str]:
        """Return the `k` (default `top_k`) best-ranked admissible commands."""
        scored = self.score(goal_text, admissible, history, observation, first_observation)
        return [s.action for s in scored[: k or self.top_k]]

    # -- the parts -------------------------------------------------------------------

    @staticmethod
    def _goal(goal: Goal, c: Command, phase: str) -> float:
        """The target always counts; the destination (or lamp) only when placing (or lighting), the appliance
        only when transforming."""
        kinds = {kind_of(c.obj), kind_of(c.recep)} - {""}
        wanted = {goal.target}
        if phase in ("place", "light"):
            wanted.add(goal.destination)
        if phase == "transform":
            wanted.add(goal.appliance)
        return W_GOAL * len(kinds & (wanted - {""}))

    @staticmethod
    def _phase(goal: Goal, track: Track, phase: str, c: Command, here: set[str]) -> float:
        recep_kind, obj_kind = kind_of(c.recep), kind_of(c.obj)
        unvisited = c.recep not in track.visited
        if phase == "search":
            if c.verb == "go" and unvisited:
                return W_PHASE["go_search"]
            if c.verb == "open" and c.recep in here and c.recep not in track.opened:
                return W_PHASE["open_search"]
        elif phase == "take":
            if c.verb == "take" and obj_kind == goal.target and c.obj not in track.placed:
                return W_PHASE["take"]
            if c.verb == "open" and c.recep not in track.opened:
                return W_PHASE["open_search"]
        elif phase == "transform":
            if c.verb == "go" and recep_kind == goal.appliance:
                return W_PHASE["go_appliance"]
            if c.verb == goal.transform_verb and c.obj == track.holding:
                return W_PHASE["transform"]
        elif phase == "place":
            if c.verb == "go" and recep_kind == goal.destination:
                return W_PHASE["go_destination"]
            if c.verb == "open" and recep_kind == goal.destination and c.recep not in track.opened:
                return W_PHASE["open_destination"]
            if c.verb == "move" and recep_kind == goal.destination:
                return W_PHASE["move_destination"]
        elif phase == "light":
            lamp_places = {r for o, r in track.seen.items() if kind_of(o) == goal.destination}
            if c.verb == "use" and kind_of(c.obj) == goal.destination:
                return W_PHASE["use_lamp"]
            if c.verb == "go" and c.recep in lamp_places:
                return W_PHASE["go_lamp"]
            if c.verb == "go" and not lamp_places and recep_kind in LAMP_HOLDERS and unvisited:
                return W_PHASE["go_lamp_holder"]
        elif phase == "clear":
            if c.verb == "move" and c.obj == track.holding:
                return W_PHASE["move_clear"]
        return 0.0

    def _search(self, goal: Goal, track: Track, phase: str, c: Command) -> float:
        if c.verb not in ("go", "open") or phase not in ("search", "take", "light"):
            return 0.0
        if phase == "light":
            return (W_SEARCH["prior"] * self.priors.location(goal.destination, kind_of(c.recep))
                    if c.verb == "go" else 0.0)
        seen_target = self._seen_target(goal, track, c)
        value = W_SEARCH["seen_target"] if seen_target else 0.0
        if phase == "search":
            value += W_SEARCH["prior"] * self.priors.location(goal.target, kind_of(c.recep))
            if c.recep in track.visited and not seen_target and c.verb == "go":
                value -= W_SEARCH["visited"]
            if kind_of(c.recep) == goal.destination and not goal.is_look:
                value -= W_SEARCH["destination"]
        return value

    @staticmethod
    def _seen_target(goal: Goal, track: Track, c: Command) -> bool:
        """True when a command goes to (or opens) a receptacle where an unplaced target was seen."""
        return c.verb in ("go", "open") and any(kind_of(o) == goal.target and r == c.recep and o not in track.placed
                                                for o, r in track.seen.items())

    @staticmethod
    def _conflict(goal: Goal, track: Track, phase: str, c: Command) -> float:
        w = W_CONFLICT
        if c.verb == "take":
            if track.holding:
                return w["second_object"]
            if c.obj in track.placed:
                return w["placed_object"]
            if kind_of(c.obj) != goal.target:
                return w["wrong_object"]
        elif c.verb == "move" and kind_of(c.obj) == goal.target and not goal.is_look:
            if phase == "transform":
                return w["untransformed_move"]
            if kind_of(c.recep) != goal.destination:
                return w["wrong_destination"]
        elif c.verb in ("clean", "heat", "cool"):
            if c.verb != goal.transform_verb or track.is_ready(goal, c.obj):
                return w["wrong_transform"]
        elif c.verb == "slice":
            return w["slice"]
        elif c.verb == "use":
            if not goal.is_look:
                return w["lamp_off_task"]
            if phase != "light":
                return w["lamp_early"]
        elif c.verb == "close":
            return w["close"]
        elif c.verb in ("look", "inventory", "help", "examine"):
            return w["idle"]
        return 0.0


def relevant_to(goal: Goal, command: str, holding: str = "") -> bool:
    """True when a command fits the task type at all (type saturation's filter).

    Moving around, opening, taking and placing the target, the task's own transformation,
    and (look tasks) using a lamp are relevant; so is putting down a wrong object the
    agent holds (`holding`). Other transformations, slicing, lamps in other tasks,
    handling other objects, and idle commands are not.
    """
    c = parse_command(command)
    if c.verb in ("go", "open"):
        return True
    if c.verb == "move" and holding and c.obj == holding:
        return True
    if c.verb in ("take", "move"):
        return kind_of(c.obj) == goal.target
    if c.verb in ("clean", "heat", "cool"):
        return c.verb == goal.transform_verb and kind_of(c.obj) == goal.target
    if c.verb == "use":
        return goal.is_look and kind_of(c.obj) in LAMP_WORDS
    return False
