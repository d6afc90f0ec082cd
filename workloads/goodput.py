"""Goodput: how much of a run's paid GPU node-time trained, and where the rest went.

The buckets and their boundaries are docs/goodput.md's. Each attempt is paid over `paid_from` -> `paid_to`, plus,
after its release, the idle time of workers brought back (`Attempt.restored`) and GKE's scale-down delay after
each release; across a run these intervals neither overlap nor leave a gap where nodes stayed. Within an
attempt every boundary is clamped into its paid time and `startup` takes the remainder, so the buckets add
up to the paid time exactly. Step buckets are the plan's step time x the ledger's step counts, scaled down when
they would not fit the job's time after its workers ran.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

if TYPE_CHECKING:
    from workloads.ledger import Attempt, Ledger

BUCKETS = (
    "gangWait",
    "imagePull",
    "gate",
    "startup",
    "stepsKept",
    "stepsLost",
    "checkpointSave",
    "idleAfterRun",
    "scaleDown",
    "stepsReduced",
)
GOOD = "stepsKept"
REDUCED = "stepsReduced"
"""Kept steps of an attempt on fewer nodes than the full gang (`recovery.shrink`, workloads/size_ladder.py): training,
at `nodes / full` of the full step rate (the same global batch on fewer GPUs), paid at its own node count."""
GOODPUT = (GOOD, REDUCED)
"""The buckets that trained: the goodput fraction's numerator; every other bucket is badput."""

SCALE_DOWN_S = 600.0
"""How long GKE keeps a GPU node after the owner's release: cluster-autoscaler removes a node once it has been
unneeded for `--scale-down-unneeded-time`, 10 minutes by default (kubernetes/autoscaler cluster-autoscaler FAQ.md,
"What are the parameters to CA?"); GKE's default `balanced` autoscaling profile keeps that, its
`optimize-utilization` profile removes nodes sooner by an amount Google does not publish ("About GKE cluster
autoscaling"), and this project sets no profile."""


def _clamp(value: Optional[float], low: float, high: float, default: float) -> float:
    return min(max(default if value is None else value, low), high)


def _gang_since(ledger: "Ledger", attempt: "Attempt") -> Optional[float]:
    """When the owner began waiting for this very attempt's gang; None when the ledger's one gang wait is another
    submission's, began after the attempt, or timed out and released its nodes (a later submission with the same
    id, `jobctl submit` days on, waited for nothing)."""
    from workloads.ledger import GANG_RELEASED

    gang = ledger.gang
    if gang is None or (gang.submission_id, gang.attempt) != (attempt.submission_id, attempt.attempt):
        return None
    return None if gang.outcome == GANG_RELEASED or gang.since > attempt.start else gang.since


ASK_WINDOW_S = 2 * 3600.0
"""How long before its first job an ask for the workers can be this run's: the deploy's and the owner's wait for
the gang is bounded by an hour (`gpuPool.capacity.maxWaitMinutes` at most), the gate by minutes."""


def run_start(ledger: "Ledger") -> Optional[float]:
    """The run's first submission: its first attempt's Ray job, that attempt's gate run or the owner's wait for its
    gang, whichever came first; nothing before it is the run's (nodes another run left are not its spend). Its first
    node counts too when the ask that raised the workers for it (`askedAt`, workloads/worker_group.py) came before
    that node and within `ASK_WINDOW_S` of the job: the nodes were brought for this run, so its scale-up is paid."""
    if not ledger.attempts:
        return None
    first = ledger.attempts[0]
    marks = first.marks
    asked, node = marks.get("askedAt"), marks.get("paidFrom")
    brought = asked is not None and node is not None and asked <= node and first.start - asked <= ASK_WINDOW_S
    starts = (first.start, marks.get("gateStart"), _gang_since(ledger, first), node if brought else None)
    return min(t for t in starts if t is not None)


def _released_before(ledger: "Ledger", index: int) -> Optional[float]:
    """When the workers were released between attempt `index - 1` and attempt `index`; None: they stayed."""
    prev, attempt = ledger.attempts[index - 1], ledger.attempts[index]
    if prev.released is not None:
        return max(prev.released, prev.end or prev.released)
    gang = ledger.gang
    if gang is not None and gang.submission_id == attempt.submission_id:
        from workloads.ledger import GANG_RELEASED

        if gang.outcome == GANG_RELEASED:  # the owner's wait for this attempt's gang timed out and released
            return max(gang.since, prev.end or gang.since)
    return None


def paid_from(ledger: "Ledger", attempt: "Attempt") -> float:
    """Where the attempt's paid node-time begins. Without a release since the attempt before, its nodes stayed
    and were paid: from that attempt's end. Else from its own first node (`paidFrom`, the earliest registration
    of its gang's nodes), else its own gang wait's start, else its job's start; never before the release nor
    before the run's first submission."""
    index = ledger.attempts.index(attempt)
    low = run_start(ledger) or attempt.start
    if index > 0:
        prev = ledger.attempts[index - 1]
        released = _released_before(ledger, index)
        if released is None and prev.end is not None:
            return max(prev.end, low)
        if released is not None:
            low = max(low, released)
    first = attempt.marks.get("paidFrom")
    if first is None:
        first = _gang_since(ledger, attempt)
    return max(attempt.start if first is None else first, low)


