"""What an environment plugin provides: a text gymnasium env and a provider of task sets.

An env plugin registers an `EnvProvider` (via the `register_envs` hook). The provider
lists task sets and their splits (`TaskSet`, in `playground.core.task_sets`), names the
tasks of a split, and builds a fresh `TextEnv` per episode. The env follows gymnasium's
API with text observations and text actions; `reset(seed=..., options={"task": task_id})`
puts it in that task's initial state, the same every time. `reset(seed=k)` without a task
plays a task of the env's split (by default its task set's default split): the `k % n`-th
of its `n` tasks (for an open-ended generated split, of its first `default_count`);
`reset()` with no seed draws one from the env's seeded random generator, as gymnasium envs
do. An unknown task raises `UnknownTaskError`. Observations and actions are Unicode text
(`UnicodeText`), so gymnasium's `check_env` and vector envs work on every env.

The `info` contract (`EnvInfo`, a TypedDict; every key optional to the type checker):

- required of every env, after reset and after every step: `goal` (str),
  `admissible_actions` (sorted list of str, or None where actions are free text or
  code), `valid_action` (bool, for the last action; True after reset), `won` and `lost`
  (bool), `score` (float), `max_score` (float, or None while unknown), and
  `action_kinds` (dict, see below);
- `expert_plan` (list of str): only when the env was made with `expert=True`, the rest of
  a plan that solves the task from here (for non-LLM agents; never shown to an LLM);
- `open_choices` (list of str): choices visible on screen that are still unmade and that
  the finish action would leave unmade (e.g. a shop's option groups with no value chosen);
- `action_format` (str): how an action is written: "command" (default: a verb and the
  objects it acts on, "take apple"), "web" (clicks and searches on a page,
  `click[label]`, `search[query]`: no world objects, so object-grounding rules leave
  them alone) or "code" (a program, e.g. a Python cell: plugins that read actions as
  short commands leave them alone);
- `admissible_complete` (bool, default True): False where `admissible_actions` is a cut of
  what the env accepts (a bounded view of a longer list, see below);
- `task` (str): the task id; anything else is the env's own (documented by the env);
- `failure` (dict): an *observable failure* at this action boundary (a tool raised, timed
  out, an input was missing, a contract was violated), for plugins to recover from instead
  of the episode erroring: `{"kind": one of FAILURE_KINDS, "message": str}` plus, where the
  env knows them, `"keys"` (list of str: the artifacts the failure implicates), `"site"`
  (str: the action that observed it) and `"rejected"` (bool: True when the call was refused
  before it changed anything, so there is nothing to roll back). An env may instead raise
  `ObservableFailure` from `step`; the loop turns it into the same thing (a step with
  `valid_action` False and `StepOutcome.failure` set), with the env's state as it left it.
- `structure` (dict): for envs whose structure a sidecar reads (instances of work, what
  each reads and writes, each call's effect policy) but which cannot declare it all at
  reset because the actions are not known in advance (code cells): what this step added,
  `{"instances": [records declared by this step], "call": [instance id, index of its call]}`
  naming the declared call the action executed; absent where the step declared nothing.
  The loop hands it to plugins as `StepOutcome.structure`; the record format is the env's
  and its readers' (documented by the env).

An admissible action may be a template `verb[...]`: any `verb[<argument>]` with a
non-empty argument is admissible (a web search, `search[...]`).

`action_kinds` maps admissible actions (or templates) to what they do, so env-agnostic
plugins understand an env's actions without knowing its verbs (`kind_of` of
`playground.core.actions` looks one up; matching actions to the list is there too):
- "look": reads without changing anything (look, inventory, examine, a sub-page);
- "move": navigates (go east, go to the fridge, back to the results);
- "access": opens, closes, locks or unlocks a container or door (instrumental);
- "take": picks an object up;
- "consume": uses an object up for good (eat, drink);
- "use": any other action on the world's objects (put, drop, cook, heat, slice);
- "search", "page", "open", "select": web pages: a query, paging through results,
  opening an item of a list, choosing an option;
- "finish": ends the task (e.g. a shop's Buy Now);
- "other": anything else.
Every admissible action has a kind. Where `admissible_actions` is None (free-text
answers, code cells) no action can be named in advance, so `action_kinds` is `{}`: no
action has a kind, and rules keyed on kinds (idle looks, wandering, finishing with
choices open) never fire there. `command_kinds` (`playground.core.actions`) gives the
kinds of text-adventure commands by their verb.

An env whose actions are calls to named tools (code cells calling APIs, tool calls) has no
admissible list, but it may still say whether an action fits its schema before it runs:
`check_action(action)` returns the `SchemaProblem`s it finds (an unknown API, an unknown or
missing argument, a syntax error; each with the offending text, the closest valid names and
signatures), `[]` when the action passes, and `None` (the default) where the env has no
schema. The loop calls it on every proposal and hands the result to plugins as
`StepContext.schema_problems`; nothing is run and no grade is read.

An env whose admissible list is a cut of the commands it accepts (it lists a bounded view;
its engine parses many more) says so with `info["admissible_complete"] = False` and gives its
own verdict on a proposed action through the same `check_action`: `[]` when the engine
would accept the command, problems when it would not. The verdict is what the agent would
learn by sending the command (whether the engine parses it), never a grade. Rules that judge
validity (`env_accepts`, `playground.core.actions`) take membership in the list as the verdict
only where the list is complete, and the env's check where it is a cut.

Failure-injection agents (the `noisy` instrument) may ask an env how a failure looks
there: an env that knows sets `failure_variants()` (see `TextEnv.failure_variants`);
agents reach the env through their optional `bind_env(env)`, called before each episode.

Some envs print grades in their observations: a score line ("Your score has just gone up by
one point."), a win or loss banner ("*** The End ***"), a purchase's score. The agent reads
them, but nothing that judges a step or a recovery may: an env that prints grade text says
what it is through `remove_grade_text(text)` (see `TextEnv.remove_grade_text`; the default
keeps the text). The loop hands the method to plugins as `EpisodeStart.remove_grade_text`, and
`EnvProvider.remove_grade_text` gives readers of traces (post-hoc judges) the same function.
`grade_text_pattern` and `cut_grade_text` are the shared pieces for writing one.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Mapping, TypedDict

import gymnasium

from playground.core.errors import PlaygroundError
from playground.core.payloads import SchemaProblem
from playground.core.task_sets import TaskSet
from playground.core.text_space import UnicodeText

MAX_TEXT = 1_000_000
RESET_OPTIONS = ("task",)


class UnknownTaskError(PlaygroundError, ValueError):
    """`reset(options={"task": ...})` named a task its env's task set does not have."""

    def __init__(self, env: str, task: str, task_set: TaskSet) -> None:
        self.env, self.task, self.task_set = env, task, task_set.name
        super().__init__(f"{env}: unknown task {task!r} in task set {task_set.name!r}; "
                         f"expected {task_set.expected_ids()}")


