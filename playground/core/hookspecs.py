"""The hooks a playground plugin can implement.

Three kinds of hooks, grouped by phase as in pytest's hookspec:

* Registration hooks, called once when plugins load. Each receives a `register`
  callable and adds named things to the host (envs, agents, interventions, harnesses,
  observers, failure labels, CLI commands). Plugins are modules (or objects) with `@hookimpl` functions.

* Run hooks, called by the runner before any episode is played (`check_playbook`,
  `discard_episodes`), on every loaded plugin (and, for checks, on a harness's
  interventions).

* Runtime hooks, called by the episode loop. They are implemented by the *episode
  plugins*: the intervention objects a harness names and the observers, all built fresh
  for every episode (so their state never leaks between episodes). Each hook says
  whether it is a decision hook (its result changes what happens) or an observer
  (its result is ignored; it cannot change the run), and how results are combined.
  Every payload is a frozen dataclass from `playground.core.payloads`, read-only all
  the way down.

Call order. Within an episode the interventions are called in the order the harness
lists them: the first listed is called first, so for a first-result hook
(`want_checkpoint`, `agent_actions`, `decide_intervention`) it decides first, and fan-out results are
collected in that order. Observers are called after the interventions. (pluggy itself
calls the last-registered plugin first; the episode's hooks are registered in reverse
to get this order. `tryfirst`/`trylast` on a hookimpl still override it.)
"""

from __future__ import annotations

import pluggy

from playground.core.payloads import (
    Decision,
    Detection,
    EpisodeEnd,
    EpisodeStart,
    Proposal,
    StepContext,
    StepOutcome,
    Verification,
)

PROJECT = "playground"
hookspec = pluggy.HookspecMarker(PROJECT)
hookimpl = pluggy.HookimplMarker(PROJECT)


# --------------------------------------------------------------------------------------
# Registration hooks (called once per process, on every loaded plugin)
# --------------------------------------------------------------------------------------


@hookspec
def register_envs(register) -> None:
    """Register environment providers.

    Call `register(provider)` with an object following `playground.core.env.EnvProvider`
    (a `name`, the task sets it offers, and `make()` building a gymnasium env).
    Heavy imports belong inside `make()`, not at module import time.
    """


@hookspec
def register_agents(register) -> None:
    """Register agents.

    Call `register(name, factory, description="", needs_expert=False, default=False,
    default_options=None)`. The factory is called with the agent options
    (`--agent-option KEY=VALUE`) as keyword arguments and returns an object following
    `playground.agents.base.Agent`. `needs_expert=True` asks the env to put its expert plan
    into the view's `extras`; `default=True` makes it the agent `playground run` plays when
    no --agent is given, with `default_options` (a dict) under the --agent-option given.
    """


@hookspec
def register_interventions(register) -> None:
    """Register interventions: the building blocks of harnesses.

    Call `register(name, factory, description="", modes=(), cost_unit="steps", cost=None, envs=(),
    candidate=True, params_model=None, effects=())`.
    `factory(params, services)` gets its parameters (an instance of `params_model`, or the dict
    of every harness parameter when it declares none) and the run's services
    (`playground.core.services.Services`: ids, seed, playbook path, scratch folder, judge model), and
    returns an episode plugin: an object whose methods implement runtime hooks with
    `@hookimpl`. A factory that takes one argument is called `factory(dict)`, the older way.
    `params_model` declares the parameters it reads: a pydantic model class whose fields are the
    keys, with their types, ranges and defaults; a run checks its parameters against it before
    anything is played. Without one the intervention is opaque (any key is accepted).
    `modes` names the failure modes the intervention is admissible for (used by methods that diagnose before choosing);
    `cost_unit` says what its cost is counted in: "steps" (env steps of the attempt),
    "tokens" (prompt + completion tokens), "reasks" (interventions made), or any unit
    with a fixed `cost` per attempt (e.g. `cost_unit="k", cost=4` for a retrieval budget).
    `envs` names the envs it works with (empty: any), so methods only try it there.
    `candidate=False` marks a point of comparison (a baseline): it runs in harnesses like any
    other, but methods that choose among the registered interventions leave it out.
    `effects` declares the `Decision` effects it may take ("reask", "replace", "rollback", "stop"): a stack of
    harnesses (`--harness A+B`) refuses interventions of two parts that both "replace" the action or both
    "rollback", since the one called first would overrule the other.
    """


