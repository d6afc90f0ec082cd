"""One soak run on the simulated head (`sim_ray`): the real watcher, holds, run owner, ledger and checkpoint
scan on a fake clock, with faults injected at seeded moments and the invariants checked after every tick."""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import Any, Optional

import requests

from tests.soak import soak_checks
from tests.soak.sim_ray import ACTIVE, SimJob, SimRay, Trainer
from workloads import destroy_mark, run_owner, submit
from workloads.gang_wait import WorkerPod
from workloads.gate import GatePlan
from workloads.job_spec import META_STACK, SYNC_SAVE, JobSpec
from workloads.ledger import LedgerFile, ledger_path
from workloads.recovery import Action, RecoveryPolicy, StateFile, Watcher

SIM_FAULTS = (
    "node_lost",
    "driver_killed",
    "head_restart",
    "watcher_restart",
    "second_submitter",
    "gate_fails_on_a_node",
    "k8s_api_error",
    "budget_trip",
    "stop",
    "slow_write",
    "failed_write",
    "destroy",
)
TICK_S, LOOK_S, STEP_S, PERIOD, NODES, PRICE = 10.0, 30.0, 20.0, 3, 2, 10.0
PLAN = GatePlan(
    node_count=NODES,
    gpus_per_node=8,
    gpu_name="B200",
    busbw_floor_gbps=162.06,
    busbw_source="soak",
    mount_path="/lustre",
    storage_expected_gbps=8.789,
    storage_floor_gbps=4.395,
    storage_source="soak",
    storage_bytes_per_node=1 << 30,
)


class FakeGang:
    """The gang's worker pods, one per alive GPU node; Kubernetes API errors and token expiry on demand."""

    def __init__(self, world: "SoakRun"):
        self.world = world

    def worker_pods(self) -> list[WorkerPod]:
        if self.world.now < self.world.k8s_fault_until:
            if self.world.rng.random() < 0.5:
                raise OSError("HTTP Error 500: Internal Server Error (Kubernetes API)")
            raise OSError("HTTP Error 401: Unauthorized (the projected service account token expired)")
        return [WorkerPod(f"w-{n}", "Running", n) for n in self.world.ray.alive_gpu_nodes()]

    def node_pool(self, node: str) -> Optional[str]:
        return "gpu-spot"

    def release(self) -> str:
        return "worker group gpu scaled to 0"