ACTION_KINDS = ("look", "move", "access", "take", "consume", "use", "search", "page", "open", "select", "finish",
                "other")
ACTION_FORMATS = ("command", "web", "code")
FAILURE_KINDS = ("tool_error", "timeout", "missing_input", "contract_violation")


class ObservableFailure(PlaygroundError):
    """Raised by `env.step` for a failure the agent can observe and a plugin may recover from.

    The loop catches it: the step is recorded with `valid_action` False, the message as its
    observation and `StepOutcome.failure` = `failure()`; the episode goes on. The env must
    leave its state consistent (whatever the failed call did is part of it).
    """

    def __init__(self, kind: str, message: str, *, keys: tuple[str, ...] | list[str] = (), site: str = "",
                 rejected: bool = False, info: Mapping[str, Any] | None = None) -> None:
        if kind not in FAILURE_KINDS:
            raise ValueError(f"unknown failure kind {kind!r}; choose from: {', '.join(FAILURE_KINDS)}")
        super().__init__(f"{kind}: {message}")
        self.kind, self.message, self.keys, self.site = kind, message, tuple(keys), site
        self.rejected, self.info = rejected, dict(info or {})

    def failure(self) -> dict[str, Any]:
        """The `info["failure"]` record this exception stands for."""
        record: dict[str, Any] = {"kind": self.kind, "message": self.message}
        if self.keys:
            record["keys"] = list(self.keys)
        if self.site:
            record["site"] = self.site
        if self.rejected:
            record["rejected"] = True
        return record