@hookspec
def register_harnesses(register) -> None:
    """Register harnesses: named sets of interventions plus parameters.

    Call `register(name, interventions=[...], params={...}, description="", default=False,
    cascade=(), verifier="env:won")`. The interventions are called in the order listed (the
    first listed decides first). `default=True` adds the harness to `playground run` without
    `--harness`. The built-in `base` harness has no interventions.

    A cascade harness gives `cascade=[NAME, ...]` instead of `interventions`: the task is
    played with the first intervention alone; when that attempt is not won (`verifier`
    names the check, "env:won", the env's success signal) the env is reset to the same
    initial state and the next one plays it, and so on (a name may repeat: N trials under
    one intervention). Each attempt's plugins are built fresh; they see which attempt they
    are in as `ids.attempt` (1, 2, ...) in every runtime-hook payload, and share what they
    keep in external stores (keyed by `ids.episode_id`, the same for every attempt).

    No registration is needed to combine harnesses: `--harness A+B` stacks the interventions of
    A, then B, in one episode, with both parameter sets (at most one part a cascade, whose
    attempts the others join); a stack that cannot run as one is refused with a named error.
    """


@hookspec
def register_observers(register) -> None:
    """Register observers that watch every episode of every harness.

    Call `register(name, factory)`; `factory()` returns an episode plugin that may
    implement only observer hooks (`episode_started`, `step_completed`,
    `episode_finished`). An observer that implements a decision hook is refused.
    """


@hookspec
def register_attempt_verifiers(register) -> None:
    """Register deployment verifiers: what decides, between the attempts of a cascade harness, whether to stop.

    Call `register(name, factory, description="")`. A cascade harness names one as its
    `verifier`; `env:won` (the env's own grade, the benchmark's verifier) is built in and needs no
    registration. `factory(params)` gets the harness parameters and returns a callable that takes a
    `playground.core.payloads.AttemptView` (what the agent saw: goal, actions, observations without
    the env's grade text, whether the agent declared itself done; never a reward, score or `won`)
    and returns an `AttemptVerdict` (or a bool). It is called once after each attempt but the last,
    while the attempt's model roles still share the agent's model (`shared_agent_model()`); an
    exception is a failed verification (the run goes on; in strict mode it stops).
    """


@hookspec
def register_harness_loaders(register) -> None:
    """Register harnesses built from a name with a prefix, such as `METHOD:POLICY.json`.

    Call `register(prefix, loader, description="")`. When a run names a harness that
    starts with `prefix`, `loader(name, rest)` is called with the whole name and the text
    after the prefix and returns a `playground.host.registry.HarnessSpec`; it raises
    `ValueError` naming what is wrong with `rest`.
    """


@hookspec
def register_intervention_loaders(register) -> None:
    """Register interventions built from a name with a prefix, such as `WRAPPER:INTERVENTION`.

    Call `register(prefix, loader, description="")`. When a harness names an intervention
    that is not registered and starts with `prefix`, `loader(name, rest, lookup)` is called
    with the whole name, the text after the prefix and `lookup(name)`, which returns any
    other intervention's `playground.host.registry.InterventionSpec` (registered or built
    by a loader; KeyError when unknown); it returns an `InterventionSpec` named `name` and
    raises `ValueError` (or `KeyError`) naming what is wrong with `rest`. Loaded
    interventions are built when a run needs them and never added to the host's registry.
    """


@hookspec
def register_failure_labels(register) -> None:
    """Declare failure types and labels: the vocabulary of detections and lessons.

    Call `register(FailureType(name, mode, description=""))` for a failure type (its
    `mode` is the failure mode it counts towards, as named in interventions' `modes`) and
    `register(FailureLabel(name, failure_type, advice="", trigger="", resolved_when=""))`
    for each label; both come from `playground.core.labels`. Called once per plugin, when
    it loads. A plugin may declare labels of a type that another plugin declares, whatever
    the load order. Each type name and each label name is declared by one plugin only: a
    second declaration is an error naming the plugin that declared it first, and the
    plugin declaring it again is skipped. After loading, a label whose type no loaded
    plugin declares is dropped and reported. The host's registry (`Host.labels`) is what
    detectors, repairs, playbook validation and mode diagnosis read.
    """


@hookspec
def register_instrument_judges(register) -> None:
    """Say how the failure-injection instrument answers your model roles' requests (`playground.core.instrument`).

    Call `register(role, answer, kind)`: `role` is the name your role asks `ask_structured` under, `kind` one of
    `playground.core.instrument.JUDGE_KINDS` (which judge-accuracy option governs it), and `answer(request)` takes
    a `JudgeRequest` (your role's prompt and schema, and the instrument's state) and returns a `JudgeAnswer`: the
    right reply, a realistic wrong one, the truth, and how to grade any reply. It runs on the instrument's side, so
    your role's decision code stays blind to the truth. A role with no answerer gets an unusable reply.
    """


@hookspec
def register_studies(register) -> None:
    """Ship studies as data: `register(path)` for each study file (TOML) of your plugin, a grid of runs, their
    pairing and the table's columns (`playground.run.study.Study`; the file's `name` is its key).

    `playground study list` shows them, `plan`, `run` and `table` take the name or a path. The file is read and
    validated when registered, so a broken one fails the plugin's load with its path and the problem. Ship the
    files as package data; never drive runs from code.
    """


