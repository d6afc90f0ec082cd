"""The owner's invariants (issue 34), checked by the soak: at each training submission, after every tick of
a run, and at its end. Each broken one is a line naming the run, its seed and the moment (`SoakRun.violate`)."""

from __future__ import annotations

import json
import os
from typing import Any

from tests.soak.sim_ray import _STEP_DIR, ACTIVE, SimJob, is_whole
from workloads import destroy_mark, goodput
from workloads.gate import META_GATE
from workloads.goodput import SCALE_DOWN_S
from workloads.ledger import Ledger, ledger_path
from workloads.run_owner import META_GATE_FOR, META_GATE_NODES
from workloads.size_ladder import META_NODES

SPEND_SLACK_S = 120.0
"""How far an attempt's ledger hours may trail or lead what it truly ran: a few watcher looks (it closes an
attempt at the look after its end; a lost one at the end it recorded)."""


def on_training_submit(world: Any, job: SimJob) -> None:
    """Before the simulated head creates the training attempt `job`."""
    others = [j.submission_id for j in world.active()]
    if others:
        world.violate(f"{job.submission_id} submitted while {', '.join(others)} runs: two attempts at once")
    # The destroy's mark is a job on the head, which a restarted head forgets (workloads/destroy_mark.py says so):
    # then nothing on the cluster tells the owner, and the destroy's deletion of the RayCluster ends the attempt.
    forgotten = world.final == "the start of destroy" and not destroy_mark.marked(
        [j.details() for j in world.ray.jobs.values()], world.spec.submission_id
    )
    if world.final is not None and not forgotten:
        world.violate(f"{job.submission_id} submitted after {world.final}")
    recorded = any(a.submission_id == job.submission_id for a in world.watcher.ledger.attempts)
    if job.submission_id in world.truth and recorded:  # the head forgot an attempt no look saw: no record to reuse
        world.violate(
            f"{job.submission_id} submitted a second time (after a head restart): attempt numbering restarted, "
            "its ledger record reused"
        )
    nodes = ",".join(world.ray.alive_gpu_nodes())
    gates = [
        g
        for g in world.ray.jobs.values()
        if META_GATE in g.metadata and g.metadata.get(META_GATE_FOR) == job.submission_id and g.status not in ACTIVE
    ]
    if not any(g.gate_ok and g.metadata.get(META_GATE_NODES) == nodes for g in gates):
        world.violate(f"{job.submission_id} submitted without a passing gate on its current nodes ({nodes})")
    size = int(job.metadata.get(META_NODES) or world.nodes)
    alive = len(world.ray.alive_gpu_nodes())
    if alive < size:
        world.violate(
            f"{job.submission_id} submitted onto {alive} alive GPU worker(s), fewer than its {size} (released workers "
            "not asked for again?)"
        )


def after_tick(world: Any) -> None:
    if len(world.active()) > 1:
        world.violate(f"two attempts at once: {', '.join(j.submission_id for j in world.active())}")
    for job in world.training():
        trainer = job.trainer
        if job.status == "RUNNING" and not trainer.resumed_whole and job.submission_id not in world.seen_ended:
            world.seen_ended.add(job.submission_id)
            world.violate(
                f"{job.submission_id} resumed from step_{trainer.resumed}, which is not whole (NeMo-RL loads the "
                "highest step_N, whole or not)"
            )
        if job.status not in ACTIVE and ("end", job.submission_id) not in world.seen_ended:
            world.seen_ended.add(("end", job.submission_id))
            _steps_lost(world, job)
    _unfinished_steps(world)
    _ledger(world)
    _idle_workers(world)
    _up_starts(world)
    _stockouts(world)


SHRINK_SLACK_S = 300.0
"""After `waitMinutes`, the attempt at a smaller size is submitted within this: the failed attempt's backoff (up to a
minute), a few looks, its gate (a minute)."""
GROW_SLACK_S = 600.0
"""After one lease from the nodes' return, the full-size attempt is submitted within this: GKE's nodes (up to three
minutes), the lease's last step and save, a look, the gate."""
QUIET_WITH_STOCKOUT = {"stockout", "settle", "slow_write", "async_leftover", "driver_killed"}
"""The faults beside a stock-out whose timing the shrink and grow-back bounds allow for (a stop, a destroy, a lost
node, a failing gate, the owner's pod or the API down would each hold the run for reasons of their own)."""


