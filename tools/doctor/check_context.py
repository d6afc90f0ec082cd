"""What every check of the doctor reads (the stack's context) and returns (report lines)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from infra.config import StackConfig
from infra.stack_context import StackContext
from tools.doctor.google_clients import Clients

PASS, WARN, FAIL = "pass", "warn", "fail"
DEFAULT_TIMEOUT = 20.0  # seconds per API call (`--timeout`)
MAX_TIMEOUT = 600.0


@dataclass(frozen=True)
class Result:
    """One line of the report; a check's own results leave `check` empty and the runner names them."""

    check: str
    status: str
    summary: str
    fix: Optional[str] = None


def passed(summary: str) -> Result:
    return Result("", PASS, summary)


def warning(summary: str, fix: Optional[str] = None) -> Result:
    return Result("", WARN, summary, fix)


def failed(summary: str, fix: Optional[str] = None) -> Result:
    return Result("", FAIL, summary, fix)


@dataclass(frozen=True)
class Context:
    """What every check reads: the validated stack, the project's number and the clients."""

    stack: str
    cfg: StackConfig
    names: StackContext
    project_number: str
    clients: Clients
    timeout: float

    @property
    def project(self) -> str:
        return self.cfg.project
