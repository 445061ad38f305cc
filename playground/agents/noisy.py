"""The `noisy` agent: a failure-injection instrument for exercising harnesses.

It follows the env's expert plan but, at configurable per-step rates and
deterministically by (seed, task), falls into one of the typical failures and stays in
it for a streak of steps: invalid or malformed actions, repeating itself, stalling with
actions that change nothing, drifting to objects unrelated to the goal, or declaring
the task done too early.

It reacts to interventions the way the harness design expects an agent to (the model of
behaviour, in one place):
- a hard repair (`message.kind == "hard_repair"`) makes it choose among the offered
  actions (the expert's action when offered, else the first one): an invalid action must
  be rewritten, so a hard repair is always obeyed;
- guidance (a soft repair's message, or standing notes while it is failing) is heeded with
  probability `compliance` times a base rate. With `take_named=true`, guidance that names an
  admissible action (quoted in its text, as a lesson's "What resolved it: 'open door'", or
  offered in `message.actions`) has base rate 1: the instrument takes the first such action
  literally. Taking the expert's planned action ends the failure; taking another is a detour
  (while failing, the failure goes on; when it was not failing, the detour is the cost of a
  false alarm or a misleading lesson). Otherwise (nothing named, `take_named` off, or the coin
  said no) a soft repair while failing makes it return to the plan with base rate
  `recover_matching` when the message's lesson labels include the failure it is making, and
  `recover_other` otherwise. With `compliance=1` and `take_named=false` (the defaults) this is
  the instrument's earlier behaviour exactly.

With `judge_accuracy` set (or an accuracy per kind of judge: `detector_accuracy`,
`need_check_accuracy`, `verifier_accuracy`, `summariser_accuracy`, `diagnoser_accuracy`) it also
plays the judges' model: the runner shares its `model` with the plugins' model roles, and each
structured request they send is answered from the instrument's own state by the answerer the
role's plugin registered (`playground.core.instrument`), right with that probability and a
realistic mistake otherwise. With `judge=local` (or `judge_base_url` + `judge_model`) a real
model answers and the instrument only grades its replies against the same truth; with `shadow=local`
(or `shadow=endpoint`) the instrument answers and drives the run while the real model is asked the same
requests of `shadow_kinds` and graded, its replies never used. Grades go into
the trace with each judge call (`judge_call` events' `graded`); the roles see only the replies.

How a failure looks depends on the env, and the agent knows no env by name:
- an env that knows (e.g. code cells) says so through `TextEnv.failure_variants()`: the
  agent calls it on the env it was bound to (`bind_env`) and sends the variant for its
  mode, with the env's label for it;
- otherwise it reads the env's `action_kinds`: on web pages (`action_format` "web") it
  re-reads or re-pages (repeat), opens sub-pages (stall), opens another item or option
  (drift) and finishes early with the finish action (stop); in command envs it repeats or
  stalls with "look"-kind actions and drifts to actions on unrelated objects (never
  "look" or "consume" ones, which could end the game).

Every failure action it proposes carries its ground truth in `Proposal.injected`:
`{"mode", "failure_type", "label", "streak", "planned"}`, where `streak` numbers the episode's
failures from 1 (all the actions of one streak share it) and `planned` is the expert's action
the failure replaced (None where the plan was done): a correct action at that step. The loop writes it into the
trace and hides it from every plugin; measurements read it from the trace
(a plugin's study columns against injected failures). A drift with nothing unrelated to drift to falls back to an
action that changes nothing, and is recorded as the stall it is.

It is an instrument, not a model of any LLM: figures obtained with it say whether the
machinery works, never how well an LLM agent would do.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from playground.agents.base import AgentConfigError, expert_action, parse_options
from playground.core.actions import is_template, kind_of
from playground.core.instrument import JUDGE_KINDS, InstrumentJudgeSpec, InstrumentState, RepairRecord, StepRecord
from playground.core.payloads import AgentView, Proposal

# failure mode -> (failure type, retrieval label) a correct detector would report; both are names the
# plugins declare in the failure-label registry (tests/test_labels.py checks they are)
FAILURE_LABELS: dict[str, tuple[str, str]] = {
    "invalid": ("action_validity", "invalid_action"),
    "malformed": ("action_validity", "unparseable_action"),
    "repeat": ("progress", "repetition_or_looping"),
    "stall": ("progress", "planning_stall"),
    "drift": ("grounding", "objective_drift"),
    "stop": ("progress", "termination_miscalibration"),
}

DEFAULTS: dict[str, Any] = {
    "invalid": 0.08,
    "malformed": 0.02,
    "repeat": 0.05,
    "stall": 0.05,
    "drift": 0.04,
    "stop": 0.02,
    "min_streak": 2,
    "max_streak": 6,
    "recover_matching": 0.9,
    "recover_other": 0.3,
    "compliance": 1.0,
    "take_named": False,
    "judge_accuracy": -1.0,  # below 0: the instrument is no judge model (the roles keep their rules)
    **{f"{kind}_accuracy": -1.0 for kind in JUDGE_KINDS},  # below 0: judge_accuracy
    "judge": "",  # "local": the embedded model answers the roles, graded by the instrument
    "judge_base_url": "",  # ... or an OpenAI-compatible endpoint
    "judge_model": "",
    "shadow": "",  # "local" (or "endpoint": judge_base_url): a model also asked, graded, while the instrument answers
    "shadow_kinds": "need_check,verifier",  # ... the requests of these kinds of judge
}
RATES = (*FAILURE_LABELS, "recover_matching", "recover_other", "compliance")
QUOTED = re.compile(r"'([^'\n]{1,200})'|\"([^\"\n]{1,200})\"|`([^`\n]{1,200})`")

SINGLE_STEP_MODES = {"invalid", "malformed", "stop"}
IDLE_KINDS = ("look",)  # actions that change nothing: stalling and looping
UNSAFE_KINDS = ("consume",)  # never drifted to: eating the wrong thing can lose the game


class NoisyAgent:
    """Expert-following agent that injects failures at set rates (see module docstring)."""

    def __init__(self, **options: Any) -> None:
        self.options = parse_options(DEFAULTS, options, "noisy")
        for mode in RATES:
            if not 0.0 <= self.options[mode] <= 1.0:
                raise ValueError(f"agent 'noisy' option {mode!r} must be a rate in [0, 1], got {self.options[mode]}")
        for key in ("judge_accuracy", *(f"{kind}_accuracy" for kind in JUDGE_KINDS)):
            if self.options[key] > 1.0:
                raise AgentConfigError(f"agent 'noisy' option {key!r} must be an accuracy in [0, 1] (or below 0: "
                                       f"unset), got {self.options[key]}")
        if self.options["shadow"] not in ("", "local", "endpoint"):
            raise AgentConfigError(f"agent 'noisy' option 'shadow' must be 'local', 'endpoint' or empty, got "
                                   f"{self.options['shadow']!r}")
        unknown = set(self._shadow_kinds()) - set(JUDGE_KINDS)
        if unknown:
            raise AgentConfigError(f"agent 'noisy' option 'shadow_kinds' names no judge kind: "
                                   f"{', '.join(sorted(unknown))}; kinds: {', '.join(JUDGE_KINDS)}")
        if self.options["judge"] not in ("", "local"):
            raise AgentConfigError(f"agent 'noisy' option 'judge' must be 'local' or empty, got "
                                   f"{self.options['judge']!r}")
        if bool(self.options["judge_base_url"]) != bool(self.options["judge_model"]):
            raise AgentConfigError("agent 'noisy': judge_base_url and judge_model go together")
        self.rng = random.Random(0)
        self.mode: str | None = None
        self.remaining = 0
        self.loop_action = ""
        self.last_search = ""
        self.variant_label = ""  # the env's label for the failure being made, where it gives one
        self.streak = 0  # how many failures the episode has started: the id of the current one
        self.env: Any = None
        self.goal, self.step = "", 0
        self.records: dict[int, StepRecord] = {}  # step -> the last proposal made at it
        self.repairs: list[RepairRecord] = []
        self.proposals: list[StepRecord] = []  # every proposal, re-asked ones too
        self.judge_rng = random.Random(0)
        self.judges: dict[str, InstrumentJudgeSpec] = {}
        self._model: Any = None
        self._heeded = self._took_named = False  # how the last message was taken (for the repair record)

    def bind_env(self, env: Any) -> None:
        """Remember the episode's env, to ask it how failures look there (`failure_variants`)."""
        self.env = env

    def bind_judges(self, judges: Mapping[str, InstrumentJudgeSpec]) -> None:
        """Remember how each model role's requests are answered (the answerers the plugins registered)."""
        self.judges.clear()  # in place: the judges' model made before reads the same mapping
        self.judges.update(judges)

    @property
    def judging(self) -> bool:
        """True when the instrument plays the judges' model (an accuracy is set, or a real model is graded)."""
        o = self.options
        return (o["judge_accuracy"] >= 0 or any(o[f"{kind}_accuracy"] >= 0 for kind in JUDGE_KINDS)
                or bool(o["judge"]) or bool(o["judge_base_url"]))

    @property
    def model(self) -> Any:
        """The judges' model the runner shares with the plugins' model roles: None unless `judging`."""
        if not self.judging:
            return None
        if self._model is None:
            from playground.agents.instrument_judge import InstrumentJudge

            kind = self.options["shadow"]
            shadow = self._local_model() if kind == "local" else self._endpoint() if kind == "endpoint" else None
            self._model = InstrumentJudge(self.judges, self.state, self.accuracy, lambda: self.judge_rng,
                                          None if kind else self._delegate(), shadow,
                                          frozenset(self._shadow_kinds()))
        return self._model

    def _shadow_kinds(self) -> list[str]:
        return [k.strip() for k in str(self.options["shadow_kinds"]).split(",") if k.strip()]

    def _local_model(self) -> Any:
        """The embedded model, with the cores this process can have now (`threads_by_contention`)."""
        from playground.agents.judge_model import build_judge_model
        from playground.processes import threads_by_contention

        return build_judge_model({"judge_local": True}, "agent 'noisy'", threads=threads_by_contention()[0])

    def _delegate(self) -> Any:
        """The real model that answers instead (graded), or None."""
        o = self.options
        if o["judge"] == "local":
            return self._local_model()
        return self._endpoint() if o["judge_base_url"] else None

    def _endpoint(self) -> Any:
        """The model at `judge_base_url` (`judge_model`)."""
        from playground.agents.judge_model import build_judge_model

        o = self.options
        if not o["judge_base_url"]:
            raise AgentConfigError("agent 'noisy': shadow=endpoint needs judge_base_url and judge_model")
        return build_judge_model(o, "agent 'noisy'", retries=4)

    def accuracy(self, kind: str) -> float:
        """The probability of a right answer for a kind of judge role: its own option, else `judge_accuracy`."""
        own = float(self.options.get(f"{kind}_accuracy", -1.0))
        return own if own >= 0 else max(0.0, float(self.options["judge_accuracy"]))

    def state(self) -> InstrumentState:
        """What the instrument knows now, for the answerers (never for a plugin's decision code)."""
        steps = tuple(self.records[k] for k in sorted(self.records))
        current = self.records.get(self.step)
        return InstrumentState(self.goal, self.step, current, steps, tuple(self.repairs), tuple(self.proposals))

    def reset(self, task_id: str, seed: int) -> None:
        self.rng = random.Random(f"noisy:{seed}:{task_id}")
        self.judge_rng = random.Random(f"noisy-judge:{seed}:{task_id}")
        self.mode, self.remaining, self.loop_action, self.last_search = None, 0, "", ""
        self.variant_label, self.streak = "", 0
        self.goal, self.step, self.records, self.repairs, self.proposals = "", 0, {}, [], []

    @property
    def failure(self) -> tuple[str, str] | None:
        """The (failure type, label) the agent is making now, or None."""
        if not self.mode:
            return None
        failure_type, label = FAILURE_LABELS[self.mode]
        return failure_type, self.variant_label or label

    def propose(self, view: AgentView) -> Proposal:
        planned = expert_action(view, "noisy")
        self.goal, self.step = view.goal, view.step
        flagged = self.records.get(view.step)  # the proposal a message at this step is about
        proposal = self._react(view, planned) if view.message else None
        if proposal is None and view.notes and self.mode is not None:
            proposal = self._follow_notes(view, planned)
        if proposal is None:
            proposal = self._next(view, planned)
        if kind_of(proposal.action, view.extras.get("action_kinds") or {}) == "search":
            self.last_search = proposal.action
        if view.message is not None and view.message.kind == "soft_repair":
            failure = flagged.injected if flagged is not None else None
            took = proposal.action if self._took_named else None
            self.repairs.append(RepairRecord(view.step, failure, self._heeded, took,
                                             flagged.action if flagged is not None else ""))
        record = StepRecord(view.step, proposal.action, proposal.finish, planned,
                            dict(proposal.injected) if proposal.injected is not None else None)
        self.records[view.step] = record
        self.proposals.append(record)
        return proposal

    def _react(self, view: AgentView, planned: str | None) -> Proposal | None:
        message = view.message
        assert message is not None  # propose() reacts only to a message
        self._heeded, self._took_named = False, False
        if message.kind == "hard_repair" and message.actions:
            self._recover()
            choice = planned if planned is not None and planned in message.actions else message.actions[0]
            return Proposal(thought="The action was invalid; I pick one of the valid actions offered.", action=choice)
        named = self._named(message.text, view, message.actions) if self.options["take_named"] else []
        compliance = self.options["compliance"]
        if named and self.rng.random() < compliance:
            return self._take(named[0], view, planned)
        if self.mode is None:
            return None
        failure = self.failure
        assert failure is not None  # self.mode is set
        label = failure[1]
        chance = self.options["recover_matching"] if label in message.labels else self.options["recover_other"]
        if self.rng.random() < compliance * chance:
            self._heeded = True
            self._recover()
            return self._on_plan(planned, "Following the advice, I return to the plan")
        return self._failure_action(self.mode, view, planned)  # the advice did not land

    def _follow_notes(self, view: AgentView, planned: str | None) -> Proposal | None:
        """While failing, take an admissible action the standing notes name (`take_named`), at `compliance`."""
        named = self._named("\n".join(view.notes), view, ()) if self.options["take_named"] else []
        if named and self.rng.random() < self.options["compliance"]:
            return self._take(named[0], view, planned)
        return None

    def _named(self, text: str, view: AgentView, offered: tuple[str, ...]) -> list[str]:
        """The admissible actions the guidance names: quoted in its text first, then those it offers."""
        admissible = {a.lower(): a for a in view.admissible_actions or () if not is_template(a)}
        quoted = [admissible[q.strip().lower()] for m in QUOTED.finditer(text) for q in m.groups()
                  if q and q.strip().lower() in admissible]
        return list(dict.fromkeys([*quoted, *(a for a in offered if a.lower() in admissible)]))

    def _take(self, action: str, view: AgentView, planned: str | None) -> Proposal:
        """Take an action the guidance named: the plan's ends the failure, another is a detour (a failure goes on)."""
        self._heeded, self._took_named = True, True
        if action == planned:
            self._recover()
            return Proposal(thought=f"Following the advice: {action}.", action=action)
        proposal = Proposal(thought=f"Following the advice: {action}.", action=action)
        if self.mode is None:
            return proposal
        failure_type, label = FAILURE_LABELS[self.mode]
        return replace(proposal, injected={"mode": self.mode, "failure_type": failure_type,
                                           "label": self.variant_label or label, "streak": self.streak,
                                           "planned": planned, "detour": True})

    def _recover(self) -> None:
        self.mode, self.remaining, self.loop_action, self.variant_label = None, 0, "", ""

    def _next(self, view: AgentView, planned: str | None) -> Proposal:
        if self.mode is not None and self.remaining <= 0:
            self._recover()  # the streak has run its course
        if self.mode is None:
            self._maybe_start_failure()
        if self.mode is None:
            return self._on_plan(planned, "Next step of the plan")
        self.remaining -= 1
        return self._failure_action(self.mode, view, planned)

    def _maybe_start_failure(self) -> None:
        for mode in FAILURE_LABELS:
            if self.rng.random() < self.options[mode]:
                self.mode = mode
                self.streak += 1
                self.remaining = 1 if mode in SINGLE_STEP_MODES else self.rng.randint(
                    int(self.options["min_streak"]), int(self.options["max_streak"]))
                return

    def _on_plan(self, planned: str | None, why: str) -> Proposal:
        if planned is None:
            return Proposal(thought="The task looks complete.", action="", finish=True)
        return Proposal(thought=f"{why}: {planned}.", action=planned)

    def _failure_action(self, mode: str, view: AgentView, planned: str | None) -> Proposal:
        """The action of a failure mode, with a thought that believes in it (no mismatch), and its ground
        truth in `injected`; the planned action where the failure cannot be made here."""
        made = self._make_failure(mode, view, planned)
        if made is None:  # a failure this page offers no action for is not made here
            return self._on_plan(planned, "Next step of the plan")
        proposal, made_mode = made
        failure_type, label = FAILURE_LABELS[made_mode]
        injected = {"mode": made_mode, "failure_type": failure_type,
                    "label": self.variant_label or label, "streak": self.streak, "planned": planned}
        return replace(proposal, injected=injected)

    def _make_failure(self, mode: str, view: AgentView, planned: str | None) -> tuple[Proposal, str] | None:
        """(the failure action, the mode it really is), or None where this page offers no such action."""
        variant = self._variants().get(mode)
        if variant:  # the env says what this failure looks like here (e.g. code cells)
            self.variant_label = variant.get("label", "")
            return Proposal(thought=f"I will run this ({mode}).", action=variant["action"]), mode
        kinds = dict(view.extras.get("action_kinds") or {})
        if view.extras.get("action_format") == "web" and mode in ("repeat", "stall", "drift", "stop"):
            proposal = self._kind_failure(mode, kinds, planned)
            return (proposal, mode) if proposal is not None else None
        target = planned or "the goal"
        admissible = sorted(a for a in view.admissible_actions or () if not is_template(a))
        idle = [a for a in admissible if kinds.get(a) in IDLE_KINDS]
        if mode == "invalid":
            action = _misspell(planned or "look", self.rng)
            return Proposal(thought=f"I will {action}.", action=action), mode
        if mode == "malformed":
            return Proposal(thought=f"I will {target}.", action=f"Action: {target} >> now!!"), mode
        if mode == "stop":
            return Proposal(thought="I think the task is done.", action="", finish=True), mode
        if mode == "repeat":
            if not self.loop_action:
                self.loop_action = self.rng.choice(idle or ["look"])
            return Proposal(thought=f"I should {self.loop_action} to be sure.", action=self.loop_action), mode
        if mode == "drift":
            drift = [a for a in admissible if a != planned and kinds.get(a) not in IDLE_KINDS + UNSAFE_KINDS
                     and not _shares_object(a, planned, view.goal)]
            if drift:
                action = self.rng.choice(drift)
                return Proposal(thought=f"I will {action}.", action=action), mode
        action = self.rng.choice(idle or ["look"])  # a stall (and a drift with nothing to drift to)
        return Proposal(thought=f"Let me {action} first.", action=action), "stall"

    def _variants(self) -> dict:
        """The bound env's failure variants now (`TextEnv.failure_variants`), or {}."""
        variants = getattr(self.env, "failure_variants", None)
        return dict(variants() or {}) if callable(variants) else {}

    def _kind_failure(self, mode: str, kinds: dict[str, str], planned: str | None) -> Proposal | None:
        """The failure on web pages (`action_format` "web"); None where the page has no such action.

        repeat: re-read or re-page the same thing; stall: read sub-pages; drift: open another
        item or choose another option than planned; stop: the finish action before the plan's end.
        """
        def of(*wanted: str) -> list[str]:
            return sorted(a for a, k in kinds.items() if k in wanted and a != planned and not is_template(a))

        if mode == "repeat":
            if self.loop_action not in kinds:
                looping = of("look", "page")
                if self.last_search and "search" in kinds.values():
                    looping = [self.last_search]  # search the same words again
                if not looping:
                    return None
                self.loop_action = self.rng.choice(looping)
            return Proposal(thought=f"I should {self.loop_action} again to be sure.", action=self.loop_action)
        if mode == "stall" and of("look"):
            action = self.rng.choice(of("look"))
            return Proposal(thought=f"Let me {action} first.", action=action)
        if mode == "drift" and of("open", "select"):
            action = self.rng.choice(of("open", "select"))
            return Proposal(thought=f"I will {action}.", action=action)
        if mode == "stop" and of("finish"):
            return Proposal(thought="This one will do; I buy it now.", action=of("finish")[0])
        return None


def _misspell(action: str, rng: random.Random) -> str:
    """Return `action` with its verb garbled (never an admissible command)."""
    verb, _, rest = action.partition(" ")
    if len(verb) < 2:
        verb = verb + "zz"
    i = rng.randrange(len(verb) - 1)
    garbled = verb[:i] + verb[i + 1] + verb[i] + verb[i + 2:]
    if garbled == verb:
        garbled = verb + "x"
    return f"{garbled}q {rest}".strip()


def _shares_object(action: str, planned: str | None, goal: str) -> bool:
    """True when the action's words (past the verb) appear in the planned action or the goal."""
    words = {w for w in action.lower().split()[1:] if len(w) > 2 and w not in {"the", "from", "into", "with"}}
    context = f"{planned or ''} {goal}".lower()
    return any(w in context for w in words)
