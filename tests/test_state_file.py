"""What the watcher saw across its restarts (workloads/recovery/state_file.py) decides what it does next."""

from __future__ import annotations

import dataclasses
import json

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


def _state_text(**fields) -> str:
    whole = {"spec_hash": "h" * 64, "submission_id": "s", "attempt": 2, "restarts": 1, **fields}
    return json.dumps(whole, allow_nan=True)


@pytest.mark.parametrize(
    "text",
    [
        "[]",
        '"state"',
        "null",
        _state_text(attempt="two"),
        _state_text(attempt=float("nan")),
        _state_text(restarts=True),
        _state_text(final="yes"),
        _state_text().replace('"restarts": 1', '"restarts": 1e309'),
        _state_text().replace('"restarts": 1', '"restarts": 1' + "0" * 5000),
        "[" * 100_000,
    ],
    ids=["list", "string", "null", "text", "nan", "bool", "final-text", "1e309", "5000-digits", "deep"],
)
def test_a_state_file_of_the_wrong_shape_is_read_as_no_state_not_a_traceback(text, tmp_path):
    path = tmp_path / "s.json"
    path.write_text(text)
    assert StateFile(path).load("h" * 64) is None
    path.write_text(_state_text())  # the same file of the right shape is read
    assert StateFile(path).load("h" * 64).attempt == 2


def test_a_state_file_that_is_a_fifo_or_a_device_is_read_as_no_state_without_waiting(tmp_path):
    import os
    import threading

    fifo = tmp_path / "s.fifo"
    os.mkfifo(fifo)
    for path in (fifo, "/dev/zero", tmp_path):
        found: list = []
        reader = threading.Thread(target=_load_into, args=(found, path), daemon=True)
        reader.start()
        reader.join(10)
        assert not reader.is_alive() and found == [None], path


def _load_into(found: list, path) -> None:
    found.append(StateFile(path).load("h" * 64))