@hookspec
def register_figures(register) -> None:
    """Add columns to study tables: `register(Figure(name, description, of, share=False))` for each figure of your
    method (`playground.core.figures.Figure`; `of(records, events)` gives a cell's value from its episode
    records and their trace events, None where it does not apply, or {key: value} for a column per key;
    `Figure(name, description, of_folder=f)` reads the files your pipeline steps wrote into a cell's run directory
    instead). The study layer computes and shows them (`playground study table`), so a method ships no counting or
    table code of its own. Names are global: prefix them with something of yours when they could clash.
    """


@hookspec
def register_pipeline_steps(register) -> None:
    """Add the stages of your method a study can run after its episodes: `register(PipelineStep(name,
    description, run, params_model))` for each (`playground.core.pipeline_step.PipelineStep`).

    A study's `[[pipelines]]` names a grid and a list of steps with their `params`; `playground study run` copies
    the grid's finished run directory to the pipeline's folder and calls each step's `run(host, run_dir, params)`
    there in order, recording each one done (a finished step is not run again; a stopped one is run again with
    the same params). Its results reach the table through your `register_figures` figures with `of_folder`.
    Names are global: prefix them with your plugin's name (`myplugin.diagnose`).
    """


@hookspec
def register_commands(cli) -> None:
    """Add subcommands or command groups to the `playground` click group `cli`.

    This is the one way to add a command; the built-in method plugins' command groups use it.
    """


# --------------------------------------------------------------------------------------
# Run hooks (called by the runner before episodes are played, outside any episode)
# --------------------------------------------------------------------------------------


@hookspec
def check_playbook(path: str) -> str | list[str] | None:
    """Check, all must pass: can the run use the playbook file at `path`?

    Called by the runner before the first episode is played (on a fresh run and on every
    resume), once for each harness of the run with the playbook path that harness will use
    (`--playbook`, else its own under the run directory): on every loaded plugin, then on
    the harness's interventions built with the run's parameters (so an intervention can
    judge the path by its parameters, e.g. a playbook it may only read must exist). Return
    None when the path will do for you (a missing file normally becomes a new playbook),
    else a sentence saying why not. Every sentence returned is reported, prefixed with the
    path, and any one stops the run before it starts (exit code 2). Must not create or
    change anything. The plugin that owns the playbook format checks the file itself, so
    the host never needs to know it.
    """


@hookspec(firstresult=True)
def playbook_digest(path: str) -> str | None:
    """First result: a hash of the content of the playbook file at `path`, for the run's lock.

    Called when a run writes `lock.json` (before and after playing). The plugin that owns the
    playbook format returns a hash that stays the same for the same content whatever the
    file's layout (e.g. an SQLite database after VACUUM), or None when the file is not one of
    its playbooks; with no answer the host hashes the file's bytes. Must not create or
    change anything.
    """


@hookspec(firstresult=True)
def copy_playbook(source: str, target: str) -> bool | None:
    """First result: copy the whole playbook at `source` (a file, or a URL the owning plugin registered) to
    `target`, where none is yet; True once copied, None when `source` is not one of your playbooks.

    Called by the study layer before a grid that starts from another grid's playbook (a study file's
    `playbook_from`, the held-out protocol) plays its first episode: once per harness of that grid, with the
    playbook the source cell grew and the one the harness will use, only where the target does not exist yet
    (so a resumed grid keeps the copy it had). A missing `source` (a source cell that stored nothing) copies
    as an empty playbook. The copy is whole or absent: never a part of one at `target`. Called by `playground
    playbook copy` too. A plugin that keeps something of its own beside a playbook implements it as a wrapper
    (`@hookimpl(wrapper=True)`): it checks before `yield` and writes after it, once the owner copied the playbook.
    """


@hookspec
def discard_episodes(run_id: str, episode_ids: list[str], playbook: str) -> None:
    """Observer, fan-out: undo what unfinished plays of these episodes wrote outside the run directory.

    Called by the runner on every loaded plugin, after the checks and before it plays
    any episode, once per harness with the ids (`EpisodeIds.episode_id`, the same on every
    resume since the run id is) of that harness's episodes the run directory does not
    record as finished, and the playbook path the harness uses. On a fresh run none of
    them has started; on a resume some may have been cut off part-way (even by `kill -9`)
    after writing. A plugin whose writes are keyed by episode (the playbook plugin: lessons
    and counter updates, by their provenance) removes those of these episodes, so each is
    played again from the state an uninterrupted run would have had, free to take another
    path. Must be idempotent, must not create a file that does not exist, and must leave
    the writes of other runs and episodes alone. Return values are ignored; an exception
    stops the run before any episode, naming the plugin.
    """


