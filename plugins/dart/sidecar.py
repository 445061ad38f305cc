"""The DART sidecar and the baselines it is compared with (see docs/methods/dart.md).

Every sidecar watches the same things: the env's declared workflow structure (reset
info, and what each step declares in `StepOutcome.structure` where the env declares as it
goes), the actions the env accepted, and the observable failures it reported
(`StepOutcome.failure`). None reads `won`, reward or score.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from playground.core.hookspecs import hookimpl
from playground.core.payloads import Decision, EpisodeStart, StepContext, StepOutcome
from playground.plugins.dart.params import DartParams, SidecarParams
from playground.plugins.dart.structure import REVERSIBLE, Timeline, Workflow

Failure = tuple[int, Mapping[str, Any], str]  # (step, failure record, action)


class _Sidecar:
    """Shared bookkeeping: structure, timeline, the pending failure, the recovery budget."""

    name = "sidecar"
    checkpoint_every_step = False
    PARAMS: type[SidecarParams] = SidecarParams  # the parameters it reads, declared (`params.py`)

    def __init__(self, params: SidecarParams | Mapping[str, Any] | None = None) -> None:
        """`params`: an instance of `PARAMS` (the host validated it), or a dict validated by it (strictly)."""
        if not isinstance(params, self.PARAMS):
            params = self.PARAMS.model_validate(dict(params or {}), strict=True)
        self.p = params
        self.max_recoveries = params.max_recoveries
        self.workflow: Workflow | None = None
        self.timeline = Timeline()
        self.pending: Failure | None = None
        self.recoveries = 0
        self.boundaries: set[int] = set()

    @hookimpl
    def episode_started(self, start: EpisodeStart) -> None:
        declaration = start.env_info.get("workflow")
        self.workflow = Workflow(declaration) if isinstance(declaration, Mapping) else None

    @hookimpl
    def want_checkpoint(self, context: StepContext) -> bool | None:
        return self._want(context)

    def _want(self, context: StepContext) -> bool | None:
        if self.workflow is None:
            return None
        self.timeline.rewind(context.step)
        if context.step == 0 or self.checkpoint_every_step:
            self.boundaries.add(context.step)
            return True
        if self.timeline.stable(self.workflow):  # a boundary: no instance half done but at a commit point
            self.boundaries.add(context.step)
            return True
        return None

    @hookimpl
    def step_completed(self, outcome: StepOutcome) -> None:
        if self.workflow is None:
            return
        step, action = outcome.context.step, outcome.proposal.action
        self.timeline.rewind(step)
        declared = outcome.structure if isinstance(outcome.structure, Mapping) else {}
        self.workflow.declare(declared.get("instances"))
        call = declared.get("call")
        if call and str(call[0]) in self.workflow.by_id:  # the env names the call (a failed one may have run)
            self.timeline.add(step, str(call[0]), int(call[1]))
        elif outcome.valid_action and action in self.workflow.by_action:
            self.timeline.add(step, *self.workflow.by_action[action])
        failure = outcome.failure
        if failure is not None and not failure.get("rejected"):
            self.pending = (step, failure, action)

    @hookimpl
    def decide_intervention(self, context: StepContext, proposal, detections) -> Decision | None:
        if self.workflow is None or self.pending is None:
            return None
        self.timeline.rewind(context.step)
        failure, self.pending = self.pending, None
        if self.recoveries >= self.max_recoveries:
            return None
        self.recoveries += 1
        return self.recover(context, failure)

    def recover(self, context: StepContext, failure: Failure) -> Decision | None:
        raise NotImplementedError

    def decision(self, kind: str, step: int, **details: Any) -> Decision:
        return Decision(self.name, kind, rollback_to=step, details=details)

    def site(self, failure: Failure) -> tuple[str, int] | None:
        """(instance, index) of the failing call: the call the env declared at the failing step, else the
        declared step its `site` (or action) names."""
        assert self.workflow is not None
        step, record, action = failure
        return self.timeline.at(step) or self.workflow.by_action.get(str(record.get("site") or action))

    def preserved(self, step: int) -> int:
        """Committed instances kept by restoring `step` (their commit lies before it)."""
        assert self.workflow is not None
        return sum(1 for iid in self.timeline.committed(self.workflow)
                   if (self.timeline.commit_step(iid, self.workflow) or 0) < step)


class Dart(_Sidecar):
    """DART: localise, certify, align, admit, else rerun the whole task.

    Parameters: `consumer_check` (default True), `effect_check` (default True; False drops the
    effect-policy condition and admission check, an ablation), `certify` (True: checkpoints
    aligned to certified instance boundaries; False: any checkpoint), `entry_only` (False:
    the failed instance's commit checkpoints, then its entry; True: only its entry),
    `exit_candidates` (default False; True: the failed instance's exit checkpoint too, an
    explicit policy), `wide_search` (default False; True: every stable checkpoint up to the
    aligned boundary, other instances' included, an ablation), `max_recoveries`.
    """

    name = "dart"
    PARAMS = DartParams

    def __init__(self, params: DartParams | Mapping[str, Any] | None = None) -> None:
        super().__init__(params)
        p = self.p
        assert isinstance(p, DartParams)
        self.consumer_check = p.consumer_check
        self.effect_check = p.effect_check
        self.certify = p.certify
        self.entry_only = p.entry_only
        self.exit_candidates = p.exit_candidates
        self.wide_search = p.wide_search
        self.checkpoint_every_step = not self.certify
        self.recovered: set[str] = set()

    def rerun(self, context: StepContext, reason: str, **details: Any) -> Decision | None:
        if 0 not in context.checkpoints:
            return None
        return self.decision("dart_rerun", 0, decision="rerun", reason=reason, **details)

    def localise(self, failure: Failure) -> tuple[str | None, str]:
        """The unique failed instance, or None and why not."""
        assert self.workflow is not None
        record = failure[1]
        keys = set(record.get("keys") or ())
        site = self.site(failure)
        begun = self.timeline.begun() + ([site[0]] if site else [])
        if not keys:
            return (site[0], "the failing call's instance") if site else (None, "no instance named by the failure")
        undeclared = [i for i in dict.fromkeys(begun) if self.workflow.by_id[i].writes is None]
        writers = [i for i in dict.fromkeys(begun) if set(self.workflow.by_id[i].writes or ()) & keys]
        if len(writers) == 1 and not undeclared:
            return writers[0], f"unique writer of {', '.join(sorted(keys))}"
        if not writers and not undeclared:
            return None, f"no begun instance writes {', '.join(sorted(keys))}"
        return None, f"ambiguous: {', '.join(writers + undeclared)} may have written {', '.join(sorted(keys))}"

    def boundary(self, instance: str, keys: set[str], entry: int) -> int:
        """The step of `instance`'s latest stable boundary before its first write of `keys`: its latest
        in-instance commit point there (unless `entry_only`), else its entry."""
        assert self.workflow is not None
        inst = self.workflow.by_id[instance]
        points = [c for c in inst.commits if c <= inst.first_write(keys)] if keys and not self.entry_only else []
        step = self.timeline.step_of(instance, max(points)) if points else None
        return entry if step is None else step

    def conditions(self, instance: str, boundary: int) -> dict[str, bool]:
        """The four certification conditions of `instance`'s boundary at step `boundary`."""
        assert self.workflow is not None
        inst, timeline = self.workflow.by_id[instance], self.timeline
        entry = timeline.first_step(instance)
        committed_before = {i for i in timeline.committed(self.workflow)
                            if entry is None or (timeline.commit_step(i, self.workflow) or 0) < entry}
        produced = set(self.workflow.inputs)
        for i in committed_before:
            produced |= set(self.workflow.by_id[i].writes or ())
        undone = [inst.step_effects[i] for s, iid, i in timeline.entries if iid == instance and s >= boundary]
        return {
            "interface_declared": inst.interface and inst.reads is not None and inst.writes is not None,
            "reads_available_at_entry": inst.reads is not None and set(inst.reads) <= produced,
            "writes_not_consumed": not self.consumers(instance) if self.consumer_check else True,
            "effects_recoverable": all(effect in REVERSIBLE for effect in undone) if self.effect_check else True,
        }

    def downstream(self, instance: str) -> list[str]:
        """Begun instances that read `instance`'s writes, or the writes of such readers (transitively)."""
        assert self.workflow is not None
        found: list[str] = []
        produced = set(self.workflow.by_id[instance].writes or ())
        for other in self.timeline.begun():
            reads = set(self.workflow.by_id[other].reads or ())
            if other != instance and reads & produced:
                found.append(other)
                produced |= set(self.workflow.by_id[other].writes or ())
        return found

    def consumers(self, instance: str, since: int = 0) -> list[str]:
        """Committed downstream instances of `instance` with calls at `since` or later (what a restore crosses)."""
        assert self.workflow is not None
        committed, crossed = set(self.timeline.committed(self.workflow)), set(self.timeline.since(since))
        return [i for i in self.downstream(instance) if i in committed and i in crossed]

    def admissible(self, step: int, instance: str) -> tuple[bool, str]:
        """Whether restoring `step` is admissible: the committed-consumer check (downstream work committed on
        the failed instance's output), then the effect-policy check (every call the restore undoes, and so
        repeats, of any instance, committed or not, must have a reversible or compensable effect)."""
        assert self.workflow is not None
        if self.consumer_check:
            crossed = self.consumers(instance, step)
            if crossed:
                return False, f"committed consumer {', '.join(crossed)} read {instance}'s output"
        irreversible = [self.workflow.by_id[iid].describe() for iid in self.irreversible(step)]
        if irreversible and self.effect_check:
            return False, f"irreversible effect of {', '.join(irreversible)}"
        return True, "no committed consumer or irreversible effect crossed"

    def irreversible(self, step: int) -> list[str]:
        """Instances with a call at `step` or later whose effect is irreversible (what restoring `step` undoes
        that nothing takes back)."""
        assert self.workflow is not None
        return list(dict.fromkeys(iid for s, iid, i in self.timeline.entries if s >= step
                                  and self.workflow.by_id[iid].step_effects[i] not in REVERSIBLE))

    def candidates(self, context: StepContext, instance: str, entry: int, boundary: int, failed_at: int) -> list[int]:
        """Checkpoints to try, latest first: the failed instance's own stable checkpoints (its commit
        checkpoints up to the aligned boundary and its entry; its exit too under `exit_candidates`; its entry
        alone under `entry_only`), or, under `wide_search`, every stable checkpoint up to the boundary."""
        if not self.certify:
            return sorted({s for s in context.checkpoints if s <= failed_at}, reverse=True)
        stable = {s for s in context.checkpoints if s in self.boundaries}
        if self.wide_search:
            return sorted({s for s in stable if s <= boundary}, reverse=True)
        own = self.own_checkpoints(instance, entry)
        levels = ("entry",) if self.entry_only else ("entry", "commit")
        chosen = {s for level in levels for s in own[level] if s <= boundary}
        if self.exit_candidates and not self.entry_only:
            chosen |= set(own["exit"])
        return sorted(chosen & stable, reverse=True)

    def own_checkpoints(self, instance: str, entry: int) -> dict[str, list[int]]:
        """The steps of `instance`'s checkpoints on this branch, by level: `entry` (before its first call,
        given), `commit` (at its declared in-instance commit points) and `exit` (after its last call, once
        committed)."""
        assert self.workflow is not None
        timeline, inst = self.timeline, self.workflow.by_id[instance]
        last = timeline.commit_step(instance, self.workflow)
        commits = [s for c in inst.commits if (s := timeline.step_of(instance, c)) is not None]
        return {"entry": [entry], "commit": commits, "exit": [] if last is None else [last + 1]}

    def recover(self, context: StepContext, failure: Failure) -> Decision | None:
        failed_at, record, _ = failure
        instance, why = self.localise(failure)
        base = {"failure": dict(record), "failure_step": failed_at}
        if instance is None:
            return self.rerun(context, f"not localised ({why})", blocked=False, instance=None, **base)
        base.update(instance=instance, localised=why)
        if instance in self.recovered:
            return self.rerun(context, f"a local recovery of {instance} failed again", blocked=False, **base)
        entry = self.timeline.first_step(instance)
        entry = failed_at if entry is None else entry
        boundary = self.boundary(instance, set(record.get("keys") or ()), entry)
        base.update(candidate=boundary, entry=entry)
        crossed = self.irreversible(boundary)
        if crossed:  # named in the trace, whichever check decides
            assert self.workflow is not None
            base["irreversible"] = [self.workflow.by_id[iid].describe() for iid in crossed]
        if self.certify:
            conditions = self.conditions(instance, boundary)
            base["conditions"] = conditions
            failed = [name for name, ok in conditions.items() if not ok]
            if failed:
                return self.rerun(context, f"{instance} not certified: {', '.join(failed)}", blocked=True, **base)
        reasons = []
        candidates = self.candidates(context, instance, entry, boundary, failed_at)
        base["candidates"] = candidates
        for step in candidates:
            ok, reason = self.admissible(step, instance)
            if ok:
                self.recovered.add(instance)
                return self.decision("dart_rollback", step, decision="rollback", reason=reason, blocked=False,
                                     preserved=self.preserved(step), **base)
            reasons.append(f"step {step}: {reason}")
        return self.rerun(context, "blocked: " + ("; ".join(reasons[:3]) or "no stable checkpoint"), blocked=True,
                          **base)


class RetryOnly(_Sidecar):
    """Baseline: rerun the whole task (restore step 0) on every observable failure."""

    name = "retry-only"

    def _want(self, context: StepContext) -> bool | None:
        return True if self.workflow is not None and context.step == 0 else None

    def recover(self, context: StepContext, failure: Failure) -> Decision | None:
        return self.decision("rerun", 0, decision="rerun", reason="retry the whole task", blocked=False,
                             failure_step=failure[0], preserved=0)


class CoarseRetry(_Sidecar):
    """Baseline: rerun the failing call's entity from its start (the entry of its first begun instance), unchecked.

    Coarser than `entry-only` (a whole chain of subtasks, not one instance), finer than a whole-task rerun.
    """

    name = "coarse-retry"

    def recover(self, context: StepContext, failure: Failure) -> Decision | None:
        assert self.workflow is not None
        failed_at = failure[0]
        site = self.site(failure)
        instance = site[0] if site else None
        entity = self.workflow.by_id[instance].entity if instance else None
        group = [i for i in self.timeline.begun()
                 if i == instance or (entity is not None and self.workflow.by_id[i].entity == entity)]
        step = min((s for i in group if (s := self.timeline.first_step(i)) is not None), default=failed_at)
        if step not in context.checkpoints:
            return None
        return self.decision("rollback", step, decision="rollback", reason=f"rerun {entity or 'the subtask'} "
                             "from its start", blocked=False, instance=instance, failure_step=failed_at,
                             preserved=self.preserved(step))


class EntryOnly(_Sidecar):
    """Baseline: restore the entry of the instance whose call failed, with no admission check."""

    name = "entry-only"
    checkpoint_every_step = True

    def recover(self, context: StepContext, failure: Failure) -> Decision | None:
        assert self.workflow is not None
        failed_at = failure[0]
        site = self.site(failure)
        entry = self.timeline.first_step(site[0]) if site else None
        step = failed_at if entry is None else entry
        if step not in context.checkpoints:
            return None
        return self.decision("rollback", step, decision="rollback", reason="restore the failing instance's entry",
                             blocked=False, instance=site[0] if site else None, failure_step=failed_at,
                             preserved=self.preserved(step))


class CheckpointLatest(_Sidecar):
    """Baseline: restore the latest checkpoint before the failing call."""

    name = "checkpoint-latest"
    checkpoint_every_step = True

    def recover(self, context: StepContext, failure: Failure) -> Decision | None:
        earlier = [s for s in context.checkpoints if s <= failure[0]]
        if not earlier:
            return None
        step = max(earlier)
        return self.decision("rollback", step, decision="rollback", reason="restore the latest checkpoint",
                             blocked=False, failure_step=failure[0], preserved=self.preserved(step))


def for_harness(name: str) -> _Sidecar | None:
    """A new sidecar as DART's registered harness `name` runs it (`dart`, an ablation in `variants.ABLATIONS`, a
    baseline in `variants.BASELINES`), or None for `base`; KeyError for any other name. For the tests and benches
    that play a harness's sidecar directly (`playground.testing.play`)."""
    from playground.plugins.dart.variants import ABLATIONS, BASELINES

    if name == "base":
        return None
    if name == "dart":
        return Dart({})
    ablations = {ablation: params for ablation, params, _ in ABLATIONS}
    if name in ablations:
        return Dart(ablations[name])
    baselines = {baseline: globals()[cls] for baseline, cls, _ in BASELINES}
    return baselines[name]({})
