"""The observable trajectory of an episode, as the baselines' reflectors, judges and inducers read it.

It holds what the agent saw and did: the goal, each action with the observation it brought,
whether the env took it as valid, its kind (the env's `action_kinds`), the observable failure
the env reported, and how the episode ended as the agent saw it (it stopped, ran out of
steps, or the env ended it). It never holds a reward, a score or `won`, nor the grade text an
env prints into its observations (score lines, win and loss banners): every observation it
keeps went through the env's `remove_grade_text` (`EpisodeStart.remove_grade_text`), so the
rules, the judge model's prompts and the success judges read none. A baseline that uses the
task's success signal (Reflexion's retries, `*_success=env`) reads `EpisodeEnd.won` itself
and says so.

The rules here are the fallbacks of the roles the papers give a model: `completed` (the
page confirming the agent's own finishing action in the last observations: WebShop's
purchase confirmation; never a win banner) stands in for an LLM success judge;
`abstract_action` (entity slots) for a model's abstraction of a step.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from playground import EpisodeEnd, EpisodeStart, StepOutcome
from playground.core.actions import kind_of
from playground.core.payloads import keep_text

# What a page says back when the agent's own finishing action went through: WebShop's purchase confirmation
# ("Thank you for shopping with us! You bought ..."), printed for every purchase, right or wrong, so it is not a
# grade (its score sentence is, and the env's `remove_grade_text` removes it). Win banners and verdicts ("*** The
# End ***", "you won", "well done", "congratulations", "task completed") are grades: they are not here, and the
# env's `remove_grade_text` keeps them out of the trajectory (as Sentry's `detectors.COMPLETION`).
COMPLETION = re.compile(r"\bthank you for (shopping|your purchase)\b", re.I)
TEMPLATE = re.compile(r"^(?P<verb>[^\[\]]+)\[(?P<argument>.*)\]$")
JOINERS = re.compile(r"\s+(on|in|into|onto|from|with|to|at|under)\s+")
# the entity slot an argument becomes, by the action's kind
SLOTS = {"move": "{direction}", "select": "{option}", "search": "{query}", "open": "{item}", "look": "{item}",
         "take": "{object}", "use": "{object}", "access": "{container}", "consume": "{food}"}
STRUCTURAL_KINDS = ("page", "finish")  # buttons that read the same in every task (Next >, Buy Now)
WORD = re.compile(r"[a-z0-9]+")


def words(text: str) -> set[str]:
    """The lower-cased words of `text` longer than two characters."""
    return {w for w in WORD.findall(text.lower()) if len(w) > 2}


@dataclass(frozen=True)
class Step:
    """One step: the action, what it brought, and what the agent could tell about it."""

    action: str
    observation: str
    valid: bool
    kind: str = ""
    new: bool = True         # the observation was not seen before in the episode
    failure: str = ""        # the kind of the observable failure the env reported, if any


@dataclass
class Trajectory:
    """An episode's observable record, filled from the runtime hooks (`start`, `record`, `end`)."""

    goal: str = ""
    first_observation: str = ""
    action_format: str = "command"
    steps: list[Step] = field(default_factory=list)
    ending: str = ""  # "stopped" (the agent or a harness stopped), "out_of_steps", "ended" (by the env), "error"
    verbs: set[str] = field(default_factory=set)  # the verbs of the admissible actions the agent was offered
    # the env's `remove_grade_text` (`EpisodeStart.remove_grade_text`): every observation kept goes through it
    remove_grade_text: Callable[[str], str] = field(default=keep_text, repr=False, compare=False)

    def start(self, start: EpisodeStart) -> None:
        """Begin from the reset: the goal and the first observation (without its grade text)."""
        self.remove_grade_text = start.remove_grade_text
        self.goal, self.steps, self.ending = start.goal, [], ""
        self.first_observation = self.remove_grade_text(start.observation)
        self.verbs = set()

    def record(self, outcome: StepOutcome) -> None:
        """Add the step an outcome reports (its action, observation without its grade text, validity, kind and
        failure; no reward)."""
        seen = {self.first_observation.strip()} | {s.observation.strip() for s in self.steps}
        action = outcome.proposal.action
        observation = self.remove_grade_text(outcome.observation)
        failure = outcome.failure.get("kind", "") if outcome.failure else ""
        self.action_format = outcome.context.action_format
        self.verbs |= {verb_of(a) for a in outcome.context.admissible_actions or ()}
        self.steps.append(Step(action, observation, outcome.valid_action,
                               kind_of(action, outcome.context.action_kinds), observation.strip() not in seen,
                               str(failure)))

    def end(self, end: EpisodeEnd) -> None:
        """Note how the episode ended as the agent saw it; won and lost are both "ended" (the grade is not read)."""
        self.ending = {"stopped": "stopped", "truncated": "out_of_steps", "error": "error"}.get(end.status, "ended")

    # -- what the rules read -----------------------------------------------------------

    @property
    def completed(self) -> bool:
        """The page confirmed the agent's own finishing action (`COMPLETION`) in one of the last two observations
        (the rule stand-in for a success judge; never a win banner, which the trajectory does not hold)."""
        return any(COMPLETION.search(s.observation) for s in self.steps[-2:])

    @property
    def stopped_early(self) -> bool:
        """The agent stopped although no observation confirmed a finishing action of its own."""
        return self.ending == "stopped" and not self.completed

    def invalid_actions(self) -> list[str]:
        """The actions the env took as invalid, in order, once each."""
        return list(dict.fromkeys(s.action for s in self.steps if not s.valid))

    def repeats(self, at_least: int = 3) -> list[tuple[str, int]]:
        """Actions repeated `at_least` times without a new observation: (action, times), most repeated first."""
        counts: dict[str, int] = {}
        for s in self.steps:
            if s.valid and not s.new:
                counts[s.action] = counts.get(s.action, 0) + 1
        return sorted(((a, n + 1) for a, n in counts.items() if n + 1 >= at_least), key=lambda x: -x[1])

    def longest_stall(self) -> int:
        """The longest run of steps that brought no new observation."""
        best = run = 0
        for s in self.steps:
            run = run + 1 if not s.new else 0
            best = max(best, run)
        return best

    def failures(self) -> list[str]:
        """The kinds of the observable failures the env reported, once each."""
        return list(dict.fromkeys(s.failure for s in self.steps if s.failure))

    def useful_steps(self) -> list[Step]:
        """Valid steps that brought a new observation (a loop's repeats and invalid tries left out)."""
        return [s for s in self.steps if s.valid and s.new]

    def kind_path(self) -> list[str]:
        """The kinds of the useful steps, consecutive repeats collapsed ("search", "open", "select", "finish")."""
        path: list[str] = []
        for s in self.useful_steps():
            kind = s.kind or "other"
            if not path or path[-1] != kind:
                path.append(kind)
        return path

    def abstract_steps(self) -> list[str]:
        """The useful steps with their entities abstracted into slots, consecutive repeats collapsed."""
        out: list[str] = []
        for s in self.useful_steps():
            step = abstract_action(s.action, s.kind, self.goal)
            if not out or out[-1] != step:
                out.append(step)
        return out

    def text(self, limit: int = 30, width: int = 160) -> str:
        """The last `limit` steps as numbered lines `N. action -> first line of the observation [invalid]`."""
        lines = []
        for number, s in list(enumerate(self.steps, 1))[-limit:]:
            first = next((line.strip() for line in s.observation.splitlines() if line.strip()), "")
            flag = "" if s.valid else " [invalid]"
            lines.append(f"{number}. {s.action} -> {first[:width]}{flag}")
        return "\n".join(lines) or "(no steps)"

    def summary(self) -> str:
        """How the episode ended, in the agent's terms."""
        ending = {"stopped": "the agent stopped", "out_of_steps": "the step budget ran out",
                  "ended": "the environment ended the episode", "error": "an error ended it"}.get(self.ending, "")
        seen = "a completion message was observed" if self.completed else "no completion message was observed"
        return f"{len(self.steps)} steps; {ending or 'it ended'}; {seen}"