def _stockouts(world: Any) -> None:
    """`recovery.shrink` (issue 43): when half the gang is gone past `waitMinutes`, an attempt at a smaller size is
    submitted within `SHRINK_SLACK_S` of that; once the nodes are back, a full-size one within a lease plus
    `GROW_SLACK_S`. Not checked where the run ended first or other faults hold it."""
    if not world.stockouts or not set(world.injected) <= QUIET_WITH_STOCKOUT or world.final is not None:
        return
    from tests.soak.soak_run import LEASE_MIN, SHRINK_WAIT_MIN

    for row in world.stockouts:
        lost, back, shrunk, grown = row
        due = lost + 60 * SHRINK_WAIT_MIN + SHRINK_SLACK_S
        if not shrunk and back > due and world.now >= due:
            row[2] = True
            if not any(lost < world.truth[j][0] <= due and n < world.nodes for j, n in world.sizes.items()):
                world.violate(
                    f"half the gang lost at +{lost - world.start:.0f}s until +{back - world.start:.0f}s and no "
                    f"attempt on fewer nodes by +{due - world.start:.0f}s (recovery.shrink, waitMinutes "
                    f"{SHRINK_WAIT_MIN})"
                )
        due = back + 60 * LEASE_MIN + GROW_SLACK_S
        small = any(lost < world.truth[j][0] and n < world.nodes for j, n in world.sizes.items())
        small = small and not any(back < other[0] <= due for other in world.stockouts)  # not lost again meanwhile
        if small and not grown and world.now >= due:
            row[3] = True
            if not any(back < world.truth[j][0] <= due and n == world.nodes for j, n in world.sizes.items()):
                world.violate(
                    f"the gang back at +{back - world.start:.0f}s and no full-size attempt by "
                    f"+{due - world.start:.0f}s (one {LEASE_MIN}-min lease)"
                )


def _up_starts(world: Any) -> None:
    """After `pulumi up` with a changed job on released workers, the new spec trains: its first attempt submitted
    within `soak_run.UP_BOUND_S`, by the deploy hook or, where the hook died first, by the owner (who asks for the
    workers itself: `holds.workers_asked`)."""
    from tests.soak.soak_run import UP_BOUND_S

    if world.up_at is None or world.now - world.up_at <= UP_BOUND_S or world.final is not None:
        return
    if "budget_trip" in world.injected:  # the run's budget is spent: the owner rightly starts nothing
        return
    if not any(k.startswith(world.spec.submission_id) for k in world.truth):  # a restarted head forgets its jobs
        world.violate_once(
            "up never started",
            f"`pulumi up` with a changed job {UP_BOUND_S / 60:.0f} min ago and no attempt of it submitted (the owner "
            "waiting for workers nobody asked for?)",
        )


IDLE_SLACK_S = 2 * 10.0
"""The soak's tick, twice: a release and the VM's removal are seen at a tick, not between."""


def idle_bound(look_s: float) -> float:
    """How long paid GPU nodes may stay up with no attempt, gate or live claim to need them: GKE's scale-down delay
    after the owner's release, which comes at its next look (`Watcher._release_after_run`)."""
    return SCALE_DOWN_S + look_s + IDLE_SLACK_S


def _idle_workers(world: Any) -> None:
    """No paid worker idle (GKE's GPU nodes up, no attempt or gate active, no live claim) past `idle_bound`; a claim
    that lapses starts the count then (so the claim's TTL is allowed), and the time the owner could not look (its
    pod down, the Ray head or the Kubernetes API failing) is not counted."""
    busy = any(j.status in ACTIVE for j in world.ray.jobs.values() if j.trainer is not None or j.gate_ok is not None)
    claim = world.claimed_until is not None and world.claimed_until > world.now
    if not world.vms_up() or busy or claim:
        world.idle_s = 0.0
        return
    if world.now < max(world.watcher_down_until, world.ray_down_until, world.k8s_fault_until) + world.last_dt:
        return
    world.idle_s += world.last_dt
    if world.idle_s > idle_bound(world.look_s):
        world.violate_once(
            "idle workers",
            f"{len(world.vms_up())} paid GPU node(s) up {world.idle_s:.0f}s with no attempt, gate or live claim: more "
            f"than GKE's scale-down delay ({SCALE_DOWN_S:.0f}s) plus one look (released workers brought back and "
            "not released again?)",
        )


def _unfinished_steps(world: Any) -> None:
    """A trainer's `step_N` is whole once it is there: NeMo-RL renames `tmp_step_N` after a synchronous save's
    write; an asynchronous one renames first (what `++checkpointing.is_async=false` prevents)."""
    try:
        names = os.listdir(world.ckpt)
    except OSError:
        return
    for name in names:
        step = int(name[5:]) if _STEP_DIR.fullmatch(name) else None
        if step is None or step in world.whole_seen:  # whole once is whole: a long run has hundreds
            continue
        path = world.ckpt / name
        if not path.is_dir():
            continue
        if is_whole(path):
            world.whole_seen.add(step)
        elif step not in world.planted:
            world.violate_once(
                f"unfinished step_{step}",
                f"step_{step} appeared before its files were written: a save renamed before its write ended "
                "(the job saves asynchronously; the job builder's checkpointing.is_async=false missing?)",
            )


def _steps_lost(world: Any, job: SimJob) -> None:
    """Steps lost at most one save period plus the step in flight, counted from whole checkpoints."""
    if job.status == "SUCCEEDED" or job.trainer is None or job.trainer.step <= job.trainer.resumed + 1:
        return
    whole = [int(p.name[5:]) for p in world.ckpt.glob("step_*") if p.name[5:].isdigit() and is_whole(p)]
    last = min(job.trainer.step, job.trainer.total)
    lost = last - max(whole, default=0)
    if lost > job.trainer.period + 1:
        world.violate(
            f"{job.submission_id} ended in step {last} with step_{max(whole, default=0)} its newest whole "
            f"checkpoint: {lost} steps lost, more than one save period ({job.trainer.period}) plus one"
        )


