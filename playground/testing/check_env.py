"""`check_env(provider)`: check an env plugin against the env contract (`playground.core.env`).

In the spirit of gymnasium's `check_env`, for playground's own promises:

- reset: the same task reset twice (in the same env and in a fresh one, same seed) gives
  the same observation and info (determinism by seed and task), and so does a reset of the
  env after it has played (a run plays many episodes on one env);
- info: the required keys (`REQUIRED_INFO`) with the right types after reset and after
  each step; `admissible_actions` sorted; every `action_kinds` key an admissible action
  (or template) and every kind one of `ACTION_KINDS` (`{}` where there is no list);
  `action_format` one of `ACTION_FORMATS`; `expert_plan` a list of str; a `failure` with a
  kind of `FAILURE_KINDS` and a message;
- step: gymnasium's 5-tuple with a text observation;
- an invalid action changes nothing: `valid_action` False, and the env then answers a
  following "look"-kind action (or, without one, reports the info) exactly as it would
  have without the invalid action (skipped where actions are free text or code);
- snapshots (when `can_snapshot`): after `restore`, replaying the same actions gives the
  same results as the first time;
- a schema check (`check_action`, where the env has one): it returns None or a list of
  `SchemaProblem`, and the expert's actions pass it, each checked in the state it is played from;
- an admissible list that is a cut (`admissible_complete` False): the env's check gives a verdict
  (not None) and the invalid action does not pass it;
- grade text (`remove_grade_text`, where the env or its provider overrides the default): it
  leaves a plain observation without grade text (`PLAIN_OBSERVATION`) unchanged; on every
  observation of a play (the reset's and the plan's) it returns text, cutting twice is cutting
  once (idempotent), and the provider's `EnvProvider.remove_grade_text` (through which post-hoc
  judges read traces) gives the env's result.

Every failure is an AssertionError naming the env, task set, task and check.

    from playground.testing import check_env
    check_env(MyProvider())                     # its default task set, two tasks
"""

from __future__ import annotations

from typing import Any

from playground.core.actions import is_admissible, is_template
from playground.core.env import ACTION_FORMATS, ACTION_KINDS, FAILURE_KINDS, REQUIRED_INFO, EnvProvider, TextEnv
from playground.core.payloads import SchemaProblem

INVALID_ACTION = "xyzzy plugh frobnicate"  # no env's command
STATE_KEYS = ("goal", "admissible_actions", "won", "lost", "score", "max_score", "action_kinds")
# an observation with no grade text in any env: `remove_grade_text` gives it back as it is
PLAIN_OBSERVATION = "You open the drawer. Inside it you see a pencil and a folded letter.\n\nExits: north, east."


def check_env(provider: EnvProvider, task_set: str | None = None, *, split: str | None = None, tasks: int = 2,
              steps: int = 3, seed: int = 0) -> None:
    """Check `provider`'s env on the first `tasks` tasks of `split` of `task_set` (defaults: the provider's)."""
    name = getattr(provider, "name", "") or type(provider).__name__
    sets = provider.task_sets()
    task_set = task_set or provider.default_task_set
    _check(task_set in sets, f"check_env({name}): task set {task_set!r} not among {sorted(sets)}")
    chosen = sets[task_set]
    split = split or chosen.default_split
    ids = chosen.tasks(split, tasks)
    _check(bool(ids), f"check_env({name}:{task_set}): split {split!r} has no tasks")
    provider.prepare(task_set, ids)
    for task in ids:
        _EnvCheck(provider, task_set, task, steps, seed, f"check_env({name}:{task_set}, task {task!r})").run()


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


