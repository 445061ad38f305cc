"""The Sentry episode plugin: detect, route to hard or soft repair, verify, learn.

One object per episode. Routing: an invalid action gets a hard repair (a ranked view
of the valid actions and a request to rewrite; if still invalid after the re-ask budget,
the configured fallback, by default to send it); so does an action that fails the env's
schema check (the problems and the closest valid calls). Otherwise a progress or grounding
detection that passes the intervention-need check gets a soft repair: guidance, as in the
paper (general advice, the last W steps as evidence, and at most k retrieved lessons of the
same failure type), after which the agent chooses its own corrected step from its own
action space. The need check is the judge model's judgment where there is one, else a
need score from the evidence (`need_check.py`) against `threshold`; with a per-episode cap
and a cooldown (which does not apply when the agent wants to stop, since that ends the
episode). An agent that still wants to stop early after the advice is shown the ranked
valid actions once more (`block_early_stop`). Nothing detected: nothing retrieved. Soft
repairs are watched by the verifier for `horizon` cycles, and only verified ones become
lessons in the playbook (`admission`).

The paper runs one model as task agent, detector, need check, verifier and summariser:
with the roles on "auto" (the default) a model agent's own model fills them, and a
scripted agent (`noisy`, `expert`) gets the rules. Variants beside the paper's
configuration: `shortlist` (a progress repair lists the actions not tried recently, and
repairs restrict the agent to the actions they offer; with `fallback=best`, the
`sentry-shortlist` harness), `follow_up` N (the N steps after a progress repair keep
offering the actions not tried recently), `bar_loops` N (the looped actions are barred for
N steps; a barred proposal is re-asked with other actions, then replaced).

Blind by construction: the plugin never hands a hook payload to its parts. It reduces each
one to what the agent sees (`blind.py`: no reward, score, `max_score`, `won` or status, and
no grade text the env prints, removed by the env's `remove_grade_text`) and passes only
that to the detectors, need check, repairs, verifier, summariser and judges.
"""

from __future__ import annotations

import random
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Mapping

from playground.api import declared_values
from playground.core.errors import PlaygroundError
from playground.core.hookspecs import hookimpl
from playground.core.payloads import (
    Decision,
    Detection,
    EpisodeEnd,
    EpisodeIds,
    EpisodeStart,
    InterventionMessage,
    Proposal,
    StepContext,
    StepOutcome,
    Verification,
    keep_text,
)
from playground.plugins.sentry.blind import BlindView, blind_outcome, blind_proposal, blind_view
from playground.plugins.sentry.detectors import DETECTOR, make_window, run_detectors
from playground.plugins.sentry.lessons import summarise
from playground.plugins.sentry.need_check import DetectionMemory, need_score
from playground.plugins.sentry.params import SentryParams
from playground.plugins.sentry.repair import fresh_actions, hard_repair_message, rank_actions, soft_repair_message
from playground.plugins.sentry.verifier import RecoveryVerifier, Verdict

if TYPE_CHECKING:
    from playground.api import Services
    from playground.plugins.playbook.store import Playbook

# The defaults of the declared parameters (`params.SentryParams`: types, ranges and meanings); the LLM roles'
# "auto" (the paper's configuration) is the judge model when there is one (an explicit judge, else the agent's own
# model), else the rules / the template (scripted agents).
DEFAULTS: dict[str, Any] = SentryParams().model_dump()
RULE_ROLES = {"detector": "rules", "verifier": "rules", "summariser": "template", "need_judge": "rules"}
NAME = "sentry"
OWN_DETECTORS = (DETECTOR, "sentry-llm-judge")  # recurrence is judged on Sentry's own detections only
LOOP_LABELS = ("repetition_or_looping", "planning_stall")  # the progress failures whose actions `bar_loops` bars


class SentryConfigError(PlaygroundError, ValueError):
    """A Sentry parameter has a bad value."""


def parse_params(params: Mapping[str, Any] | SentryParams) -> dict[str, Any]:
    """Sentry's parameters as a dict: a `SentryParams` instance's values as they are (the host validated them),
    else the keys of `params` that `SentryParams` declares validated by it, strictly (as a run checks them: a bool
    is true or false, a number is not a string), the defaults filled in. SentryConfigError names the parameter,
    the rule it breaks and the value."""
    return declared_values(SentryParams, params, "sentry", SentryConfigError)