class EnvInfo(TypedDict, total=False):
    """The `info` dict an env returns from `reset` and `step` (see the module docstring)."""

    goal: str  # the task, in words
    admissible_actions: list[str] | None  # sorted; None where actions are free text or code
    valid_action: bool  # whether the last action was understood and done (True after reset)
    won: bool  # the task is solved
    lost: bool  # the task can no longer be solved
    score: float  # points so far
    max_score: float | None  # the most points the task gives (None while unknown)
    action_kinds: dict[str, str]  # admissible action or template -> one of ACTION_KINDS ({} without a list)
    expert_plan: list[str]  # only with expert=True: the rest of a plan that solves the task
    open_choices: list[str]  # unmade choices on screen that the finish action would leave unmade
    action_format: str  # one of ACTION_FORMATS (default "command")
    admissible_complete: bool  # False where admissible_actions is a cut of what the env accepts (default True)
    task: str  # the task id
    failure: dict[str, Any]  # an observable failure at this action boundary (kind, message, keys, site, rejected)
    structure: dict[str, Any]  # the structure this step declared (instances, the call executed), where it declared any


REQUIRED_INFO: dict[str, type | tuple[type, ...]] = {
    "goal": str, "admissible_actions": (list, tuple, type(None)), "valid_action": bool, "won": bool, "lost": bool,
    "score": (int, float), "max_score": (int, float, type(None)), "action_kinds": dict,
}


class FailureVariant(TypedDict):
    """How one failure mode looks in an env right now: the action to send and the env's label for it."""

    action: str
    label: str


