"""Sentry is blind to grades by construction: fuzzing reward, score, max_score, won (and the
won/lost status) in recorded hook payloads changes none of its detections, decisions,
verdicts or lessons.

Episodes are played under Sentry with a recorder around it; the recorded payloads are then
replayed into fresh Sentry objects (each with a copy of the same seeded playbook), once as
recorded and several times with random grades. A planted leak (the old `score_rose`) must be
caught, so the test has the power to see one.

Grades printed in the observation text are fuzzed the same way: the built-in envs' score lines
and banners planted into the observations of an env whose `remove_grade_text` removes them
change nothing either, and a Sentry that reads observations without the env's
`remove_grade_text` is caught.
"""

from __future__ import annotations

import dataclasses
import random
import shutil
from pathlib import Path

import pytest

from playground.agents.noisy import NoisyAgent
from playground.core.hookspecs import hookimpl
from playground.core.payloads import EpisodeEnd, EpisodeStart, StepContext, StepOutcome, keep_text, to_dict
from playground.plugins.playbook.store import Playbook
from playground.plugins.sentry.harness import SentryPlugin
from playground.testing import play, tiny_env
from playground.testing.tiny import TinyEnv

HOOKS = ("episode_started", "agent_notes", "detect_failures", "decide_intervention", "verify_recovery",
         "verify_at_end", "episode_finished")
NOISY = {"invalid": 0.1, "repeat": 0.15, "stall": 0.15, "drift": 0.08, "stop": 0.08, "recover_matching": 0.6,
         "recover_other": 0.4}


class Recorder:
    """Wraps a Sentry object: passes every hook on and records its keyword arguments."""

    def __init__(self, inner: SentryPlugin) -> None:
        self.inner, self.calls = inner, []

    def _pass(self, hook: str, **kwargs):
        self.calls.append((hook, kwargs))
        return getattr(self.inner, hook)(**kwargs)

    @hookimpl
    def episode_started(self, start):
        return self._pass("episode_started", start=start)

    @hookimpl
    def agent_notes(self, context):
        return self._pass("agent_notes", context=context)

    @hookimpl
    def detect_failures(self, context, proposal):
        return self._pass("detect_failures", context=context, proposal=proposal)

    @hookimpl
    def decide_intervention(self, context, proposal, detections):
        return self._pass("decide_intervention", context=context, proposal=proposal, detections=detections)

    @hookimpl
    def verify_recovery(self, outcome):
        return self._pass("verify_recovery", outcome=outcome)

    @hookimpl
    def verify_at_end(self, end):
        return self._pass("verify_at_end", end=end)

    @hookimpl
    def episode_finished(self, end):
        return self._pass("episode_finished", end=end)


def seed_playbook(path: Path) -> Path:
    with Playbook(path) as pb:
        pb.add("progress", ["repetition_or_looping"], "looping", "do something new", subtype="repeat:look")
        pb.add("progress", ["planning_stall"], "idling", "change the world", subtype="idle:look")
        pb.add("grounding", ["objective_drift"], "drifting", "back to the goal's objects", subtype="off_goal:take")
    return path


def record(env, tasks, params, playbook: Path, max_steps=30, agent_options=NOISY):
    """Play `tasks` under a recorded Sentry; return the recorded calls of each episode."""
    episodes = []
    for task in tasks:
        recorder = Recorder(SentryPlugin(params))
        play(env, NoisyAgent(**agent_options), plugins=[recorder], task=task, max_steps=max_steps, params=params,
             playbook=str(playbook), harness="sentry")
        episodes.append(recorder.calls)
    return episodes


# -- fuzzing the grades --------------------------------------------------------------


def _grade(rng: random.Random):
    return rng.choice([None, 0.0, 1.0, -1.0, rng.uniform(-5, 100), float(rng.randint(0, 10))])


def _context(context: StepContext, rng: random.Random) -> StepContext:
    history = tuple(dataclasses.replace(t, reward=rng.uniform(-10, 10), score=_grade(rng)) for t in context.history)
    return dataclasses.replace(context, score=_grade(rng), max_score=_grade(rng), history=history)


