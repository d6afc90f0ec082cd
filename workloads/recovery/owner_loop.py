"""The run owner's loop: resubmit the stack's job when infrastructure, not the job, killed it.

A RayJob with `clusterSelector` refuses `backoffLimit > 0` (ray-project/kuberay v1.7.0
ray-operator/controllers/ray/utils/validation.go), so resubmission comes from this loop, in the cluster or
on a laptop (jobctl watch). A resubmission is the same `JobSpec` as `<id>-r<N>`, and NeMo-RL resumes from
the highest `step_N` in its checkpoint dir (NVIDIA-NeMo/RL nemo_rl/utils/checkpoint.py).
Rules and holds: docs/preemption-recovery.md. Not covered: a job that hangs instead of failing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, TextIO

from workloads import size_ladder
from workloads.job_types import META_SPEC_HASH, JobSpec
from workloads.recovery import budget_stop, holds, worker_release
from workloads.recovery.classify import FINAL, Action, Decision, RayNode, decide, value_of
from workloads.recovery.policy import RecoveryPolicy
from workloads.recovery.state_file import LostJob, Seen, StateFile

if TYPE_CHECKING:
    from workloads.gang_wait import GangView
    from workloads.ledger import Attempt, Ledger, LedgerFile
    from workloads.run_owner import GateSetup, RunPlan

META_AUTO_RESTARTS = "nemo-rl-gke/auto-restarts"
"""Consecutive automatic restarts up to and including this attempt (absent = a submission by hand)."""
META_CAPACITY_WAITS = "nemo-rl-gke/capacity-waits"
"""Consecutive resubmissions after a capacity wait up to and including this attempt (not restarts)."""


_FINAL_CAUSES = ("succeeded", "stopped", "budget", "application")
"""Ledger causes after which the owner never resubmits (`_finish`: a success, a stop, the budget's, a failure
of the job's own)."""


class Watcher:
    """One watched spec. `step()` looks once, acts if needed, and returns the decision."""

    def __init__(
        self,
        client: Any,
        spec: JobSpec,
        policy: RecoveryPolicy,
        *,
        clock: Callable[[], float] = time.time,
        state: Optional[StateFile] = None,
        gate: Optional["GateSetup"] = None,
        run: Optional["RunPlan"] = None,
        ledger: Optional["LedgerFile"] = None,
        gang: Optional["GangView"] = None,
        release: Optional["GangView"] = None,
    ):
        from workloads.run_owner import RunPlan

        self.client, self.spec, self.policy, self.clock, self.state = client, spec, policy, clock, state
        self.run = run if run is not None else RunPlan()
        self.gate = gate if gate is not None else self.run.gate
        self.seen: Optional[Seen] = state.load(spec.spec_hash) if state is not None else None
        self.resubmitted: list[str] = []
        self.ledger_file = ledger
        self.ledger = self._load_ledger()
        self.notes: list[str] = []
        """Lines for the watcher's log besides the decision; `watch` prints them."""
        self.gang = gang
        self._table_forgot = False
        """The job table has forgotten the last attempt (a head restart): its writers may still live."""
        self.release = release
        """Scales the worker group to 0 once the run has ended; None: the workers stay."""
        self._previous_look: Optional[float] = None
        self._workers_back_since: Optional[float] = None
        """When workers were first seen back after the run's release (`_release_after_run`)."""
        self.shrink_to: Optional[dict[str, Any]] = None
        """The size of run.json's `shrink_sizes` the resubmission runs at (`holds.shrink_when_short`); None: full."""

    def _load_ledger(self) -> "Ledger":
        from workloads.ledger import Ledger

        if self.ledger_file is not None:
            ledger = self.ledger_file.load(self.spec.stack, self.spec.run_id)
        else:
            ledger = Ledger(self.spec.stack, self.spec.run_id)
        ledger.node_hour_usd, ledger.budget_usd = self.run.node_hour_usd, self.run.budget_usd
        ledger.rung_node_hour_usd = dict(self.run.rung_node_hour_usd)
        ledger.price_estimate = self.run.node_hour_estimate
        return ledger

    def _save_ledger(self) -> None:
        if self.ledger_file is not None:
            self.ledger_file.save(self.ledger)

    def _note(self, line: str, event: bool = False) -> None:
        self.notes.append(line)
        if event:
            self._event(line)

    def _event(self, line: str) -> None:
        """Record `line` in the ledger's events (shown by `status`) only."""
        self.ledger.events.append(f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime(self.clock()))} {line}")

    def _remember(self, seen: Seen) -> None:
        changed = self.seen is None or seen.to_json() != self.seen.to_json()
        self.seen = seen
        if changed and self.state is not None:
            self.state.save(seen)

    def _node_rows(self) -> list[dict[str, Any]]:
        """Ray's node table (`submit.ray_nodes`); the tests fake a preemption here."""
        from workloads import submit

        return submit.ray_nodes(self.client)

    def step(self) -> Decision:
        from workloads import submit

        now = self.clock()
        jobs = submit.list_jobs(self.client, self.spec.stack)
        mine = [j for j in jobs if (j.metadata or {}).get(META_SPEC_HASH) == self.spec.spec_hash]
        nodes: list[RayNode] = []
        if mine:
            newest = max(mine, key=lambda j: (submit.attempt_of(j), j.start_time or 0))
            newer = [j for j in jobs if j not in mine and (j.start_time or 0) > (newest.start_time or 0)]
            if newer:
                return Decision(
                    Action.DONE, f"superseded by {newer[-1].submission_id} (another spec of stack {self.spec.stack})"
                )
            attempt = submit.attempt_of(newest)
            restarts = submit.metadata_int(newest, META_AUTO_RESTARTS, 0)
            capacity_waits = submit.metadata_int(newest, META_CAPACITY_WAITS, 0)
            if value_of(newest.status) == "FAILED":
                with contextlib.suppress(submit.JobError):  # no node evidence then; the log rules still apply
                    nodes = [RayNode.from_row(row) for row in self._node_rows()]
            info: Any = newest
            decision = decide(
                info, attempt, self.policy, now, restarts=restarts, capacity_waits=capacity_waits, nodes=nodes
            )
            decision = self._lease_end(newest, attempt, decision)
            self._close_superseded(mine, newest, now)
            decision = self._account(newest, attempt, decision, now) or decision
            self._release_after_run(jobs, newest, decision, now)
            self._previous_look = now
            status, final = str(value_of(newest.status)), decision.action in FINAL
            self._remember(
                Seen(self.spec.spec_hash, newest.submission_id, attempt, restarts, capacity_waits, status, final)
            )
        elif any(value_of(j.status) in ("PENDING", "RUNNING") for j in jobs):
            # Another spec of the stack runs (a `submit` by hand, a deploy): ours would fight it for the GPUs.
            running = next(j for j in jobs if value_of(j.status) in ("PENDING", "RUNNING"))
            return Decision(
                Action.WAIT,
                f"no job of this spec; {running.submission_id} (another spec of stack {self.spec.stack}) runs",
            )
        elif self.seen is not None and self.seen.final:
            decision = Decision(
                Action.DONE,
                f"{self.seen.submission_id} had ended ({self.seen.status.lower() or 'given up'}) before the cluster "
                "forgot it; nothing to recover",
            )
            # Its workers are still the owner's to release (a claim held them at its end; a Helm upgrade brings them).
            self._release_after_run(jobs, LostJob(self.seen.submission_id, end_time=0), decision, now)
            self._previous_look = now
            return decision
        elif self.seen is not None:
            if self.seen.lost_since is None:
                self.seen.lost_since = self._forgotten_at(self.seen.submission_id, now)
            attempt, restarts = self.seen.attempt, self.seen.restarts
            info = LostJob(self.seen.submission_id, end_time=int(self.seen.lost_since * 1000))
            decision = decide(info, attempt, self.policy, now, restarts=restarts)
            self._account(info, attempt, decision, now)
            self._table_forgot = True
        else:  # numbered from the ledger, as `run_owner.next_attempt` does: never `<id>` again after a head restart
            last = self._last_record()
            if last is not None and last.end is None:
                # The state file is lost too: the ledger's open record is the attempt the cluster forgot.
                self.seen = Seen(self.spec.spec_hash, last.submission_id, last.attempt, max(last.attempt - 1, 0))
                return self.step()
            if last is not None and last.cause in _FINAL_CAUSES:
                decision = Decision(
                    Action.DONE,
                    f"{last.submission_id} had ended ({last.cause}) before the cluster and the watcher's state "
                    "forgot it; nothing to recover",
                )
                self._release_after_run(jobs, LostJob(last.submission_id, end_time=0), decision, now)
                self._previous_look = now
                return decision
            decision = decide(None, self.ledger.last_attempt(self.spec.submission_id), self.policy, now)
        if decision.action is Action.RESUBMIT:
            decision = self._resubmit(decision)
        return decision

    def _last_record(self) -> Optional["Attempt"]:
        """The ledger's record of this spec's highest attempt, if any."""
        from workloads.submit import attempt_id

        mine = [a for a in self.ledger.attempts if a.submission_id == attempt_id(self.spec.submission_id, a.attempt)]
        return max(mine, key=lambda a: a.attempt, default=None)

    def _forgotten_at(self, job_id: str, now: float) -> float:
        """When the cluster forgot `job_id`: the start of the head that no longer knows it, when that head started
        after the attempt (its driver ran on the old head and died with it), else `now`. A watcher down while the
        attempt ended and the head restarted would otherwise charge the attempt until its next look (the soak,
        seed 5). Ray's node table marks the head (`is_head_node`, `start_time_ms`: ray python/ray/util/state/
        common.py `NodeState`, Ray 2.60.0)."""
        from workloads import submit

        record = self.ledger.find(job_id)
        if record is None:
            return now
        rows: list[Any] = []
        with contextlib.suppress(submit.JobError):
            rows = self._node_rows()
        starts = [
            row["start_time_ms"] / 1000
            for row in rows
            if isinstance(row, dict)
            and row.get("is_head_node") is True
            and row.get("state") == "ALIVE"
            and isinstance(row.get("start_time_ms"), int)
            and not isinstance(row.get("start_time_ms"), bool)
        ]
        head = max(starts, default=None)
        return head if head is not None and record.start < head < now else now

    def _latest_checkpoint(self) -> Optional[int]:
        from workloads import checkpoints

        return checkpoints.scan(self.run.checkpoint_dir).latest if self.run.checkpoint_dir else None

    def _account(self, job: Any, attempt: int, decision: Decision, now: float) -> Optional[Decision]:
        """Keep the ledger's record of `job` (the newest attempt) current; the budget's decision, if any."""
        record = self.ledger.find(job.submission_id)
        status = value_of(job.status)
        if record is None:  # submitted by the deploy or by hand: first seen now
            start = (getattr(job, "start_time", None) or now * 1000) / 1000
            nodes = size_ladder.attempt_nodes(job, self.run.node_count)  # its size as submitted, shrunk or not
            record = self._new_record(attempt, job.submission_id, start, self._latest_checkpoint() or 0, [], nodes)
        elif status in ("PENDING", "RUNNING") and self._mark_pods(record):  # missed at an earlier look
            self._save_ledger()
        if status in ("PENDING", "RUNNING"):
            return self._budget(job, record, now) if status == "RUNNING" else None
        if record.end is None:
            self._finish(job, record, decision, now)
        return None

    def _close_superseded(self, mine: list, newest: Any, now: float) -> None:
        """Close every open ledger record older than `newest` (it ended when the table says, else when `newest`
        started): left open, its node-hours would grow for ever."""
        from workloads import submit

        ends = {j.submission_id: j.end_time for j in mine}
        start = (getattr(newest, "start_time", None) or now * 1000) / 1000
        closed = False
        for record in self.ledger.attempts:
            if record.end is not None or record.submission_id == newest.submission_id:
                continue
            if record.attempt > submit.attempt_of(newest):
                continue
            end_ms = ends.get(record.submission_id)
            # One the table forgot (a head restart) ended when that head started, not when `newest` did.
            end = end_ms / 1000 if end_ms else self._forgotten_at(record.submission_id, min(start, now))
            record.end, record.cause = end, "superseded"
            self._note(f"attempt {record.attempt} ({record.submission_id}) superseded by {newest.submission_id}", True)
            closed = True
        if closed:
            self._save_ledger()

    def _finish(self, job: Any, record: "Attempt", decision: Decision, now: float) -> None:
        from workloads import checkpoints, submit

        status = value_of(job.status)
        record.end = (getattr(job, "end_time", None) or now * 1000) / 1000
        causes = {"SUCCEEDED": "succeeded", "STOPPED": "stopped" if self.ledger.stop_requested_at is None else "budget"}
        record.cause = causes.get(status) or (decision.cause.value if decision.cause is not None else "failed")
        if status == "SUCCEEDED" and decision.action is Action.RESUBMIT:  # `_lease_end`: not the run's end
            record.cause = size_ladder.LEASE_CAUSE
        record.saved_step = self._latest_checkpoint()
        self._mark_gate(record)
        text = str(getattr(job, "message", "") or "")
        last = checkpoints.last_started_step(text)
        if last is None and not isinstance(job, LostJob):  # the message holds only the log's tail: read it whole
            with contextlib.suppress(submit.JobError):
                last = checkpoints.last_started_step("".join(submit.logs(self.client, job.submission_id)))
        record.last_step = last
        if status == "SUCCEEDED":
            record.steps_lost = 0
        elif record.saved_step is not None:
            record.steps_lost = checkpoints.steps_lost(last, max(record.saved_step, record.resume_step))
        spend = self.ledger.attempt_spend(record, now)
        lost = "steps lost not known" if record.steps_lost is None else f"{record.steps_lost} step(s) lost"
        saved = (
            "no checkpoint visible"
            if record.saved_step is None
            else f"last complete checkpoint step_{record.saved_step}"
        )
        ran = "" if last is None else f", was in step {last}"
        self._note(
            f"attempt {record.attempt} ({record.submission_id}) ended: {record.cause}{ran}; resumed from step "
            f"{record.resume_step}, {saved}: {lost}; {record.node_hours(now):.2f} node-hours"
            + ("" if spend is None else f", ${spend:,.2f}"),
            event=True,
        )
        self._save_ledger()
        # One JSON line per ended attempt: the dashboard's log-based metrics extract it (infra/observability.py);
        # the run's spend so far is in it because Monitoring cannot sum a distribution's values itself.
        per_step, run_spend = self.ledger.usd_per_step(record, now), self.ledger.spend(now)
        self.notes.append(
            json.dumps(
                {
                    "nemoRlGke": "attempt-ended",
                    "stack": self.spec.stack,
                    "attempt": record.attempt,
                    "submissionId": record.submission_id,
                    "cause": record.cause,
                    "resumeStep": record.resume_step,
                    "savedStep": record.saved_step,
                    "stepsDone": record.steps_done,
                    "stepsLost": record.steps_lost,
                    "nodeHours": round(record.node_hours(now), 4),
                    "spendUsd": None if spend is None else round(spend, 2),
                    "usdPerStep": None if per_step is None else round(per_step, 4),
                    "runSpendUsd": None if run_spend is None else round(run_spend, 2),
                    **self._goodput_fields(record, now),
                },
                sort_keys=True,
            )
        )

    def _mark_pods(self, record: "Attempt") -> bool:
        """Record what the worker pods show of the attempt's nodes (`gang_wait.pod_marks`): the `gangWait` and
        `imagePull` goodput boundaries; whether they were recorded now. Read when the attempt is recorded and, while
        they are missing (its pods still pulling or pending, an API error), at each later look while it runs;
        once set, never read again. Never read: the pull counts under `gangWait` (docs/goodput.md)."""
        from workloads import gang_wait

        view = self.gang or self.release
        if view is None or self.run.node_count < 1 or "podsRunning" in record.marks:
            return False
        marks: dict[str, float] = {}
        with contextlib.suppress(*gang_wait.VIEW_ERRORS):
            # An attempt on fewer nodes (recovery.shrink) has its marks once its own count of pods runs: waiting for
            # the full gang, they would come from nodes that return during its lease and charge its steps as a wait.
            marks = gang_wait.pod_marks(view, record.nodes or self.run.node_count)
            if marks:  # the ask that raised the workers (workloads/worker_group.py): whose nodes these are
                asked = view.group().asked_at
                if asked is not None:
                    marks["askedAt"] = asked
        record.marks.update(marks)
        return bool(marks)

    def _mark_gate(self, record: "Attempt") -> None:
        """Record the attempt's gate run start and end (the `gate` goodput bucket's boundaries)."""
        from workloads import submit
        from workloads.run_owner import META_GATE_FOR

        runs: list[Any] = []  # none known when the job table does not answer
        with contextlib.suppress(submit.JobError):
            jobs = submit.all_jobs(self.client)
            runs = [j for j in jobs if (j.metadata or {}).get(META_GATE_FOR) == record.submission_id and j.start_time]
        if runs:
            record.marks["gateStart"] = min(j.start_time for j in runs) / 1000
            ends = [j.end_time for j in runs if j.end_time]
            if ends:
                record.marks["gateEnd"] = max(ends) / 1000

    def _goodput_fields(self, record: "Attempt", now: float) -> dict[str, Any]:
        """The attempt's goodput fraction and badput dollars for its `attempt-ended` line."""
        from workloads import goodput

        rows = goodput.run_buckets(
            self.ledger,
            now,
            step_seconds=self.run.step_seconds,
            write_seconds=self.run.checkpoint_write_seconds,
            save_period=self.run.save_period,
            full_nodes=self.run.node_count or None,
        )
        row = [r for r in rows if r[0] is record]
        run = goodput.summary(row)
        usd: Optional[dict[str, float]] = run["usd"]  # type: ignore[assignment]
        fraction = run["fraction"]
        return {
            "goodputFraction": None if fraction is None else round(float(fraction), 4),  # type: ignore[arg-type]
            "badputUsd": None if usd is None else {b: round(v, 2) for b, v in usd.items() if b not in goodput.GOODPUT},
        }

    def _budget(self, job: Any, record: "Attempt", now: float) -> Optional[Decision]:
        return budget_stop.budget_decision(self, job, record, now)

    def _release_after_run(self, jobs: list[Any], newest: Any, decision: Decision, now: float) -> None:
        worker_release.release_after_run(self, jobs, newest, decision, now)

    def _resubmit(self, decision: Decision) -> Decision:
        decision = holds.first_hold(self, decision)
        if decision.action is not Action.RESUBMIT:
            return decision
        job_id = self.resubmit(decision.next_attempt, decision.restarts or 0, decision.capacity_waits)
        return dataclasses.replace(decision, reason=f"{decision.reason}: resubmitted as {job_id}")

    def _lease_end(self, job: Any, attempt: int, decision: Decision) -> Decision:
        """An attempt on fewer nodes that SUCCEEDED ended its lease (`checkpoint_must_save_by`) on a whole checkpoint,
        unless its log says it reached `grpo.max_num_steps`: resubmit at once, at full size when the gang is back
        (`holds.shrink_when_short` chooses), with no restart counted. A log that cannot be read counts as a lease end:
        a run already at its last step ends again at once."""
        from workloads import submit

        full = self.run.node_count
        if decision.action is not Action.DONE or value_of(job.status) != "SUCCEEDED":
            return decision
        if full <= 0 or size_ladder.attempt_nodes(job, full) >= full:
            return decision
        record = self.ledger.find(job.submission_id)
        if record is not None and record.end is not None:
            ended = record.cause == size_ladder.LEASE_CAUSE
        else:
            try:
                ended = size_ladder.LEASE_ENDED_LINE in "".join(submit.logs(self.client, job.submission_id))
            except submit.JobError:
                ended = True
        if not ended:
            return decision
        nodes = size_ladder.attempt_nodes(job, full)
        return Decision(
            Action.RESUBMIT,
            f"{job.submission_id} on {nodes} of {full} nodes ended its {self.run.shrink_lease_minutes}-min lease on a "
            "whole checkpoint (recovery.shrink)",
            next_attempt=attempt + 1,
            restarts=0,
        )

    def _attempt_spec(self, attempt: int, job_id: str) -> JobSpec:
        """The spec attempt `attempt` is submitted with: the run's, or resized to `shrink_to` (one log line and one
        ledger event saying the size and why)."""
        size = self.shrink_to
        if size is None:
            return self.spec
        nodes = int(size["nodes"])
        try:
            spec = size_ladder.resized_spec(self.spec, nodes, size["overrides"])
        except ValueError as err:
            self._note(f"attempt {attempt} ({job_id}) not resized ({err}): submitted at full size", event=True)
            self.shrink_to = None
            return self.spec
        self._note(f"attempt {attempt} ({job_id}) runs on {nodes} of {self.run.node_count} nodes: {size['why']}", True)
        return spec

    def _new_record(
        self, attempt: int, job_id: str, start: float, resume: int, cleaned: list[str], nodes: Optional[int] = None
    ) -> "Attempt":
        """A new ledger record, saved, with the rungs of the whole gang seen before it ("spot 3, onDemand 5"); `nodes`:
        the attempt's size (default: the size this watcher submits it at)."""
        from workloads.ledger import GANG_COMPLETE, Attempt

        gang = self.ledger.gang
        whole = gang is not None and gang.submission_id == job_id and gang.outcome == GANG_COMPLETE
        mix = gang.mix if whole and gang is not None else ""
        if nodes is None:
            nodes = int(self.shrink_to["nodes"]) if self.shrink_to is not None else self.run.node_count
        record = Attempt(attempt, job_id, start, nodes, resume, cleaned=cleaned, rungs=mix)
        self._mark_pods(record)
        self.ledger.attempts.append(record)
        self._save_ledger()
        return record

    def resubmit(self, attempt: int, restarts: int, capacity_waits: int = 0) -> str:
        from workloads import checkpoints, submit

        meta = {META_AUTO_RESTARTS: str(restarts)}
        if capacity_waits:
            meta[META_CAPACITY_WAITS] = str(capacity_waits)
        cleaned: list[str] = []
        if self.run.checkpoint_dir:
            # No attempt runs now: a `tmp_step_<N>` is a dead run's partial save (workloads/checkpoints.py).
            quiet = checkpoints.QUIET_SECONDS if self._table_forgot else 0.0
            cleaned = checkpoints.clean_partial(self.run.checkpoint_dir, quiet=quiet)  # file times: wall clock
            # What the job's entrypoint does first (workloads/job_spec.py `prepare_checkpoints`), done here too so
            # that the step logged below is the one NeMo-RL loads; the earlier release's directory is the run's
            # parent (`workloads.job_types.run_checkpoint_subdir`). A failure is the attempt's to report.
            with contextlib.suppress(checkpoints.PrepareError, OSError):
                legacy = os.path.dirname(self.run.checkpoint_dir.rstrip("/"))
                checkpoints.prepare(self.run.checkpoint_dir, legacy, lambda line: self._note(line, event=True))
        resume = self._latest_checkpoint()
        spec = self._attempt_spec(attempt, submit.attempt_id(self.spec.submission_id, attempt))
        job_id, _ = submit.submit_attempt(self.client, spec, attempt, meta)
        self.resubmitted.append(job_id)
        if self.ledger.find(job_id) is None:  # else someone submitted this very attempt first: that is the job
            self._new_record(attempt, job_id, self.clock(), resume or 0, cleaned)
        if resume is not None:
            start = f"resumes from step_{resume}" if resume else "starts at step 0 (no complete checkpoint)"
            removed = f"; removed the partial save(s) {', '.join(cleaned)}" if cleaned else ""
            self._note(f"attempt {attempt} ({job_id}) {start}{removed}", event=True)
            self._save_ledger()
        self._remember(Seen(self.spec.spec_hash, job_id, attempt, restarts, capacity_waits, status="PENDING"))
        return job_id


