"""The Ray Job API client's one-line errors (`JobError`s), and `redacted`, which every address they name goes
through (their messages end up in CI logs and tickets). Never imports Ray.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from workloads.cli_args import RUN, looks_like_credential, shown_line

if TYPE_CHECKING:
    from ray.job_submission import JobStatus


class JobError(Exception):
    """A job operation failed for a reason the user can act on; `str()` is one line."""


class InvalidAddress(JobError):
    """A dashboard address or endpoint that cannot be a URL; raised before any network use. `address` is masked."""

    def __init__(self, address: str, reason: str):
        self.address, self.reason = redacted(address), reason
        super().__init__(f"{self.address}: {reason}")


class DashboardUnreachable(JobError):
    def __init__(self, address: str, detail: str = ""):
        self.address = address = redacted(address)
        hint = (
            "check that the cluster is up and the Ray head pod is running "
            "(`kubectl -n <namespace> get pods -l ray.io/node-type=head`), "
            "and that the address/port (or port-forward) is right"
        )
        super().__init__(f"Ray dashboard unreachable at {address}{f' ({detail})' if detail else ''}: {hint}")


class DashboardAuthError(JobError):
    def __init__(self, address: str, detail: str = ""):
        self.address = address = redacted(address)
        super().__init__(
            f"not authorized at {address}{f' ({detail})' if detail else ''}: run "
            "`gcloud auth application-default login` and make sure your identity may proxy to "
            "services in the namespace (RBAC services/proxy, e.g. roles/container.developer)"
        )


class UnknownJob(JobError):
    def __init__(self, job_id: str, address: str = ""):
        self.job_id = job_id
        where = f" on {redacted(address)}" if address else ""
        shown = shown_line(repr(job_id), 160)
        super().__init__(f"no job {shown}{where}; `{RUN} jobctl list --stack <stack>` shows the stack's jobs")


class WaitTimeout(JobError):
    def __init__(self, job_id: str, last: JobStatus, timeout: float):
        self.job_id, self.last = job_id, last
        super().__init__(f"job {job_id} still {last} after {timeout:g}s")


class DashboardError(JobError):
    """Any other failed Job API request."""


class DuplicateSubmission(DashboardError):
    """A submission id Ray already has: someone submitted this very job first."""

    def __init__(self, job_id: str, address: str):
        super().__init__(f"Ray job {job_id} already exists at {address}")
        self.job_id = job_id


_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://")
"""RFC 3986's scheme, then `//`. Not `urlsplit`: it ends the netloc at the first `/`, so with a password that holds
`//` (`http://admin:pw//x@host`) it would take `admin:pw` for the host and leave the rest in the path."""


def redacted(text: str) -> str:
    """A URL as messages show it: everything between the scheme and the last `@` (the userinfo, whatever `/`, `#`,
    `?` or `//` a password holds) masked as `***`, no query or fragment, a path part that looks like a credential not
    shown, and one bounded line (a control character escaped)."""
    scheme = _SCHEME.match(text)
    prefix = scheme.group() if scheme else ""
    rest = text[len(prefix) :]
    if "@" in rest:
        rest = "***@" + rest.rpartition("@")[2]
    rest = re.split(r"[?#]", rest, maxsplit=1)[0]
    rest = "/".join("***" if looks_like_credential(part) else part for part in rest.split("/"))
    return shown_line(prefix + rest, 300)