def fuzz(hook: str, kwargs: dict, rng: random.Random) -> dict:
    """The same payloads with random reward, score, max_score, won (and won/lost status)."""
    out = dict(kwargs)
    if "context" in out:
        out["context"] = _context(out["context"], rng)
    if "outcome" in out:
        o: StepOutcome = out["outcome"]
        out["outcome"] = dataclasses.replace(o, context=_context(o.context, rng), reward=rng.uniform(-10, 10),
                                             score=_grade(rng), won=rng.random() < 0.5)
    if "end" in out:
        end: EpisodeEnd = out["end"]
        status = rng.choice(["won", "lost"]) if end.status in ("won", "lost") else end.status
        out["end"] = dataclasses.replace(end, won=rng.random() < 0.5, status=status)
    if "start" in out:
        start: EpisodeStart = out["start"]
        info = {**start.env_info, "score": _grade(rng), "max_score": _grade(rng), "won": rng.random() < 0.5,
                "reward": rng.uniform(-1, 1)}
        out["start"] = dataclasses.replace(start, env_info=info)
    return out


def _plain(value):
    """Comparable form of a hook result (the playbook path a lesson names differs by replay)."""
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if dataclasses.is_dataclass(value):
        value = to_dict(value)
        if isinstance(value.get("lesson"), dict):
            value["lesson"] = {k: v for k, v in value["lesson"].items() if k != "playbook"}
    return value


def replay(calls, make_plugin, playbook: Path, rng: random.Random | None, alter=fuzz) -> list:
    """Feed recorded calls into a fresh plugin (altered by `alter`, fuzzed grades by default, when `rng` is
    given); return every result."""
    plugin = make_plugin()
    results, detections = [], []
    for hook, kwargs in calls:
        kwargs = alter(hook, kwargs, rng) if rng is not None else dict(kwargs)
        if hook == "episode_started":
            kwargs["start"] = dataclasses.replace(kwargs["start"], playbook=str(playbook))
        if hook == "decide_intervention":
            kwargs["detections"] = detections  # what this plugin detected, not what was recorded
        result = getattr(plugin, hook)(**kwargs)
        if hook == "detect_failures":
            detections = list(result or [])
        results.append((hook, _plain(result)))
    return results


def differences(episodes, make_plugin, seed_path: Path, work: Path, fuzzes: int = 4, alter=fuzz) -> list[str]:
    """Replay each episode as recorded and `fuzzes` times altered by `alter` (random grades by default); name
    every difference."""
    found = []
    for e, calls in enumerate(episodes):
        for f in range(fuzzes + 1):
            path = work / f"replay-{e}-{f}.sqlite"
            shutil.copy(seed_path, path)
            results = replay(calls, make_plugin, path, random.Random(f"{e}:{f}") if f else None, alter)
            if f == 0:
                reference = results
                continue
            for i, (got, want) in enumerate(zip(results, reference)):
                if got != want:
                    found.append(f"episode {e}, fuzz {f}, call {i} ({want[0]}): {got[1]!r} != {want[1]!r}")
                    break
    return found


def summary(episodes, make_plugin, seed_path: Path, work: Path) -> dict:
    counts = {"detections": 0, "decisions": 0, "verdicts": 0, "lessons": 0}
    for e, calls in enumerate(episodes):
        path = work / f"count-{e}.sqlite"
        shutil.copy(seed_path, path)
        for hook, result in replay(calls, make_plugin, path, None):
            if hook == "detect_failures":
                counts["detections"] += len(result or [])
            elif hook == "decide_intervention":
                counts["decisions"] += result is not None
            elif hook in ("verify_recovery", "verify_at_end"):
                counts["verdicts"] += len(result)
                counts["lessons"] += sum(1 for v in result if v["lesson"])
    return counts


class ScoreReadingSentry(SentryPlugin):
    """A planted leak: the old `score_rose`, a higher env score counting as progress."""

    def __init__(self, params):
        super().__init__(params)
        self.best = None

    def verify_recovery(self, outcome):
        if outcome.score is not None and (self.best is None or outcome.score > self.best):
            if self.best is not None:
                for watch in self.verifier.watches:
                    watch.progress_action = watch.progress_action or outcome.proposal.action
                    watch.relevant_action = watch.relevant_action or outcome.proposal.action
            self.best = outcome.score
        return super().verify_recovery(outcome)


TINY_TASKS = [f"tiny-{i}" for i in range(20_000, 20_012)]