# --------------------------------------------------------------------------------------
# Runtime hooks: episode phase
# --------------------------------------------------------------------------------------


@hookspec
def episode_started(start: EpisodeStart) -> None:
    """Observer, fan-out: the env has been reset and the episode begins.

    Called on every episode plugin; return values are ignored. Harness plugins use it
    to set up their per-episode state (e.g. open the playbook); `start.env_info` is the
    env's reset info, for env-specific facts (e.g. an API's documentation).
    """


@hookspec
def verify_at_end(end: EpisodeEnd) -> Verification | list[Verification] | None:
    """Verifier, fan-out: verdicts on repairs still watched when the episode ends.

    Called once when an episode ends without an error (won, lost, stopped, truncated),
    after its last `verify_recovery` and before `episode_finished`, so a verifier whose
    watch window the episode cut short can judge on what was seen (the loop records each
    verdict and its lesson as `verify_recovery`'s). Like `verify_recovery`, it should judge
    from the observable behaviour, not from `end.won` or `end.status`.
    """


@hookspec
def episode_finished(end: EpisodeEnd) -> None:
    """Observer, fan-out: the episode has ended (won, lost, stopped, truncated, error).

    Called on every episode plugin, also after an error; return values are ignored.
    """


# --------------------------------------------------------------------------------------
# Runtime hooks: step phase, in the order the loop calls them
# --------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def want_checkpoint(context: StepContext) -> bool | None:
    """Decision, first result: should the env be snapshotted before this step?

    Only called when the env can snapshot. The first plugin (in harness order) that
    returns True or False decides; None passes the question on, and no answer means no
    checkpoint. True keeps a checkpoint of the state before `context.step`; a later
    `Decision(rollback_to=step)` can restore it (rolling back to a step with no
    checkpoint is an error of the plugin that asked).
    """


@hookspec
def agent_notes(context: StepContext) -> str | list[str] | None:
    """Decision input, fan-out: standing text shown to the agent with every proposal of this step.

    Called once per step before the agent proposes. All notes are collected in plugin
    order into `AgentView.notes`. This is how a harness puts material in the agent's
    context unconditionally (e.g. a whole playbook, for an exposure control); prefer
    `decide_intervention` messages for anything conditional on a failure.
    """


@hookspec(firstresult=True)
def agent_actions(context: StepContext) -> tuple[str, ...] | list[str] | None:
    """Decision input, first result: narrow the admissible actions the agent is shown this step.

    Called once per step, after `agent_notes` and before the agent proposes, only when the
    env lists admissible actions. The first plugin (in harness order) that returns a
    sequence decides; None passes the question on, and no answer shows the env's whole
    list. The loop keeps the returned actions that are admissible, in the order given
    (duplicates dropped), and puts them in `AgentView.admissible_actions` for every
    proposal of the step; a result with no admissible action is an error of the plugin.
    Only what the agent is shown changes: detectors and decision hooks still see the env's
    whole list in `context.admissible_actions`, and the env still accepts any admissible
    action. This is how a harness shows a ranked or filtered action view instead of a hint.
    """


@hookspec
def detect_failures(
    context: StepContext, proposal: Proposal
) -> Detection | list[Detection] | None:
    """Decision input, fan-out: report failures seen in the proposal or the recent window.

    Called on every episode plugin for each proposal (also for re-asked proposals,
    with `context.attempt` > 0). All detections are collected, in plugin call order,
    and passed to `decide_intervention`. Return None when nothing is wrong.
    """


@hookspec(firstresult=True)
def decide_intervention(
    context: StepContext, proposal: Proposal, detections: list[Detection]
) -> Decision | None:
    """Decision, first result: what to do about the proposal.

    The first non-None `Decision` wins, in harness order (see "Call order" above).
    Return None to let the proposal go to the env unchanged. A `Decision` has exactly
    one effect: "reask" (a `message`: the loop asks the agent again, up to the
    harness's `max_reasks_per_step`, and the new proposal goes through detection
    again), "replace" (an `action`), "rollback" (`rollback_to` a checkpointed step) or
    "stop".
    """


@hookspec
def step_completed(outcome: StepOutcome) -> None:
    """Observer, fan-out: an action went to the env and this is what came back."""


@hookspec
def verify_recovery(outcome: StepOutcome) -> Verification | list[Verification] | None:
    """Verifier, fan-out: verdicts on earlier repairs, given the latest step.

    Called after `step_completed`. A verifier may only return verdicts on repairs it
    is watching; the loop records each verdict (and the lesson it produced, if any).
    The outcome carries `won` and `reward`, but a recovery verifier should judge from
    the observable behaviour only.
    """
