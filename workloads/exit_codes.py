"""Exit codes of the day-2 CLI and the in-cluster watcher, and which error means which: 0 ok; 1 the job
ended FAILED or STOPPED; 2 bad config, unknown job or usage; 3 dashboard unreachable or credentials
refused; 4 --timeout passed; 5 the acceptance gate failed.
"""

from __future__ import annotations

import sys
from typing import Callable, Optional, TextIO

from workloads.cli_args import UsageError, shown_line
from workloads.job_types import JobBuildError

OK, JOB_FAILED, USAGE, UNREACHABLE, TIMEOUT, GATE_FAILED = 0, 1, 2, 3, 4, 5
INTERRUPTED = 130


class CommandError(Exception):
    """A one-line error with its exit code."""

    def __init__(self, message: str, code: int = USAGE):
        super().__init__(message)
        self.code = code


def for_error(exc: BaseException) -> Optional[int]:
    """The exit code of an error the user can act on, or None for a bug."""
    if isinstance(exc, CommandError):
        return exc.code
    if isinstance(exc, (UsageError, JobBuildError)):
        return USAGE
    # Looked up, not imported: importing them would load Ray for `submit --dry-run`.
    gate = sys.modules.get("workloads.gate.verdict")
    if gate is not None and isinstance(exc, gate.GateFailed):  # its message is the one line
        return GATE_FAILED
    submit = sys.modules.get("workloads.job_errors")  # the Job API client's errors
    if submit is None or not isinstance(exc, submit.JobError):
        return None
    if isinstance(exc, (submit.DashboardUnreachable, submit.DashboardAuthError)):
        return UNREACHABLE
    if isinstance(exc, submit.WaitTimeout):
        return TIMEOUT
    if isinstance(exc, (submit.UnknownJob, submit.InvalidAddress)):
        return USAGE
    dashboard = sys.modules.get("workloads.dashboard")
    if dashboard is not None and isinstance(exc, dashboard.ProxyError):  # e.g. the local port is taken
        return USAGE
    return JOB_FAILED


def run(body: Callable[[], int], err: TextIO) -> int:
    """The end of a `main`: an error the user can act on is one line and its code; a bug raises."""
    try:
        return body()
    except KeyboardInterrupt:
        return INTERRUPTED
    except Exception as exc:
        code = for_error(exc)
        if code is None:
            raise
        err.write(f"error: {shown_line(str(exc))}\n")  # one line, whatever a user or a server put in it
        return code
