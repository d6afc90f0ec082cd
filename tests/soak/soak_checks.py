"""The owner's invariants (issue 34), checked by the soak: at each training submission, after every tick of
a run, and at its end. Each broken one is a line naming the run, its seed and the moment (`SoakRun.violate`)."""

from __future__ import annotations

import json
from typing import Any

from tests.soak.sim_ray import ACTIVE, SimJob, is_whole
from workloads.gate import META_GATE
from workloads.ledger import Ledger, ledger_path
from workloads.run_owner import META_GATE_FOR, META_GATE_NODES

SPEND_SLACK_S = 120.0
"""How far an attempt's ledger hours may trail or lead what it truly ran: a few watcher looks (it closes an
attempt at the look after its end; a lost one at the end it recorded)."""


def on_training_submit(world: Any, job: SimJob) -> None:
    """Before the simulated head creates the training attempt `job`."""
    others = [j.submission_id for j in world.active()]
    if others:
        world.violate(f"{job.submission_id} submitted while {', '.join(others)} runs: two attempts at once")
    if world.final is not None:
        world.violate(f"{job.submission_id} submitted after {world.final}")
    if job.submission_id in world.truth:
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


def after_tick(world: Any) -> None:
    if len(world.active()) > 1:
        world.violate(f"two attempts at once: {', '.join(j.submission_id for j in world.active())}")
    for job in world.training():
        trainer = job.trainer
        if job.status == "RUNNING" and not trainer.resumed_whole and job.submission_id not in world.seen_ended:
            world.seen_ended.add(job.submission_id)
            world.violate(f"{job.submission_id} resumed from step_{trainer.resumed}, which is not whole")
        if job.status not in ACTIVE and ("end", job.submission_id) not in world.seen_ended:
            world.seen_ended.add(("end", job.submission_id))
            _steps_lost(world, job)
    _ledger(world)


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
        if abs(hours - true_hours) * 3600 > SPEND_SLACK_S + (truth[0] - record.start if truth[0] > record.start else 0):
            world.violate(
                f"attempt {record.submission_id}: the ledger charges {hours:.2f} h, it ran {true_hours:.2f} h"
            )
    spend = ledger.spend(world.now)
    parts = sum(ledger.attempt_spend(a, world.now) or 0 for a in ledger.attempts)
    if spend is not None and abs(spend - parts) > 1e-6:
        world.violate(f"the ledger's spend ${spend:.2f} is not the sum of its attempts' ${parts:.2f}")