class TextEnv(gymnasium.Env):
    """Base class for playground envs: text in, text out, optional snapshots.

    Subclasses implement `reset` and `step` as in gymnasium; `reset` calls
    `super().reset(seed=seed)` and then `self.task_for_reset(seed, options)` to learn which
    task to play. An env made with a `task_set` checks explicit tasks against it and picks
    one of its `split` (default: the task set's default split) when reset names none. An
    env that can save and restore its state sets `can_snapshot = True` and implements
    `snapshot()` and `restore()`; the loop uses that for rollback and replay.
    """

    metadata = {"render_modes": []}
    can_snapshot: bool = False
    env_name: str = ""  # used in error messages; default: the class name

    def __init__(self, task_set: TaskSet | None = None, *, split: str | None = None,
                 render_mode: str | None = None) -> None:
        if render_mode is not None:
            raise ValueError(f"{self._name()}: no render modes (text envs return their text as observations); "
                             f"got render_mode={render_mode!r}")
        self.render_mode = None
        self.task_set = task_set
        self.split = split
        if split is not None:
            self.use_split(split)
        self.observation_space = UnicodeText(MAX_TEXT)
        self.action_space = UnicodeText(MAX_TEXT)

    def use_split(self, split: str) -> None:
        """Play tasks of `split` when reset names no task; ValueError names the splits."""
        if self.task_set is None or split not in self.task_set.splits:
            choices = ", ".join(self.task_set.splits) if self.task_set is not None else "(no task set)"
            raise ValueError(f"{self._name()}: unknown split {split!r}; choose from: {choices}")
        self.split = split

    def task_for_reset(self, seed: int | None, options: Mapping[str, Any] | None) -> str:
        """The task a `reset(seed=seed, options=options)` plays (call after `super().reset(seed=seed)`).

        `options["task"]` is checked against the task set (`UnknownTaskError`). Without it:
        the `seed % n`-th of the split's `n` tasks, or with no seed one drawn from
        `self.np_random` (seeded by an earlier reset), so the same seeds give the same tasks.
        """
        options = dict(options or {})
        unknown = sorted(set(options) - set(RESET_OPTIONS))
        if unknown:
            raise ValueError(f"{self._name()}: unknown reset option(s) {', '.join(map(repr, unknown))}; "
                             f"known: {', '.join(map(repr, RESET_OPTIONS))}")
        task = options.get("task")
        if task is not None and str(task) != "":
            task = str(task)
            if self.task_set is not None and not self.task_set.has_task(task):
                raise UnknownTaskError(self._name(), task, self.task_set)
            return task
        if self.task_set is None:
            raise ValueError(f"{self._name()}: reset needs options={{'task': <task id>}} (this env has no task set)")
        split = self.split or self.task_set.default_split
        tasks = self.task_set.tasks(split)
        if not tasks:
            raise ValueError(f"{self._name()}: split {split!r} of task set {self.task_set.name!r} has no tasks")
        index = seed % len(tasks) if seed is not None else int(self.np_random.integers(len(tasks)))
        return tasks[index]

    def _name(self) -> str:
        return self.env_name or type(self).__name__

    def snapshot(self) -> Any:
        """Return an opaque copy of the current state (only if `can_snapshot`)."""
        raise NotImplementedError(f"{type(self).__name__} cannot snapshot")

    def restore(self, snapshot: Any) -> None:
        """Put the env back into a state returned by `snapshot()`."""
        raise NotImplementedError(f"{type(self).__name__} cannot restore")

    def check_action(self, action: str) -> list[SchemaProblem] | None:
        """Check `action` against the env's action schema without running it (see the module docstring).

        The problems found (`[]` when it passes); None where the env has no schema (the
        default: an env that lists admissible actions already says what is valid).
        """
        return None

    def remove_grade_text(self, text: str) -> str:
        """`text` (an observation of this env) without the grade text the env prints in it.

        Grade text is whatever tells how well the task is going or went rather than what
        happened: score lines ("Your score has just gone up by one point.", "You scored 1
        out of a possible 1, in 5 turns."), win and loss banners ("*** The End ***", "*** You
        lost! ***"), any score or verdict the env prints (a purchase's "Your score (min 0.0,
        max 1.0): 0.75"). The agent reads it; detectors, verifiers, summarisers and judges see
        observations only through this method (`EpisodeStart.remove_grade_text`, and for
        traces `EnvProvider.remove_grade_text`), so none of them can tell a recovery worked
        from the env's grade. An env removes whole sentences or lines and keeps the rest of
        the observation as it was (`cut_grade_text`); text with no grade text comes back
        unchanged. Default: the text unchanged (an env that prints no grade).
        """
        return text

    def ground_truth(self) -> Mapping[str, Any] | None:
        """What the env knows and no agent or plugin may see, for measurement only (None: nothing; the default).

        The loop writes it into the trace after every step (`StepEvent.truth`) and every restore
        (`RollbackEvent.truth`) and shows it to no agent and no plugin; a study's figures read it back
        from the trace (the workflow env's restores that crossed an irreversible effect, its faults that
        fired). Keep it small and JSON-ready: it is written once per step.
        """
        return None

    def failure_variants(self) -> Mapping[str, FailureVariant]:
        """How the next action looks under failure modes, for failure-injection agents only.

        Modes are the `noisy` agent's ("invalid", "malformed", "repeat", "stall", "drift",
        "stop"); an env whose failures look different from generic command-style ones (a
        wrong API name in a code cell) returns them here, by mode. Default: none, so the
        agent makes its generic failures from `action_kinds`.
        """
        return {}



