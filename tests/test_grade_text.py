"""No grade text reaches a judge: each env's `remove_grade_text` takes the grade text it prints out of a real
observation and keeps the rest, the loop hands the env's method to plugins (`EpisodeStart.remove_grade_text`),
and the post-hoc LLM judges (AED's producer, DARC's diagnoser) build their prompts from cleaned observations."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from playground.core.env import TextEnv, cut_grade_text, grade_text_pattern
from playground.core.hookspecs import hookimpl
from playground.core.payloads import keep_text
from playground.envs.finance.env import FinanceEnv, FinanceProvider
from playground.envs.textworld.grades import without_grade_text as textworld_grade_free
from playground.envs.textworld.provider import TextWorldProvider
from playground.envs.webshop.env import WebShopProvider
from playground.testing import ScriptedAgent, play, tiny_env
from playground.testing.tiny import TinyEnv, TinyProvider
from tests.conftest import cli

# every grade text a built-in env prints, for "none of it is left" checks
GRADE = re.compile(r"score|scored|\*\*\*|well done", re.I)


def play_expert(env, task: str):
    """Reset `env` on `task` and follow its expert plan to the end; return every (action, observation)."""
    observation, info = env.reset(options={"task": task})
    seen = [("", observation)]
    while info.get("expert_plan"):
        action = info["expert_plan"][0]
        observation, _, terminated, _, info = env.step(action)
        seen.append((action, observation))
        if terminated:
            break
    return seen, info


# -- the shared cut ------------------------------------------------------------------------------------------


def test_cut_grade_text_drops_whole_lines_and_sentences_and_tidies_blank_lines():
    pattern = grade_text_pattern(r"Grade: \d+\.", r"\*\*\* Won \*\*\*")
    assert cut_grade_text("You act.\n\nGrade: 3.\n\n*** Won ***\n\nAfter.", pattern) == "You act.\n\nAfter."
    assert cut_grade_text("You act.\n\nGrade: 3.", pattern) == "You act."
    assert cut_grade_text("*** Won ***\n\nYou act.", pattern) == "You act."
    assert cut_grade_text("You act. Grade: 3. You see a box.", pattern) == "You act. You see a box."
    assert cut_grade_text("  You act. Grade: 3.\nnext", pattern) == "  You act.\nnext"  # indentation kept
    untouched = "Nothing graded.\n\n\n  here  \n"
    assert cut_grade_text(untouched, pattern) is untouched  # no match: the very text, extra blank lines and all
    once = cut_grade_text("A.\n\nGrade: 1.\n\nB.", pattern)
    assert cut_grade_text(once, pattern) == once


def test_the_default_keeps_the_text_and_envs_without_grade_text_keep_the_default():
    from playground.envs.workflow.env import WorkflowEnv, WorkflowProvider

    text = "Your score has just gone up by one point."
    assert TextEnv.remove_grade_text(TinyEnv(), text) == text
    assert WorkflowProvider().remove_grade_text(text) == text
    # workflow's status line is the agent's own progress count, not a grade: it prints no grade text
    assert WorkflowEnv.remove_grade_text is TextEnv.remove_grade_text


# -- each env: a real observation loses exactly its grade text ------------------------------------------------


def test_tiny_loses_its_win_banner_and_keeps_the_drop():
    env = tiny_env()
    seen, info = play_expert(env, "tiny-20003")
    assert info["won"]
    last = seen[-1][1]
    assert "Well done" in last
    assert env.remove_grade_text(last) == last.split(" Well done")[0]  # "You drop the red key."
    assert env.remove_grade_text(last).startswith("You drop the ")
    assert TinyProvider().remove_grade_text(last) == env.remove_grade_text(last)
    for _, observation in seen[:-1]:  # nothing else it printed was a grade
        assert env.remove_grade_text(observation) == observation


def test_webshop_loses_the_purchase_score_and_keeps_the_confirmation():
    provider = WebShopProvider()
    env = provider.make("generated", expert=True)
    seen, info = play_expert(env, "generated-20000")
    last = seen[-1][1]
    match = re.fullmatch(r"(Thank you for shopping with us! You bought .*\.) Your score \(min 0\.0, max 1\.0\): "
                         r"\d\.\d\d", last, re.S)
    assert match, last
    assert env.remove_grade_text(last) == match.group(1)
    assert provider.remove_grade_text(last) == match.group(1)
    for _, observation in seen[:-1]:
        assert env.remove_grade_text(observation) == observation


@pytest.mark.parametrize("right", [True, False])
def test_finance_loses_the_answer_score_and_keeps_the_answer(right):
    env = FinanceEnv("formula", expert=True)
    task = FinanceProvider().task_sets()["formula"].tasks("test", 1)[0]
    observation, info = env.reset(options={"task": task})
    assert env.remove_grade_text(observation) == observation  # the question
    answer = info["expert_plan"][0] if right else "12345.67"
    observation, *_ = env.step(answer)
    assert observation.endswith(f"Score: {1 if right else 0} of 1.")
    assert env.remove_grade_text(observation) == f"Answer recorded: {answer!r}."
    assert FinanceProvider().remove_grade_text(observation) == f"Answer recorded: {answer!r}."


# TextWorld's text as its games print it (Inform 7 with TextWorld's templates), taken from generated games:
# easy-20000 won with "drop Advent Calendar", cooking-20000 lost by eating an ingredient of the recipe.
WON = ("You drop the Advent Calendar on the ground.\n\nYour score has just gone up by one point.\n\n*** The End ***"
       "\n\nYou scored 1 out of a possible 1, in 2 turns.")
LOST = "You eat the chicken wing. Not bad.\n\n*** You lost! ***\n\nYou scored 1 out of a possible 3, in 6 turns."
POINT = "You take the chicken wing from the fridge.\n\nYour score has just gone up by one point."


def test_textworld_loses_its_score_lines_and_banners():
    assert textworld_grade_free(WON) == "You drop the Advent Calendar on the ground."
    assert textworld_grade_free(LOST) == "You eat the chicken wing. Not bad."
    assert textworld_grade_free(POINT) == "You take the chicken wing from the fridge."
    assert textworld_grade_free("You put it down.\n\nYour score has just gone up by two points.") == "You put it down."
    assert textworld_grade_free("You scored a total of 3 points, in 7 turns.") == ""
    room = "-= Kitchen =-\nYou are in a kitchen.\n\nThere is a score sheet on the table."  # a thing, not a grade
    assert textworld_grade_free(room) == room
    assert TextWorldProvider().remove_grade_text(WON) == textworld_grade_free(WON)


@pytest.fixture(scope="module")
def textworld_games(tmp_path_factory):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PLAYGROUND_CACHE", str(tmp_path_factory.mktemp("playground-cache")))
        provider = TextWorldProvider()
        provider.prepare("easy", ["easy-20000"])
        provider.prepare("cooking", ["cooking-20000"])
        yield provider


@pytest.mark.slow
def test_a_real_textworld_game_loses_its_score_line_and_end_banner(textworld_games):
    env = textworld_games.make("easy", expert=True)
    try:
        seen, info = play_expert(env, "easy-20000")
        assert info["won"]
        last = seen[-1][1]
        assert "Your score has just gone up by one point." in last and "*** The End ***" in last
        assert "You scored 1 out of a possible 1, in " in last
        cleaned = env.remove_grade_text(last)
        assert cleaned == last.split("\n\n")[0] and not GRADE.search(cleaned)  # "You drop the ... on the ground."
        for _, observation in seen[:-1]:
            assert env.remove_grade_text(observation) == observation
    finally:
        env.close()


@pytest.mark.slow
def test_a_real_textworld_loss_loses_its_banner(textworld_games):
    """Eating an ingredient the recipe needs loses a cooking game: "*** You lost! ***" and the score line go."""
    env = textworld_games.make("cooking", expert=True)
    try:
        observation, info = env.reset(options={"task": "cooking-20000"})
        lost = None
        while info["expert_plan"] and lost is None:
            action = info["expert_plan"][0]
            observation, _, _, _, info = env.step(action)
            taken = action.split(" from ")[0].removeprefix("take ") if action.startswith("take ") else None
            if taken and f"eat {taken}" in info["admissible_actions"]:
                lost = env.step(f"eat {taken}")
        assert lost is not None and lost[4]["lost"]
        text = lost[0]
        assert "*** You lost! ***" in text and "out of a possible" in text
        cleaned = env.remove_grade_text(text)
        assert cleaned == text.split("\n\n")[0] and cleaned.startswith("You eat the ") and not GRADE.search(cleaned)
    finally:
        env.close()


# -- the loop hands the env's method to plugins ---------------------------------------------------------------


class StartRecorder:
    def __init__(self) -> None:
        self.starts: list = []
        self.cleaned: list[str] = []

    @hookimpl
    def episode_started(self, start):
        self.starts.append(start)

    @hookimpl
    def step_completed(self, outcome):
        self.cleaned.append(self.starts[-1].remove_grade_text(outcome.observation))


def test_the_loop_hands_plugins_the_envs_remove_grade_text():
    env, recorder = tiny_env(), StartRecorder()
    result = play(env, ScriptedAgent(), [recorder], task="tiny-20003")
    assert result.result.won
    start = recorder.starts[0]
    assert start.remove_grade_text.__wrapped__ == env.remove_grade_text  # the env's own method, guarded
    last = result.of("step")[-1]["observation"]
    assert "Well done" in last and recorder.cleaned[-1] == env.remove_grade_text(last) == last.split(" Well")[0]
    assert start.remove_grade_text("plain text") == "plain text"


def test_a_fork_hands_its_observers_the_envs_remove_grade_text(tmp_path):
    """`playground fork` plays through the same loop: the env it rebuilt gives its own `remove_grade_text`."""
    from playground.host.manager import get_host
    from playground.run.forks import fork, load_episode
    from playground.core.events import HeaderEvent
    from playground.run.traces import TraceWriter

    path = tmp_path / "trace.jsonl"
    trace = TraceWriter(path, HeaderEvent(env="tiny", task_set="default", task_id="tiny-20003", seed=0, max_steps=10,
                                          episode_id="e", run_id="r", harness="base"))
    played = play(tiny_env(), ScriptedAgent(["look"]), task="tiny-20003", max_steps=1)
    for event in played.trace:
        trace.emit(event)
    trace.close()
    recorder = StartRecorder()
    result = fork(get_host(), load_episode(path), 1, tmp_path / "fork.jsonl", agent="expert",
                  observers=[("rec", recorder)])
    assert result.won
    won = "You drop the red key. Well done: the red key is back in the hall."
    assert recorder.starts[0].remove_grade_text(won) == "You drop the red key."
    assert recorder.cleaned[-1].startswith("You drop the ") and "Well done" not in recorder.cleaned[-1]


class NoMethodEnv:
    """A gymnasium env that is no `TextEnv`: it has no `remove_grade_text`."""

    def __init__(self) -> None:
        self.inner = tiny_env()

    def reset(self, *, seed=None, options=None):
        return self.inner.reset(seed=seed, options=options)

    def step(self, action):
        return self.inner.step(action)


def test_an_env_without_the_method_gives_the_identity():
    recorder = StartRecorder()
    play(NoMethodEnv(), ScriptedAgent(), [recorder], task="tiny-20003")
    assert recorder.starts[0].remove_grade_text is keep_text


class BrokenGrades(TinyEnv):
    def remove_grade_text(self, text: str) -> str:
        raise RuntimeError("grade table missing")


def test_a_raising_remove_grade_text_withholds_the_observation_and_the_episode_goes_on():
    recorder = StartRecorder()
    result = play(BrokenGrades(expert=True), ScriptedAgent(), [recorder], task="tiny-20003", strict=False)
    assert result.result.status == "won"  # not ended by the fault
    assert recorder.cleaned and set(recorder.cleaned) == {""}  # never shown with its grade text
    errors = result.of("error")
    assert len(errors) == 1 and errors[0]["fatal"] is False and "grade table missing" in errors[0]["message"]


def test_with_strict_a_raising_remove_grade_text_ends_the_episode():
    from playground.core.episode_hooks import PluginError

    with pytest.raises(PluginError, match="env remove_grade_text failed"):
        play(BrokenGrades(expert=True), ScriptedAgent(), [StartRecorder()], task="tiny-20003", strict=True)


# -- post-hoc LLM judges ------------------------------------------------------------------------------------

BANNER = " Well done: the red key is back in the hall."  # tiny's win banner, planted where the agent failed


def test_aed_llm_prompt_carries_no_grade_text(tmp_path, capsys):
    """AED's LLM producer (`aed diagnose --producer llm`) reads the run's traces: grade text planted in their
    observations (tiny's win banner) never reaches the model; the rest of each observation does."""
    from playground.testing.openai_server import ScriptedChatServer

    run = tmp_path / "run"
    code, _out, err = cli(capsys, "run", "--env", "tiny", "--agent", "noisy", "--agent-option", "invalid=0.3",
                          "--harness", "base", "--episodes", "4", "--max-steps", "4", "--out", str(run), "--quiet")
    assert code == 0, err
    planted = 0
    for path in sorted((run / "traces").rglob("*.jsonl")):
        lines = []
        for line in path.read_text().splitlines():
            event = json.loads(line)
            if event["type"] in ("reset", "step") and "Well done" not in event["observation"]:
                event["observation"] += BANNER
                planted += 1
            lines.append(json.dumps(event))
        path.write_text("\n".join(lines) + "\n")
    assert planted
    with ScriptedChatServer(default="no idea") as server:
        code, _out, err = cli(capsys, "aed", "diagnose", str(run), "--producer", "llm", "--judge-base-url",
                              server.base_url, "--judge-model", "m")
        assert code == 0, err
        prompts = [request["messages"][-1]["content"] for request in server.requests]
    assert prompts and all("Well done" not in prompt for prompt in prompts)
    assert all("You are in the" in prompt for prompt in prompts)  # the observations themselves are there


def test_aed_render_trace_cleans_every_observation(tmp_path):
    from playground.plugins.aed.diagnose import render_trace
    from playground.run.forks import load_episode
    from playground.core.events import EndEvent, HeaderEvent, ProposalEvent, ResetEvent, StepEvent
    from playground.run.traces import TraceWriter

    path = tmp_path / "trace.jsonl"
    trace = TraceWriter(path, HeaderEvent(env="textworld", task_set="easy", task_id="easy-1", seed=0))
    trace.emit(ResetEvent(goal="drop it", observation="-= Garage =-\nA garage.\n\n" + POINT.split("\n\n")[1],
                          admissible_actions=["drop it"]))
    trace.emit(ProposalEvent(step=0, attempt=0, thought="", action="drop it", finish=False,
                             admissible_actions=["drop it"]))
    trace.emit(StepEvent(step=0, action="drop it", observation=WON, valid_action=True))
    trace.emit(EndEvent(status="truncated", won=False, steps=1))
    trace.close()
    prompt = render_trace(load_episode(path), textworld_grade_free)
    assert not GRADE.search(prompt.replace("Episode status", ""))
    assert "-= Garage =-\nA garage." in prompt and "You drop the Advent Calendar on the ground." in prompt
    assert "*** The End ***" in render_trace(load_episode(path))  # without the env's function: all of it


def test_darc_summary_cleans_every_observation():
    from playground.core.events import ResetEvent, StepEvent
    from playground.plugins.darc.llm_diagnosis import summarise_trace

    events = [ResetEvent(goal="drop it", observation="A garage."),
              StepEvent(step=0, action="eat meal", observation=LOST, valid_action=True),
              StepEvent(step=1, action="take wing", observation=POINT.split("\n\n")[1] + "\n\nA", valid_action=True)]
    summary = summarise_trace(events, textworld_grade_free)
    assert not GRADE.search(summary)
    assert "0. eat meal -> You eat the chicken wing. Not bad." in summary and "1. take wing -> A" in summary
    assert "*** You lost! ***" not in summary and "Your score" in summarise_trace(events)


# -- Sentry's paired forks and offline replay, the baselines' trajectories, check_env ----------------------------


def _texts(value) -> list[str]:
    """Every observation a blind record (a view, an outcome, a turn) carries, the history's included."""
    from playground.plugins.sentry.blind import BlindOutcome, BlindTurn, BlindView

    if isinstance(value, BlindOutcome):
        return [value.observation, *_texts(value.view)]
    if isinstance(value, BlindView):
        return [value.observation, *(turn.observation for turn in value.history)]
    if isinstance(value, BlindTurn):
        return [value.observation]
    return [str(value)]


def banner_run(tmp_path, monkeypatch, harnesses: list[str], episodes: int = 8):
    """A run of the noisy agent on tiny whose every description carries tiny's win banner (grade text tiny's
    `remove_grade_text` takes away); the patch stays for the test, so forks and replays rebuild the same text.
    Sentry screens with its rules (`detector=rules`), the detectors the offline replay runs."""
    from playground.host.manager import get_host
    from playground.run.config import RunConfig
    from playground.run.runner import run

    describe = TinyEnv._describe
    monkeypatch.setattr(TinyEnv, "_describe", lambda self: describe(self) + BANNER)
    out = tmp_path / "run"
    run(get_host(), RunConfig(env="tiny", task_set="default", split="test",
                              tasks=[f"tiny-{20_000 + i}" for i in range(episodes)], agent="noisy",
                              harnesses=harnesses, out=str(out), max_steps=10, params={"detector": "rules"},
                              agent_options={"invalid": 0.3, "stop": 0.1, "repeat": 0.15}))
    raw = [json.loads(line)["observation"] for path in (out / "traces").rglob("*.jsonl")
           for line in path.read_text().splitlines() if json.loads(line)["type"] in ("reset", "step")]
    assert sum("Well done" in text for text in raw) > len(raw) // 2  # planted (the agent read it)
    return get_host(), out


class JudgeInputs:
    """Spies on what every `LocalRecoveryJudge` reads: its prefix and first observation, each view its detectors
    get, each outcome its verifier gets."""

    def __init__(self, monkeypatch) -> None:
        from playground.plugins.sentry import recovery_judge
        from playground.plugins.sentry.verifier import RecoveryVerifier

        self.texts: list[str] = []
        self.outcomes = 0
        spy = self
        detect, observe = recovery_judge.run_detectors, RecoveryVerifier.observe
        init = recovery_judge.LocalRecoveryJudge.__init__

        def run_detectors(view, proposal, window, **options):
            spy.texts += [*_texts(view), options.get("first_observation", "")]
            return detect(view, proposal, window, **options)

        def verifier_observe(verifier, outcome):
            spy.texts += _texts(outcome)
            spy.outcomes += 1
            return observe(verifier, outcome)

        def judge_init(judge, *args, **kwargs):
            init(judge, *args, **kwargs)
            spy.texts += [judge.first_observation, *(turn.observation for turn in judge.prefix),
                          *judge.verifier.seen]

        monkeypatch.setattr(recovery_judge, "run_detectors", run_detectors)
        monkeypatch.setattr(RecoveryVerifier, "observe", verifier_observe)
        monkeypatch.setattr(recovery_judge.LocalRecoveryJudge, "__init__", judge_init)

    def graded(self) -> list[str]:
        return [text for text in self.texts if "Well done" in text]


def test_the_paired_forks_judge_reads_no_grade_text(tmp_path, monkeypatch):
    """Sentry's paired forks (`sentry.paired_forks`): the recorded prefix and first observation reach
    `LocalRecoveryJudge` through the env provider's `remove_grade_text`, the forks' outcomes through the live
    env's (`EpisodeStart.remove_grade_text`): tiny's win banner, planted into every description, reaches none of
    its detectors' views, its verifier's outcomes or what it remembers as seen. Without either filter the same run's judges read it."""
    from playground.plugins.sentry import paired
    from playground.plugins.sentry.recovery_judge import LocalRecoveryJudge

    host, out = banner_run(tmp_path, monkeypatch, ["sentry"])
    inputs = JudgeInputs(monkeypatch)
    report = paired.paired_forks(host, out, "sentry", points=4)
    assert report["chosen"] == 4 and inputs.outcomes and not report["not_replayable"]
    assert inputs.texts and not inputs.graded()
    assert any("You are in the" in text for text in inputs.texts)  # the observations themselves are there

    # without the provider's filter (the prefix and first observation as the trace has them) ...
    with monkeypatch.context() as m:
        m.setattr(paired, "grade_text_remover", lambda host, episode: keep_text)
        inputs = JudgeInputs(m)
        paired.paired_forks(host, out, "sentry", points=4)
        assert inputs.graded()
    # ... and without the live env's (the forks' outcomes as the env printed them)
    started = LocalRecoveryJudge.episode_started

    @hookimpl
    def unfiltered(judge, start):
        return started(judge, dataclasses.replace(start, remove_grade_text=keep_text))

    with monkeypatch.context() as m:
        m.setattr(LocalRecoveryJudge, "episode_started", unfiltered)
        inputs = JudgeInputs(m)
        paired.paired_forks(host, out, "sentry", points=4)
        assert inputs.graded()


def test_the_recovery_judge_cleans_a_raw_prefix_with_the_function_it_is_given():
    from playground.core.payloads import Detection
    from playground.plugins.sentry.blind import BlindTurn
    from playground.plugins.sentry.recovery_judge import LocalRecoveryJudge

    prefix = (BlindTurn(0, "", "take wing", POINT, True), BlindTurn(1, "", "eat meal", LOST, True))
    detection = Detection("sentry-rules", "progress", ("planning_stall",))
    judge = LocalRecoveryJudge(2, detection, prefix, "cook", WON, remove_grade_text=textworld_grade_free)
    remembered = [judge.first_observation, *(t.observation for t in judge.prefix), *judge.verifier.seen]
    assert not any(GRADE.search(text) for text in remembered)
    assert judge.prefix[1].observation == "You eat the chicken wing. Not bad."
    raw = LocalRecoveryJudge(2, detection, prefix, "cook", WON)  # without it: as given
    assert "*** The End ***" in raw.first_observation and "*** You lost! ***" in raw.prefix[1].observation


def test_the_baselines_trajectory_holds_no_grade_text_and_no_banner_is_a_completion(monkeypatch):
    """The memory baselines' trajectory (what their success judges, reflectors and inducers read) keeps every
    observation through `EpisodeStart.remove_grade_text`; tiny's win banner is not a completion (only a page
    confirming the agent's own finishing action is: WebShop's purchase)."""
    from playground.plugins.baselines.awm import AwmPlugin
    from playground.plugins.baselines.reasoningbank import ReasoningBankPlugin
    from playground.plugins.baselines.trajectory import COMPLETION

    describe = TinyEnv._describe
    monkeypatch.setattr(TinyEnv, "_describe", lambda self: describe(self) + BANNER)
    plugin = AwmPlugin({})
    played = play(tiny_env(), ScriptedAgent(["look", "look"]), [plugin], task="tiny-20003", max_steps=2)
    assert all("Well done" in e["observation"] for e in played.of("step"))  # what the agent read
    trajectory = plugin.trajectory
    assert trajectory.steps and not any("Well done" in text for text in
                                        [trajectory.first_observation, *(s.observation for s in trajectory.steps)])
    assert "You are in the" in trajectory.steps[0].observation
    assert trajectory.steps[1].new is False  # the banner changes nothing of what counts as new
    assert not trajectory.completed and "Well done" not in trajectory.text()

    monkeypatch.setattr(TinyEnv, "_describe", describe)
    won = ReasoningBankPlugin({})
    result = play(tiny_env(), ScriptedAgent([]), [won], task="tiny-20003")
    assert result.result.won and "Well done" in result.of("step")[-1]["observation"]
    assert won.trajectory.steps[-1].observation.startswith("You drop the ") and not won.trajectory.completed
    for banner in ("*** The End ***", "You won!", "Well done!", "Congratulations!", "Task completed."):
        assert not COMPLETION.search(banner)


def test_a_webshop_purchase_is_an_observed_completion_without_its_score():
    from playground.plugins.baselines.awm import AwmPlugin

    plugin = AwmPlugin({})
    env = WebShopProvider().make("generated", expert=True)
    result = play(env, ScriptedAgent([]), [plugin], task="generated-20000")
    assert "Your score" in result.of("step")[-1]["observation"]
    trajectory = plugin.trajectory
    assert trajectory.steps[-1].observation.startswith("Thank you for shopping with us!")
    assert not any("score" in s.observation.lower() for s in trajectory.steps) and trajectory.completed


class NotText(TinyEnv):
    def remove_grade_text(self, text: str):
        return None if "Well done" in text else text


class CutsACharacterAtATime(TinyEnv):
    def remove_grade_text(self, text: str) -> str:
        return text[:-1] if "Well done" in text else text  # never done: each cut takes one more character


class EatsEverything(TinyEnv):
    def remove_grade_text(self, text: str) -> str:
        return ""


class KeepsTheBanner(TinyEnv):
    remove_grade_text = TextEnv.remove_grade_text  # the default, while tiny's provider still cuts the banner


def test_check_env_checks_remove_grade_text():
    from playground.testing import check_env
    from tests.test_check_env import Broken

    check_env(TinyProvider(), tasks=3, steps=10)  # tiny's cut: text, idempotent, a plain observation kept
    for env_class, check in [(NotText, "remove_grade_text returns text"),
                             (CutsACharacterAtATime, "remove_grade_text is idempotent"),
                             (EatsEverything, "remove_grade_text leaves an observation without grade text unchanged"),
                             (KeepsTheBanner, "the provider's remove_grade_text gives the env's result")]:
        with pytest.raises(AssertionError) as raised:
            check_env(Broken(env_class), tasks=3, steps=10)
        assert str(raised.value).startswith("check_env(tiny:default, task 'tiny-20000')"), env_class
        assert check in str(raised.value), (env_class, str(raised.value))


def test_one_host_lookup_gives_every_reader_the_envs_grade_text_remover():
    """Issue 36: `aed dataset` kept the grade text of a run whose env was not loaded, while `aed diagnose` refused.
    Every reader now asks the host, which refuses an env it does not have."""
    import pytest

    from playground.host.manager import get_host

    host = get_host()
    assert host.grade_text_remover("webshop") == host.envs.get("webshop").provider.remove_grade_text
    with pytest.raises(KeyError, match="no-such-env") as refused:
        host.grade_text_remover("no-such-env")
    # a user's error (the CLI's one line, exit 2), printed as written: every reader refuses without wrapping it
    from playground.core.errors import PlaygroundError

    assert isinstance(refused.value, PlaygroundError)
    assert str(refused.value).startswith("the grade text env 'no-such-env' prints cannot be removed")
