"""The run ledger: what each attempt of a run did and cost, kept on Lustre where it outlives the watcher and
the head (`<ray.mountPath>/.nemo-rl-gke/watcher/<stack>.ledger.json`, written by rename).

Spend (`Ledger.attempt_spend`, the one function the total, the budget, `status` and the `attempt-ended`
line read): with a known mix of rungs each rung's nodes x hours x its node-hour price, else node-hours x
the first rung's price; the prices come from the plan (run.json). GPU node-hours only. The budget, the
gang wait and the columns: docs/preemption-recovery.md, docs/capacity.md.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from workloads.gang_wait import mix_counts

WARN_FRACTION = 0.8


@dataclass
class Attempt:
    attempt: int
    submission_id: str
    start: float
    nodes: int
    resume_step: int = 0
    end: Optional[float] = None
    cause: str = "running"
    last_step: Optional[int] = None
    """The step it was in when it ended (from its log); None: not known."""
    saved_step: Optional[int] = None
    steps_lost: Optional[int] = None
    cleaned: list[str] = field(default_factory=list)
    note: str = ""
    rungs: str = ""
    """The rungs its nodes came from ("spot 3, onDemand 5"); empty: not looked at."""
    released: Optional[float] = None
    """When the owner released the workers after this attempt ended the run; None: not released."""
    marks: dict[str, float] = field(default_factory=dict)
    """Named times around the attempt (`gateStart`, `gateEnd`, `nodesReady`, `podsRunning`): goodput boundaries."""

    def hours(self, now: float) -> float:
        return max((self.end if self.end is not None else now) - self.start, 0.0) / 3600

    def node_hours(self, now: float) -> float:
        return self.nodes * self.hours(now)

    @property
    def steps_done(self) -> Optional[int]:
        return None if self.last_step is None else max(self.last_step - self.resume_step, 0)


GANG_WAITING, GANG_COMPLETE, GANG_RELEASED, GANG_KEPT = "waiting", "complete", "released", "kept"


@dataclass
class GangWait:
    """The owner's wait for the whole gang before attempt `attempt` (`submission_id`)."""

    attempt: int
    submission_id: str
    since: float
    """When the wait began: the bound counts from here, across watcher restarts."""
    want: int
    ready: int = 0
    mix: str = ""
    outcome: str = GANG_WAITING
    line: str = ""


@dataclass
class Ledger:
    stack: str
    run_id: str
    """The run's (`run_id_for`): every spec of the run adds to one ledger."""
    node_hour_usd: Optional[float] = None
    rung_node_hour_usd: dict[str, float] = field(default_factory=dict)
    price_estimate: Optional[str] = None
    budget_usd: Optional[float] = None
    attempts: list[Attempt] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    budget_warned: bool = False
    stop_requested_at: Optional[float] = None
    stop_requested_step: Optional[int] = None
    gang: Optional[GangWait] = None
    """The newest gang wait; None: none."""

    def find(self, submission_id: str) -> Optional[Attempt]:
        return next((a for a in self.attempts if a.submission_id == submission_id), None)

    def last_attempt(self, submission_id: str) -> int:
        """The highest attempt of the spec recorded here (0: none): the count a head restart never empties."""
        from workloads.submit import attempt_id

        mine = [a.attempt for a in self.attempts if a.submission_id == attempt_id(submission_id, a.attempt)]
        return max(mine, default=0)

    def spend(self, now: float) -> Optional[float]:
        """The run's spend so far; None when an attempt has no price."""
        spends = [self.attempt_spend(a, now) for a in self.attempts]
        if any(s is None for s in spends) or (not spends and self.node_hour_usd is None):
            return None
        return sum(s for s in spends if s is not None)

    def attempt_spend(self, a: Attempt, now: float) -> Optional[float]:
        """Nodes of each rung x hours x that rung's price when the mix is known, else node-hours x `node_hour_usd`."""
        mix = mix_counts(a.rungs)
        if not mix:
            return None if self.node_hour_usd is None else a.node_hours(now) * self.node_hour_usd
        prices = [self.rung_node_hour_usd.get(rung, self.node_hour_usd) for rung in mix]
        if any(p is None for p in prices):
            return None
        per_hour = sum(n * p for n, p in zip(mix.values(), prices, strict=True) if p is not None)
        # Were the mix's counts ever to differ from `nodes`, the node-hours are kept at the mix's mean price.
        return a.node_hours(now) * per_hour / sum(mix.values())

    def usd_per_step(self, a: Attempt, now: float) -> Optional[float]:
        """The attempt's spend over the steps it ran (lost ones included); None: not known."""
        spend, done = self.attempt_spend(a, now), a.steps_done
        return None if spend is None or not done else spend / done

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Ledger":
        names = {f.name for f in dataclasses.fields(cls)}
        attempt_names = {f.name for f in dataclasses.fields(Attempt)}
        # Written before run ids, a ledger was keyed by its spec's submission id (no run id matches it).
        data = {"run_id": data.get("submission_id", ""), **data}
        kept = {k: v for k, v in data.items() if k in names and k not in ("attempts", "gang")}
        ledger = cls(**kept)
        ledger.attempts = [
            Attempt(**{k: v for k, v in a.items() if k in attempt_names}) for a in data.get("attempts", [])
        ]
        gang = data.get("gang")
        if gang:
            gang_names = {f.name for f in dataclasses.fields(GangWait)}
            ledger.gang = GangWait(**{k: v for k, v in gang.items() if k in gang_names})
        return ledger