def _ledger(world: Any) -> None:
    path = ledger_path(world.state_path)
    if not path.exists():
        return
    try:
        ledger = Ledger.from_dict(json.loads(path.read_text()))
    except (ValueError, TypeError) as err:
        world.violate(f"the ledger {path.name} is corrupt: {err}")
        return
    for record in ledger.attempts:
        if record.end is None:
            continue
        first = world.closed.setdefault(record.submission_id, record.end)
        if first != record.end:
            world.violate(f"attempt {record.submission_id} closed twice in the ledger ({first} then {record.end})")
            world.closed[record.submission_id] = record.end
    ids = [a.submission_id for a in ledger.attempts]
    if len(ids) != len(set(ids)):
        world.violate(f"the ledger has one attempt twice: {ids}")


def at_end(world: Any) -> None:
    """Every ended attempt closed; the spend the sum of what the attempts truly ran."""
    ledger = world.watcher.ledger
    for older, newer in zip(ledger.attempts, ledger.attempts[1:], strict=False):
        if older.end is None:
            world.violate(
                f"attempt {older.submission_id} was replaced by {newer.submission_id} but never closed in the ledger"
            )
    for record in ledger.attempts:
        truth = world.truth.get(record.submission_id)
        if truth is None:
            continue
        hours = ((record.end if record.end is not None else world.now) - record.start) / 3600
        true_hours = (truth[1] - truth[0]) / 3600
        unseen = max(world.unseen_end.get(record.submission_id, truth[1]) - truth[1], 0.0)
        if abs(hours - true_hours) * 3600 > SPEND_SLACK_S + unseen + max(truth[0] - record.start, 0):
            world.violate(
                f"attempt {record.submission_id}: the ledger charges {hours:.2f} h, it ran {true_hours:.2f} h"
            )
    _buckets_fill_paid_time(world)
    spend = ledger.spend(world.now)
    parts = sum(ledger.attempt_spend(a, world.now) or 0 for a in ledger.attempts)
    if spend is not None and abs(spend - parts) > 1e-6:
        world.violate(f"the ledger's spend ${spend:.2f} is not the sum of its attempts' ${parts:.2f}")


def _run_rows(world: Any) -> list:
    """The run's goodput rows (`goodput.run_buckets`) at the world's clock, with the plan's step and save figures."""
    return goodput.run_buckets(
        world.watcher.ledger,
        world.now,
        step_seconds=world.run.step_seconds,
        write_seconds=None,
        save_period=world.run.save_period,
        full_nodes=world.nodes,
    )


def _buckets_fill_paid_time(world: Any) -> None:
    """The run's goodput buckets sum to the union of its paid intervals (`goodput.paid_intervals`): each attempt's
    to its own intervals times its nodes, and no two attempts paid for the same moment."""
    ledger, now = world.watcher.ledger, world.now
    if not ledger.attempts:
        return
    rows = _run_rows(world)
    intervals = goodput.paid_intervals(ledger, now)
    for (attempt, hours, _), spans in zip(rows, intervals, strict=True):
        paid = attempt.nodes * sum(b - a for a, b in spans) / 3600
        if abs(sum(hours.values()) - paid) > 1e-6:
            world.violate(
                f"attempt {attempt.submission_id}: its goodput buckets hold {sum(hours.values()):.4f} node-h, its paid "
                f"intervals {paid:.4f}"
            )
    every = [span for spans in intervals for span in spans]
    union = goodput._union(every)
    overlap = sum(b - a for a, b in every) - sum(b - a for a, b in union)
    if overlap > 1e-6:
        world.violate(f"the attempts' paid intervals overlap by {overlap / 3600:.2f} h: that time is counted twice")
    world.goodput = goodput.summary(rows)["fraction"]


GOODPUT_POINT = 0.01


def goodput_truth(world: Any) -> None:
    """After a two-day idle or on week-old nodes: the run's goodput fraction within a point of the one the soak's
    own bill gives (the same kept node-hours over the node-seconds the world's VMs were up since the run's first
    look). Only for runs whose other faults keep the ledger's node count the world's (`soak_run.EXACT_FAULTS`)."""
    run = goodput.summary(_run_rows(world))
    hours: dict[str, float] = run["nodeHours"]  # type: ignore[assignment]
    good = sum(hours[b] for b in goodput.GOODPUT)
    if run["fraction"] is None or world.paid_node_s <= 0:
        return
    truth = good / (world.paid_node_s / 3600)
    if abs(float(run["fraction"]) - truth) > GOODPUT_POINT:  # type: ignore[arg-type]
        world.violate(
            f"goodput {100 * float(run['fraction']):.1f} % of {sum(hours.values()):.2f} paid node-h; the bill says "  # type: ignore[arg-type]
            f"{100 * truth:.1f} % of {world.paid_node_s / 3600:.2f} node-h (more than a point apart)"
        )