def paid_to(ledger: "Ledger", attempt: "Attempt", now: float) -> float:
    """The release; the job's end when another attempt follows without one; now while the workers are kept."""
    start = paid_from(ledger, attempt)
    if attempt.end is None:
        stop = now
    elif attempt.released is not None:
        stop = max(attempt.released, attempt.end)
    elif ledger.attempts.index(attempt) < len(ledger.attempts) - 1:
        stop = attempt.end
    else:
        stop = max(now, attempt.end)
    return max(stop, start)


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[tuple[float, float]] = []
    for a, b in sorted(i for i in intervals if i[1] > i[0]):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def after_release(ledger: "Ledger", attempt: "Attempt", now: float) -> tuple[list[tuple[float, float]], float]:
    """The paid intervals after the attempt's release up to the next attempt's paid start (now when none): the
    restored workers' idle time (`Attempt.restored`) and each release's scale-down delay; with the seconds of
    them that are scale-down only. Empty when the workers were not released."""
    if attempt.released is None:
        return [], 0.0
    release = max(attempt.released, attempt.end or attempt.released)
    index = ledger.attempts.index(attempt)
    limit = paid_from(ledger, ledger.attempts[index + 1]) if index + 1 < len(ledger.attempts) else now

    def clip(spans: list[tuple[float, float]]) -> list[tuple[float, float]]:
        return _union([(max(a, release), min(b, limit)) for a, b in spans])

    # A restored span without its second release is still up.
    restored = [(r[0], r[1] if len(r) > 1 else limit) for r in attempt.restored if r]
    idle = clip(restored)
    tails = clip([(release, release + SCALE_DOWN_S)] + [(b, b + SCALE_DOWN_S) for _, b in restored])
    paid = _union(idle + tails)
    length = sum(b - a for a, b in paid) - sum(b - a for a, b in idle)
    return paid, max(length, 0.0)


def paid_intervals(ledger: "Ledger", now: float) -> list[list[tuple[float, float]]]:
    """Per attempt, the intervals its node-hours are paid over (its buckets sum to them times its nodes)."""
    return [
        _union([(paid_from(ledger, a), paid_to(ledger, a, now))] + after_release(ledger, a, now)[0])
        for a in ledger.attempts
    ]


def saves(attempt: "Attempt", save_period: Optional[int]) -> int:
    """Checkpoints the attempt wrote: NeMo-RL saves `step_N` when N is a multiple of `save_period`, at the last step
    and when its save timeout comes (NVIDIA-NeMo/RL v0.7.0 nemo_rl/algorithms/grpo.py `should_save_by_step`,
    `should_save_by_timeout`); counted from the step it resumed at, its newest one included."""
    saved, resume = attempt.saved_step, attempt.resume_step
    if not save_period or saved is None or saved <= resume:
        return 0
    return saved // save_period - resume // save_period + (1 if saved % save_period else 0)


def attempt_buckets(
    attempt: "Attempt",
    start: float,
    stop: float,
    *,
    step_seconds: Optional[float],
    write_seconds: Optional[float],
    save_period: Optional[int],
    now: float,
    restored_s: float = 0.0,
    scale_down_s: float = 0.0,
    full_nodes: Optional[int] = None,
) -> dict[str, float]:
    """The attempt's node-hours per bucket over its paid time `start` -> `stop`, plus `restored_s` seconds of
    restored idle workers and `scale_down_s` of scale-down delay after its release. An attempt on fewer nodes than
    `full_nodes` keeps its steps in `REDUCED`, each taking `full_nodes / nodes` of the plan's (full-size) step."""
    marks = attempt.marks
    stop = max(stop, start)
    job_start = _clamp(attempt.start, start, stop, attempt.start)
    job_end = _clamp(attempt.end if attempt.end is not None else now, job_start, stop, stop)
    gate_ran = "gateStart" in marks
    gate_start = _clamp(marks.get("gateStart"), start, job_start, job_start)
    # The pods' marks may fall inside the job (a resubmission waits for its replacement nodes), never after a gate
    # (it runs on them) nor after the job's end; unknown, the wait reaches the gate or the job's start.
    pods = _clamp(marks.get("podsRunning"), start, gate_start if gate_ran else job_end, gate_start)
    nodes_ready = _clamp(marks.get("nodesReady"), start, pods, pods)
    done = attempt.steps_done or 0
    lost = min(attempt.steps_lost or 0, done)
    reduced = full_nodes is not None and 0 < attempt.nodes < full_nodes
    if reduced and step_seconds:
        step_seconds = step_seconds * full_nodes / attempt.nodes  # type: ignore[operator]
    est = {
        "stepsKept": (done - lost) * (step_seconds or 0.0),
        "stepsLost": lost * (step_seconds or 0.0),
        "checkpointSave": saves(attempt, save_period) * (write_seconds or 0.0),
    }
    room = job_end - max(job_start, pods)  # steps run once the job runs on its workers
    scale = min(1.0, room / sum(est.values())) if sum(est.values()) > 0 else 0.0
    seconds = {
        "gangWait": nodes_ready - start,
        "imagePull": pods - nodes_ready,
        "gate": job_start - gate_start if gate_ran else 0.0,
        **{k: v * scale for k, v in est.items()},
        "idleAfterRun": stop - job_end + restored_s,
        "scaleDown": scale_down_s,
    }
    if reduced:
        seconds[REDUCED], seconds[GOOD] = seconds[GOOD], 0.0
    else:
        seconds[REDUCED] = 0.0
    # The remainder, nothing lost: the job's own start-up and, without a gate, the workers' wait for the job.
    seconds["startup"] = job_end - pods - seconds["gate"] - sum(est[k] * scale for k in est)
    return {name: attempt.nodes * seconds[name] / 3600 for name in BUCKETS}


