"""Job submission against a real local Ray head, through the module and the CLI users run
(the CLI's own commands: tests/test_jobctl.py; connecting: tests/test_ray_connection.py; addresses:
tests/test_ray_address.py; the errors' messages: tests/test_job_errors.py).

Jobs are short `python -c` commands; each test uses its own stack name so the shared head's
jobs never mix. Only 127.0.0.1 is contacted.
"""

from __future__ import annotations

import asyncio
import io
import time

import pytest
from ray.job_submission import JobStatus
from ray_head import JOB_TIMEOUT, STALL_BOUND, python_job

from jobctl import cli
from workloads import submit as jobs
from workloads.job_spec import META_STACK
from workloads.run_owner import GateSetup, submit_gated

# Ray's own log-tail call trips a deprecation in the installed aiohttp; not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore:ssl=None is deprecated:DeprecationWarning")


def submit(client, spec) -> jobs.SubmitResult:
    """A submission as the run's owner makes it with the gate off (the hook's and the CLI's way)."""
    return submit_gated(client, spec, GateSetup())[0]


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_a_job_runs_then_succeeds_and_resubmitting_it_adds_nothing(client, tmp_path):
    # The job runs until the test has seen it RUNNING (a fixed sleep could end before a slow poll).
    go = tmp_path / "go"
    spec = python_job(
        "t-ok",
        "import os, time; print('hello from the job', flush=True)\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.05)",
    )
    first = submit(client, spec)
    assert first.created and first.submission_id == spec.submission_id and first.stopped == ()
    seen: list[JobStatus] = []
    assert (
        jobs.wait(
            client,
            spec.submission_id,
            until={JobStatus.RUNNING},
            timeout=JOB_TIMEOUT,
            on_status=lambda s, _t: seen.append(s),
            poll_interval=0.2,
        )
        == JobStatus.RUNNING
    )
    go.touch()
    assert (
        jobs.wait(
            client, spec.submission_id, timeout=JOB_TIMEOUT, on_status=lambda s, _t: seen.append(s), poll_interval=0.3
        )
        == JobStatus.SUCCEEDED
    )
    assert JobStatus.RUNNING in seen and seen[-1] == JobStatus.SUCCEEDED
    assert "hello from the job" in "".join(jobs.logs(client, spec.submission_id))

    again = submit(client, spec)
    assert (again.submission_id, again.created, again.status) == (spec.submission_id, False, JobStatus.SUCCEEDED)
    listed = jobs.list_jobs(client, "t-ok")
    assert [j.submission_id for j in listed] == [spec.submission_id]
    assert listed[0].metadata[META_STACK] == "t-ok"


def test_the_same_spec_running_is_not_resubmitted(client, tmp_path):
    go = tmp_path / "go"
    spec = python_job("t-running", f"import os, time\nwhile not os.path.exists({str(go)!r}): time.sleep(0.05)")
    first = submit(client, spec)
    jobs.wait(client, spec.submission_id, until={JobStatus.RUNNING}, timeout=JOB_TIMEOUT, poll_interval=0.2)
    again = submit(client, spec)
    go.touch()
    assert (again.submission_id, again.created, again.status) == (first.submission_id, False, JobStatus.RUNNING)
    assert [j.submission_id for j in jobs.list_jobs(client, "t-running")] == [spec.submission_id]


def test_the_same_spec_pending_is_not_resubmitted(client):
    spec = python_job("t-pending", "print('never runs')")
    # The first attempt as `submit_attempt` makes it, but asking for a resource no node has: Ray keeps
    # it PENDING for as long as the test needs (a real cluster: a job waiting for its GPU nodes).
    client.submit_job(
        entrypoint=spec.entrypoint,
        submission_id=spec.submission_id,
        runtime_env=spec.runtime_env,
        metadata={**spec.metadata, jobs.META_ATTEMPT: "1"},
        entrypoint_resources={"t-pending-never": 1},
    )
    try:
        assert jobs.status(client, spec.submission_id) == JobStatus.PENDING
        again = submit(client, spec)
        assert (again.submission_id, again.created, again.status) == (spec.submission_id, False, JobStatus.PENDING)
        assert [j.submission_id for j in jobs.list_jobs(client, "t-pending")] == [spec.submission_id]
    finally:
        jobs.stop(client, spec.submission_id)


def test_a_failing_job_reaches_failed_and_the_same_spec_is_retried_as_a_new_attempt(client):
    spec = python_job("t-fail", "import sys; print('going down'); sys.exit(3)")
    submit(client, spec)
    assert jobs.wait(client, spec.submission_id, timeout=JOB_TIMEOUT, poll_interval=0.3) == JobStatus.FAILED
    retry = submit(client, spec)
    assert retry.created and retry.submission_id == f"{spec.submission_id}-r2"
    jobs.wait(client, retry.submission_id, timeout=JOB_TIMEOUT, poll_interval=0.3)
    assert [j.submission_id for j in jobs.list_jobs(client, "t-fail")] == [spec.submission_id, retry.submission_id]