@pytest.fixture(scope="module")
def tiny_recording(tmp_path_factory):
    work = tmp_path_factory.mktemp("blind")
    seed = seed_playbook(work / "seed.sqlite")
    recorded = shutil.copy(seed, work / "recorded.sqlite")
    return record(tiny_env(), TINY_TASKS, {}, Path(recorded)), seed, work


@pytest.mark.parametrize("params", [{}, {"admission": "early"}, {"bar_loops": 3}, {"need_check": False}],
                         ids=["window", "early", "bar-loops", "no-need-check"])
def test_fuzzed_grades_change_no_detection_decision_verdict_or_lesson(tiny_recording, params):
    episodes, seed, work = tiny_recording
    counts = summary(episodes, lambda: SentryPlugin(params), seed, work)
    assert counts["detections"] > 20 and counts["decisions"] > 10 and counts["verdicts"] > 3 and counts["lessons"] > 0
    assert differences(episodes, lambda: SentryPlugin(params), seed, work) == []


def test_fuzzed_grades_change_nothing_where_the_env_checks_a_schema(tmp_path):
    """Schema problems reach Sentry's view (they come from the action and the schema, not a grade): its
    hard repairs of schema-invalid actions do not move with the grades either."""
    from tests.test_sentry_schema import ToolTiny

    seed = seed_playbook(tmp_path / "seed.sqlite")
    recorded = Path(shutil.copy(seed, tmp_path / "recorded.sqlite"))
    episodes = record(ToolTiny(expert=True), TINY_TASKS[:8], {}, recorded, agent_options={**NOISY, "invalid": 0.3})
    schema_checked = [kwargs["context"].schema_problems for calls in episodes for hook, kwargs in calls
                      if hook == "decide_intervention"]
    assert sum(bool(problems) for problems in schema_checked) >= 5
    counts = summary(episodes, lambda: SentryPlugin({}), seed, tmp_path)
    assert counts["decisions"] > 5
    assert differences(episodes, lambda: SentryPlugin({}), seed, tmp_path) == []


def test_the_fuzz_catches_a_planted_score_read(tiny_recording):
    episodes, seed, work = tiny_recording
    assert differences(episodes, lambda: ScoreReadingSentry({}), seed, work)


@pytest.mark.slow
def test_fuzzed_grades_change_nothing_on_recorded_textworld_episodes(tmp_path, monkeypatch):
    from playground.envs.textworld.provider import TextWorldProvider

    monkeypatch.setenv("PLAYGROUND_CACHE", str(tmp_path / "cache"))
    tasks = ["custom-20000", "custom-20001", "custom-20002"]
    provider = TextWorldProvider()
    provider.prepare("custom", tasks)
    seed = seed_playbook(tmp_path / "seed.sqlite")
    recorded = Path(shutil.copy(seed, tmp_path / "recorded.sqlite"))
    episodes = record(provider.make("custom", expert=True), tasks, {}, recorded, max_steps=40)
    counts = summary(episodes, lambda: SentryPlugin({}), seed, tmp_path)
    assert counts["detections"] > 0 and counts["verdicts"] > 0
    assert differences(episodes, lambda: SentryPlugin({}), seed, tmp_path) == []
    assert differences(episodes, lambda: ScoreReadingSentry({}), seed, tmp_path)


# -- fuzzing the grade text an env prints ----------------------------------------------


def _remove_builtin_grade_text(text: str) -> str:
    """The built-in envs' `remove_grade_text`, one after the other (TextWorld, WebShop, Finance, tiny)."""
    from playground.envs.finance.env import without_grade_text as finance
    from playground.envs.textworld.grades import without_grade_text as textworld
    from playground.envs.webshop.env import without_grade_text as webshop
    from playground.testing.tiny import without_grade_text as tiny

    for remove in (finance, webshop, textworld, tiny):
        text = remove(text)
    return text


class GradeTextTiny(TinyEnv):
    """`tiny` whose `remove_grade_text` removes the grade text every built-in env prints."""

    def remove_grade_text(self, text: str) -> str:
        return _remove_builtin_grade_text(text)


# (grade text, where it may go: "end" only for the text the env prints last in its observation)
PLANTED = (("Your score has just gone up by one point.", "anywhere"), ("You scored 1 out of a possible 1.", "anywhere"),
           ("*** The End ***", "anywhere"), ("Your score (min 0.0, max 1.0): 1.0", "anywhere"),
           ("Score: 1 of 1", "end"))