class _EnvCheck:
    def __init__(self, provider: EnvProvider, task_set: str, task: str, steps: int, seed: int, where: str) -> None:
        self.provider, self.task_set, self.task = provider, task_set, task
        self.steps, self.seed, self.where = steps, seed, where

    def fail_unless(self, condition: bool, check: str, detail: str = "") -> None:
        _check(condition, f"{self.where}: {check}" + (f": {detail}" if detail else ""))

    def make(self):
        return self.provider.make(self.task_set, expert=True)

    def reset(self, env) -> tuple[str, dict]:
        result = env.reset(seed=self.seed, options={"task": self.task})
        self.fail_unless(isinstance(result, tuple) and len(result) == 2, "reset returns (observation, info)",
                         repr(result)[:200])
        observation, info = result
        self.fail_unless(isinstance(observation, str), "reset's observation is text", type(observation).__name__)
        self.info_ok(info, "after reset")
        return observation, info

    def step(self, env, action: str) -> tuple:
        result = env.step(action)
        self.fail_unless(isinstance(result, tuple) and len(result) == 5,
                         "step returns (observation, reward, terminated, truncated, info)", repr(result)[:200])
        observation, reward, terminated, truncated, info = result
        self.fail_unless(isinstance(observation, str), f"step({action!r})'s observation is text",
                         type(observation).__name__)
        self.fail_unless(isinstance(reward, (int, float)) and isinstance(terminated, bool)
                         and isinstance(truncated, bool),
                         f"step({action!r}) returns a number reward and bool terminated/truncated",
                         f"{reward!r}, {terminated!r}, {truncated!r}")
        self.info_ok(info, f"after step({action!r})")
        return result

    def info_ok(self, info: Any, when: str) -> None:
        self.fail_unless(isinstance(info, dict), f"info is a dict {when}", type(info).__name__)
        for key, types in REQUIRED_INFO.items():
            self.fail_unless(key in info, f"info has required key {key!r} {when}", f"keys: {sorted(info)}")
            value = info[key]
            ok = isinstance(value, types) and not (key in ("score", "max_score") and isinstance(value, bool))
            self.fail_unless(ok, f"info[{key!r}] has the right type {when}", f"{type(value).__name__}: {value!r}"[:200])
        admissible, kinds = info["admissible_actions"], info["action_kinds"]
        if admissible is not None:
            self.fail_unless(all(isinstance(a, str) for a in admissible), f"admissible actions are text {when}")
            self.fail_unless(list(admissible) == sorted(admissible), f"admissible actions are sorted {when}",
                             str(list(admissible))[:300])
            strange = [a for a in kinds if a not in admissible]
            self.fail_unless(not strange, f"action_kinds keys are admissible actions {when}", str(strange)[:300])
        else:
            self.fail_unless(kinds == {}, f"action_kinds is {{}} without an admissible list {when}", str(kinds)[:300])
        bad = {a: k for a, k in kinds.items() if k not in ACTION_KINDS}
        self.fail_unless(not bad, f"every kind is one of {ACTION_KINDS} {when}", str(bad)[:300])
        if "action_format" in info:
            self.fail_unless(info["action_format"] in ACTION_FORMATS,
                             f"action_format is one of {ACTION_FORMATS} {when}",
                             repr(info["action_format"]))
        if "admissible_complete" in info:
            self.fail_unless(isinstance(info["admissible_complete"], bool), f"admissible_complete is a bool {when}",
                             repr(info["admissible_complete"]))
        if "open_choices" in info:
            self.fail_unless(all(isinstance(c, str) for c in info["open_choices"]), f"open_choices are text {when}")
        if "failure" in info:
            failure = info["failure"]
            ok = (isinstance(failure, dict) and failure.get("kind") in FAILURE_KINDS
                  and isinstance(failure.get("message"), str))
            self.fail_unless(ok, f"failure is {{'kind': one of {FAILURE_KINDS}, 'message': str, ...}} {when}",
                             repr(failure)[:200])
        if "expert_plan" in info:
            plan = info["expert_plan"]
            self.fail_unless(isinstance(plan, list) and all(isinstance(a, str) for a in plan),
                             f"expert_plan is a list of text {when}", repr(plan)[:200])

    def run(self) -> None:
        env = self.make()
        try:
            first = self.reset(env)
            self.fail_unless(self.reset(env) == first, "determinism: resetting the same task again gives the same "
                             "observation and info")
            fresh = self.make()
            try:
                self.fail_unless(self.reset(fresh) == first, "determinism: a fresh env reset to the same task and seed "
                                 "gives the same observation and info")
            finally:
                fresh.close()
            self.check_invalid_action(env, first)
            if getattr(env, "can_snapshot", False):
                self.check_snapshot(env)
            self.check_steps(env)
            self.check_grade_text(env)
            self.check_schema(env)
            self.fail_unless(self.reset(env) == first, "reuse: after it has played, resetting the env to the task "
                             "gives its initial state again (a run plays many episodes on one env)")
        finally:
            env.close()

    def plan(self, info: dict) -> list[str]:
        """Up to `steps` actions to play from here: the expert plan, else admissible actions that are not looks."""
        plan = list(info.get("expert_plan") or [])
        if not plan:
            kinds = info["action_kinds"]
            plan = [a for a in info["admissible_actions"] or () if not is_template(a) and kinds.get(a) != "look"]
        return plan[: self.steps]

    def check_invalid_action(self, env, first: tuple[str, dict]) -> None:
        _, info = first
        admissible = info["admissible_actions"]
        if admissible is None or is_admissible(INVALID_ACTION, admissible):
            return  # free text or code: every action means something
        self.reset(env)
        observation, _, terminated, _, after = self.step(env, INVALID_ACTION)
        self.fail_unless(after["valid_action"] is False,
                         f"an invalid action ({INVALID_ACTION!r}) has valid_action False")
        self.fail_unless(not terminated, "an invalid action does not end the episode")
        looks = sorted(a for a, k in info["action_kinds"].items() if k == "look" and not is_template(a))
        if looks:
            with_invalid = self.step(env, looks[0])
            self.reset(env)
            without = self.step(env, looks[0])
            self.fail_unless(_state(with_invalid) == _state(without), "an invalid action changes nothing",
                             f"{looks[0]!r} after it gives {_state(with_invalid)!r:.300}, "
                             f"without it {_state(without)!r:.300}")
        else:
            self.fail_unless(_keys(after) == _keys(info), "an invalid action changes nothing",
                             f"info after it {_keys(after)!r:.300}, after reset {_keys(info)!r:.300}")

    def check_snapshot(self, env) -> None:
        _, info = self.reset(env)
        saved = env.snapshot()
        actions = self.plan(info)
        played = self.play(env, actions)
        env.restore(saved)
        again = self.play(env, actions)
        self.fail_unless(_comparable(again) == _comparable(played), "snapshot/restore round trip: replaying "
                         f"{actions} after restore() gives the same results", f"{again!r:.300} vs {played!r:.300}")
        env.restore(saved)  # a snapshot stays reusable
        self.fail_unless(_comparable(self.play(env, actions)) == _comparable(played),
                         "snapshot/restore round trip: a snapshot can be restored twice")

    def check_steps(self, env) -> None:
        _, info = self.reset(env)
        played = self.play(env, self.plan(info))
        self.reset(env)
        self.fail_unless(_comparable(self.play(env, self.plan(info))) == _comparable(played),
                         "determinism: the same actions from the same reset give the same results")

    def check_grade_text(self, env) -> None:
        """An env that removes grade text (its `remove_grade_text`, or its provider's, not the default): a plain
        observation comes back unchanged; on every observation of a play it returns text, cutting twice is cutting
        once, and the provider's function gives the env's result."""
        remove = getattr(env, "remove_grade_text", None)
        if not callable(remove):
            return  # no `TextEnv`: the loop hands plugins the identity
        env_cuts = getattr(type(env), "remove_grade_text", None) is not TextEnv.remove_grade_text
        provider_cuts = getattr(type(self.provider), "remove_grade_text", None) is not EnvProvider.remove_grade_text
        if not (env_cuts or provider_cuts):
            return  # the default keeps the text: an env that prints no grade
        cut = remove(PLAIN_OBSERVATION)
        self.fail_unless(isinstance(cut, str) and cut == PLAIN_OBSERVATION, "remove_grade_text leaves an "
                         "observation without grade text unchanged", f"{PLAIN_OBSERVATION!r} became {cut!r:.200}")
        observation, info = self.reset(env)
        for text in [observation, *(result[0] for result in self.play(env, self.plan(info)))]:
            cut = remove(text)
            self.fail_unless(isinstance(cut, str), "remove_grade_text returns text",
                             f"{type(cut).__name__} for {text!r:.200}")
            again = remove(cut)
            self.fail_unless(again == cut, "remove_grade_text is idempotent (cutting twice is cutting once)",
                             f"{text!r:.200} cut once is {cut!r:.200}, twice {again!r:.200}")
            by_provider = self.provider.remove_grade_text(text)
            self.fail_unless(by_provider == cut, "the provider's remove_grade_text gives the env's result",
                             f"{text!r:.200}: the env's {cut!r:.200}, the provider's {by_provider!r:.200}")

    def check_schema(self, env) -> None:
        check = getattr(env, "check_action", None)
        _, info = self.reset(env)
        if info.get("admissible_complete", True) is False:
            self.check_cut(env)
        if not callable(check):
            return
        for action in self.plan(info):
            problems = self.checked(env, action)
            self.fail_unless(not problems, f"the expert's action {action!r} passes check_action", repr(problems)[:300])
            if self.step(env, action)[2]:
                break

    def checked(self, env, action: str) -> list | None:
        """`env.check_action(action)`, checked to be None or a list of `SchemaProblem`."""
        problems = env.check_action(action)
        self.fail_unless(problems is None or (isinstance(problems, list)
                                              and all(isinstance(p, SchemaProblem) for p in problems)),
                         f"check_action({action!r}) returns None or a list of SchemaProblem", repr(problems)[:300])
        return problems

    def check_cut(self, env) -> None:
        """An admissible list that is a cut of what the env accepts: the env's check is the verdict on the rest."""
        check = getattr(env, "check_action", None)
        self.fail_unless(callable(check) and self.checked(env, INVALID_ACTION) is not None,
                         "an env whose admissible list is a cut (admissible_complete False) gives its verdict through "
                         "check_action")
        self.fail_unless(bool(self.checked(env, INVALID_ACTION)),
                         f"check_action rejects the invalid action {INVALID_ACTION!r}")

    def play(self, env, actions: list[str]) -> list[tuple]:
        results = []
        for action in actions:
            result = self.step(env, action)
            results.append(result)
            if result[2] or result[3]:
                break
        return results


def _keys(info: dict) -> dict:
    return {k: info.get(k) for k in STATE_KEYS}


def _state(result: tuple) -> tuple:
    observation, reward, terminated, truncated, info = result
    return observation, reward, terminated, truncated, _keys(info)


def _comparable(results: list[tuple]) -> list[tuple]:
    return [_state(r) + (r[4].get("valid_action"), r[4].get("expert_plan")) for r in results]
