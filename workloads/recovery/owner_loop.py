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

from workloads.job_types import META_SPEC_HASH, JobSpec
from workloads.recovery import holds
from workloads.recovery.classify import Action, Decision, RayNode, decide, value_of
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


_FINAL = (Action.DONE, Action.GIVE_UP)
SAVE_WAIT_CAP_S = 1800.0
"""How long past its save cycle a budget stop waits for a save still being written."""


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
            self._close_superseded(mine, newest, now)
            decision = self._account(newest, attempt, decision, now) or decision
            self._release_after_run(jobs, newest, decision, now)
            status, final = str(value_of(newest.status)), decision.action in _FINAL
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
            return Decision(
                Action.DONE,
                f"{self.seen.submission_id} had ended ({self.seen.status.lower() or 'given up'}) before the cluster "
                "forgot it; nothing to recover",
            )
        elif self.seen is not None:
            if self.seen.lost_since is None:
                self.seen.lost_since = now
            attempt, restarts = self.seen.attempt, self.seen.restarts
            info = LostJob(self.seen.submission_id, end_time=int(self.seen.lost_since * 1000))
            decision = decide(info, attempt, self.policy, now, restarts=restarts)
            self._account(info, attempt, decision, now)
            self._table_forgot = True
        else:  # numbered from the ledger, as `run_owner.next_attempt` does: never `<id>` again after a head restart
            decision = decide(None, self.ledger.last_attempt(self.spec.submission_id), self.policy, now)
        if decision.action is Action.RESUBMIT:
            decision = self._resubmit(decision)
        return decision

    def _latest_checkpoint(self) -> Optional[int]:
        from workloads import checkpoints

        return checkpoints.scan(self.run.checkpoint_dir).latest if self.run.checkpoint_dir else None

    def _account(self, job: Any, attempt: int, decision: Decision, now: float) -> Optional[Decision]:
        """Keep the ledger's record of `job` (the newest attempt) current; the budget's decision, if any."""
        record = self.ledger.find(job.submission_id)
        if record is None:  # submitted by the deploy or by hand: first seen now
            start = (getattr(job, "start_time", None) or now * 1000) / 1000
            record = self._new_record(attempt, job.submission_id, start, self._latest_checkpoint() or 0, [])
        status = value_of(job.status)
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
            record.end, record.cause = (end_ms / 1000 if end_ms else min(start, now)), "superseded"
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

    def _mark_pods(self, record: "Attempt") -> None:
        """Record what the worker pods show of the attempt's nodes (`gang_wait.pod_marks`): the `gangWait` and
        `imagePull` goodput boundaries. Read at the attempt's start, while its gang runs; an API error leaves
        them out (the pull then counts under `gangWait`)."""
        from workloads import gang_wait

        view = self.gang or self.release
        if view is None or self.run.node_count < 1:
            return
        with contextlib.suppress(*gang_wait.VIEW_ERRORS):
            record.marks.update(gang_wait.pod_marks(view, self.run.node_count))

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
        )
        row = [r for r in rows if r[0] is record]
        run = goodput.summary(row)
        usd: Optional[dict[str, float]] = run["usd"]  # type: ignore[assignment]
        fraction = run["fraction"]
        return {
            "goodputFraction": None if fraction is None else round(float(fraction), 4),  # type: ignore[arg-type]
            "badputUsd": None if usd is None else {b: round(v, 2) for b, v in usd.items() if b != goodput.GOOD},
        }

    def _budget(self, job: Any, record: "Attempt", now: float) -> Optional[Decision]:
        """At 80 % of `job.budgetUsd` warn once; at 100 % stop after the next complete checkpoint, or at once when
        none comes within one save period."""
        from workloads import submit
        from workloads.ledger import WARN_FRACTION

        budget, spent = self.ledger.budget_usd, self.ledger.spend(now)
        if budget is None or spent is None:
            return None
        if spent >= WARN_FRACTION * budget and not self.ledger.budget_warned:
            self.ledger.budget_warned = True
            self._note(
                f"budget warning: ${spent:,.2f} spent, {100 * spent / budget:.0f} % of job.budgetUsd ${budget:,.2f}",
                event=True,
            )
            self._save_ledger()
        if spent < budget:
            self._budget_raised()
            return None
        latest = self._latest_checkpoint()
        if self.ledger.stop_requested_at is None:
            self.ledger.stop_requested_at, self.ledger.stop_requested_step = now, latest
            window = self.run.save_window_seconds
            when = f"in {window:.0f} s, one save period, if none comes" if window else "no save period known: now"
            self._note(
                f"budget reached: ${spent:,.2f} of job.budgetUsd ${budget:,.2f}; {job.submission_id} is stopped "
                f"after its next complete checkpoint ({when})",
                event=True,
            )
            self._save_ledger()
        window = self.run.save_window_seconds or 0.0
        since = self.ledger.stop_requested_step
        saved = latest is not None and since is not None and latest > since  # 0: no checkpoint yet
        waited = now - self.ledger.stop_requested_at
        # Never into a save being written, the one it waits for or a newer one begun since (the run's last).
        writing = waited < window + SAVE_WAIT_CAP_S and self._save_in_flight(max(latest or 0, since or 0))
        if (not saved and waited < window) or writing:
            return Decision(
                Action.WAIT,
                f"budget reached; {job.submission_id} stops after its next complete checkpoint (newer than "
                f"step_{since or 0})",
            )
        with contextlib.suppress(submit.UnknownJob):
            submit.stop(self.client, job.submission_id)
        why = (
            f"after its checkpoint step_{latest}" if saved else "at once: no complete checkpoint within one save period"
        )
        record.note = f"stopped by the budget {why}"
        self._note(f"budget: stopped {job.submission_id} {why} (${spent:,.2f} of ${budget:,.2f})", event=True)
        self._save_ledger()
        return Decision(Action.DONE, f"job.budgetUsd ${budget:,.2f} spent: stopped {job.submission_id} {why}")

    def _budget_raised(self) -> None:
        """Spend is under the budget again: forget the earlier trip."""
        if self.ledger.stop_requested_at is None:
            return
        self.ledger.stop_requested_at = self.ledger.stop_requested_step = None
        self._note("budget raised above the spend: the earlier budget stop is withdrawn", event=True)
        self._save_ledger()

    def _save_in_flight(self, since: Optional[int]) -> bool:
        """Whether a save newer than `since` is being written: Ray's stop gives the driver 3 s before SIGKILL and
        NeMo-RL has no SIGTERM handler, so a stop now would lose it."""
        from workloads import checkpoints

        if not self.run.checkpoint_dir:
            return False
        found = checkpoints.scan(self.run.checkpoint_dir)
        return any(step > (since or 0) for step in (*found.partial, *found.incomplete))

    def _release_after_run(self, jobs: list[Any], newest: Any, decision: Decision, now: float) -> None:
        """Once the run has ended for good and no job of the stack is active, scale the workers to 0, once per
        attempt; a failed release is tried again next look."""
        record = self.ledger.find(newest.submission_id)
        if self.release is None or decision.action not in _FINAL or record is None or record.end is None:
            return
        if record.released is not None or any(value_of(j.status) in ("PENDING", "RUNNING") for j in jobs):
            return
        from workloads.gang_wait import VIEW_ERRORS

        try:
            done = self.release.release()
        except VIEW_ERRORS as err:
            self._note(f"run ended ({record.cause}); releasing its workers failed ({err}): trying again next look")
            return
        # `now` was read before this look listed the jobs, and Ray stamps `end` on its own clock: a run that ended
        # during the look would otherwise be released before it ended.
        record.released = max(now, record.end)
        self._note(
            f"run ended ({record.cause}): workers released ({done}); GKE removes the GPU nodes after its scale-down "
            "delay, and `python -m jobctl submit` brings them back",
            event=True,
        )
        self._save_ledger()

    def _resubmit(self, decision: Decision) -> Decision:
        decision = holds.first_hold(self, decision)
        if decision.action is not Action.RESUBMIT:
            return decision
        job_id = self.resubmit(decision.next_attempt, decision.restarts or 0, decision.capacity_waits)
        return dataclasses.replace(decision, reason=f"{decision.reason}: resubmitted as {job_id}")

    def _new_record(self, attempt: int, job_id: str, start: float, resume: int, cleaned: list[str]) -> "Attempt":
        """A new ledger record, saved, with the rungs of the whole gang seen before it ("spot 3, onDemand 5")."""
        from workloads.ledger import GANG_COMPLETE, Attempt

        gang = self.ledger.gang
        whole = gang is not None and gang.submission_id == job_id and gang.outcome == GANG_COMPLETE
        mix = gang.mix if whole and gang is not None else ""
        record = Attempt(attempt, job_id, start, self.run.node_count, resume, cleaned=cleaned, rungs=mix)
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
        resume = self._latest_checkpoint()
        job_id, _ = submit.submit_attempt(self.client, self.spec, attempt, meta)
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
