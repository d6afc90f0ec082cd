"""The acceptance gate's driver (workloads/gate/driver.py): which Ray nodes it probes, the storage phase's
figures and pairing of writers and readers, and the real gate orchestration on the session's local Ray
head (gloo on the CPU, a temporary directory as the mount)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from gate_support import cluster_plan, cpu_plan

from workloads import gate
from workloads import submit as jobs
from workloads.gate import driver, storage_io
from workloads.run_owner import GateSetup, submit_gated


def test_worker_nodes_are_the_alive_nodes_with_all_the_gpus_a_probe_takes():
    nodes = [
        {"NodeID": "head", "Alive": True, "NodeManagerAddress": "10.0.0.2", "Resources": {"CPU": 8}},
        {"NodeID": "b", "Alive": True, "NodeManagerAddress": "10.0.0.9", "Resources": {"GPU": 8}},
        {"NodeID": "a", "Alive": True, "NodeManagerAddress": "10.0.0.3", "Resources": {"GPU": 8}},
        {"NodeID": "dead", "Alive": False, "NodeManagerAddress": "10.0.0.4", "Resources": {"GPU": 8}},
        {"NodeID": "half", "Alive": True, "NodeManagerAddress": "10.0.0.5", "Resources": {"GPU": 4}},
    ]
    assert [n["NodeID"] for n in driver.worker_nodes(cluster_plan(), nodes)] == ["a", "b"]


def test_worker_nodes_of_a_cpu_plan_are_those_with_any_of_the_resource_sorted_by_address():
    plan = cpu_plan(Path("/tmp"), gpus_per_node=2)
    nodes = [
        {"NodeID": "a", "Alive": True, "NodeManagerAddress": "10.0.0.9", "Resources": {"CPU": 0.5}},
        {"NodeID": "z", "Alive": True, "NodeManagerAddress": "10.0.0.3", "Resources": {"CPU": 1}},
        {"NodeID": "none", "Alive": True, "NodeManagerAddress": "10.0.0.1", "Resources": {"memory": 1}},
        {"NodeID": "y", "Alive": True, "Resources": {"CPU": 4}},  # no address: sorts first
    ]
    assert [n["NodeID"] for n in driver.worker_nodes(plan, nodes)] == ["y", "z", "a"]
    one_gpu = cluster_plan(gpus_per_node=1)
    assert driver.worker_nodes(one_gpu, [{"NodeID": "c", "Alive": True, "Resources": {"CPU": 8}}]) == []


class FakeProbe:
    """A probe actor whose writes and reads return what the test says, recording each call."""

    def __init__(self, calls: list, write: dict, read: dict):
        self.write = SimpleNamespace(remote=lambda *args: calls.append(("write", *args)) or write)
        self.read = SimpleNamespace(remote=lambda *args: calls.append(("read", *args)) or read)


def io_result(seconds: float, *errors: str) -> dict:
    return {"bytes": 10**9, "seconds": seconds, "errors": list(errors)}


def test_the_storage_figures_are_all_bytes_over_the_slowest_node_within_the_phases_shares(tmp_path, monkeypatch):
    import ray

    timeouts: list = []
    monkeypatch.setattr(ray, "get", lambda refs, timeout=None: timeouts.append(timeout) or refs)
    calls: list = []
    probes = [FakeProbe(calls, io_result(s), io_result(r)) for s, r in ((2.0, 7.0), (3.0, 1.0))]
    plan = cpu_plan(tmp_path, node_count=2)
    run_dir = tmp_path / "runs" / "gate-1"  # its parent does not exist yet
    check = driver._storage(plan, probes, run_dir, lambda share: 100 * share)
    # 2 GB written in 3 s (the slower node), 2 GB read in 7 s.
    assert (check.ok, check.numbers["writeGBps"], check.numbers["readGBps"]) == (True, 0.667, 0.286), check
    assert timeouts == [50.0, 90.0]
    assert {call[1] for call in calls} == {str(run_dir)}
    # A run directory that exists already is another run's: not reused.
    again = driver._storage(plan, probes, run_dir, lambda share: 100 * share)
    assert again.summary == f"Lustre at {tmp_path}: cannot create {run_dir}: File exists"


def test_storage_io_errors_and_a_timeout_fail_the_check_naming_the_first(tmp_path, monkeypatch):
    import ray

    monkeypatch.setattr(ray, "get", lambda refs, timeout=None: refs)
    plan = cpu_plan(tmp_path)
    calls: list = []
    failing = [
        FakeProbe(calls, io_result(1.0, "node0-0.bin: No space left on device"), io_result(1.0, "node1-1.bin: x"))
    ]
    check = driver._storage(plan, failing, tmp_path / "a", lambda share: 1.0)
    assert (check.ok, check.summary) == (
        False,
        f"Lustre at {tmp_path}: 2 I/O error(s), e.g. node0-0.bin: No space left on device",
    )

    def timed_out(refs, timeout=None):
        raise ray.exceptions.GetTimeoutError("timed out")

    monkeypatch.setattr(ray, "get", timed_out)
    check = driver._storage(plan, [FakeProbe(calls, io_result(1.0), io_result(1.0))], tmp_path / "b", lambda s: 1.0)
    assert check == gate.Check(
        "storage",
        False,
        f"Lustre at {tmp_path}: timed out",
        {"writeGBps": None, "readGBps": None, "expectedGBps": 0.002, "floorGBps": 0.001},
    )


def test_every_storage_read_is_of_files_another_node_wrote(tmp_path, monkeypatch):
    """`_storage` hands node i the files node (i+1) % n wrote, so no node reads its own page cache (that a
    read opens the named node's files is tests/test_storage_io.py's)."""
    from types import SimpleNamespace

    import ray

    calls: list[tuple[str, int, int]] = []

    def probe(i: int):
        def run(kind):
            def remote(directory, node_rank, size, streams):
                calls.append((kind, i, node_rank))
                return storage_io.parallel_io(Path(directory), node_rank, size, streams, write=kind == "write")

            return SimpleNamespace(remote=remote)

        return SimpleNamespace(write=run("write"), read=run("read"))

    monkeypatch.setattr(ray, "get", lambda refs, timeout=None: refs)
    plan = cpu_plan(tmp_path, node_count=3, storage_bytes_per_node=storage_io.BLOCK * 2, storage_streams=2)
    check = driver._storage(plan, [probe(i) for i in range(3)], tmp_path / "run", lambda share: 60.0)
    assert check.numbers["writeGBps"] > 0 and check.numbers["readGBps"] > 0, check.summary
    reads = [(reader, owner) for kind, reader, owner in calls if kind == "read"]
    assert reads == [(0, 1), (1, 2), (2, 0)] and all(reader != owner for reader, owner in reads)


def jobs_spec(stack: str):
    from workloads.job_spec import JobSpec

    return JobSpec.create(
        stack=stack, recipe="r", entrypoint=f"{shlex.quote(sys.executable)} -c 'print(1)'", runtime_env={}
    )


def test_the_gate_runs_end_to_end_on_a_local_head_and_a_failing_one_stops_the_submission(head, client, tmp_path):
    """GPUs and fabric pass for real (two gloo ranks), storage fails on an unreachable floor; under
    enforce, the owner's submission raises before anything is submitted, and the gate's files are gone."""
    mount = tmp_path / "lustre"
    mount.mkdir()
    plan = cpu_plan(mount, storage_expected_gbps=2000.0, storage_floor_gbps=1000.0)
    lines: list[str] = []
    spec = jobs_spec("t-gate-e2e")

    with pytest.raises(gate.GateFailed) as raised:
        submit_gated(client, spec, GateSetup("enforce", plan), on_line=lines.append, poll_interval=0.2)
    report = raised.value.report
    lines.extend(report.lines())
    assert [c.name for c in report.checks] == ["gpus", "fabric", "storage"]
    gpus, fabric, storage = report.checks
    assert gpus.ok and gpus.numbers == {"healthyGpus": 2, "expectedGpus": 2}, gpus.summary
    assert fabric.ok and fabric.numbers["busbwGBps"] > 0, fabric.summary
    assert not storage.ok and 0 < storage.numbers["writeGBps"] < 1000 and 0 < storage.numbers["readGBps"] < 1000
    assert str(raised.value).startswith("acceptance gate FAILED: storage: Lustre write ")
    assert "below the floor 1000 GB/s" in str(raised.value) and 0 < report.seconds < plan.timeout_s
    assert jobs.list_jobs(client, "t-gate-e2e") == []  # the training job was never submitted
    assert list(mount.iterdir()) == []  # the gate's files are cleaned up
    assert any(line.startswith("gate cost: 1 GPU node(s) x ") for line in lines)
