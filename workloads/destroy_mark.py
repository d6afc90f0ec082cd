"""The mark that `pulumi destroy` has begun: once it is set, nothing starts an attempt of the run.

Why: the Ray head and the watcher stay up through the Lustre export, and a watcher in its backoff
would resubmit, or clean a partial save, while the export copies `checkpoints/`. The job submission's
delete (`workloads.hook.JobSubmissionProvider.delete`, before the Lustre guard's export) sets the mark
and then stops every attempt; every submission (`workloads.submit.submit_attempt`) and the watcher's
first hold (`workloads/recovery/holds.py` `not_destroying`) refuse while it is there. The mark is a
no-op Ray job `<submission id>-destroying`: it lives where every submitter already looks, and ends
with the head; `JobSubmissionProvider.create`/`update` removes it, so a deploy after a stopped destroy
runs again. A head restarted mid-destroy forgets it (no GCS fault tolerance), its attempts stopped too.
"""

from __future__ import annotations

import contextlib
from typing import Any

from workloads import submit

SUFFIX = "-destroying"
META_DESTROYING = "nemo_rl_gke_destroying"
"""The mark's metadata key: no `META_STACK`, so `submit.list_jobs` (status, ledger, CLI) never shows it."""


class DestroyBegun(submit.JobError):
    """An attempt was about to start after `pulumi destroy` began."""


def mark_id(submission_id: str) -> str:
    """The mark's Ray job id (never an attempt id: those are `<id>` and `<id>-r<N>`, `submit.attempt_id`)."""
    return f"{submission_id}{SUFFIX}"


def destroy_begun(client: Any, submission_id: str) -> bool:
    """Whether the mark is on the Ray head (in its job list, as `submit` lists the jobs it owns)."""
    return marked(submit.all_jobs(client), submission_id)


def marked(jobs: Any, submission_id: str) -> bool:
    """Whether the mark is among `jobs` (a job list already read: the watcher's holds share one)."""
    mark = mark_id(submission_id)
    return any(j.submission_id == mark for j in jobs)


def refuse_if_destroying(client: Any, submission_id: str) -> None:
    """Raise `DestroyBegun` while the mark is there (one line for each path that starts an attempt)."""
    if destroy_begun(client, submission_id):
        raise DestroyBegun(
            f"pulumi destroy has begun (Ray job {mark_id(submission_id)}): no attempt of {submission_id} is "
            "started; a `pulumi up` that submits the job removes the mark"
        )


def mark_destroy_begun(client: Any, submission_id: str) -> None:
    """Set the mark (idempotent: a second destroy finds it there)."""
    with contextlib.suppress(submit.DashboardError):  # "already exists": the mark is set
        submit.guard(
            client.get_address(),
            lambda: client.submit_job(
                entrypoint="true", submission_id=mark_id(submission_id), metadata={META_DESTROYING: "true"}
            ),
        )
    if not destroy_begun(client, submission_id):
        raise DestroyBegun(f"could not set the destroy mark {mark_id(submission_id)} on the Ray head")


def clear_destroy_mark(client: Any, submission_id: str) -> None:
    """Remove the mark: wait for its no-op to end (Ray deletes only ended jobs), then delete it."""
    job_id = mark_id(submission_id)
    with contextlib.suppress(submit.UnknownJob):
        submit.wait(client, job_id, timeout=60.0, poll_interval=0.5)
        submit.guard(client.get_address(), lambda: client.delete_job(job_id), job_id)