def verb_of(action: str) -> str:
    """The verb of an action: the name of a template (`click` of `click[...]`), else its first word, lower-cased."""
    text = " ".join(action.split()).lower()
    return text.split("[", 1)[0] if TEMPLATE.match(text) else text.split(" ", 1)[0]


def abstract_action(action: str, kind: str, goal: str) -> str:
    """The action with its entities replaced by slots named by the action's kind.

    `take rusty key` -> `take {object}` (`{object from the goal}` when the goal names it),
    `search[red shoes size 9]` -> `search[{query from the goal}]`, `put apple on table` ->
    `put {object} on {object}`; a page or finish button (`click[Next >]`, `click[Buy Now]`)
    and an action without an argument (`look`) stay as they are.
    """
    text = " ".join(action.split())
    template = TEMPLATE.match(text)
    if template:
        verb, argument, form = template["verb"], template["argument"].strip(), "{verb}[{argument}]"
    else:
        verb, _, argument = text.partition(" ")
        form = "{verb} {argument}"
    if not argument or kind in STRUCTURAL_KINDS:
        return text
    slot = SLOTS.get(kind, "{object}")
    goal_words = words(goal)
    pieces = JOINERS.split(argument)
    # JOINERS.split keeps the joiner words at the odd positions
    slotted = [piece if i % 2 else _slot(piece, slot, goal_words) for i, piece in enumerate(pieces)]
    return form.format(verb=verb, argument=" ".join(slotted))


def _slot(piece: str, slot: str, goal_words: set[str]) -> str:
    mine = words(piece)
    return slot[:-1] + " from the goal}" if mine and mine <= goal_words else slot


def goal_gist(goal: str, limit: int = 14) -> str:
    """The goal's first `limit` words, one line (a title for a memory item or a workflow)."""
    first = " ".join(goal.split()[:limit])
    return first + (" ..." if len(goal.split()) > limit else "")


def approx_tokens(text: str) -> int:
    """A rough token count: a quarter of the characters (no tokenizer is assumed)."""
    return (len(text) + 3) // 4
