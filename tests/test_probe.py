"""The acceptance gate's probe on a node (workloads/gate/probe.py): which NCCL lines it keeps from the
per-GPU processes' logs (recorded real ones), and the whole logs it copies only when asked."""

from __future__ import annotations

import json
from pathlib import Path

from gate_support import cluster_plan, nccl_log

from workloads import gate
from workloads.gate import probe, verdict

GIB_LOG = nccl_log("gib_a4_2x8.log")
# Captured from real runs of the gate's rank process on one H200 with NCCL 2.28.9 (tests/nccl_logs/README.md).
H200_RANK_LOG = nccl_log("h200-1gpu-nccl-2.28.9-gate-rank-socket.log")
H200_KEPT_LOG = nccl_log("h200-1gpu-nccl-2.28.9-socket.log")
H200_NO_PLUGIN_LOG = nccl_log("h200-1gpu-nccl-2.28.9-gate-rank-nccl-net-gib-no-plugin.log")


def test_only_the_lines_the_verdict_reads_are_kept_from_a_process_log(tmp_path):
    (tmp_path / "nccl.host.1.log").write_text(GIB_LOG + "host:1:1 [0] NCCL INFO cudaDriverVersion 12090\n")
    kept = probe._nccl_lines(tmp_path)
    assert "Using network gIB" in kept and "via NET/gIB/0/GDRDMA" in kept and "cudaDriverVersion" not in kept
    assert gate.parse_nccl_log(kept).networks == {"gIB": 16}


def without_prefix(lines: str) -> list[str]:
    """NCCL INFO lines without their `<host>:<pid>:<tid> [<dev>]` prefix (pids differ between runs)."""
    return [line.split(" NCCL ", 1)[1] for line in lines.splitlines() if " NCCL " in line and not line.startswith("#")]


def test_the_lines_kept_from_a_real_rank_log_are_those_an_earlier_real_run_kept(tmp_path):
    (tmp_path / "nccl.vm.687.log").write_text(H200_RANK_LOG)
    kept = probe._nccl_lines(tmp_path)
    assert without_prefix(kept) == without_prefix(H200_KEPT_LOG)
    assert "Init COMPLETE" not in kept and "Channel 00/64" not in kept
    assert (
        verdict.net_check(gate.parse_nccl_log(kept), "gIB")
        == verdict.net_check(gate.parse_nccl_log(H200_KEPT_LOG), "gIB")
        == "NCCL used the Socket transport, not gIB"
    )


def test_a_real_rank_told_to_use_gib_without_the_plugin_cannot_prove_gib_and_keeps_nccls_warning(tmp_path):
    info = gate.parse_nccl_log(H200_NO_PLUGIN_LOG)
    assert info.networks == {} and info.versions == {"2.28.9+cuda13.0"}
    (tmp_path / "nccl.vm.744.log").write_text(H200_NO_PLUGIN_LOG)
    kept = probe._nccl_lines(tmp_path)
    assert "NCCL WARN Failed to initialize any NET plugin" in kept
    # What the rank process reported in that run (its collective_error, as torch 2.11 words it).
    rank = {
        "node_rank": 0,
        "rank": 0,
        "device_ok": True,
        "device_name": "NVIDIA H200",
        "collective_error": "DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:93, "
        "invalid usage",
    }
    plan = cluster_plan(node_count=1, gpus_per_node=1, gpu_name="H200", busbw_floor_gbps=0.0)
    check = gate.fabric_from(plan, [{"ranks": [rank], "nccl_log": kept}], [rank], 1)
    assert not check.ok and check.numbers["network"] is None
    assert check.summary.startswith(
        "all_gather: no 'Using network' line in the NCCL INFO log: cannot prove that gIB was used; 1 distinct "
        "collective error(s)"
    )


def test_the_probe_copies_the_whole_nccl_logs_only_when_asked(tmp_path, monkeypatch):
    """`NodeProbe.ranks(keep_nccl_logs=...)` (tools/gate_vs_nccl_tests.py); the GPU process is replaced
    by one that writes the real H200 log where NCCL_DEBUG_FILE points and a report where the spec says."""
    import subprocess
    import types

    class RankProcess:
        returncode = 0

        def __init__(self, argv, env, **_kw):
            spec = json.loads(Path(argv[-1]).read_text())
            work_dirs.add(Path(env["NCCL_DEBUG_FILE"]).parent)
            Path(env["NCCL_DEBUG_FILE"].replace("%h", "vm").replace("%p", str(spec["local_rank"]))).write_text(
                H200_RANK_LOG
            )
            Path(spec["out"]).write_text(json.dumps({"rank": spec["rank"], "node_rank": 0, "device_ok": True}))

        def wait(self, timeout=None):
            return 0

        def poll(self):
            return 0

    work_dirs: set[Path] = set()
    monkeypatch.setattr(
        probe,
        "subprocess",
        types.SimpleNamespace(Popen=RankProcess, TimeoutExpired=subprocess.TimeoutExpired, STDOUT=subprocess.STDOUT),
    )
    plan = cluster_plan(node_count=1, gpus_per_node=2).to_dict()
    keep = tmp_path / "kept"
    keep.mkdir()
    result = gate.NodeProbe().ranks(plan, 0, "127.0.0.1", 1, 5.0, keep_nccl_logs=str(keep))
    assert sorted(p.name for p in keep.iterdir()) == ["nccl.vm.0.log", "nccl.vm.1.log"]
    assert (keep / "nccl.vm.1.log").read_text() == H200_RANK_LOG
    assert gate.parse_nccl_log(result["nccl_log"]).networks == {"Socket": 2}
    gate.NodeProbe().ranks(plan, 0, "127.0.0.1", 1, 5.0)  # the cluster's call: nothing kept
    assert len(work_dirs) == 2 and not any(d.exists() for d in work_dirs)
    assert len(list(keep.iterdir())) == 2
