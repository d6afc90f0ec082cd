"""One soak run on the simulated head (`sim_ray`): the real watcher, holds, run owner, ledger and checkpoint
scan on a fake clock, with faults injected at seeded moments and the invariants checked after every tick."""

from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path
from typing import Any, Optional, Union

import requests

from tests.soak import soak_checks
from tests.soak.sim_ray import ACTIVE, WHOLE_MARK, SimJob, SimRay, Trainer, parse_entrypoint
from workloads import destroy_mark, run_owner, size_ladder, submit, worker_group
from workloads.gang_wait import WorkerGroup, WorkerPod
from workloads.gate import GatePlan
from workloads.goodput import SCALE_DOWN_S
from workloads.job_spec import CHECKPOINTS_DIR, META_STACK, SYNC_SAVE, JobSpec, build_job, run_checkpoint_subdir_for
from workloads.job_types import legacy_checkpoint_dir
from workloads.ledger import LedgerFile, ledger_path
from workloads.recipes import RECIPES, Parallelism, TrainingBackend
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
    "state_lost",
    "async_leftover",
    "release_then_up",
    "helm_restore",
    "two_day_idle",
    "old_nodes",
    "stockout",
)
UP_BOUND_S = 1800.0
"""After `pulumi up` with a changed job on released workers, the new spec's first attempt is submitted within this:
the ask, GKE's nodes (a few minutes), the gate, and the other faults of the run (a failing gate's node replaced in
up to 15 min, the owner's pod down, API errors)."""
IDLE_S = 2 * 86400.0
"""`two_day_idle`: the clock's jump between a stop and the user's `jobctl submit`."""
EXACT_FAULTS = {"two_day_idle", "idle_resume", "old_nodes", "driver_killed", "slow_write", "async_leftover"}
"""Faults after which the ledger's node count is the world's at every moment (no node lost, no gang short): the
goodput fraction is checked against the world's bill (`soak_checks.goodput_truth`)."""
ASYNC_RECIPE, SYNC_RECIPE = "qwen2.5-1.5b-gsm8k", "qwen2.5-72b-deepscaler"
"""The two save modes, by the recipes' own workers: NeMo-RL v0.6.0's DTensor v2 worker saves asynchronously
(`dcp.async_save`: the job builder must turn it off, `workloads.job_spec.SYNC_SAVE`), v0.4.0's Megatron one
synchronously. Half the runs use each."""
STACK = "soak"
TOTALS = (9, 13, 17)
"""A run's steps: a few values, so that the real job builder (~0.1 s a build) runs a few times per soak."""
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


@dataclasses.dataclass(frozen=True)
class SoakJobSettings:
    """The stack's `job` config as the job builder reads it (`workloads.job_spec.JobSettings`)."""

    recipe: str
    parallelism: Parallelism
    max_num_steps: int
    overrides: tuple[str, ...] = ()
    wandb_project: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class SoakPool:
    node_count: int = NODES
    gpus_per_node: int = 8


EARLY = {"two_day_idle": 0.6 * min(TOTALS) * STEP_S}
"""Faults that must come while the run trains (the user stops it, then resumes it two days later)."""
SpecCache = dict[tuple[str, int, str], JobSpec]
B200_SHAPE = size_ladder.Shape(
    full_nodes=8,
    gpus_per_node=8,
    train_tensor_parallel=4,
    train_pipeline_parallel=4,
    global_batch=256,
    generation_tensor_parallel=8,
)
"""The b200 stack's run (Pulumi.b200.yaml: the 72B DeepScaleR recipe, TP4 x PP4, global batch 256, vLLM TP8, 8 nodes):
its ladder is 8, 4, 2 (`stockout` runs)."""
SHRINK_WAIT_MIN, LEASE_MIN, MIN_NODES = 10, 60, 2
"""Pulumi.b200.yaml's `recovery.shrink`."""
STOCKOUT_TOTAL = 500
"""A `stockout` run's steps: long enough (~3 h at full size) to outlast a stock-out and a lease."""