def test_a_changed_spec_stops_the_running_job_first_and_stop_ends_a_running_job(client):
    old = python_job("t-change", "import time; time.sleep(120)")
    submit(client, old)
    assert (
        jobs.wait(client, old.submission_id, until={JobStatus.RUNNING}, timeout=JOB_TIMEOUT, poll_interval=0.2)
        == JobStatus.RUNNING
    )
    new = python_job("t-change", "import time; time.sleep(120)  # v2")
    result = submit(client, new)
    assert result.created and result.stopped == (old.submission_id,)
    assert jobs.status(client, old.submission_id) == JobStatus.STOPPED
    assert (
        jobs.wait(client, new.submission_id, until={JobStatus.RUNNING}, timeout=JOB_TIMEOUT, poll_interval=0.2)
        == JobStatus.RUNNING
    )
    assert jobs.stop(client, new.submission_id) is True
    assert jobs.wait(client, new.submission_id, timeout=JOB_TIMEOUT, poll_interval=0.2) == JobStatus.STOPPED
    assert jobs.stop(client, new.submission_id) is False


def test_a_second_submitter_of_the_same_attempt_adopts_the_job_the_first_created(client):
    # Ray refuses the duplicate id with an HTTP 500 whose first line is "Traceback (most recent call last):".
    spec = python_job("t-twice", "pass")
    assert jobs.submit_attempt(client, spec, 2) == (f"{spec.submission_id}-r2", True)
    assert jobs.submit_attempt(client, spec, 2) == (f"{spec.submission_id}-r2", False)
    assert [j.submission_id for j in jobs.list_jobs(client, "t-twice")] == [f"{spec.submission_id}-r2"]


def test_an_unknown_job_id_raises_unknown_job(client, head):
    for call in (jobs.status, jobs.stop, lambda c, j: list(jobs.logs(c, j))):
        with pytest.raises(jobs.UnknownJob, match="no job 'no-such-job'"):
            call(client, "no-such-job")
    code, out, err = run_cli("status", "--address", head.address, "--job", "no-such-job")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: no job 'no-such-job'")
    code, _, err = run_cli("logs", "--stack", "h200", "--address", head.address)  # no --job, no job of h200
    assert (code, err) == (2, f"error: no job of stack h200 on {head.address}; `submit` one, or pass --job\n")


def test_a_silent_log_stream_gives_up_after_its_idle_timeout_instead_of_hanging():
    # What `logs --follow` drives Ray's log websocket with; a stream that never sends stands in for a
    # stalled connection, and the caller then falls back to polling over HTTP (with timeouts).
    async def silent():
        await asyncio.sleep(3600)
        yield "never"

    started = time.monotonic()
    with pytest.raises(asyncio.TimeoutError):
        next(jobs._sync_iter(silent(), 0.2))
    assert time.monotonic() - started < STALL_BOUND


def wait_for_log_line(client, job_id: str, text: str, timeout: float = JOB_TIMEOUT) -> str:
    """Poll the job's log until it contains `text`; the log then. Fails naming the job and the text."""
    deadline = time.monotonic() + timeout
    while True:
        log = "".join(jobs.logs(client, job_id))
        if text in log:
            return log
        assert time.monotonic() < deadline, f"job {job_id}: {text!r} not in its log after {timeout:g}s:\n{log[-500:]}"
        time.sleep(0.2)


def test_logs_tail_prints_only_the_last_lines_of_the_job_log_also_when_following(client, head, tmp_path):
    # The job prints only once Ray's "Running entrypoint" line is in its log: Ray writes that line
    # through a buffered file object it closes after starting the driver
    # (ray/dashboard/modules/job/job_supervisor.py `_exec_entrypoint`, 2.60.0), so a driver quick enough
    # on a busy machine could get its lines in first, and the last two lines would not be the job's.
    go = tmp_path / "go"
    spec = python_job(
        "t-tail",
        f"import os, time\nwhile not os.path.exists({str(go)!r}): time.sleep(0.05)\n"
        "for i in range(1, 6): print('line', i)",
    )
    submit(client, spec)
    wait_for_log_line(client, spec.submission_id, "Running entrypoint")
    go.touch()
    assert jobs.wait(client, spec.submission_id, timeout=JOB_TIMEOUT, poll_interval=0.3) == JobStatus.SUCCEEDED
    assert "line 1\n" in "".join(jobs.logs(client, spec.submission_id))  # the whole log has all five
    args = ("logs", "--stack", "dev", "--address", head.address, "--job", spec.submission_id, "--tail", "2")
    assert run_cli(*args) == (0, "line 4\nline 5\n", "")
    # Following replays the log from its start over the websocket; none of the skipped part may reappear.
    assert run_cli(*args, "--follow") == (0, "line 4\nline 5\n", "")
    assert run_cli(*args[:-1], "99") == (0, "".join(jobs.logs(client, spec.submission_id)), "")


# ---------------------------------------------------------------- issue 36: addresses that leak or crash
