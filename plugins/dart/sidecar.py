"""The DART sidecar and the baselines it is compared with (see docs/methods/dart.md).

Every sidecar watches the same things: the env's declared workflow structure (reset
info), the actions the env accepted, and the observable failures it reported
(`StepOutcome.failure`). None reads `won`, reward or score.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from playground.core.hookspecs import hookimpl
from playground.core.payloads import Decision, EpisodeStart, StepContext, StepOutcome
from playground.plugins.dart.structure import REVERSIBLE, Stopwatch, Timeline, Workflow

Failure = tuple[int, Mapping[str, Any], str]  # (step, failure record, action)


class _Sidecar:
    """Shared bookkeeping: structure, timeline, the pending failure, the recovery budget, timing."""

    name = "sidecar"
    checkpoint_every_step = False

    def __init__(self, params: Mapping[str, Any] | None = None) -> None:
        params = dict(params or {})
        self.max_recoveries = int(params.get("max_recoveries", 3))
        self.workflow: Workflow | None = None
        self.timeline = Timeline()
        self.pending: Failure | None = None
        self.recoveries = 0
        self.watch = Stopwatch()
        self.boundaries: set[int] = set()

    @hookimpl
    def episode_started(self, start: EpisodeStart) -> None:
        declaration = start.env_info.get("workflow")
        self.workflow = Workflow(declaration) if isinstance(declaration, Mapping) else None

    @hookimpl
    def want_checkpoint(self, context: StepContext) -> bool | None:
        return self.watch.timed(lambda: self._want(context))

    def _want(self, context: StepContext) -> bool | None:
        if self.workflow is None:
            return None
        self.timeline.rewind(context.step)
        if context.step == 0 or self.checkpoint_every_step:
            self.boundaries.add(context.step)
            return True
        if not self.timeline.in_progress(self.workflow):  # a boundary: no instance half done
            self.boundaries.add(context.step)
            return True
        return None

    @hookimpl
    def step_completed(self, outcome: StepOutcome) -> None:
        self.watch.timed(lambda: self._observe(outcome))

    def _observe(self, outcome: StepOutcome) -> None:
        if self.workflow is None:
            return
        step, action = outcome.context.step, outcome.proposal.action
        self.timeline.rewind(step)
        if outcome.valid_action and action in self.workflow.by_action:
            self.timeline.add(step, *self.workflow.by_action[action])
        failure = outcome.failure
        if failure is not None and not failure.get("rejected"):
            self.pending = (step, failure, action)

    @hookimpl
    def decide_intervention(self, context: StepContext, proposal, detections) -> Decision | None:
        return self.watch.timed(lambda: self._decide(context))

    def _decide(self, context: StepContext) -> Decision | None:
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

    def preserved(self, step: int) -> int:
        """Committed instances kept by restoring `step` (their commit lies before it)."""
        assert self.workflow is not None
        return sum(1 for iid in self.timeline.committed(self.workflow)
                   if (self.timeline.commit_step(iid, self.workflow) or 0) < step)


class Dart(_Sidecar):
    """DART: localise, certify, align, admit, else rerun the whole task.

    Parameters: `consumer_check` (default True), `certify` (True: checkpoints aligned to
    certified instance boundaries; False: any checkpoint), `entry_only` (False: fall back
    to earlier commit checkpoints; True: only the failed instance's entry), `max_recoveries`.
    """

    name = "dart"

    def __init__(self, params: Mapping[str, Any] | None = None) -> None:
        super().__init__(params)
        params = dict(params or {})
        self.consumer_check = bool(params.get("consumer_check", True))
        self.certify = bool(params.get("certify", True))
        self.entry_only = bool(params.get("entry_only", False))
        self.checkpoint_every_step = not self.certify
        self.recovered: set[str] = set()

    def rerun(self, context: StepContext, reason: str, **details: Any) -> Decision | None:
        if 0 not in context.checkpoints:
            return None
        return self.decision("dart_rerun", 0, decision="rerun", reason=reason, **details)

    def localise(self, failure: Failure) -> tuple[str | None, str]:
        """The unique failed instance, or None and why not."""
        assert self.workflow is not None
        _, record, action = failure
        keys = set(record.get("keys") or ())
        site = self.workflow.by_action.get(str(record.get("site") or action))
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

    def conditions(self, instance: str) -> dict[str, bool]:
        """The four certification conditions of `instance`'s boundaries."""
        assert self.workflow is not None
        inst, timeline = self.workflow.by_id[instance], self.timeline
        entry = timeline.first_step(instance)
        committed_before = {i for i in timeline.committed(self.workflow)
                            if entry is None or (timeline.commit_step(i, self.workflow) or 0) < entry}
        produced = set(self.workflow.inputs)
        for i in committed_before:
            produced |= set(self.workflow.by_id[i].writes or ())
        return {
            "interface_declared": inst.interface and inst.reads is not None and inst.writes is not None,
            "reads_available_at_entry": inst.reads is not None and set(inst.reads) <= produced,
            "writes_not_consumed": not self.consumers(instance) if self.consumer_check else True,
            "effects_recoverable": inst.effect in REVERSIBLE,
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
        the failed instance's output), then the effect-policy check (the failed instance and any other
        instance the restore undoes must be reversible or compensable)."""
        assert self.workflow is not None
        downstream = set(self.downstream(instance))
        if self.consumer_check:
            crossed = self.consumers(instance, step)
            if crossed:
                return False, f"committed consumer {', '.join(crossed)} read {instance}'s output"
        irreversible = [i for i in self.timeline.since(step) if i not in downstream
                        and self.workflow.by_id[i].effect not in REVERSIBLE]
        if instance not in irreversible and self.workflow.by_id[instance].effect not in REVERSIBLE:
            irreversible.insert(0, instance)
        if irreversible:
            return False, f"irreversible effect of {', '.join(irreversible)}"
        return True, "no committed consumer or irreversible effect crossed"

    def candidates(self, context: StepContext, instance: str, failed_at: int) -> list[int]:
        """Checkpoints to try, latest first: the instance's entry, then earlier commit checkpoints."""
        entry = self.timeline.first_step(instance)
        entry = failed_at if entry is None else entry
        stable = [s for s in context.checkpoints if s <= entry and (s in self.boundaries or not self.certify)]
        if not self.certify:
            stable = [s for s in context.checkpoints if s <= failed_at]
        stable = sorted(set(stable), reverse=True)
        if self.entry_only:
            return [s for s in stable[:1] if all(i == instance for i in self.timeline.since(s))]
        return stable

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
        if self.certify:
            conditions = self.conditions(instance)
            base["conditions"] = conditions
            failed = [name for name, ok in conditions.items() if not ok]
            if failed:
                return self.rerun(context, f"{instance} not certified: {', '.join(failed)}", blocked=True,
                                  candidate=entry, **base)
        reasons = []
        for step in self.candidates(context, instance, failed_at):
            ok, reason = self.admissible(step, instance)
            if ok:
                self.recovered.add(instance)
                return self.decision("dart_rollback", step, decision="rollback", reason=reason, blocked=False,
                                     candidate=entry, preserved=self.preserved(step), **base)
            reasons.append(f"step {step}: {reason}")
        return self.rerun(context, "blocked: " + ("; ".join(reasons[:3]) or "no stable checkpoint"), blocked=True,
                          candidate=entry, **base)


class RetryOnly(_Sidecar):
    """Baseline: rerun the whole task (restore step 0) on every observable failure."""

    name = "retry-only"

    def _want(self, context: StepContext) -> bool | None:
        return True if self.workflow is not None and context.step == 0 else None

    def recover(self, context: StepContext, failure: Failure) -> Decision | None:
        return self.decision("rerun", 0, decision="rerun", reason="retry the whole task", blocked=False,
                             failure_step=failure[0], preserved=0)


class EntryOnly(_Sidecar):
    """Baseline: restore the entry of the instance whose call failed, with no admission check."""

    name = "entry-only"
    checkpoint_every_step = True

    def recover(self, context: StepContext, failure: Failure) -> Decision | None:
        assert self.workflow is not None
        failed_at, record, action = failure
        site = self.workflow.by_action.get(str(record.get("site") or action))
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