def build_spec(
    recipe_name: str, total: int, mount: Path, cache: Optional[SpecCache] = None, nodes: int = NODES
) -> JobSpec:
    """The job the real builder makes for `recipe_name` with `total` steps on `nodes` GPU nodes, Lustre at `mount`
    (memoised in `cache`: a build checks every override against the pinned config, ~0.08 s)."""
    key = (recipe_name, total, f"{mount}:{nodes}")
    if cache is not None and key in cache:
        return cache[key]
    recipe = RECIPES[recipe_name]
    job = SoakJobSettings(recipe.name, recipe.parallelism, total)
    spec = build_job(recipe, job, SoakPool(nodes), str(mount), STACK, False, PERIOD)
    if cache is not None:
        cache[key] = spec
    return spec


class FakeGang:
    """The RayCluster's GPU worker group as KubeRay and GKE serve it: `replicas`, the claim and the last ask live on
    the world (one group, whichever watcher or submitter reads it); a worker pod per alive GPU node, its node's
    creation the world's VM's; Kubernetes API errors and token expiry on demand."""

    def __init__(self, world: "SoakRun"):
        self.world = world

    def _api(self) -> None:
        if self.world.now < self.world.k8s_fault_until:
            if self.world.rng.random() < 0.5:
                raise OSError("HTTP Error 500: Internal Server Error (Kubernetes API)")
            raise OSError("HTTP Error 401: Unauthorized (the projected service account token expired)")

    def worker_pods(self) -> list[WorkerPod]:
        self._api()
        rows = {n["node_id"]: n for n in self.world.ray.nodes}
        return [
            WorkerPod(f"w-{n}", "Running", n, rows[n]["start_time_ms"] / 1000, rows[n]["start_time_ms"] / 1000)
            for n in self.world.ray.alive_gpu_nodes()
        ]

    def node_pool(self, node: str) -> Optional[str]:
        return "gpu-spot"

    def node_created(self, node: str) -> Optional[float]:
        vm = self.world.vm_of.get(node)
        return None if vm is None else self.world.vms[vm][0]

    def release(self) -> str:
        self.scale(0)
        return "worker group gpu scaled to 0"

    def group(self) -> WorkerGroup:
        self._api()
        w = self.world
        return WorkerGroup(0, w.replicas, 0, w.nodes, w.claimed_until, w.asked_at)

    def scale(
        self, replicas: int, claim_until: Optional[float] = None, asked_at: Optional[float] = None
    ) -> Optional[int]:
        """The worker group's replicas: KubeRay deletes the extra pods at once and makes the missing ones, which
        wait for GKE's nodes (`SoakRun._follow_replicas`)."""
        self._api()
        w = self.world
        had, w.replicas = w.replicas, replicas
        if claim_until is not None:
            w.claimed_until = claim_until
        if asked_at is not None and replicas > had:
            w.asked_at = asked_at
        return had if had != replicas else None


