"""Goodput: how much of each attempt's paid GPU node-time trained, and where the rest went.

The buckets and their boundaries are docs/goodput.md's; they add up to the paid time exactly (every
boundary is clamped into it, `startup` takes the remainder). Step buckets are the plan's step time x the
ledger's step counts, scaled down when they would not fit the job's time.
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
)
GOOD = "stepsKept"


def _clamp(value: Optional[float], low: float, high: float, default: float) -> float:
    return min(max(default if value is None else value, low), high)


def paid_from(ledger: "Ledger", attempt: "Attempt") -> float:
    """Attempt 1 is paid from its gang wait's start (else its job's), a later one from the previous attempt's end."""
    index = ledger.attempts.index(attempt)
    if index > 0 and ledger.attempts[index - 1].end is not None:
        return min(ledger.attempts[index - 1].end or attempt.start, attempt.start)
    gang = ledger.gang
    if gang is not None and gang.submission_id == attempt.submission_id:
        return min(gang.since, attempt.start)
    return min(attempt.marks.get("paidFrom", attempt.start), attempt.start)


def paid_to(ledger: "Ledger", attempt: "Attempt", now: float) -> float:
    """The release; the job's end when another attempt follows; now while the workers are kept."""
    if attempt.end is None:
        return now
    if attempt.released is not None:
        return max(attempt.released, attempt.end)
    later = ledger.attempts.index(attempt) < len(ledger.attempts) - 1
    return attempt.end if later else max(now, attempt.end)


def attempt_buckets(
    attempt: "Attempt",
    start: float,
    stop: float,
    *,
    step_seconds: Optional[float],
    write_seconds: Optional[float],
    save_period: Optional[int],
    now: float,
) -> dict[str, float]:
    """The attempt's node-hours per bucket over its paid time `start` -> `stop`."""
    marks = attempt.marks
    job_start = _clamp(attempt.start, start, stop, attempt.start)
    job_end = _clamp(attempt.end if attempt.end is not None else now, job_start, stop, stop)
    gate_start = _clamp(marks.get("gateStart"), start, job_start, job_start)
    pods = _clamp(marks.get("podsRunning"), start, gate_start, gate_start)
    nodes_ready = _clamp(marks.get("nodesReady"), start, pods, pods)
    job_s = job_end - job_start
    done = attempt.steps_done or 0
    lost = min(attempt.steps_lost or 0, done)
    saves = 0
    if save_period and attempt.saved_step is not None and attempt.saved_step > attempt.resume_step:
        saves = (attempt.saved_step - attempt.resume_step) // save_period
    est = {
        "stepsKept": (done - lost) * (step_seconds or 0.0),
        "stepsLost": lost * (step_seconds or 0.0),
        "checkpointSave": saves * (write_seconds or 0.0),
    }
    scale = min(1.0, job_s / sum(est.values())) if sum(est.values()) > 0 else 0.0
    seconds = {
        "gangWait": nodes_ready - start,
        "imagePull": pods - nodes_ready,
        "gate": job_start - pods,
        **{k: v * scale for k, v in est.items()},
        "idleAfterRun": stop - job_end,
    }
    seconds["startup"] = job_s - sum(est[k] * scale for k in est)  # the remainder: nothing is lost
    return {name: attempt.nodes * seconds[name] / 3600 for name in BUCKETS}


def run_buckets(
    ledger: "Ledger",
    now: float,
    *,
    step_seconds: Optional[float],
    write_seconds: Optional[float],
    save_period: Optional[int],
) -> list[tuple["Attempt", dict[str, float], Optional[float]]]:
    """Per attempt: its node-hours per bucket and its node-hour price (None: not known)."""
    rows = []
    for a in ledger.attempts:
        hours = attempt_buckets(
            a,
            paid_from(ledger, a),
            paid_to(ledger, a, now),
            step_seconds=step_seconds,
            write_seconds=write_seconds,
            save_period=save_period,
            now=now,
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
    return {"fraction": hours[GOOD] / total if total > 0 else None, "nodeHours": hours, "usd": usd}


def lines(
    ledger: "Ledger",
    now: float,
    *,
    step_seconds: Optional[float],
    write_seconds: Optional[float],
    save_period: Optional[int],
) -> list[str]:
    """`python -m jobctl status`'s goodput and badput lines."""
    if not ledger.attempts:
        return []
    rows = run_buckets(ledger, now, step_seconds=step_seconds, write_seconds=write_seconds, save_period=save_period)
    run = summary(rows)
    hours: dict[str, float] = run["nodeHours"]  # type: ignore[assignment]
    usd: Optional[dict[str, float]] = run["usd"]  # type: ignore[assignment]
    fraction = run["fraction"]
    total = sum(hours.values())
    head = "goodput: " + ("-" if fraction is None else f"{100 * float(fraction):.0f} %")  # type: ignore[arg-type]
    head += f" of {total:.2f} paid GPU node-hours in kept steps"
    if usd is not None:
        head += f" (${usd[GOOD]:,.2f} of ${sum(usd.values()):,.2f})"
    bad = [
        f"{b} {hours[b]:.2f} node-h" + ("" if usd is None else f" ${usd[b]:,.2f}")
        for b in BUCKETS
        if b != GOOD and hours[b] > 0
    ]
    return [head, "badput: " + (", ".join(bad) if bad else "none")]