def watch(
    client: Any,
    spec: JobSpec,
    policy: RecoveryPolicy,
    *,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
    once: bool = False,
    out: Optional[TextIO] = None,
    heartbeat: Optional[Path] = None,
    state: Optional[Path] = None,
    until: Optional[Callable[[Decision], bool]] = None,
    gate: Optional["GateSetup"] = None,
    run: Optional["RunPlan"] = None,
    gang: Optional["GangView"] = None,
    release: Optional["GangView"] = None,
) -> Decision:
    """Check the spec's job every `policy.check_interval_seconds` and resubmit it after a preemption.

    Runs until `until(decision)` is true (forever by default), or once with `once`; a dashboard that does not
    answer is reported and retried. A line goes to `out` whenever the decision changes; `heartbeat` is touched
    after every look; `state` keeps what the watcher saw across restarts. Returns the last decision."""
    from workloads import submit
    from workloads.ledger import LedgerFile, ledger_path

    watcher = Watcher(
        client,
        spec,
        policy,
        clock=clock,
        state=StateFile(state) if state is not None else None,
        gate=gate,
        run=run,
        ledger=LedgerFile(ledger_path(state)) if state is not None else None,
        gang=gang,
        release=release,
    )
    last_line = None
    while True:
        try:
            decision = watcher.step()
        except submit.JobError as err:
            decision = Decision(Action.WAIT, f"cannot look at the job: {err}")
        if heartbeat is not None:
            touch(heartbeat)
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(clock()))
        if out is not None:
            for note in watcher.notes:
                out.write(note + "\n" if note.startswith("{") else f"{stamp} {spec.submission_id} {note}\n")
        watcher.notes.clear()
        line = f"{decision.action.value}: {decision.reason}"
        if out is not None and (line != last_line or decision.action is Action.RESUBMIT):
            out.write(f"{stamp} {spec.submission_id} {line}\n")
            out.flush()
        last_line = line
        if once or (until is not None and until(decision)):
            return decision
        sleep(policy.check_interval_seconds)


def touch(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.touch()
        os.utime(path)