def run_buckets(
    ledger: "Ledger",
    now: float,
    *,
    step_seconds: Optional[float],
    write_seconds: Optional[float],
    save_period: Optional[int],
    full_nodes: Optional[int] = None,
) -> list[tuple["Attempt", dict[str, float], Optional[float]]]:
    """Per attempt: its node-hours per bucket and its node-hour price (None: not known); `full_nodes`, the run's
    gang (run.json's `node_count`), tells an attempt on fewer nodes (`REDUCED`)."""
    rows = []
    for a in ledger.attempts:
        tail, scale_down = after_release(ledger, a, now)
        hours = attempt_buckets(
            a,
            paid_from(ledger, a),
            paid_to(ledger, a, now),
            step_seconds=step_seconds,
            write_seconds=write_seconds,
            save_period=save_period,
            now=now,
            restored_s=sum(b - x for x, b in tail) - scale_down,
            scale_down_s=scale_down,
            full_nodes=full_nodes,
        )
        spend, job_hours = ledger.attempt_spend(a, now), a.node_hours(now)
        price = spend / job_hours if spend is not None and job_hours > 0 else ledger.node_hour_usd
        rows.append((a, hours, price))
    return rows


def summary(rows: list[tuple["Attempt", dict[str, float], Optional[float]]]) -> dict[str, object]:
    """The run's goodput `fraction`, `nodeHours` and `usd` per bucket (None when a price is not known)."""
    hours = {b: sum(r[1][b] for r in rows) for b in BUCKETS}
    priced = all(price is not None for _, _, price in rows)
    usd = {b: sum(h[b] * (p or 0.0) for _, h, p in rows) for b in BUCKETS} if priced else None
    total = sum(hours.values())
    good = sum(hours[b] for b in GOODPUT)
    return {"fraction": good / total if total > 0 else None, "nodeHours": hours, "usd": usd}


def lines(
    ledger: "Ledger",
    now: float,
    *,
    step_seconds: Optional[float],
    write_seconds: Optional[float],
    save_period: Optional[int],
    full_nodes: Optional[int] = None,
) -> list[str]:
    """`python -m jobctl status`'s goodput and badput lines."""
    if not ledger.attempts:
        return []
    rows = run_buckets(
        ledger,
        now,
        step_seconds=step_seconds,
        write_seconds=write_seconds,
        save_period=save_period,
        full_nodes=full_nodes,
    )
    run = summary(rows)
    hours: dict[str, float] = run["nodeHours"]  # type: ignore[assignment]
    usd: Optional[dict[str, float]] = run["usd"]  # type: ignore[assignment]
    fraction = run["fraction"]
    total = sum(hours.values())
    head = "goodput: " + ("-" if fraction is None else f"{100 * float(fraction):.0f} %")  # type: ignore[arg-type]
    head += f" of {total:.2f} paid GPU node-hours in kept steps"
    if usd is not None:
        head += f" (${sum(usd[b] for b in GOODPUT):,.2f} of ${sum(usd.values()):,.2f})"
    if hours[REDUCED] > 0 and full_nodes:
        shares = sorted({a.nodes for a, h, _ in rows if h[REDUCED] > 0})
        rate = ", ".join(f"{n} nodes at {100 * n / full_nodes:.0f} %" for n in shares)
        head += f"; of them {hours[REDUCED]:.2f} node-h at reduced size ({rate} of the full step rate)"
    bad = [
        f"{b} {hours[b]:.2f} node-h" + ("" if usd is None else f" ${usd[b]:,.2f}")
        for b in BUCKETS
        if b not in GOODPUT and hours[b] > 0
    ]
    return [head, "badput: " + (", ".join(bad) if bad else "none")]
