"""The mark that `pulumi destroy` has begun: once it is set, nothing starts an attempt of the run.

On a destroy the Ray head and the preemption watcher stay up through the Lustre export (the in-cluster
objects are `deleted_with` the cluster, __main__.py), and a watcher in its backoff would resubmit an
attempt, or clean a partial save, in `checkpoints/` while the export copies it. The job submission's
delete (`workloads.hook.JobSubmissionProvider.delete`, which Pulumi runs before the Lustre guard's
export) sets the mark first, then stops every attempt; every submission of an attempt
(`workloads.submit.submit_attempt`: the deploy, `python -m jobctl`, the watcher) and the watcher's
resubmission path, before it touches `checkpoints/` (the first hold, `workloads/recovery/holds.py`
`not_destroying`), refuse while it is there.

The mark is a Ray job, `<submission id>-destroying`, whose entrypoint does nothing: it lives where every
submitter already looks (the Job API of the one Ray head), needs no Lustre write from the user's machine
and no Kubernetes call, and where a part is already gone it is not needed: without the cluster or the Ray
head nothing can submit. It ends with the Ray head; a `pulumi up` that submits the job again
(`JobSubmissionProvider.create`/`update`) removes it first, so a destroy that stopped half-way and is
followed by a deploy runs again. Only on a real cluster: the head keeps its job table until it restarts
(no GCS fault tolerance here), so a head restarted during the destroy forgets the mark; its attempts were
stopped with it.
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
    mark = mark_id(submission_id)
    return any(j.submission_id == mark for j in submit._guard(client.get_address(), client.list_jobs))


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
        submit._guard(
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
        submit._guard(client.get_address(), lambda: client.delete_job(job_id), job_id)
