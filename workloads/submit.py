"""Submit, watch and stop NeMo-RL jobs on the Ray dashboard's Job Submission API.

Connecting is `workloads.ray_connection`, addresses `workloads.ray_address`, errors `workloads.job_errors`
(re-exported here). A `JobSpec` has a deterministic id and its attempts are `<id>-r<N>` (Ray never
reuses an id), found by their metadata.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable, Collection, Iterator, Optional

from ray.job_submission import JobDetails, JobStatus, JobSubmissionClient

# Re-exported: callers catch these errors, connect and `guard` their own Job API calls through `submit.*`.
from workloads.job_errors import (  # noqa: F401
    DashboardAuthError,
    DashboardError,
    DashboardUnreachable,
    DuplicateSubmission,
    InvalidAddress,
    JobError,
    UnknownJob,
    WaitTimeout,
)
from workloads.job_types import META_ATTEMPT, META_RECIPE, META_SPEC_HASH, META_STACK, JobSpec
from workloads.ray_connection import CONNECT_TIMEOUT, connect, guard  # noqa: F401

TERMINAL = frozenset({JobStatus.STOPPED, JobStatus.SUCCEEDED, JobStatus.FAILED})
RETRYABLE = frozenset({JobStatus.STOPPED, JobStatus.FAILED})
LOG_IDLE_TIMEOUT = 120.0
"""Seconds `logs --follow` waits on the websocket for a chunk before it polls over HTTP instead."""


@dataclass(frozen=True)
class SubmitResult:
    submission_id: str
    status: JobStatus
    created: bool
    """False when the same spec was already there and nothing was submitted."""
    stopped: tuple[str, ...] = ()
    """Jobs of other specs of the stack stopped to make room."""


def status(client: JobSubmissionClient, job_id: str) -> JobStatus:
    return info(client, job_id).status


def info(client: JobSubmissionClient, job_id: str) -> JobDetails:
    return guard(client.get_address(), lambda: client.get_job_info(job_id), job_id)


def stop(client: JobSubmissionClient, job_id: str) -> bool:
    """Ask the job to stop; True if it was still running."""
    return bool(guard(client.get_address(), lambda: client.stop_job(job_id), job_id))


def all_jobs(client: JobSubmissionClient) -> list[JobDetails]:
    """Every job on the head (gate runs and the destroy mark too)."""
    return list(guard(client.get_address(), client.list_jobs))


def list_jobs(
    client: JobSubmissionClient, stack: Optional[str] = None, recipe: Optional[str] = None
) -> list[JobDetails]:
    """This program's jobs, oldest first; filtered by stack and recipe when given."""
    jobs = all_jobs(client)
    mine = [
        j
        for j in jobs
        if j.submission_id
        and META_STACK in (j.metadata or {})
        and (stack is None or j.metadata[META_STACK] == stack)
        and (recipe is None or j.metadata.get(META_RECIPE) == recipe)
    ]
    return sorted(mine, key=lambda j: (j.start_time or 0, j.submission_id))


def latest_job(client: JobSubmissionClient, stack: str, recipe: Optional[str] = None) -> Optional[JobDetails]:
    jobs = list_jobs(client, stack, recipe)
    return jobs[-1] if jobs else None


def ray_nodes(client: JobSubmissionClient) -> list[dict[str, Any]]:
    """Ray's node table, dead nodes included (`GET /api/v0/nodes`, dashboard/modules/state/state_head.py since
    Ray 2.0), through the client's `_do_request` so its token and TLS settings apply."""
    address = client.get_address()

    response = guard(
        address, lambda: client._do_request("GET", "/api/v0/nodes?limit=10000&detail=true", timeout=CONNECT_TIMEOUT * 3)
    )
    if response.status_code in (401, 403):
        raise DashboardAuthError(address, f"HTTP {response.status_code}")
    if response.status_code != 200:
        raise DashboardError(f"Ray state API at {address}/api/v0/nodes answered HTTP {response.status_code}")
    try:
        rows = response.json()["data"]["result"]["result"]
    except (KeyError, TypeError, ValueError):
        raise DashboardError(f"Ray state API at {address}/api/v0/nodes answered in an unknown shape") from None
    return [row for row in rows if isinstance(row, dict)]


def metadata_int(job: Any, key: str, default: int) -> int:
    """A number stored in a job's metadata; `default` when absent or not a number."""
    try:
        return int((getattr(job, "metadata", None) or {}).get(key, default))
    except (TypeError, ValueError):
        return default


def attempt_of(job: Any) -> int:
    return metadata_int(job, META_ATTEMPT, 1)


def attempt_id(submission_id: str, attempt: int) -> str:
    return submission_id if attempt <= 1 else f"{submission_id}-r{attempt}"


