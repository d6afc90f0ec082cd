"""What the recovery package's test files build alike (tests/test_classify.py, test_policy.py,
test_state_file.py, test_owner_loop.py): a fast policy, a driver's traceback, and Ray's job record."""

from __future__ import annotations

from ray.job_submission import JobDetails

from workloads.recovery import RecoveryPolicy

FAST = RecoveryPolicy(check_interval_seconds=0.2, max_restarts=2, backoff_seconds=0, max_backoff_seconds=0)
TRACEBACK = 'Traceback (most recent call last):\n  File "run_grpo.py", line 3, in <module>\n'


def info(
    status="FAILED",
    *,
    message="",
    error_type="JOB_ENTRYPOINT_COMMAND_ERROR",
    exit_code=1,
    end_ms=1_000_000,
    sid="j",
    meta=None,
):
    """Ray's record of a job that ended `status` (or runs) at `end_ms`, as the job table returns it."""
    return JobDetails(
        type="SUBMISSION",
        entrypoint="python run_grpo.py",
        status=status,
        message=message,
        error_type=error_type if status == "FAILED" else None,
        driver_exit_code=exit_code if status == "FAILED" else None,
        start_time=end_ms - 5000,
        end_time=end_ms if status in ("FAILED", "STOPPED", "SUCCEEDED") else None,
        submission_id=sid,
        metadata=meta or {},
    )