def judge_roles(params: dict[str, Any], judge_available: bool) -> dict[str, str]:
    """Each LLM-capable role's setting with "auto" resolved: the LLM where a judge model is available, else the
    rules (the template for the summariser)."""
    llm = {"detector": "llm", "verifier": "llm", "summariser": "llm", "need_judge": "llm"}
    return {role: (llm if judge_available else RULE_ROLES)[role] if params[role] == "auto" else params[role]
            for role in RULE_ROLES}


class SentryPlugin:
    """Per-episode Sentry state and its hook implementations (see module docstring)."""

    def __init__(self, params: Mapping[str, Any] | SentryParams, services: Services | None = None) -> None:
        self.p = parse_params(params)
        self.services = services
        judge = self._judge_model()
        self.roles = judge_roles(self.p, judge is not None)
        horizon, quiet, admission = int(self.p["horizon"]), int(self.p["quiet_steps"]), self.p["admission"]
        self.verifier: RecoveryVerifier = RecoveryVerifier(horizon, quiet, admission)
        self.judge_detector = self.need_judge = None
        self.summarise = summarise
        if judge is not None:
            from playground.plugins.sentry.judges import LLMDetector, LLMNeedCheck, LLMSummariser, LLMVerifier

            if self.roles["verifier"] == "llm":
                self.verifier = LLMVerifier(judge, horizon, quiet, admission)
            steps = (str(self.p["judge_history"]), int(self.p["window"]))  # what the detector and need check see
            if self.roles["detector"] in ("llm", "both"):
                self.judge_detector = LLMDetector(judge, *steps)
            if self.roles["summariser"] == "llm":
                self.summarise = LLMSummariser(judge).summarise
            if self.roles["need_judge"] == "llm":
                self.need_judge = LLMNeedCheck(judge, *steps)
        self.memory = DetectionMemory(int(self.p["window"]))
        self.remove_grade_text: Callable[[str], str] = keep_text  # the env's, once the episode starts
        self.playbook: Playbook | None = None
        # what Sentry keeps of the episode's start: ids and the playbook path for provenance, and
        # what the agent saw (never the env's reset info, which carries score and max_score)
        self.ids: EpisodeIds | None = None
        self.playbook_path: str | None = None
        self.first_observation = ""
        self.soft_repairs = 0
        self.last_soft_step: int | None = None
        self.last_soft_type: str | None = None
        self.bar: tuple[int, frozenset[tuple[str, str]]] | None = None  # (repair step, barred (observation, action))

    def _judge_model(self):
        """The judge model the LLM roles use: an explicit judge, else the agent's own model; None where no role
        asks for one or (roles on "auto") none is available. A role set to "llm" with no model is an error. Built
        by the host's services where Sentry was given them, else by `judges.judge_model_or_none`."""
        roles = [self.p[role] for role in RULE_ROLES]
        wants_llm = "llm" in roles or "both" in roles
        if not wants_llm and "auto" not in roles:
            return None
        from playground.plugins.sentry.judges import judge_model_or_none, make_judge_model

        model = judge_model_or_none(self.p) if self.services is None else self.services.judge(self.p, NAME)
        if model is None and wants_llm:
            return make_judge_model(self.p)  # raises, naming the parameters to give
        return model

    def _view(self, context: StepContext | BlindView) -> BlindView:
        """What the agent sees of `context`, with the grade text its env prints removed."""
        return blind_view(context, remove_grade_text=self.remove_grade_text)

    # -- episode -------------------------------------------------------------------

    @hookimpl
    def episode_started(self, start: EpisodeStart) -> None:
        self.remove_grade_text = start.remove_grade_text
        self.ids, self.playbook_path = start.ids, start.playbook
        self.first_observation = self.remove_grade_text(start.observation)
        self.verifier.start_episode(self.first_observation, start.goal)
        uses_playbook = self.p["soft_repair"] or self.p["persistent"]
        if start.playbook and uses_playbook:
            from playground.plugins.playbook.backend import playbook_exists
            from playground.plugins.playbook.store import Playbook

            read_only = bool(self.p["playbook_read_only"])
            if not read_only or playbook_exists(start.playbook):  # a file, or a PostgreSQL URL
                self.playbook = Playbook(start.playbook, read_only=read_only)

    @hookimpl
    def check_playbook(self, path: str) -> str | None:
        """Before the run: a playbook this harness may only read (`playbook_read_only`) must exist."""
        uses_playbook = self.p["soft_repair"] or self.p["persistent"]
        from playground.plugins.playbook.backend import playbook_exists

        if uses_playbook and self.p["playbook_read_only"] and not playbook_exists(path):
            return "playbook_read_only=true, but there is no playbook there to read (name an existing one)"
        return None

    @hookimpl
    def verify_at_end(self, end: EpisodeEnd):
        """Judge the repairs the episode's end cut short, on what was seen (never `end.won` or `end.status`)."""
        return self._verifications(self.verifier.finish())

    @hookimpl
    def episode_finished(self, end: EpisodeEnd) -> None:
        if self.playbook is not None:
            self.playbook.close()
            self.playbook = None

    # -- step ----------------------------------------------------------------------

    @hookimpl
    def agent_notes(self, context: StepContext):
        view = self._view(context)
        notes = [self._follow_up_note(view)]
        if self.p["persistent"] and self.playbook is not None:
            lines = [f"- [{lesson.failure_type}: {', '.join(lesson.labels)}] when {lesson.trigger}: {lesson.principle}"
                     for lesson in self.playbook.all()]
            notes.append("Playbook of lessons from earlier episodes:\n" + "\n".join(lines) if lines else None)
        return [n for n in notes if n] or None

    def _follow_up_note(self, view: BlindView) -> str | None:
        """In the `follow_up` steps after a progress repair, keep offering the actions not tried recently.

        Only the fresh actions are named, never the ones the agent was looping on: a small
        model tends to copy whatever actions its prompt mentions.
        """
        last = self.last_soft_step
        if last is None or not 0 < view.step - last <= int(self.p["follow_up"]):
            return None
        if self.last_soft_type != "progress":
            return None
        offered = fresh_actions(view, int(self.p["window"]), int(self.p["top_actions"]))
        return ("You were stuck a few steps ago. Keep making progress; actions you have not tried recently: "
                + ", ".join(offered)) if offered else None

    @hookimpl
    def detect_failures(self, context: StepContext, proposal: Proposal):
        view, proposal = self._view(context), blind_proposal(proposal)
        rules = self.p["screen"] and self.roles["detector"] in ("rules", "both")
        found = run_detectors(view, proposal, int(self.p["window"]), screen=bool(rules),
                              first_observation=self.first_observation)
        if (self.judge_detector is None or not self.p["screen"]
                or any(d.failure_type == "action_validity" for d in found)):
            return found
        judged = self.judge_detector.detect(view, proposal,
                                            make_window(view, int(self.p["window"]), self.first_observation))
        return found + ([judged] if judged else [])

    @hookimpl
    def decide_intervention(self, context: StepContext, proposal: Proposal, detections):
        view, proposal = self._view(context), blind_proposal(proposal)
        if view.attempt == 0:
            own = [d for d in detections if d.detector in OWN_DETECTORS]
            self.verifier.note_detections(view.step, own)
            self.memory.note(view.step, [d for d in own if d.failure_type != "action_validity"])
        invalid = [d for d in detections if d.failure_type == "action_validity"]
        if invalid and self.p["hard_repair"]:
            return self._hard_repair(view, proposal, invalid[0])
        barred = self._barred(view, proposal)
        if barred is not None:
            return barred
        if invalid or not self.p["soft_repair"]:
            return None
        if view.attempt > 0:
            return self._insisted_stop(view, proposal, detections)
        return self._soft_repair(view, proposal, detections)

    def _insisted_stop(self, view: BlindView, proposal: Proposal, detections) -> Decision | None:
        """The agent still wants to stop after the advice: offer concrete actions once more."""
        early = [d for d in detections if "termination_miscalibration" in d.labels]
        if not (early and proposal.finish and self.p["block_early_stop"] and view.admissible_actions):
            return None
        if view.attempt >= int(self.p["max_reasks_per_step"]):
            return None
        ranked = tuple(rank_actions(view, int(self.p["top_actions"])))
        message = InterventionMessage("hard_repair", "The task is not finished. Choose one of these actions:\n"
                                      + "\n".join(f"- {a}" for a in ranked), "progress", ranked, early[0].labels,
                                      restrict=bool(self.p["shortlist"]))
        return Decision(NAME, "termination_guard", message=message, detections=tuple(early))

    def _hard_repair(self, view: BlindView, proposal: Proposal, detection: Detection) -> Decision | None:
        closest_to = proposal.action if self.p["hard_rank"] == "closest" else None
        if view.attempt < int(self.p["max_reasks_per_step"]):
            message = hard_repair_message(view, detection, int(self.p["top_actions"]), closest_to,
                                          restrict=bool(self.p["shortlist"]))
            return Decision(NAME, "hard_repair", message=message, detections=(detection,))
        fallback = self.p["fallback"]
        ranked = rank_actions(view, 1, closest_to)
        if fallback == "best" and ranked:
            return Decision(NAME, "hard_repair_fallback", action=ranked[0], detections=(detection,))
        if fallback == "give_up":
            return Decision(NAME, "give_up", stop=True, detections=(detection,))
        return None

    def _looped(self, view: BlindView, proposal: Proposal) -> frozenset[tuple[str, str]]:
        """The (observation, action) pairs the agent was looping on: the proposal in the current state,
        and every pair the last W steps repeated. A pair, not an action: the same action from
        another state is not the loop (walking back along a corridor is not)."""
        history, size = view.history, int(self.p["window"])
        before = [history[i - 1].observation if i > 0 else self.first_observation for i in range(len(history))]
        pairs = [(b.strip(), t.action.strip()) for b, t in zip(before[-size:], history[-size:])] if size else []
        looped = ({pair for pair in pairs if pairs.count(pair) >= 2}
                  | {(view.observation.strip(), proposal.action.strip())})
        return frozenset(pair for pair in looped if pair[1])

    def _barred(self, view: BlindView, proposal: Proposal) -> Decision | None:
        """`bar_loops`: the agent proposes, within N steps of a loop repair, an action it was looping on
        from the state it looped in."""
        if self.bar is None or proposal.finish:
            return None
        step, pairs = self.bar
        here = view.observation.strip()
        actions = {action for state, action in pairs if state == here}
        if proposal.action.strip() not in actions or view.step > step + int(self.p["bar_loops"]):
            return None
        if view.step == step and view.attempt == 0:  # the looped proposal itself: the soft repair's business
            return None
        others = [a for a in rank_actions(view, len(view.admissible_actions or ())) if a not in actions]
        if not others:
            return None
        if view.attempt < int(self.p["max_reasks_per_step"]):
            offered = tuple(others[:int(self.p["top_actions"])])
            message = InterventionMessage(
                "hard_repair", f"You were looping on {proposal.action!r}; it is barred for a few steps. "
                "Choose one of these actions instead:\n" + "\n".join(f"- {a}" for a in offered), "progress", offered,
                LOOP_LABELS)
            return Decision(NAME, "loop_bar", message=message, details={"barred": sorted(actions)})
        return Decision(NAME, "loop_bar", action=others[0], details={"barred": sorted(actions)})

    def _soft_repair(self, view: BlindView, proposal: Proposal, detections) -> Decision | None:
        candidates = [d for d in detections if d.failure_type != "action_validity"]
        if not candidates or self.soft_repairs >= int(self.p["max_repairs"]):
            return None
        need: dict[str, Any] = {}
        if self.p["need_check"]:
            cooling = self.last_soft_step is not None and view.step - self.last_soft_step <= int(self.p["cooldown"])
            if cooling and not proposal.finish:  # stopping ends the episode: never let a cooldown wave it through
                return None
            chosen, need = self._need_check(view, proposal, candidates)
            if chosen is None:
                return None
            detection = chosen
        else:
            detection = max(candidates, key=lambda d: d.confidence)
        lessons = self._retrieve(view, detection)
        message = soft_repair_message(view, detection, lessons, int(self.p["window"]), int(self.p["top_actions"]),
                                      shortlist=bool(self.p["shortlist"]))
        ids = tuple(item.lesson.id for item in lessons)
        self.verifier.watch(view.step, detection, ids, proposal.action)
        self.soft_repairs += 1
        self.last_soft_step = view.step
        self.last_soft_type = detection.failure_type
        if int(self.p["bar_loops"]) > 0 and set(detection.labels) & set(LOOP_LABELS) and not proposal.finish:
            self.bar = (view.step, self._looped(view, proposal))
        return Decision(NAME, "soft_repair", message=message, detections=(detection,),
                        details={"lessons": list(ids), "why": [item.reason for item in lessons],
                                 **({"need_check": need} if need else {})})

    def _need_check(self, view: BlindView, proposal: Proposal,
                    candidates: list[Detection]) -> tuple[Detection | None, dict[str, Any]]:
        """The intervention-need check: the detection to repair (None: no intervention now) and how it was decided.

        The rules score each detection's need from the evidence (`need_check.need_score`) and repair the
        neediest above `threshold`; an LLM need check asks the judge model about that detection instead,
        falling back to the rules when its reply is unusable."""
        scored = [(need_score(d, self.memory.recurrences(view.step, d), proposal.finish), d) for d in candidates]
        score, detection = max(scored, key=lambda pair: pair[0])
        if self.need_judge is not None:
            window = make_window(view, int(self.p["window"]), self.first_observation)
            intervene, why = self.need_judge.decide(view, detection, proposal, window)
            if intervene is not None:
                return (detection if intervene else None), {"by": "llm", "intervene": intervene, "why": why}
        passed = score >= float(self.p["threshold"])
        return (detection if passed else None), {"by": "rules", "need": round(score, 3)}

    def _retrieve(self, view: BlindView, detection: Detection) -> list:
        mode = self.p["retrieval"]
        if self.playbook is None or mode == "off":
            return []
        rng = random.Random(f"{self.ids.episode_id if self.ids else ''}:{view.step}") if mode == "random" else None
        return self.playbook.retrieve(detection.failure_type, detection.labels, int(self.p["k"]), mode=mode, rng=rng,
                                      origin=self._origin(view.step))

    def _origin(self, step: int) -> dict[str, Any]:
        """The provenance of what this episode writes to the playbook at a repair step: lessons and counter updates
        are keyed by it, so a replayed episode counts each once and a discarded one can be taken back."""
        ids = self.ids
        assert ids is not None  # set when the episode starts
        return {"run": ids.run_id, "env": ids.env, "task": ids.task_id, "episode": ids.episode_id,
                "attempt": ids.attempt, "step": step}

    @hookimpl
    def verify_recovery(self, outcome: StepOutcome):
        return self._verifications(self.verifier.observe(blind_outcome(outcome,
                                                                       remove_grade_text=self.remove_grade_text)))

    def _verifications(self, verdicts: list[Verdict]) -> list[Verification]:
        results = []
        for verdict in verdicts:
            w = verdict.watch
            lesson = None
            if self.playbook is not None and not self.playbook.read_only:
                if verdict.resolved is not None and w.lesson_ids:
                    self.playbook.record_outcomes(w.lesson_ids, verified=True, helped=verdict.resolved,
                                                  origin=self._origin(w.repair_step))
                if verdict.resolved is not False and self.p["update_playbook"]:
                    lesson = self._store_lesson(verdict)
            results.append(Verification(NAME, w.repair_step, w.detection.failure_type, verdict.name, verdict.evidence,
                                        lesson))
        return results

    def _store_lesson(self, verdict: Verdict) -> dict:
        draft = self.summarise(verdict, verdict.watch.failing_action or "")
        assert self.playbook is not None  # lessons are stored only with a playbook, mid-episode
        provenance = self._origin(verdict.watch.repair_step)
        # the texts come from what the agent saw: a lone surrogate there is written as U+FFFD, not refused
        from playground.plugins.playbook.io import without_surrogates

        trigger, principle, subtype = (without_surrogates(t) for t in (draft.trigger, draft.principle, draft.subtype))
        draft = replace(draft, trigger=trigger, principle=principle, subtype=subtype)
        lesson_id = self.playbook.add(draft.failure_type, draft.labels, draft.trigger, draft.principle,
                                      subtype=draft.subtype, provenance=provenance)
        return {"id": lesson_id, "failure_type": draft.failure_type, "labels": list(draft.labels),
                "subtype": draft.subtype, "trigger": draft.trigger, "principle": draft.principle,
                "provenance": provenance, "playbook": str(self.playbook_path)}
