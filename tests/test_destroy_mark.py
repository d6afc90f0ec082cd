"""The mark that `pulumi destroy` has begun (workloads/destroy_mark.py): set by the job submission's delete
before the Lustre export, it stops the watcher and every other submitter from starting an attempt."""

from __future__ import annotations

import pytest
from gate_support import FakeClient, python_job
from ray.job_submission import JobDetails

from workloads import destroy_mark, run_owner
from workloads.job_spec import META_ATTEMPT
from workloads.recovery import Action, Cause, RecoveryPolicy, Watcher


def info(status: str, *, sid: str, meta: dict) -> JobDetails:
    return JobDetails(type="SUBMISSION", entrypoint="true", status=status, submission_id=sid, metadata=meta)


class Head(FakeClient):
    """The fake Job API with what the mark needs: a submitted job is listed; `delete_job` removes one."""

    def submit_job(self, **kwargs) -> str:
        if any(j.submission_id == kwargs["submission_id"] for j in self.jobs):
            raise RuntimeError(
                f"Request failed with status code 400: Job with submission_id {kwargs['submission_id']} already exists."
            )
        self.jobs.append(info("SUCCEEDED", sid=kwargs["submission_id"], meta=kwargs.get("metadata") or {}))
        return super().submit_job(**kwargs)

    def delete_job(self, job_id: str) -> bool:
        self.jobs = [j for j in self.jobs if j.submission_id != job_id]
        return True


def test_the_mark_is_a_job_of_its_own_id_that_no_listing_of_the_run_shows():
    from workloads import submit

    head = Head([])
    assert not destroy_mark.destroy_begun(head, "dev-job-1")
    destroy_mark.mark_destroy_begun(head, "dev-job-1")
    destroy_mark.mark_destroy_begun(head, "dev-job-1")  # a second destroy finds it there
    assert destroy_mark.destroy_begun(head, "dev-job-1") and not destroy_mark.destroy_begun(head, "dev-job-2")
    assert [j.submission_id for j in head.jobs] == ["dev-job-1-destroying"]
    assert submit.list_jobs(head) == [], "status, the ledger and the CLI list only the run's own jobs"
    destroy_mark.clear_destroy_mark(head, "dev-job-1")
    assert not destroy_mark.destroy_begun(head, "dev-job-1")


def test_a_watcher_in_its_backoff_starts_no_attempt_and_cleans_nothing_once_destroy_has_begun(tmp_path):

    spec = python_job("t-destroy", "pass")
    running = info("RUNNING", sid=spec.submission_id, meta={**spec.metadata, META_ATTEMPT: "1"})
    head = Head([running])
    now = [100.0]
    watcher = Watcher(head, spec, RecoveryPolicy(60, 5, 30, 30), clock=lambda: now[0])
    assert watcher.step().action is Action.WAIT
    head.jobs = []  # preempted: the head lost the job; the watcher backs off
    lost = watcher.step()
    assert lost.action is Action.WAIT and lost.cause is Cause.PREEMPTION
    destroy_mark.mark_destroy_begun(head, spec.submission_id)  # pulumi destroy, before the Lustre export
    head.submitted.clear()
    now[0] = 131.0
    held = watcher.step()
    assert held.action is Action.WAIT and "pulumi destroy has begun" in held.reason, held
    assert head.submitted == [], "an attempt started while the export copies checkpoints/"


def test_no_deploy_or_cli_submission_starts_a_run_once_destroy_has_begun():
    spec = python_job("t-destroy-cli", "pass")
    head = Head([])
    destroy_mark.mark_destroy_begun(head, spec.submission_id)
    head.submitted.clear()
    with pytest.raises(destroy_mark.DestroyBegun, match="a `pulumi up` that submits the job removes the mark"):
        run_owner.submit_gated(head, spec, run_owner.GateSetup("off", None))
    assert head.submitted == []