class SoakRun:
    """The world of one run: the simulated head, the checkpoint dir, the watcher, and what truly happened."""

    def __init__(
        self, seed: int, index: int, faults: list[str], workdir: Path, is_async: bool, sync_override: bool = True
    ):
        self.seed, self.index, self.rng = seed, index, random.Random(f"{seed}/{index}")
        self.now, self.write_s = 1_700_000_000.0, 8.0
        self.start = self.now
        self.ckpt, self.state_path = workdir / "checkpoints", workdir / "watcher" / "soak.json"
        self.ray = SimRay(self, f"http://sim-{seed}-{index}", NODES, self.rng)
        # `is_async`: the recipe's worker saves asynchronously by default (NeMo-RL v0.6.0's DTensor v2). The job
        # builder then turns it off on the command line (workloads/job_spec.py `SYNC_SAVE`); the fake trainer
        # obeys the entrypoint it is given, as NeMo-RL obeys its overrides. `sync_override=False` plants a job
        # without it (tests/test_soak.py: the checks must catch the step_N that then appears before its files).
        sync = f" ++{SYNC_SAVE}=false" if is_async and sync_override else ""
        entrypoint = f"python fake_trainer.py{sync}"
        self.is_async = is_async and f"++{SYNC_SAVE}=false" not in entrypoint
        self.spec = JobSpec.create(stack="soak", recipe="grpo", entrypoint=entrypoint, runtime_env={})
        self.run = run_owner.RunPlan(
            gate_policy="enforce",
            gate_plan=PLAN.to_dict(),
            checkpoint_dir=str(self.ckpt),
            node_count=NODES,
            node_hour_usd=PRICE,
            budget_usd=None,
            save_period=PERIOD,
            step_seconds=STEP_S,
            gang_max_wait_minutes=60,
            ray_cluster="rc",
            ray_worker_group="gpu",
            gang_default_rung="spot",
        )
        self.policy = RecoveryPolicy(LOOK_S, 8, 30.0, 60.0, pool_gpus=8 * NODES, resubmit_missing=True)
        self.violations: list[str] = []
        self.final: Optional[str] = None
        self.stopping: Optional[str] = None
        self.k8s_fault_until = self.ray_down_until = self.watcher_down_until = 0.0
        self.pending: list[tuple[float, str]] = []
        self.truth: dict[str, list[float]] = {}
        """Training job id -> [start, end] (sim seconds) as they truly ran: the spend's yardstick."""
        self.closed: dict[str, float] = {}
        self.seen_ended: set[str] = set()
        self.total = self.rng.randint(9, 18)
        self.schedule = sorted((self.now + self.rng.uniform(30, 60 * STEP_S), f) for f in faults)
        self.injected: list[str] = []
        self.watcher = self.new_watcher()
        self.next_look = self.now

    # ---------------------------------------------------------------- hooks from the simulated head

    def now_ms(self) -> int:
        return int(self.now * 1000)

    def violate(self, what: str) -> None:
        self.violations.append(f"run {self.index} (seed {self.seed}) at +{self.now - self.start:.0f}s: {what}")

    def maybe_api_fault(self, what: str) -> None:
        if self.now < self.ray_down_until:
            raise requests.exceptions.ConnectionError("the Ray head is restarting")

    def new_trainer(self) -> Trainer:
        return Trainer(self.ckpt, self.total, PERIOD, STEP_S, self.write_s, self.is_async)

    def on_submit(self, job: SimJob) -> None:
        if META_STACK not in job.metadata:
            return
        soak_checks.on_training_submit(self, job)
        self.truth[job.submission_id] = [self.now, self.now]

    def on_stop(self, job: SimJob) -> None:
        if job.trainer is None:
            return
        if self.stopping is None:  # neither the soak's user nor its destroy: the watcher's budget stop
            self.final = self.final or "budget stop"
            if job.trainer.save_in_flight():
                self.violate(f"the budget stop of {job.submission_id} killed its save of step_{job.trainer.save_step}")

    def new_watcher(self) -> Watcher:
        return Watcher(
            self.ray,
            self.spec,
            self.policy,
            clock=lambda: self.now,
            state=StateFile(self.state_path),
            run=self.run,
            ledger=LedgerFile(ledger_path(self.state_path)),
            gang=FakeGang(self),
        )

    # ---------------------------------------------------------------- time

    def training(self) -> list[SimJob]:
        return [j for j in self.ray.jobs.values() if j.trainer is not None]

    def active(self) -> list[SimJob]:
        return [j for j in self.training() if j.status in ACTIVE]

    def advance(self, seconds: float) -> None:
        """Let `seconds` of sim time pass: the drivers run, the watcher looks every `LOOK_S`."""
        end = self.now + seconds
        while self.now < end:
            self.now = min(self.now + TICK_S, end)
            self.ray.tick(self.now)
            for job in self.training():
                if job.status in ACTIVE:
                    self.truth.setdefault(job.submission_id, [self.now, self.now])[1] = self.now
            for when, what in [p for p in self.pending if p[0] <= self.now]:
                self.pending.remove((when, what))
                self.ray.add_gpu_node() if what == "replace" else self._replace_bad()
            if self.now >= self.next_look:
                self.next_look = self.now + LOOK_S
                self.look()
            soak_checks.after_tick(self)

    def look(self) -> None:
        if self.now < self.watcher_down_until:
            return
        if self.watcher_down_until:  # its pod is back: a new watcher from the state file and the ledger
            self.watcher_down_until, self.watcher = 0.0, self.new_watcher()
        try:
            self.decision = self.watcher.step()
        except submit.JobError:
            self.decision = None
        self.watcher.notes.clear()
        if self.decision is not None and self.decision.action is Action.DONE and "succeeded" in self.decision.reason:
            self.final = self.final or "success"

    def sim_sleep(self, seconds: float) -> None:
        self.advance(seconds)

    # ---------------------------------------------------------------- the run

    def play(self) -> int:
        """Run until every fault is in and the owner is done (or 8 simulated hours); the faults injected."""
        self.decision = None
        limit = self.now + 8 * 3600
        while self.now < limit:
            while self.schedule and self.schedule[0][0] <= self.now:
                self.inject(self.schedule.pop(0)[1])
            self.advance(TICK_S)
            over = self.decision is not None and self.decision.action in (Action.DONE, Action.GIVE_UP)
            if over and not self.schedule and not self.active() and not self.pending:
                break
        soak_checks.at_end(self)
        return len(self.injected)

    def inject(self, fault: str) -> None:
        self.injected.append(fault)
        getattr(self, f"_fault_{fault}")()

    def _running(self) -> Optional[SimJob]:
        return next((j for j in self.active() if j.status == "RUNNING"), None)

    def _fault_node_lost(self) -> None:
        alive = self.ray.alive_gpu_nodes()
        if alive:
            self.ray.kill_node(self.rng.choice(alive), self.now_ms())
            self.pending.append((self.now + self.rng.uniform(60, 400), "replace"))
        job = self._running()
        if job is not None:
            self.ray.end(job, "FAILED", 1, "ray.exceptions.ActorDiedError: The actor died unexpectedly")

    def _fault_driver_killed(self) -> None:
        job = self._running()
        if job is not None:
            self.ray.end(job, "FAILED", 143, "")

    def _fault_head_restart(self) -> None:
        self.ray.jobs.clear()  # no GCS fault tolerance: the job table is gone, the drivers with it
        self.ray_down_until = self.now + self.rng.uniform(0, 90)
        if self.rng.random() < 0.5:  # the hook on an update, or a user, submits after the restart
            self.later(self.rng.uniform(90, 300), "second_submitter")

    def _fault_watcher_restart(self) -> None:
        ledger = ledger_path(self.state_path)
        if ledger.parent.exists() and self.rng.random() < 0.5:  # killed mid-write: a half temp file stays
            (ledger.parent / f".{ledger.name}.999.tmp").write_text('{"attempts": [{"att')
        self.watcher_down_until = self.now + self.rng.uniform(0, 400)  # the pod restarts
        if self.rng.random() < 0.5:  # the attempt ends and a user submits while no watcher looks
            self.later(self.rng.uniform(0, 60), "driver_killed")
            self.later(self.rng.uniform(60, 200), "second_submitter")

    def later(self, seconds: float, fault: str) -> None:
        self.schedule = sorted([*self.schedule, (self.now + seconds, fault)])

    def _fault_second_submitter(self) -> None:
        if self.final is not None:
            return
        newest = max(self.training(), key=lambda j: j.start_ms, default=None)
        if newest is not None and newest.status in ACTIVE and self.rng.random() < 0.5:
            attempt = submit.attempt_of(newest.details())
            try:  # the hook's or jobctl's submission racing the watcher's of the same attempt
                job_id, created = submit.submit_attempt(self.ray, self.spec, attempt)
            except submit.JobError as err:
                self.violate(f"a second submitter of {newest.submission_id} was not told to adopt it: {err}")
            return
        # They read the watcher's ledger on Lustre through a probe job (`workloads.ledger.read_on_head`); here the file.
        ledger = LedgerFile(ledger_path(self.state_path))
        try:  # `python -m jobctl submit` / the hook on update
            run_owner.submit_gated(
                self.ray,
                self.spec,
                self.run.gate,
                sleep=self.sim_sleep,
                poll_interval=LOOK_S,
                ledger=lambda: ledger.load(self.spec.stack, self.spec.run_id),
            )
        except run_owner.GateFailed:
            pass
        except submit.JobError as err:
            if "Traceback" in str(err):
                self.violate(f"a second submitter failed with an unreadable error: {err}")

    def _fault_gate_fails_on_a_node(self) -> None:
        alive = self.ray.alive_gpu_nodes()
        if alive:
            self.ray.bad_node = self.rng.choice(alive)
            self.pending.append((self.now + self.rng.uniform(200, 900), "replace_bad"))

    def _replace_bad(self) -> None:
        if self.ray.bad_node is not None:
            self.ray.kill_node(self.ray.bad_node, self.now_ms())
            self.ray.bad_node = None
            self.ray.add_gpu_node()

    def _fault_k8s_api_error(self) -> None:
        self.k8s_fault_until = self.now + self.rng.uniform(30, 600)

    def _fault_budget_trip(self) -> None:
        spent = self.watcher.ledger.spend(self.now) or 0.0
        budget = spent + self.rng.uniform(0.1, 2.0)
        self.run = dataclasses.replace(self.run, budget_usd=budget)
        self.watcher.run, self.watcher.ledger.budget_usd = self.run, budget

    def _fault_stop(self) -> None:
        job = self._running()
        if job is not None and self.final is None:
            self.stopping, self.final = "user", "stop"
            submit.stop(self.ray, job.submission_id)
            self.stopping = None

    def _fault_slow_write(self) -> None:
        self.write_s = self.rng.uniform(60, 200)
        for job in self.active():
            job.trainer.write_s = self.write_s  # type: ignore[union-attr]

    def _fault_failed_write(self) -> None:
        job = self._running()
        if job is not None and job.trainer is not None:
            job.trainer.fail_save = True

    def _fault_destroy(self) -> None:
        if self.final is not None:
            return
        self.stopping, self.final = "destroy", "the start of destroy"
        destroy_mark.mark_destroy_begun(self.ray, self.spec.submission_id)
        for job in self.active():
            submit.stop(self.ray, job.submission_id)
        self.stopping = None


def play_run(seed: int, index: int, faults: list[str], workdir: Path, is_async: bool) -> tuple[int, list[str]]:
    run = SoakRun(seed, index, faults, workdir, is_async)
    count = run.play()
    return count, run.violations


def pick_faults(rng: random.Random, left: int) -> list[str]:
    return [rng.choice(SIM_FAULTS) for _ in range(min(left, rng.randint(1, 3)))]


__all__: list[Any] = ["SoakRun", "play_run", "pick_faults", "SIM_FAULTS"]