def plant(text: str, rng: random.Random) -> str:
    """`text` with one to three of the built-in envs' grade texts planted: as a sentence after it, on a line of
    its own after it (or, where the env may print it anywhere, before it)."""
    chosen = rng.sample(PLANTED, k=rng.randint(1, 3))
    for grade, where in sorted(chosen, key=lambda item: item[1] == "end"):  # the "end" one last
        place = rng.choice(["sentence", "line"] + (["before"] if where == "anywhere" else []))
        if place == "sentence":
            text = f"{text} {grade}"
        elif place == "line":
            text = f"{text}\n\n{grade}"
        else:
            text = f"{grade}\n\n{text}"
    return text


def plant_grade_text(hook: str, kwargs: dict, rng: random.Random) -> dict:
    """The same payloads with grade text planted into about half of their observations (each copy of an
    observation on its own: the current one, the history's, the outcome's, the first one)."""

    def maybe(text: str) -> str:
        return plant(text, rng) if rng.random() < 0.5 else text

    def context(c: StepContext) -> StepContext:
        history = tuple(dataclasses.replace(t, observation=maybe(t.observation)) for t in c.history)
        return dataclasses.replace(c, observation=maybe(c.observation), history=history)

    out = dict(kwargs)
    if "context" in out:
        out["context"] = context(out["context"])
    if "outcome" in out:
        o: StepOutcome = out["outcome"]
        out["outcome"] = dataclasses.replace(o, context=context(o.context), observation=maybe(o.observation))
    if "start" in out:
        out["start"] = dataclasses.replace(out["start"], observation=maybe(out["start"].observation))
    return out


def _observations(episodes) -> set[str]:
    found = set()
    for calls in episodes:
        for _, kwargs in calls:
            for c in [kwargs.get("context"), getattr(kwargs.get("outcome"), "context", None)]:
                if c is not None:
                    found |= {c.observation, *(t.observation for t in c.history)}
            if "outcome" in kwargs:
                found.add(kwargs["outcome"].observation)
            if "start" in kwargs:
                found.add(kwargs["start"].observation)
    return found


class GradeTextReadingSentry(SentryPlugin):
    """A planted leak: Sentry reading observations as they are, without the env's `remove_grade_text`."""

    def episode_started(self, start):
        return super().episode_started(dataclasses.replace(start, remove_grade_text=keep_text))


RULES = {"detector": "rules", "verifier": "rules", "summariser": "template"}


def test_planted_grade_text_changes_no_detection_decision_verdict_or_lesson(tmp_path):
    """Score lines and banners the built-in envs print ("Your score has just gone up by one point.", "*** The
    End ***", WebShop's "Your score (min 0.0, max 1.0): 1.0", Finance's "Score: 1 of 1", ...), planted into the
    observations of an env whose `remove_grade_text` removes them, change none of Sentry's detections,
    decisions, verdicts or lessons (rule detector and verifier, template summariser): Sentry reads every
    observation through `EpisodeStart.remove_grade_text`. Read without it, the same planting is caught."""
    seed = seed_playbook(tmp_path / "seed.sqlite")
    recorded = Path(shutil.copy(seed, tmp_path / "recorded.sqlite"))
    env = GradeTextTiny(expert=True)
    episodes = record(env, TINY_TASKS, RULES, recorded)
    starts = [kwargs["start"] for calls in episodes for hook, kwargs in calls if hook == "episode_started"]
    assert all(start.remove_grade_text.__wrapped__ == env.remove_grade_text for start in starts)
    rng = random.Random(7)
    for text in _observations(episodes):  # the planting is exactly what the env's remove_grade_text takes away
        assert env.remove_grade_text(plant(text, rng)) == env.remove_grade_text(text)
    counts = summary(episodes, lambda: SentryPlugin(RULES), seed, tmp_path)
    assert counts["detections"] > 20 and counts["decisions"] > 10 and counts["verdicts"] > 3 and counts["lessons"] > 0
    assert differences(episodes, lambda: SentryPlugin(RULES), seed, tmp_path, alter=plant_grade_text) == []
    assert differences(episodes, lambda: GradeTextReadingSentry(RULES), seed, tmp_path, alter=plant_grade_text)
