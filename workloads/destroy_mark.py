"""The mark that `pulumi destroy` has begun: once set, nothing starts an attempt of the run, so nothing
resubmits or cleans a partial save while the Lustre export copies `checkpoints/`. The job submission's
delete sets it (then stops every attempt), its create/update removes it. It is a no-op Ray job
`<submission id>-destroying`, where every submitter already looks; a restarted head forgets it.
"""

from __future__ import annotations

import contextlib
from typing import Any

from workloads import submit

SUFFIX = "-destroying"
META_DESTROYING = "nemo_rl_gke_destroying"
"""No `META_STACK`: `submit.list_jobs` never shows the mark."""


class DestroyBegun(submit.JobError):
    """An attempt was about to start after `pulumi destroy` began."""


def mark_id(submission_id: str) -> str:
    return f"{submission_id}{SUFFIX}"


def destroy_begun(client: Any, submission_id: str) -> bool:
    return marked(submit.all_jobs(client), submission_id)


def marked(jobs: Any, submission_id: str) -> bool:
    """Whether the mark is among `jobs` (a job list already read)."""
    mark = mark_id(submission_id)
    return any(j.submission_id == mark for j in jobs)


def refuse_if_destroying(client: Any, submission_id: str) -> None:
    if destroy_begun(client, submission_id):
        raise DestroyBegun(
            f"pulumi destroy has begun (Ray job {mark_id(submission_id)}): no attempt of {submission_id} is "
            "started; a `pulumi up` that submits the job removes the mark"
        )


def mark_destroy_begun(client: Any, submission_id: str) -> None:
    """Set the mark (idempotent)."""
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
    """Remove the mark once its no-op has ended (Ray deletes only ended jobs)."""
    job_id = mark_id(submission_id)
    with contextlib.suppress(submit.UnknownJob):
        submit.wait(client, job_id, timeout=60.0, poll_interval=0.5)
        submit.guard(client.get_address(), lambda: client.delete_job(job_id), job_id)
