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
    restored: list[list[float]] = field(default_factory=list)
    """[seen, released again] of each time the workers came back after the release with no attempt to run (a Helm
    upgrade of the Ray release, a hand edit) and the owner released them again: paid, idle GPU time."""
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

    MAX_BYTES = 16 << 20
    """Far above any ledger (its events grow a line per attempt and wait); a larger file reads as no ledger."""
    LARGEST = 1e12
    """No number of a ledger comes near it (epoch seconds: the year 33658; dollars, steps, nodes); a larger one would
    fail where it is shown (`time.gmtime(1e300)` overflows)."""

    def load(self, stack: str, run_id: str, *, refuse: bool = False) -> Ledger:
        """The ledger of `run_id` in the file: read by the bounded reader (a FIFO or /dev/zero is refused, not
        waited on or read without end) and of a ledger's shape (`_fits`, as the head read checks it). Another run's,
        or none: an empty ledger. A file that is not a ledger: an empty ledger, or with `refuse` (a file a user
        named) a `ValueError` saying why, in one line."""
        from workloads import cli_args

        try:
            data = cli_args.loads_json(cli_args.read_user_file(self.path, self.MAX_BYTES), self.LARGEST)
            if not isinstance(data, dict):
                raise ValueError(f"a JSON {type(data).__name__}, not an object")
            try:
                ledger = Ledger.from_dict(data)
            except (AttributeError, TypeError):  # an attempt that is not an object, or lacks a field
                raise ValueError("an attempt is not an object with its fields") from None
            if not _fits(ledger.to_dict(), Ledger):
                raise ValueError("a field of the wrong type")
        except (OSError, ValueError) as err:  # UnreadableFile is a ValueError
            if refuse:
                raise ValueError(
                    f"{str(err).partition('; allowed')[0]}; allowed: a run ledger (JSON) the watcher wrote"
                ) from None
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
_MARK = "NEMO_RL_GKE_LEDGER"
_BEGIN, _END = f"{_MARK}_BEGIN", f"{_MARK}_END"
"""The lines around the probe's output. Its command never holds them whole: the shell joins each at run time."""


def read_on_head(client: Any, path: str, *, stack: str, timeout: float = 120.0) -> Optional[Ledger]:
    """The ledger at `path` on the head's Lustre mount, read by a tiny Ray job (the Job API is all a user's
    machine reaches); None when there is none yet, or what is there is not a whole ledger. Raises `JobError`
    when the head cannot be asked or the job does not end within `timeout` (then it is stopped)."""
    import time as _time
    import uuid

    from workloads import submit

    address = client.get_address()
    # Unique: two reads within a second (a deploy's hook and a `jobctl status`) must not share an id.
    job_id = f"{stack}-ledger-{_time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
    entrypoint = probe_command(path)
    submit.guard(
        address,
        lambda: client.submit_job(entrypoint=entrypoint, submission_id=job_id, metadata={META_PROBE: stack}),
        job_id,
    )
    try:
        submit.wait(client, job_id, timeout=timeout, poll_interval=0.5)
    except submit.WaitTimeout:
        with contextlib.suppress(submit.JobError):
            submit.stop(client, job_id)
        raise
    text = "".join(submit.logs(client, job_id))
    with contextlib.suppress(submit.JobError):
        submit.guard(address, lambda: client.delete_job(job_id), job_id)
    return ledger_from_probe_log(text, supervisor_line(job_id, entrypoint))


def probe_command(path: str) -> str:
    """The probe's shell command: the file base64-encoded between a `_BEGIN` and an `_END` line, `_END` only after
    a whole read (a missing or unreadable file: no `_END`). Ray's job supervisor writes "Running entrypoint for job
    <id>: <this command>" into the same log, and not always first: it is a buffered write to the log file, flushed
    when the file closes, after the command has started (ray-project/ray
    python/ray/dashboard/modules/job/job_supervisor.py `_exec_entrypoint`, Ray 2.60.0 at b7f4259e; seen after the
    output on a local head). So the markers are built by the shell, and the body is base64, one alphabet, which a
    stray line cannot pass through unnoticed (`base64` is coreutils, an essential package of the image's Ubuntu 24.04
    base: NVIDIA-NeMo/RL docker/Dockerfile `BASE_IMAGE`)."""
    import shlex

    return f"m={_MARK}; printf '%s_BEGIN\\n' $m; base64 < {shlex.quote(path)} && printf '%s_END\\n' $m"


def supervisor_line(job_id: str, entrypoint: str) -> str:
    """The line Ray's job supervisor writes into the job's log (`probe_command` cites where)."""
    return f"Running entrypoint for job {job_id}: {entrypoint}\n"


def ledger_from_probe_log(text: str, supervisor: str = "") -> Optional[Ledger]:
    """The ledger in a probe job's log (`probe_command`); None without both markers, with a body that is not
    base64 of JSON, or with JSON that is not a ledger. `supervisor`, the supervisor's line, is taken out first
    wherever it landed (its one write can fall between two of the body's)."""
    import base64
    import binascii

    lines = text.replace(supervisor, "", 1).splitlines() if supervisor else text.splitlines()
    try:
        first = lines.index(_BEGIN)
        body = "".join(lines[first + 1 : lines.index(_END, first)])
        data = json.loads(base64.b64decode(body, validate=True))
    except (ValueError, binascii.Error):  # no markers; not base64; not JSON (an empty file included)
        return None
    try:
        ledger = Ledger.from_dict(data)
    except (AttributeError, TypeError, ValueError):  # not an object; an attempt not an object or missing a field
        return None
    return ledger if _fits(ledger.to_dict(), Ledger) else None


def _fits(value: Any, hint: Any) -> bool:
    """Whether JSON `value` has the shape of type `hint` (a field's annotation; a dataclass: an object with each of
    its fields): a ledger whose numbers are text would fail later, in the table or the goodput."""
    import typing

    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Union:
        return any(_fits(value, a) for a in args)
    if origin is list:
        return isinstance(value, list) and all(_fits(v, args[0]) for v in value)
    if origin is dict:
        return isinstance(value, dict) and all(_fits(k, args[0]) and _fits(v, args[1]) for k, v in value.items())
    if dataclasses.is_dataclass(hint):
        hints = typing.get_type_hints(hint)
        return isinstance(value, dict) and all(
            f.name in value and _fits(value[f.name], hints[f.name]) for f in dataclasses.fields(hint)
        )
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint) if isinstance(hint, type) else True
