"""A real, private Ray head for the job-submission tests.

One head per test session, shared by every module that asks (`shared_head(config)`): started
with `ray start --head` from this venv, every port chosen free and bound to 127.0.0.1, its own
temp dir, and its own process group. Teardown kills that process group (and anything else still
holding the temp dir), never `ray stop`, which would stop every Ray process of the user,
including other sessions' heads. A watchdog does the same if the test process dies without
cleaning up (a killed or timed-out pytest, an interrupted cleanup), so no head outlives its session.
Under xdist, `ray_heads_first` sends every Ray test to one of two workers, so two heads start.
"""

from __future__ import annotations

import shlex
import sys
import uuid

import pytest

from tests import local_ray_head
from tests.local_ray_head import RAY, START_DEADLINE, START_TIMEOUT, free_ports  # noqa: F401 (tests use them)
from workloads.job_types import JobSpec

JOB_TIMEOUT = 240.0
"""Seconds a test waits for a job on the head to reach the state it needs (RUNNING, ended, a log
line). Each job starts a JobSupervisor actor, a fresh Python worker that imports Ray, before its
driver runs: a few seconds on an idle machine, tens of seconds at a load average of 10 on two cores
(docs/testing.md). It is a deadline, not a sleep: a passing test never waits for it, and a hang still
fails, naming what it waited for."""
STALL_BOUND = 30.0
"""Seconds within which a call against a stalled server must have given up (its own timeout is under
a second): far under the stall itself (60 s, tests/stalled_http.py), far over what a busy machine adds."""
_STASH_KEY = pytest.StashKey["LocalRayHead"]()


def python_job(stack: str, code: str, recipe: str = "t") -> JobSpec:
    """A spec running `code` with this interpreter (the raylet's PATH may not have the venv)."""
    return JobSpec.create(
        stack=stack,
        recipe=recipe,
        entrypoint=f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}",
        # A unique value keeps reruns against a long-lived head from matching old jobs.
        runtime_env={"env_vars": {"RAY_OVERRIDE_JOB_RUNTIME_ENV": "1", "RUN": uuid.uuid4().hex[:8]}},
    )


class LocalRayHead(local_ray_head.LocalRayHead):
    """`tests.local_ray_head.LocalRayHead` whose failed start fails the test that asked for it."""

    @classmethod
    def start(cls, attempts: int = 3, deadline_s: float = START_DEADLINE) -> "LocalRayHead":
        try:
            return super().start(attempts, deadline_s)  # type: ignore[return-value]
        except local_ray_head.HeadStartFailed as err:
            pytest.fail(str(err))


def shared_head(config: pytest.Config) -> LocalRayHead:
    """The session's head, started on first use and stopped when the session ends."""
    head = config.stash.get(_STASH_KEY, None)
    if head is None:
        head = LocalRayHead.start()
        config.stash[_STASH_KEY] = head
        config.add_cleanup(head.stop)
    return head


def ray_heads_first(items: list, ray_items: list, workers: int) -> list:
    """`items` reordered so the Ray tests open the first two of `workers` equal shares, in turns.

    `--dist worksteal` (pytest-xdist 3.8.0, xdist/scheduler/worksteal.py `check_schedule`) first hands
    worker k the k-th of `workers` contiguous shares of the collection, and later moves tests only from
    the back of a queue: tests at the front of a share stay with its worker. Every worker collects and
    sorts alike, so they agree. If xdist dealt otherwise, only the number of heads would change."""
    ray_ids = {id(item) for item in ray_items}
    rest = [item for item in items if id(item) not in ray_ids]
    first, second = ray_items[0::2], ray_items[1::2]
    cut = max(0, len(items) // workers - len(first))
    return first + rest[:cut] + second + rest[cut:]