def submit_attempt(
    client: JobSubmissionClient, spec: JobSpec, attempt: int, metadata: Optional[dict[str, str]] = None
) -> tuple[str, bool]:
    """Submit attempt `attempt` of `spec` with `metadata` added; returns the id and whether this call created it
    (False: someone submitted this very attempt first, and that is the job)."""
    job_id = attempt_id(spec.submission_id, attempt)
    try:
        guard(
            client.get_address(),
            lambda: client.submit_job(
                entrypoint=spec.entrypoint,
                submission_id=job_id,
                runtime_env=spec.runtime_env,
                metadata={**spec.metadata, META_ATTEMPT: str(attempt), **(metadata or {})},
            ),
            job_id,
        )
    except DuplicateSubmission:
        return job_id, False
    return job_id, True


def stop_other_specs(client: JobSubmissionClient, spec: JobSpec, *, stop_timeout: float = 60.0) -> tuple[str, ...]:
    """Stop the stack's unfinished jobs of other specs (one GPU pool, one job), waiting up to `stop_timeout` each."""
    stale = [
        j
        for j in list_jobs(client, spec.stack)
        if j.metadata.get(META_SPEC_HASH) != spec.spec_hash and j.status not in TERMINAL
    ]
    stopped = []
    for job in stale:
        with contextlib.suppress(UnknownJob):
            stop(client, job.submission_id)
            stopped.append(job.submission_id)
    for job_id in stopped:
        with contextlib.suppress(WaitTimeout, UnknownJob):
            wait(client, job_id, timeout=stop_timeout, poll_interval=0.5)
    return tuple(stopped)


def wait(
    client: JobSubmissionClient,
    job_id: str,
    *,
    until: Collection[JobStatus] = TERMINAL,
    timeout: Optional[float] = None,
    on_status: Optional[Callable[[JobStatus, float], None]] = None,
    poll_interval: float = 1.0,
) -> JobStatus:
    """Poll until the job's status is in `until` or it ended; `on_status(status, elapsed)` after every poll."""
    start = time.monotonic()
    while True:
        current = status(client, job_id)
        elapsed = time.monotonic() - start
        if on_status is not None:
            on_status(current, elapsed)
        if current in until or current in TERMINAL:
            return current
        if timeout is not None and elapsed >= timeout:
            raise WaitTimeout(job_id, current, timeout)
        time.sleep(poll_interval)


def logs(
    client: JobSubmissionClient,
    job_id: str,
    *,
    follow: bool = False,
    tail: Optional[int] = None,
    poll_interval: float = 1.0,
) -> Iterator[str]:
    """The job's log as text chunks: the whole log or its last `tail` lines; with `follow`, then new output until
    it ends, over Ray's log websocket, else by polling (a proxy that does not pass upgrades)."""
    if tail is not None and tail < 1:
        raise ValueError(f"tail must be a positive number of lines, got {tail}")
    address = client.get_address()
    status(client, job_id)  # UnknownJob before anything is yielded
    if not follow:
        text = guard(address, lambda: client.get_job_logs(job_id), job_id)
        yield text if tail is None else last_lines(text, tail)
        return
    import aiohttp

    shown = 0  # characters from the start of the log already yielded or deliberately skipped
    if tail is not None:
        # Ray's websocket replays the log from its first line: the tail from a snapshot, that much replay dropped.
        text = guard(address, lambda: client.get_job_logs(job_id), job_id)
        yield last_lines(text, tail)
        shown = len(text)
    streamed = 0
    try:
        for chunk in _sync_iter(client.tail_job_logs(job_id), LOG_IDLE_TIMEOUT):
            new = chunk[max(shown - streamed, 0) :]
            streamed += len(chunk)
            shown = max(shown, streamed)
            if new:
                yield new
        return
    except (aiohttp.WSServerHandshakeError, aiohttp.ClientError, RuntimeError, asyncio.TimeoutError):
        # Streaming failed (or was never possible); continue from what was already shown.
        pass
    while True:
        done = status(client, job_id) in TERMINAL
        text = guard(address, lambda: client.get_job_logs(job_id), job_id)
        if len(text) > shown:
            yield text[shown:]
            shown = len(text)
        if done:
            return
        time.sleep(poll_interval)


def last_lines(text: str, count: int) -> str:
    """The last `count` lines, split at "\n" only, as `tail -n` does."""
    end = len(text) - 1 if text.endswith("\n") else len(text)
    for _ in range(count):
        end = text.rfind("\n", 0, end)
        if end < 0:
            return text
    return text[end + 1 :]


def _sync_iter(agen: AsyncIterator[str], idle_timeout: Optional[float] = None) -> Iterator[str]:
    """Drive an async iterator from sync code; `asyncio.TimeoutError` after `idle_timeout` without an item."""
    loop = asyncio.new_event_loop()
    try:
        while True:
            try:
                yield loop.run_until_complete(asyncio.wait_for(agen.__anext__(), idle_timeout))
            except StopAsyncIteration:
                return
    finally:
        with contextlib.suppress(Exception):
            loop.run_until_complete(agen.aclose())  # type: ignore[attr-defined]
        loop.close()