class SoakRun:
    """The world of one run: the simulated head, the checkpoint dir, the watcher, and what truly happened."""

    def __init__(
        self,
        seed: int,
        index: int,
        faults: list[str],
        workdir: Path,
        is_async: bool,
        specs: Optional[SpecCache] = None,
    ):
        """`is_async`: the run's recipe is one whose worker saves asynchronously (`ASYNC_RECIPE`); the job
        builder must make it save synchronously, and the fake trainer obeys the entrypoint it is given, as
        NeMo-RL obeys its overrides. `workdir` is the run's Lustre (its mount path)."""
        self.seed, self.index, self.rng = seed, index, random.Random(f"{seed}/{index}")
        self.now, self.write_s = 1_700_000_000.0, 8.0
        self.start = self.now
        self.workdir, self.state_path = workdir, workdir / ".nemo-rl-gke" / "watcher" / f"{STACK}.json"
        self.stockouts: list[list[Any]] = []
        """`stockout`s: [lost at, capacity back at, checked: shrunk, grown back]."""
        self.sizes: dict[str, int] = {}
        """Training job id -> the GPU node count it was submitted at."""
        shrinks = "stockout" in faults
        if shrinks:  # the b200 stack: its recipe saves synchronously
            is_async = False
        self.native_async = is_async
        self.nodes = B200_SHAPE.full_nodes if shrinks else NODES
        """The run's full gang (GPU nodes)."""
        self.replicas, self.claimed_until, self.asked_at = self.nodes, None, None
        """The worker group's `replicas`, claim and last ask (`FakeGang`): the deploy left the gang up."""
        self.vms: dict[str, list[Any]] = {}
        """GKE's GPU nodes (the billed VMs): name -> [created, unneeded since or None, removed at or None]."""
        self.vm_of: dict[str, str] = {}
        """Ray GPU node id -> the VM its worker pod runs on."""
        self.short: list[tuple[float, int]] = []
        """Stock-outs: (until, nodes the pool cannot have until then)."""
        self.paid_node_s = 0.0
        """The GPU node-seconds billed since the run's first look (the VMs up): goodput's yardstick."""
        self.idle_s, self.last_dt, self.look_s = 0.0, 0.0, LOOK_S
        self.billing = False
        """The world's bill runs from the run's first look (the deploy's submission): nodes before are not its."""
        self.limit = self.now + 8 * 3600
        self.tries: dict[str, int] = {}
        self.up_at: Optional[float] = None
        self.unseen_end: dict[str, float] = {}
        """Attempts that ended unseen before a head restart forgot them -> that head's start."""
        """When `release_then_up` changed the spec (its first attempt is then awaited, `soak_checks.after_tick`)."""
        self.goodput: Optional[float] = None
        self.ray = SimRay(self, f"http://sim-{seed}-{index}", self.nodes, self.rng)
        for node in self.ray.alive_gpu_nodes():
            self.vm_of[node] = self._new_vm(self.now)
        self.gang = FakeGang(self)
        self.total = STOCKOUT_TOTAL if shrinks else self.rng.choice(TOTALS)
        self.recipe = RECIPES[ASYNC_RECIPE if is_async else SYNC_RECIPE]
        self.specs = specs
        self.spec = build_spec(self.recipe.name, self.total, workdir, specs, self.nodes)
        # Where the watcher looks (infra/run_plan.py: its pod's checkpoints mount + the run's subdir), which
        # must be where the job saves: the fake trainer reads its own from the entrypoint.
        job = SoakJobSettings(self.recipe.name, self.recipe.parallelism, self.total)
        self.ckpt = workdir / CHECKPOINTS_DIR / run_checkpoint_subdir_for(self.recipe, job, STACK)
        self.planted: set[int] = set()
        self.whole_seen: set[int] = set()
        """Unfinished step_N the soak put there itself (`async_leftover`), not saved by a trainer."""
        self.run = run_owner.RunPlan(
            gate_policy="enforce",
            gate_plan=dataclasses.replace(PLAN, node_count=self.nodes).to_dict(),
            checkpoint_dir=str(self.ckpt),
            node_count=self.nodes,
            node_hour_usd=PRICE,
            budget_usd=None,
            save_period=PERIOD,
            step_seconds=STEP_S,
            gang_max_wait_minutes=60,
            ray_cluster="rc",
            ray_worker_group="gpu",
            gang_default_rung="spot",
            **(self._shrink_plan() if shrinks else {}),
        )
        self.policy = RecoveryPolicy(LOOK_S, 8, 30.0, 60.0, pool_gpus=8 * self.nodes, resubmit_missing=True)
        self.violations: list[str] = []
        self.final: Optional[str] = None
        self.stopping: Optional[str] = None
        self.k8s_fault_until = self.ray_down_until = self.watcher_down_until = 0.0
        self.pending: list[tuple[float, str]] = []
        self.truth: dict[str, list[float]] = {}
        """Training job id -> [start, end] (sim seconds) as they truly ran: the spend's yardstick."""
        self.closed: dict[str, float] = {}
        self.seen_ended: set[Union[str, tuple[str, str]]] = set()
        self.reported: set[str] = set()
        self.schedule = sorted((self.now + self.rng.uniform(30, EARLY.get(f, 60 * STEP_S)), f) for f in faults)
        self.injected: list[str] = []
        for when, fault in [p for p in self.schedule if p[1] in START_FAULTS]:
            self.schedule.remove((when, fault))
            self.inject(fault)
        self.watcher = self.new_watcher()
        self.next_look = self.now

    # ---------------------------------------------------------------- hooks from the simulated head

    def now_ms(self) -> int:
        return int(self.now * 1000)

    def violate(self, what: str) -> None:
        self.violations.append(f"run {self.index} (seed {self.seed}) at +{self.now - self.start:.0f}s: {what}")

    def violate_once(self, key: str, what: str) -> None:
        if key not in self.reported:
            self.reported.add(key)
            self.violate(what)

    def maybe_api_fault(self, what: str) -> None:
        if self.now < self.ray_down_until:
            raise requests.exceptions.ConnectionError("the Ray head is restarting")

    def new_trainer(self, entrypoint: Optional[str] = None) -> Trainer:
        """The driver of a job with this entrypoint (the run's own by default), configured by its overrides."""
        shell, overrides = parse_entrypoint(entrypoint or self.spec.entrypoint)
        mode = overrides.get(SYNC_SAVE, "").lower()
        is_async = self.native_async if mode not in ("true", "false") else mode == "true"
        nodes = int(overrides.get(size_ladder.NODES_KEY, self.nodes))
        lease = overrides.get(size_ladder.LEASE_KEY, "null")
        return Trainer(
            Path(overrides["checkpointing.checkpoint_dir"]),
            int(overrides["grpo.max_num_steps"]),
            int(overrides["checkpointing.save_period"]),
            STEP_S * self.nodes / max(nodes, 1),  # the same global batch on fewer GPUs
            self.write_s,
            is_async,
            shell=shell,
            config=nemo_rl_config(self.recipe, overrides),
            lease_s=None if lease in ("", "null") else _duration(lease),
        )

    def on_submit(self, job: SimJob) -> None:
        if META_STACK not in job.metadata:
            return
        soak_checks.on_training_submit(self, job)
        self.truth[job.submission_id] = [self.now, self.now]
        self.sizes[job.submission_id] = size_ladder.attempt_nodes(job, self.nodes)

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
            gang=self.gang,
            release=self.gang,
        )

    @staticmethod
    def _shrink_plan() -> dict[str, Any]:
        """`recovery.shrink` on, as infra/run_plan.py `shrink_values` writes it for b200: the ladder's sizes below the
        full gang (`workloads.size_ladder`), each with its overrides, the wait and the lease."""
        sizes = size_ladder.smaller_sizes(size_ladder.ladder(B200_SHAPE), MIN_NODES)
        return {
            "shrink_sizes": [{"nodes": n, "overrides": list(size_ladder.size_overrides(n, LEASE_MIN))} for n in sizes],
            "shrink_wait_minutes": SHRINK_WAIT_MIN,
            "shrink_lease_minutes": LEASE_MIN,
        }

    def _fault_stockout(self) -> None:
        """Spot takes half the gang for 10 min to 3 h: its nodes die with their VMs, the attempt with them, and GKE
        finds none until then. The owner must train at a smaller size after `waitMinutes` and grow back within one
        lease of the nodes' return (`soak_checks.after_tick`)."""
        alive = self.ray.alive_gpu_nodes()
        job = self._running()
        if job is None or self.final is not None or len(alive) < self.nodes:
            return None if self.final is not None else self._retry("stockout")
        gone = self.nodes // 2
        for node in self.rng.sample(alive, gone):
            self.lose_node(node)
        until = self.now + self.rng.uniform(600, 3 * 3600)
        self.short.append((until, gone))
        self.ray.end(job, "FAILED", 1, "ray.exceptions.ActorDiedError: The actor died unexpectedly")
        self.stockouts.append([self.now, until, False, False])

    # ---------------------------------------------------------------- the worker group, KubeRay and GKE

    def _new_vm(self, created: float) -> str:
        name = f"vm-{len(self.vms) + 1}"
        self.vms[name] = [created, None, None]
        return name

    def vms_up(self) -> list[str]:
        return [v for v, r in self.vms.items() if r[2] is None]

    def idle_vms(self) -> list[str]:
        return [v for v, r in self.vms.items() if r[2] is None and r[1] is not None]

    def spawn(self) -> str:
        """A worker pod becomes a Ray GPU node, on a VM GKE kept (unneeded, not yet removed) or a new one."""
        node = self.ray.add_gpu_node()
        idle = self.idle_vms()
        vm = idle[0] if idle else self._new_vm(self.now)
        self.vms[vm][1] = None
        self.vm_of[node] = vm
        return node

    def lose_node(self, node: str) -> None:
        """A spot preemption: the Ray node dies with its VM."""
        self.ray.kill_node(node, self.now_ms())
        vm = self.vm_of.get(node)
        if vm is not None and self.vms[vm][2] is None:
            self.vms[vm][2] = self.now

    def capacity(self) -> int:
        return self.nodes - sum(n for until, n in self.short if until > self.now)

    def _follow_replicas(self) -> None:
        """KubeRay and GKE: extra worker pods deleted at once (their VMs unneeded), missing ones made and scheduled
        once GKE adds a node (a minute or three; seconds on a VM it kept) within the pool's capacity, and a VM
        unneeded for `SCALE_DOWN_S` removed."""
        for row in self.vms.values():
            if row[2] is None and row[1] is not None and self.now - row[1] >= SCALE_DOWN_S:
                row[2] = row[1] + SCALE_DOWN_S
        alive = self.ray.alive_gpu_nodes()
        for node in alive[self.replicas :]:
            self.ray.kill_node(node, self.now_ms())
            vm = self.vm_of.get(node)
            if vm is not None and self.vms[vm][2] is None:
                self.vms[vm][1] = self.now
        alive = alive[: self.replicas]
        coming = sum(1 for _, what in self.pending if what == "grow")
        idle = len(self.idle_vms())
        for _ in range(min(self.replicas, self.capacity()) - len(alive) - coming):
            self.pending.append((self.now + (20.0 if idle > 0 else self.rng.uniform(60, 180)), "grow"))
            idle -= 1

    def _grow(self) -> None:
        if len(self.ray.alive_gpu_nodes()) < min(self.replicas, self.capacity()):
            self.spawn()

    def ensure_workers(self) -> Any:
        """`run_owner.submit_gated`'s `ensure_workers` as the deploy hook builds it (workloads/hook.py
        `_ensure_workers`): ask through the group, count Ray's alive GPU nodes, on the soak's clock."""
        return lambda: worker_group.ensure_workers(
            self.gang,
            self.nodes,
            lambda: worker_group.alive_gpu_nodes(self.ray),
            timeout_s=3600.0,
            poll_s=10.0,
            clock=lambda: self.now,
            monotonic=lambda: self.now,
            sleep=self.sim_sleep,
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
            step = min(self.now + TICK_S, end)
            self.last_dt = step - self.now
            self.paid_node_s += len(self.vms_up()) * self.last_dt if self.billing else 0.0
            self.now = step
            self._follow_replicas()
            self.ray.tick(self.now)
            for job in self.training():
                if job.status in ACTIVE:
                    self.truth.setdefault(job.submission_id, [self.now, self.now])[1] = self.now
            for when, what in [p for p in self.pending if p[0] <= self.now]:
                self.pending.remove((when, what))
                self._grow() if what == "grow" else self._replace_bad()
            if self.now >= self.next_look:
                self.next_look = self.now + LOOK_S
                self.look()
                self.billing = True
                self._follow_replicas()  # a release takes the pods at once
            soak_checks.after_tick(self)

    def look(self) -> None:
        if self.now < self.watcher_down_until:
            return
        try:
            if self.watcher_down_until:  # its pod is back: a new watcher from the state file and the ledger
                self.watcher_down_until, self.watcher = 0.0, self.new_watcher()
            self.decision = self.watcher.step()
        except submit.JobError:
            self.decision = None
        except Exception as err:  # noqa: BLE001 (the owner's bug, reported as one; the soak goes on)
            self.decision = None
            self.violate_once(f"raised {type(err).__name__}", f"the watcher's look raised {type(err).__name__}: {err}")
        self.watcher.notes.clear()
        if self.decision is not None and self.decision.action is Action.DONE and "succeeded" in self.decision.reason:
            self.final = self.final or "success"

    def sim_sleep(self, seconds: float) -> None:
        self.advance(seconds)

    # ---------------------------------------------------------------- the run

    def play(self) -> int:
        """Run until every fault is in and the owner is done (or 8 simulated hours); the faults injected."""
        self.decision = None
        while self.now < self.limit:
            while self.schedule and self.schedule[0][0] <= self.now:
                self.inject(self.schedule.pop(0)[1])
            self.advance(TICK_S)
            over = self.decision is not None and self.decision.action in (Action.DONE, Action.GIVE_UP)
            if over and not self.schedule and not self.active() and not self.pending:
                break
        exact = set(self.injected) <= EXACT_FAULTS
        if exact and {"idle_resume", "old_nodes"} & set(self.injected):
            self.advance(SCALE_DOWN_S + 2 * LOOK_S)  # the last release's nodes go: the bill is whole
            soak_checks.goodput_truth(self)
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
            self.lose_node(self.rng.choice(alive))
            self.short.append((self.now + self.rng.uniform(60, 400), 1))  # until GKE finds a spot VM again
        job = self._running()
        if job is not None:
            self.ray.end(job, "FAILED", 1, "ray.exceptions.ActorDiedError: The actor died unexpectedly")

    def _fault_driver_killed(self) -> None:
        job = self._running()
        if job is not None:
            self.ray.end(job, "FAILED", 143, "")

    def _stop_unseen(self, fault: str) -> bool:
        """A user's stop that no look has seen yet: a head restart (or the state's loss) now would leave the owner
        nothing to tell it from a preemption (a stop is kept only in the job table and the watcher's state), a
        limit the soak does not test; the fault comes a look later."""
        last = self.watcher._last_record()
        if self.final == "stop" and last is not None and last.end is None:
            self.later(LOOK_S, fault)
            return True
        return False

    def _fault_head_restart(self) -> None:
        if self._stop_unseen("head_restart"):
            return
        self.ray_down_until = self.now + self.rng.uniform(0, 90)
        for (
            job_id
        ) in self.truth:  # ended (or forgotten by an earlier restart) unseen: the owner knows this head's start
            record = self.watcher.ledger.find(job_id)
            job = self.ray.jobs.get(job_id)
            if (job is None or job.status not in ACTIVE) and (record is None or record.end is None):
                self.unseen_end[job_id] = self.ray_down_until
        self.ray.restart_head(int(self.ray_down_until * 1000))  # no GCS fault tolerance: the job table is gone
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

    def _fault_state_lost(self) -> None:
        """The head and the watcher's pod restart together (a system pool upgrade) and the watcher's state file is
        gone or unreadable: the new watcher finds no job and no state (`Watcher.step`'s last branch) and must
        number the next attempt from the ledger. Half the time the attempt fails first, and the loss comes after
        the watcher saw that (its ledger record closed, the next attempt not yet submitted)."""
        if self._stop_unseen("state_lost"):
            return
        job = self._running()
        if job is not None and self.rng.random() < 0.5:
            self.ray.end(job, "FAILED", 143, "")
            self.later(LOOK_S + self.rng.uniform(1, 40), "state_lost")
            return
        if self.rng.random() < 0.5:
            self.state_path.unlink(missing_ok=True)
        elif self.state_path.exists():
            self.state_path.write_text('{"spec_hash": ')
        self._fault_head_restart()
        self.watcher_down_until = max(self.watcher_down_until, self.now + self.rng.uniform(1, 120))

    def _fault_async_leftover(self) -> None:
        """Before the run's first attempt: a release that saved asynchronously left a whole step_<P> and a
        step_<2P> renamed before its files (a preemption cut its write), both of this run (their `config.yaml`
        says so), in the legacy checkpoint dir the entrypoint adopts from or in the run's own: NeMo-RL would
        resume from step_<2P> unless the entrypoint sets it aside."""
        legacy = Path(legacy_checkpoint_dir(str(self.workdir), STACK, self.recipe.name))
        where = legacy if self.rng.random() < 0.5 else self.ckpt
        config = nemo_rl_config(self.recipe, parse_entrypoint(self.spec.entrypoint)[1])
        for step in (PERIOD, 2 * PERIOD):
            (where / f"step_{step}").mkdir(parents=True, exist_ok=True)
            (where / f"step_{step}" / "training_info.json").write_text(f'{{"step": {step}}}')
            (where / f"step_{step}" / "config.yaml").write_text(config)
        (where / f"step_{PERIOD}" / WHOLE_MARK).parent.mkdir(parents=True, exist_ok=True)
        (where / f"step_{PERIOD}" / WHOLE_MARK).write_text("{}")
        self.planted.add(2 * PERIOD)

    def _fault_old_nodes(self) -> None:
        """An upgrade onto old live nodes: the run (a fresh ledger, a new run key) starts on GPU nodes and Ray workers
        an earlier release left up three days ago; they are not this run's spend before its first submission."""
        old = self.now - 3 * 86400
        for row in self.vms.values():
            row[0] = old
        for node in self.ray.nodes:
            node["start_time_ms"] = int(old * 1000)

    def _released(self) -> bool:
        """The owner has ended the run and released its workers, and nothing runs."""
        last = self.watcher._last_record()
        return last is not None and last.released is not None and not self.active()

    def _retry(self, fault: str) -> None:
        """Not yet (the run still going, its workers not released): again a look later, for at most two hours."""
        self.tries[fault] = self.tries.get(fault, 0) + 1
        if self.tries[fault] <= 240:
            self.later(LOOK_S, fault)

    def _fault_helm_restore(self) -> None:
        """A Helm upgrade after the release: its merge patch sends the worker group whole, `replicas: N`, no claim."""
        if not self._released():
            return self._retry("helm_restore")
        self.replicas = self.nodes
        self.idle_s = 0.0  # the owner cannot release them before the upgrade brought them: its bound starts now
        self.later(soak_checks.idle_bound(LOOK_S) + LOOK_S, "settle")  # long enough to see them released again

    def _fault_settle(self) -> None:
        """Nothing: the run goes on until then (the owner's answer to a fault is awaited)."""

    def _fault_two_day_idle(self) -> None:
        """The user stops the run (or it ended); two days later, its workers long gone, `python -m jobctl submit`."""
        if self.final is None and self._running() is not None:
            self.stopping, self.final = "user", "stop"
            submit.stop(self.ray, self._running().submission_id)  # type: ignore[union-attr]
            self.stopping = None
        if self.final == "stop":
            return self.later(LOOK_S, "idle_resume")
        if self.final is None:
            return self._retry("two_day_idle")

    def _fault_idle_resume(self) -> None:
        if self.final != "stop":  # another fault ended the run meanwhile (a budget stop, a new spec, a destroy)
            return None
        if not self._released() or self.vms_up():
            return self._retry("idle_resume")
        self.now += IDLE_S
        self.limit += IDLE_S
        self.next_look = self.now
        self.user_submit()

    def _fault_release_then_up(self) -> None:
        """After the run ended and its workers were released, `pulumi up` with a changed job (more steps): the new
        spec's watcher, and the deploy hook's submission (`run_owner.submit_gated` asking for the workers)."""
        if self.final not in ("stop", "success") or not self._released():
            return self._retry("release_then_up") if self.final is None or not self._released() else None
        self.total += 4
        self.spec = build_spec(self.recipe.name, self.total, self.workdir, self.specs)
        self.final = None
        self.watcher = self.new_watcher()  # the watcher's pod restarts with the new run.json
        self.up_at = self.now
        if self.rng.random() < 0.5:  # the deploy hook submits; else it died first and the owner must
            self.user_submit()
        self.later(UP_BOUND_S + LOOK_S, "settle")

    def user_submit(self) -> None:
        """`python -m jobctl submit` or the deploy hook: `submit_gated` with the workers asked for first."""
        if self.final == "stop":
            self.final = None  # the user resumes what they stopped
        try:
            self._submit_gated()
        except (run_owner.GateFailed, worker_group.WorkersNotReady, submit.JobError, OSError):
            pass

    def _submit_gated(self) -> None:
        """`run_owner.submit_gated` as the hook and `jobctl submit` call it, the workers asked for first. They read the
        watcher's ledger on Lustre through a probe job (`workloads.ledger.read_on_head`); here the file."""
        ledger = LedgerFile(ledger_path(self.state_path))
        run_owner.submit_gated(
            self.ray,
            self.spec,
            self.run.gate,
            sleep=self.sim_sleep,
            poll_interval=LOOK_S,
            ledger=lambda: ledger.load(self.spec.stack, self.spec.run_id),
            ensure_workers=self.ensure_workers(),
        )

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
        try:  # `python -m jobctl submit` / the hook on update
            self._submit_gated()
        except (
            run_owner.GateFailed,
            worker_group.WorkersNotReady,
            OSError,
        ):  # the submitter's error, shown to its user
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
            self.lose_node(self.ray.bad_node)  # drained and replaced
            self.ray.bad_node = None
            if len(self.ray.alive_gpu_nodes()) < self.replicas:  # KubeRay's new pod, on a new node
                self.spawn()

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
        self.replicas = 0  # the destroy deletes the RayCluster: its worker pods go


def _duration(text: str) -> float:
    """NeMo-RL's 'DD:HH:MM:SS' (nemo_rl/utils/timer.py `convert_to_seconds`) in seconds."""
    days, hours, minutes, seconds = (int(x) for x in text.split(":"))
    return float(((days * 24 + hours) * 60 + minutes) * 60 + seconds)


def nemo_rl_config(recipe: Any, overrides: dict[str, str]) -> str:
    """The part of the run's NeMo-RL config a saved step's `config.yaml` names the run by (the model, the
    sequence length, the backend and its TP and PP), from the overrides and else the recipe's config file; JSON,
    which YAML reads."""
    par = recipe.parallelism
    seq = overrides.get("policy.max_total_sequence_length", str(recipe.config_max_sequence_length))
    policy: dict[str, Any] = {
        "model_name": overrides.get("policy.model_name", recipe.model),
        "max_total_sequence_length": int(seq),
    }
    if par.backend is TrainingBackend.MEGATRON:
        policy["megatron_cfg"] = {
            "enabled": True,
            "tensor_model_parallel_size": int(overrides.get("policy.megatron_cfg.tensor_model_parallel_size", 1)),
            "pipeline_model_parallel_size": int(overrides.get("policy.megatron_cfg.pipeline_model_parallel_size", 1)),
        }
    else:
        tp = int(overrides.get("policy.dtensor_cfg.tensor_parallel_size", 1))
        policy["dtensor_cfg"] = {"enabled": True, "tensor_parallel_size": tp}
    return json.dumps({"policy": policy})


START_FAULTS = ("async_leftover", "old_nodes")
"""Faults that are the state a run starts in, applied before its first look."""


def play_run(
    seed: int, index: int, faults: list[str], workdir: Path, is_async: bool, specs: Optional[SpecCache] = None
) -> tuple[int, list[str]]:
    run = SoakRun(seed, index, faults, workdir, is_async, specs)
    count = run.play()
    return count, run.violations


def pick_faults(rng: random.Random, left: int) -> list[str]:
    return [rng.choice(SIM_FAULTS) for _ in range(min(left, rng.randint(1, 3)))]


__all__: list[Any] = ["SoakRun", "play_run", "pick_faults", "SIM_FAULTS"]
