"""What the watcher saw across its restarts (workloads/recovery/state_file.py) decides what it does next."""

from __future__ import annotations

import dataclasses

import pytest
from gate_support import FakeClient, python_job
from recovery_support import FAST, info

from workloads.recovery import Action, StateFile, Watcher
from workloads.recovery.state_file import Seen

pytestmark = pytest.mark.filterwarnings("ignore:ssl=None is deprecated:DeprecationWarning")


def test_what_the_state_file_says_decides_after_a_restart_with_an_empty_job_table(tmp_path):
    spec = python_job("t-state", "pass")
    state = StateFile(tmp_path / "t-state.json")
    policy = dataclasses.replace(FAST, resubmit_missing=True)
    # Stopped on purpose before the head restarted: not brought back.
    state.save(Seen(spec.spec_hash, spec.submission_id, 1, 0, status="STOPPED", final=True))
    client = FakeClient([])
    assert Watcher(client, spec, policy, state=state).step().action is Action.DONE and not client.submitted
    # Another spec's record is ignored; with job.submit on, the missing job is submitted as attempt 1.
    state.save(Seen("0" * 64, "other", 5, 3))
    decision = Watcher(client, spec, policy, state=state).step()
    assert decision.action is Action.RESUBMIT and client.submitted[0]["submission_id"] == spec.submission_id
    assert StateFile(state.path).load(spec.spec_hash).attempt == 1
    # Another spec's job running on the stack (a submission by hand): ours is not added beside it.
    other = python_job("t-state", "pass  # v2")
    busy = FakeClient([info("RUNNING", sid=other.submission_id, meta=dict(other.metadata))])
    decision = Watcher(busy, spec, policy).step()
    assert decision.action is Action.WAIT and other.submission_id in decision.reason and not busy.submitted
    # A torn or foreign file is no record (and no crash).
    state.path.write_text("{not json")
    assert state.load(spec.spec_hash) is None