class LedgerFile:
    """The ledger on disk; a failed read is an empty ledger, a failed write is ignored."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def load(self, stack: str, run_id: str) -> Ledger:
        try:
            ledger = Ledger.from_dict(json.loads(self.path.read_text()))
        except (OSError, ValueError, TypeError):
            return Ledger(stack, run_id)
        return ledger if ledger.run_id == run_id else Ledger(stack, run_id)

    def save(self, ledger: Ledger) -> None:
        write_quietly(self.path, json.dumps(ledger.to_dict(), indent=1, sort_keys=True) + "\n")


def write_quietly(path: Path, text: str) -> None:
    """Write `text` by rename (a reader never sees half a file); a failed write is ignored (kept in memory)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(text)
        os.replace(tmp, path)


def ledger_path(state_file: str | Path) -> Path:
    state = Path(state_file)
    return state.with_name(f"{state.stem}.ledger.json")


def _money(value: Optional[float]) -> str:
    return "-" if value is None else f"${value:,.2f}"


def _opt(value: Any) -> str:
    return "-" if value is None else str(value)


def _when(epoch: Optional[float]) -> str:
    import time

    return "-" if epoch is None else time.strftime("%Y-%m-%d %H:%M", time.gmtime(epoch))


_COLUMNS = "attempt|start (UTC)|end (UTC)|cause|nodes|rungs|node-h|resumed|done|lost|spend|$/step".split("|")


def table(ledger: Ledger, now: float) -> list[str]:
    """The ledger as a text table for `python -m jobctl status`, with totals, budget and a pending gang wait."""
    rows = [
        [str(a.attempt), _when(a.start), _when(a.end), a.cause, str(a.nodes), a.rungs or "-"]
        + [f"{a.node_hours(now):.2f}", f"step {a.resume_step}", _opt(a.steps_done), _opt(a.steps_lost)]
        + [_money(ledger.attempt_spend(a, now)), _money(ledger.usd_per_step(a, now))]
        for a in ledger.attempts
    ]
    # The rungs column only when the watcher looked at the gang.
    keep = [i for i, name in enumerate(_COLUMNS) if name != "rungs" or any(a.rungs for a in ledger.attempts)]
    cells = [[row[i] for i in keep] for row in (_COLUMNS, *rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(keep))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    total = ledger.spend(now)
    lost = sum(a.steps_lost or 0 for a in ledger.attempts)
    hours = sum(a.node_hours(now) for a in ledger.attempts)
    summary = f"{len(ledger.attempts)} attempt(s), {hours:.2f} node-hours, {lost} step(s) lost, spend {_money(total)}"
    if ledger.price_estimate and total is not None:
        summary += " (at estimated prices: data/prices.yaml)"
    if ledger.budget_usd is not None:
        summary += f" of the budget {_money(ledger.budget_usd)}"
        if total is not None and ledger.budget_usd > 0:
            summary += f" ({100 * total / ledger.budget_usd:.0f} %)"
    lines.append(summary)
    gang = ledger.gang
    # Not once its attempt exists (someone else submitted it meanwhile: the deploy, a user).
    if gang is not None and gang.outcome != GANG_COMPLETE and ledger.find(gang.submission_id) is None:
        nodes = f"{gang.ready} of {gang.want} GPU nodes ({gang.mix or 'none'})"
        state = {
            GANG_WAITING: f"waiting since {_when(gang.since)} UTC, {nodes}",
            GANG_KEPT: f"waiting since {_when(gang.since)} UTC, past gpuPool.capacity.maxWaitMinutes (kept), {nodes}",
            GANG_RELEASED: f"incomplete, {nodes}, and its workers released: nothing is submitted until they are "
            "back and the attempt is submitted again (docs/capacity.md)",
        }
        lines.append(f"gang for attempt {gang.attempt}: {state.get(gang.outcome, gang.outcome)}")
    lines += [f"  {e}" for e in ledger.events]
    return lines


META_PROBE = "nemo-rl-gke/probe"
"""Ray job metadata of a read-only helper job."""
_BEGIN, _END = "NEMO_RL_GKE_LEDGER_BEGIN", "NEMO_RL_GKE_LEDGER_END"


def read_on_head(client: Any, path: str, *, stack: str, timeout: float = 120.0) -> Optional[Ledger]:
    """The ledger at `path` on the head's Lustre mount, read by a tiny Ray job (the Job API is all a user's
    machine reaches); None when there is none yet."""
    import shlex
    import time as _time

    from workloads import submit

    job_id = f"{stack}-ledger-{_time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    quoted = shlex.quote(path)
    submit.guard(
        client.get_address(),
        lambda: client.submit_job(
            entrypoint=f"echo {_BEGIN}; cat {quoted} 2>/dev/null; echo; echo {_END}",
            submission_id=job_id,
            metadata={META_PROBE: stack},
        ),
    )
    submit.wait(client, job_id, timeout=timeout, poll_interval=0.5)
    text = "".join(submit.logs(client, job_id))
    with contextlib.suppress(submit.JobError):
        client.delete_job(job_id)
    body = text.split(_BEGIN, 1)[-1].split(_END, 1)[0].strip()
    if not body:
        return None
    try:
        return Ledger.from_dict(json.loads(body))
    except (ValueError, TypeError):
        return None