class EnvProvider:
    """Base class for what an env plugin registers: task sets plus an env factory."""

    name: str = ""
    description: str = ""
    default_task_set: str = ""
    is_default: bool = False  # the env `playground run` uses when no --env is given
    # Whether separate instances of this env may play at once in threads of one process (`--in-flight`). An engine
    # with process-wide state (a shared parser, one game per process) sets False: the runner then calls its envs
    # under one lock per provider, so episodes in flight take turns in the engine while their model calls overlap.
    thread_safe: bool = True

    def task_sets(self) -> Mapping[str, TaskSet]:
        """Return the task sets this env offers, by name."""
        raise NotImplementedError

    def make(self, task_set: str, *, expert: bool = False, **options: Any) -> TextEnv:
        """Build a fresh env on `task_set`.

        A run keeps it for many episodes (each starts with `reset`) and closes it at the end.
        `expert=True` asks for `info["expert_plan"]`. Import heavy packages here.
        """
        raise NotImplementedError

    def prepare(self, task_set: str, task_ids: list[str], progress: Callable[[str], None] | None = None) -> None:
        """Make sure the given tasks exist on disk (e.g. generate and cache games)."""

    def missing(self) -> str | None:
        """What this env needs that is not installed here (an extra, an engine, a setup step), in one line that
        says how to install it; None when it can run. `playground envs` shows it, and a run on the env stops with
        it before playing. Keep it cheap: no engine start. Default: None."""
        return None

    def setup(self, progress: Callable[[str], None]) -> None:
        """Install what the env needs outside this environment (`playground envs setup NAME`); default: nothing."""
        progress(f"{self.name}: nothing to set up")

    def describe(self, task_set: str) -> dict:
        """Return what a trace header records: package version, data hash or seeds."""
        return {"env": self.name, "task_set": task_set}

    def remove_grade_text(self, text: str) -> str:
        """`text` (an observation of this provider's env) without the grade text the env prints in it.

        The same function as its envs' `TextEnv.remove_grade_text`, for readers that have no
        env (post-hoc judges reading a trace, whose header names the env). Default: the text
        unchanged.
        """
        return text

    def data_files(self, task_set: str) -> Mapping[str, str]:
        """Return the files whose content defines `task_set`, by name (e.g. a benchmark's task files): the run's
        lock.json records each file's SHA-256, so a changed data file is caught. Default: none (a generated task
        set is pinned by `describe` and the task ids)."""
        return {}


def grade_text_pattern(*phrases: str) -> re.Pattern[str]:
    """One pattern for an env's grade text: any of the regular expressions `phrases` (each matching
    within one line), with the spaces before it, for `cut_grade_text`."""
    return re.compile(r"[ \t]*(?:" + "|".join(f"(?:{phrase})" for phrase in phrases) + ")")


def cut_grade_text(text: str, pattern: re.Pattern[str]) -> str:
    """`text` without every match of `pattern` (an env's grade text, `grade_text_pattern`), tidied.

    A line left empty by the cut goes, and with it a blank line that would double another
    (or that would open or close the text); a line cut in part keeps its indentation and
    loses the spaces the cut left at its ends. Lines without a match stay as they are, and
    text with no match comes back unchanged (so cutting twice is cutting once).
    """
    if pattern.search(text) is None:
        return text
    kept: list[str] = []
    dropped = False  # the last line looked at was cut away whole
    for line in text.split("\n"):
        cut = pattern.sub("", line)
        if cut == line:
            if dropped and not line.strip() and (not kept or not kept[-1].strip()):
                continue  # a blank line next to another one (or at the start) once the cut line is gone
            kept.append(line)
            dropped = False
        elif cut.strip():
            kept.append(line[: len(line) - len(line.lstrip())] + cut.strip())
            dropped = False
        else:
            dropped = True
    while dropped and kept and not kept[-1].strip():
        kept.pop()
    return "\n".join(kept)

