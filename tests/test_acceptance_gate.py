"""The acceptance gate: its verdicts on recorded NCCL logs and measured numbers, and the real gate
orchestration on the session's local Ray head (gloo on the CPU, a temporary directory as the mount)."""

from __future__ import annotations

import dataclasses
import io
import json
import shlex
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from gate_support import cluster_plan, cpu_plan, nccl_log, two_node_report

from jobctl import cli
from jobctl import commands as cli_commands
from workloads import acceptance_gate as gate
from workloads import exit_codes
from workloads import submit as jobs

GIB_LOG = nccl_log("gib_a4_2x8.log")
SOCKET_LOG = nccl_log("socket_fallback_a3u_2x8.log")
# Captured from real runs of the gate's rank process on one H200 with NCCL 2.28.9 (tests/nccl_logs/README.md).
H200_RANK_LOG = nccl_log("h200-1gpu-nccl-2.28.9-gate-rank-socket.log")
H200_KEPT_LOG = nccl_log("h200-1gpu-nccl-2.28.9-socket.log")
H200_NO_PLUGIN_LOG = nccl_log("h200-1gpu-nccl-2.28.9-gate-rank-nccl-net-gib-no-plugin.log")


# ------------------------------------------------------------------------------------ NCCL logs


def test_a_log_of_the_gib_plugin_shows_every_communicator_and_channel_on_gib_with_gpudirect():
    info = gate.parse_nccl_log(GIB_LOG)
    assert info.networks == {"gIB": 16} and info.channel_nets == {"gIB": 64} and info.gdr_channels == 64
    assert info.versions == {"2.27.7+cuda12.9"}
    assert gate.net_check(info, "gIB") is None
    assert gate.net_check(info, "gib") is None  # NCCL matches plugin names case-insensitively


def test_a_socket_fallback_log_fails_the_net_check_naming_the_transport():
    info = gate.parse_nccl_log(SOCKET_LOG)
    assert info.networks == {"Socket": 16} and info.channel_nets == {"Socket": 32} and info.gdr_channels == 0
    assert gate.net_check(info, "gIB") == "NCCL used the Socket transport, not gIB"


def test_a_socket_fallback_fails_the_fabric_even_at_a_bandwidth_above_the_floor():
    check = gate.check_fabric(cluster_plan(), 300.0, SOCKET_LOG)
    assert not check.ok and "Socket" in check.summary and check.numbers["network"] == "Socket"
    assert gate.check_fabric(cluster_plan(), 300.0, GIB_LOG).ok


def test_a_log_that_never_says_which_network_cannot_prove_gib():
    only_channels = "\n".join(line for line in GIB_LOG.splitlines() if "Using network" not in line)
    assert "cannot prove" in gate.net_check(gate.parse_nccl_log(only_channels), "gIB")
    assert "cannot prove" in gate.check_fabric(cluster_plan(), 300.0, "").summary


def test_gib_communicators_with_a_channel_over_sockets_fail():
    mixed = GIB_LOG + "host:1:2 [0] NCCL INFO Channel 03/0 : 0[0] -> 8[0] [send] via NET/Socket/0\n"
    assert gate.net_check(gate.parse_nccl_log(mixed), "gIB") == "NCCL channels ran over NET/Socket, not NET/gIB"


def test_only_the_lines_the_verdict_reads_are_kept_from_a_process_log(tmp_path):
    (tmp_path / "nccl.host.1.log").write_text(GIB_LOG + "host:1:1 [0] NCCL INFO cudaDriverVersion 12090\n")
    kept = gate._nccl_lines(tmp_path)
    assert "Using network gIB" in kept and "via NET/gIB/0/GDRDMA" in kept and "cudaDriverVersion" not in kept
    assert gate.parse_nccl_log(kept).networks == {"gIB": 16}


def without_prefix(lines: str) -> list[str]:
    """NCCL INFO lines without their `<host>:<pid>:<tid> [<dev>]` prefix (pids differ between runs)."""
    return [line.split(" NCCL ", 1)[1] for line in lines.splitlines() if " NCCL " in line and not line.startswith("#")]


def test_a_real_h200_rank_without_gib_is_read_as_socket_and_fails_the_fabric_naming_it():
    info = gate.parse_nccl_log(H200_RANK_LOG)
    assert info.networks == {"Socket": 1} and info.versions == {"2.28.9+cuda13.0"}
    # One rank: its "Channel 00/64 : 0" lines are rings of one, not NET connections.
    assert info.channel_nets == {} and info.gdr_channels == 0
    check = gate.check_fabric(
        cluster_plan(node_count=1, gpus_per_node=1, gpu_name="H200", busbw_floor_gbps=0.0), 0.0, H200_RANK_LOG
    )
    assert not check.ok and check.summary == "all_gather busbw 0 GB/s: NCCL used the Socket transport, not gIB"
    assert check.numbers["network"] == "Socket" and check.numbers["gdrChannels"] == 0


def test_the_lines_kept_from_a_real_rank_log_are_those_an_earlier_real_run_kept(tmp_path):
    (tmp_path / "nccl.vm.687.log").write_text(H200_RANK_LOG)
    kept = gate._nccl_lines(tmp_path)
    assert without_prefix(kept) == without_prefix(H200_KEPT_LOG)
    assert "Init COMPLETE" not in kept and "Channel 00/64" not in kept
    assert (
        gate.net_check(gate.parse_nccl_log(kept), "gIB")
        == gate.net_check(gate.parse_nccl_log(H200_KEPT_LOG), "gIB")
        == "NCCL used the Socket transport, not gIB"
    )


def test_a_real_rank_told_to_use_gib_without_the_plugin_cannot_prove_gib_and_keeps_nccls_warning(tmp_path):
    info = gate.parse_nccl_log(H200_NO_PLUGIN_LOG)
    assert info.networks == {} and info.versions == {"2.28.9+cuda13.0"}
    (tmp_path / "nccl.vm.744.log").write_text(H200_NO_PLUGIN_LOG)
    kept = gate._nccl_lines(tmp_path)
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
    check = gate._fabric_from(plan, [{"ranks": [rank], "nccl_log": kept}], [rank], 1)
    assert not check.ok and check.numbers["network"] is None
    assert check.summary.startswith(
        "all_gather: no 'Using network' line in the NCCL INFO log: cannot prove that gIB was used; 1 distinct "
        "collective error(s)"
    )


def test_the_probe_copies_the_whole_nccl_logs_only_when_asked(tmp_path, monkeypatch):
    """`NodeProbe.ranks(keep_nccl_logs=...)` (tools/gate_vs_nccl_tests.py); the GPU process is replaced
    by one that writes the real H200 log where NCCL_DEBUG_FILE points and a report where the spec says."""
    import json
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
        gate,
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


# ------------------------------------------------------------------------------------ numbers


def test_bus_bandwidth_is_computed_as_nccl_tests_does():
    # Google's published A3 Ultra row (data/acceptance_gate.yaml): all_gather of 1 GiB on 16 ranks in
    # 3105.7 us is algbw 345.74 GB/s, busbw 324.13 GB/s (the time is printed rounded to 0.1 us).
    algbw, busbw = gate.bus_bandwidth("all_gather", 1073741824, 3105.7e-6, 16)
    assert (algbw, busbw) == pytest.approx((345.74, 324.13), abs=0.015)
    assert gate.bus_bandwidth("all_reduce", 10**9, 1.0, 4) == (1.0, 1.5)  # 2(n-1)/n


def test_a_fabric_below_its_floor_fails_with_both_numbers():
    check = gate.check_fabric(cluster_plan(), 41.3, GIB_LOG)
    assert not check.ok and check.summary == "all_gather busbw 41.3 GB/s: below the floor 162.06 GB/s"
    assert check.numbers == {"busbwGBps": 41.3, "floorGBps": 162.06, "network": "gIB", "gdrChannels": 64}


def test_one_node_has_no_fabric_floor_but_still_needs_gib():
    plan = cluster_plan(node_count=1, busbw_floor_gbps=0.0)
    assert gate.check_fabric(plan, 620.0, GIB_LOG).ok
    assert not gate.check_fabric(plan, 620.0, SOCKET_LOG).ok


def test_missing_nodes_wrong_gpus_and_broken_gpus_are_each_named():
    def rank(node, i, name="NVIDIA B200", ok=True, **extra):
        return {
            "node_rank": node,
            "rank": node * 8 + i,
            "host": f"gpu-{node}",
            "device_name": name,
            "device_ok": ok,
            **extra,
        }

    healthy = [rank(n, i) for n in range(2) for i in range(8)]
    assert gate.check_gpus(cluster_plan(), healthy, 2).ok
    assert gate.check_gpus(cluster_plan(), healthy, 2).numbers == {"healthyGpus": 16, "expectedGpus": 16}
    wrong = healthy[:8] + [rank(1, i, name="NVIDIA H100 80GB HBM3") for i in range(8)]
    check = gate.check_gpus(cluster_plan(), wrong, 2)
    assert not check.ok and "gpu-1: 0 of 8 healthy B200 GPUs (saw NVIDIA H100 80GB HBM3)" in check.summary
    broken = healthy[:15] + [
        {"node_rank": 1, "rank": 15, "host": "gpu-1", "device_error": "RuntimeError: CUDA error: ECC"}
    ]
    assert (
        "gpu-1: 7 of 8 healthy B200 GPUs (saw RuntimeError: CUDA error: ECC)"
        in gate.check_gpus(cluster_plan(), broken, 2).summary
    )
    assert gate.check_gpus(cluster_plan(), healthy[:8], 1).summary.startswith("1 of 2 worker nodes in the Ray cluster")


def test_the_slowest_rank_and_every_failure_of_the_per_gpu_processes_reach_the_fabric_verdict():
    plan = cluster_plan(node_count=1, gpus_per_node=2, busbw_floor_gbps=0.0)
    ok = [{"node_rank": 0, "rank": r, "busbw_gbps": bw, "wrong": 0} for r, bw in ((0, 310.2), (1, 305.9))]
    assert gate._fabric_from(plan, [{"ranks": ok, "nccl_log": GIB_LOG}], ok, 1).numbers["busbwGBps"] == 305.9
    crashed = [
        ok[0],
        {"node_rank": 0, "rank": 1, "collective_error": "DistBackendError: NCCL error: remote process exited"},
    ]
    check = gate._fabric_from(plan, [{"ranks": crashed, "nccl_log": GIB_LOG}], crashed, 1)
    assert not check.ok and "1 distinct collective error(s), e.g. DistBackendError: NCCL error" in check.summary
    corrupt = [ok[0], {**ok[1], "wrong": 12}]
    assert (
        "12 wrong elements in the gathered data"
        in gate._fabric_from(plan, [{"ranks": corrupt, "nccl_log": GIB_LOG}], corrupt, 1).summary
    )
    lost = gate._fabric_from(plan, [{"ranks": [], "nccl_log": "", "timed_out": True}], [], 1)
    assert not lost.ok and "0 of 2 ranks finished the collective (timed out)" in lost.summary


def test_storage_below_its_floor_fails_naming_what_was_slow():
    check = gate.check_storage(cluster_plan(), 6.2, 1.1)
    assert not check.ok
    assert (
        check.summary == "Lustre write 6.2 GB/s, read 1.1 GB/s: read below the floor 4.395 GB/s (expected 8.789 GB/s)"
    )
    assert gate.check_storage(cluster_plan(), 6.2, 5.0).ok


def test_worker_nodes_are_the_alive_nodes_with_all_the_gpus_a_probe_takes():
    nodes = [
        {"NodeID": "head", "Alive": True, "NodeManagerAddress": "10.0.0.2", "Resources": {"CPU": 8}},
        {"NodeID": "b", "Alive": True, "NodeManagerAddress": "10.0.0.9", "Resources": {"GPU": 8}},
        {"NodeID": "a", "Alive": True, "NodeManagerAddress": "10.0.0.3", "Resources": {"GPU": 8}},
        {"NodeID": "dead", "Alive": False, "NodeManagerAddress": "10.0.0.4", "Resources": {"GPU": 8}},
        {"NodeID": "half", "Alive": True, "NodeManagerAddress": "10.0.0.5", "Resources": {"GPU": 4}},
    ]
    assert [n["NodeID"] for n in gate.worker_nodes(cluster_plan(), nodes)] == ["a", "b"]


# ------------------------------------------------------------------------------------ report and policy


def failed_report() -> gate.GateReport:
    return two_node_report(gate.check_fabric(cluster_plan(), 23.5, SOCKET_LOG))


def test_a_failed_gate_is_one_line_naming_what_failed_and_the_numbers():
    report = failed_report()
    assert not report.ok
    assert report.summary() == (
        "acceptance gate FAILED: fabric: all_gather busbw 23.5 GB/s: NCCL used the Socket transport, not gIB; "
        "below the floor 162.06 GB/s"
    )
    assert "\n" not in report.summary()
    assert report.cost_line() == "gate cost: 2 GPU node(s) x 131 s = 0.073 node-hours"


def test_the_report_survives_the_job_log_and_gives_the_stack_output():
    report = failed_report()
    log = (
        "some driver output\n"
        + "\n".join(report.lines())
        + "\n"
        + gate.RESULT_MARKER
        + __import__("json").dumps(report.to_dict())
        + "\n"
    )
    again = gate.parse_result(log)
    assert again == report
    assert again.outputs() == {
        "passed": False,
        "busbwGBps": 23.5,
        "busbwFloorGBps": 162.06,
        "lustreWriteGBps": 6.2,
        "lustreReadGBps": 5.0,
        "lustreFloorGBps": 4.395,
        "healthyGpus": 16,
        "seconds": 131.0,
        "nodeHours": 0.0728,
        "summary": report.summary(),
    }
    assert gate.parse_result("no marker here") is None


def test_enforce_raises_on_a_failed_gate_while_warn_and_off_do_not():
    report = failed_report()
    with pytest.raises(gate.GateFailed) as raised:
        gate.enforce(report, "enforce")
    assert str(raised.value) == report.summary()
    gate.enforce(report, "warn")
    gate.enforce(report, "off")
    passed = gate.GateReport((gate.Check("gpus", True, "ok"),), 1.0, 1)
    gate.enforce(passed, "enforce")
    could_not_run = gate.GateReport((), 0.0, 2, error="ModuleNotFoundError: No module named 'torch'")
    with pytest.raises(gate.GateFailed, match="could not run: ModuleNotFoundError"):
        gate.enforce(could_not_run, "enforce")


def test_the_plan_travels_as_one_shell_word_and_comes_back_equal():
    plan = cluster_plan(busbw_source="0.5 x 324.13 GB/s: it's a quote; $(not run)")
    words = shlex.split(gate.job_entrypoint(plan))
    assert words[:4] == ["python", "-m", "workloads.acceptance_gate", "run"] and len(words) == 5
    assert gate.GatePlan.decode(words[4]) == plan


def test_the_typical_duration_grows_with_what_the_storage_phase_moves():
    small = gate.estimated_seconds(cluster_plan())
    big = gate.estimated_seconds(cluster_plan(storage_bytes_per_node=16 << 30))
    assert 60 < small < big and big - small == pytest.approx(2 * 2 * 15 * (1 << 30) / (8.789e9), rel=1e-6)


def test_gb_per_second_keeps_one_decimal_from_100_and_three_significant_digits_below():
    assert [gate.gbps(v) for v in (320.44, 100.0, 41.3, 0.0123)] == ["320.4", "100.0", "41.3", "0.0123"]


def test_two_wrong_transports_or_channel_nets_are_both_named():
    two = "h:1:1 [0] NCCL INFO Using network Socket\nh:2:2 [0] NCCL INFO Using network IB\n"
    assert gate.net_check(gate.parse_nccl_log(two), "gIB") == "NCCL used the IB/Socket transport, not gIB"
    channels = GIB_LOG + "".join(
        f"h:1:2 [0] NCCL INFO Channel 0{i}/0 : 0[0] -> 8[0] [send] via NET/{net}/0\n"
        for i, net in enumerate(("Socket", "IB"))
    )
    assert gate.net_check(gate.parse_nccl_log(channels), "gIB") == "NCCL channels ran over NET/IB/Socket, not NET/gIB"
    # The fabric's numbers list every network the communicators used.
    assert gate.check_fabric(cluster_plan(), 300.0, GIB_LOG + SOCKET_LOG).numbers["network"] == "Socket,gIB"


def test_a_passing_fabric_is_one_line_naming_the_transport_and_the_floor():
    fabric = gate.check_fabric(cluster_plan(), 300.0, GIB_LOG)
    numbers = {"busbwGBps": 300.0, "floorGBps": 162.06, "network": "gIB", "gdrChannels": 64}
    assert fabric == gate.Check("fabric", True, "all_gather busbw 300.0 GB/s over gIB >= floor 162.06 GB/s", numbers)
    one_node = gate.check_fabric(cluster_plan(node_count=1, busbw_floor_gbps=0.0), 620.0, GIB_LOG)
    assert one_node.summary == "all_gather busbw 620.0 GB/s over gIB (one node: no floor)"
    gloo = gate.check_fabric(cluster_plan(expect_net=None, backend="gloo"), 300.0, "")
    assert gloo == gate.Check(
        "fabric",
        True,
        "all_gather busbw 300.0 GB/s (gloo) >= floor 162.06 GB/s",
        {"busbwGBps": 300.0, "floorGBps": 162.06},
    )
    nothing = gate.check_fabric(cluster_plan(), None, GIB_LOG)
    assert (nothing.ok, nothing.summary) == (False, "all_gather: no bandwidth measured")


def test_the_fabric_reports_the_nccl_and_gib_releases_and_fails_on_another_nccl_than_the_rows():
    # The log's processes loaded NCCL 2.27.7 with the gIB plugin (tests/nccl_logs/gib_a4_2x8.log).
    seen = {"ncclVersions": ["2.27.7"], "netPlugins": ["gIB v10"]}
    both = gate.check_fabric(cluster_plan(expect_nccl="2.27.7", expect_gib="v1.1.1"), 300.0, GIB_LOG)
    assert both.ok and both.numbers == {
        "busbwGBps": 300.0,
        "floorGBps": 162.06,
        "network": "gIB",
        "gdrChannels": 64,
        **seen,
        "expectedNccl": "2.27.7",
        "expectedGib": "v1.1.1",
    }
    nccl_only = gate.check_fabric(cluster_plan(expect_nccl="2.27.7"), 300.0, GIB_LOG)
    assert nccl_only.ok and nccl_only.numbers["expectedGib"] is None and nccl_only.numbers["ncclVersions"] == ["2.27.7"]
    other = gate.check_fabric(cluster_plan(expect_nccl="2.27.5"), 300.0, GIB_LOG)
    assert (other.ok, other.summary) == (
        False,
        "all_gather busbw 300.0 GB/s: NCCL 2.27.7 loaded, not 2.27.5 of the version matrix row "
        "(data/version_matrix.yaml)",
    )


def test_every_process_log_and_the_first_failure_of_the_ranks_decide_the_fabric():
    plan = cluster_plan(node_count=1, gpus_per_node=2, busbw_floor_gbps=0.0)
    ok = [{"node_rank": 0, "rank": r, "busbw_gbps": bw, "wrong": 0} for r, bw in ((0, 310.2), (1, 305.456))]
    # Each process's log ends in its own line: joined, neither line runs into the other.
    logs = [{"nccl_log": f"h:{r}:{r} [0] NCCL INFO Using network gIB"} for r in range(2)]
    passed = gate._fabric_from(plan, logs, ok, 1)
    assert passed.ok and passed.numbers["busbwGBps"] == 305.46 and passed.numbers["network"] == "gIB", passed
    assert gate._fabric_from(plan, logs, ok, 0).summary == ("all_gather busbw 305.5 GB/s: only 0 of 1 nodes took part")
    broken = [ok[0], {"node_rank": 0, "rank": 1, "device_error": "RuntimeError: CUDA error: ECC"}]
    assert gate._fabric_from(plan, logs, broken, 1).summary == (
        "all_gather busbw 310.2 GB/s: not every GPU joined the collective"
    )
    assert gate._fabric_from(plan, logs, ok[:1], 1).summary == (
        "all_gather busbw 310.2 GB/s: 1 of 2 ranks finished the collective"
    )


def test_a_passing_gpu_check_and_a_failing_one_name_the_check_and_every_problem():
    def rank(node, i, **report):
        return {"node_rank": node, "rank": node * 8 + i, "host": f"gpu-{node}", **report}

    healthy = [rank(n, i, device_name="NVIDIA B200", device_ok=True) for n in range(2) for i in range(8)]
    assert gate.check_gpus(cluster_plan(), healthy, 2) == gate.Check(
        "gpus", True, "16 healthy B200 GPUs on 2 nodes", {"healthyGpus": 16, "expectedGpus": 16}
    )
    assert gate.check_gpus(cluster_plan(), healthy[:7], 1) == gate.Check(
        "gpus",
        False,
        "1 of 2 worker nodes in the Ray cluster; gpu-0: 7 of 8 healthy B200 GPUs",
        {"healthyGpus": 7, "expectedGpus": 16},
    )
    # A node that reported nothing is named by its rank; a rank that said nothing shows as "nothing".
    silent = gate.check_gpus(cluster_plan(), healthy[:8], 2)
    assert silent.summary == "worker 1: 0 of 8 healthy B200 GPUs", silent
    mute = healthy[:15] + [rank(1, 7)]
    assert gate.check_gpus(cluster_plan(), mute, 2).summary == "gpu-1: 7 of 8 healthy B200 GPUs (saw nothing)"
    # What was seen instead is listed sorted, and cut at 160 characters.
    two = healthy[:14] + [rank(1, 6, device_name="NVIDIA H100"), rank(1, 7, device_error="RuntimeError: ECC")]
    assert gate.check_gpus(cluster_plan(), two, 2).summary == (
        "gpu-1: 6 of 8 healthy B200 GPUs (saw NVIDIA H100, RuntimeError: ECC)"
    )
    long = healthy[:15] + [rank(1, 7, device_error="E" * 300)]
    assert gate.check_gpus(cluster_plan(), long, 2).summary == f"gpu-1: 7 of 8 healthy B200 GPUs (saw {'E' * 160})"


def test_storage_that_measured_nothing_or_failed_or_was_slow_fails_with_its_numbers():
    plan = cluster_plan()

    def numbers(write, read):
        return {"writeGBps": write, "readGBps": read, "expectedGBps": 8.789, "floorGBps": 4.395}

    assert gate.check_storage(plan, 6.2, None) == gate.Check(
        "storage", False, "Lustre at /lustre: nothing measured", numbers(6.2, None)
    )
    assert gate.check_storage(plan, 6.2, 5.0, "timed out") == gate.Check(
        "storage", False, "Lustre at /lustre: timed out", numbers(6.2, 5.0)
    )
    assert gate.check_storage(plan, 1.2, 2.0) == gate.Check(
        "storage",
        False,
        "Lustre write 1.2 GB/s, read 2 GB/s: write below the floor 4.395 GB/s; read below the floor 4.395 GB/s "
        "(expected 8.789 GB/s)",
        numbers(1.2, 2.0),
    )
    assert gate.check_storage(plan, 6.2, 5.0) == gate.Check(
        "storage", True, "Lustre write 6.2 GB/s, read 5 GB/s >= floor 4.395 GB/s", numbers(6.2, 5.0)
    )


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
    check = gate._storage(plan, probes, run_dir, lambda share: 100 * share)
    # 2 GB written in 3 s (the slower node), 2 GB read in 7 s.
    assert (check.ok, check.numbers["writeGBps"], check.numbers["readGBps"]) == (True, 0.667, 0.286), check
    assert timeouts == [50.0, 90.0]
    assert {call[1] for call in calls} == {str(run_dir)}
    # A run directory that exists already is another run's: not reused.
    again = gate._storage(plan, probes, run_dir, lambda share: 100 * share)
    assert again.summary == f"Lustre at {tmp_path}: cannot create {run_dir}: File exists"


def test_storage_io_errors_and_a_timeout_fail_the_check_naming_the_first(tmp_path, monkeypatch):
    import ray

    monkeypatch.setattr(ray, "get", lambda refs, timeout=None: refs)
    plan = cpu_plan(tmp_path)
    calls: list = []
    failing = [
        FakeProbe(calls, io_result(1.0, "node0-0.bin: No space left on device"), io_result(1.0, "node1-1.bin: x"))
    ]
    check = gate._storage(plan, failing, tmp_path / "a", lambda share: 1.0)
    assert (check.ok, check.summary) == (
        False,
        f"Lustre at {tmp_path}: 2 I/O error(s), e.g. node0-0.bin: No space left on device",
    )

    def timed_out(refs, timeout=None):
        raise ray.exceptions.GetTimeoutError("timed out")

    monkeypatch.setattr(ray, "get", timed_out)
    check = gate._storage(plan, [FakeProbe(calls, io_result(1.0), io_result(1.0))], tmp_path / "b", lambda s: 1.0)
    assert check == gate.Check(
        "storage",
        False,
        f"Lustre at {tmp_path}: timed out",
        {"writeGBps": None, "readGBps": None, "expectedGBps": 0.002, "floorGBps": 0.001},
    )


def test_worker_nodes_of_a_cpu_plan_are_those_with_any_of_the_resource_sorted_by_address():
    plan = cpu_plan(Path("/tmp"), gpus_per_node=2)
    nodes = [
        {"NodeID": "a", "Alive": True, "NodeManagerAddress": "10.0.0.9", "Resources": {"CPU": 0.5}},
        {"NodeID": "z", "Alive": True, "NodeManagerAddress": "10.0.0.3", "Resources": {"CPU": 1}},
        {"NodeID": "none", "Alive": True, "NodeManagerAddress": "10.0.0.1", "Resources": {"memory": 1}},
        {"NodeID": "y", "Alive": True, "Resources": {"CPU": 4}},  # no address: sorts first
    ]
    assert [n["NodeID"] for n in gate.worker_nodes(plan, nodes)] == ["y", "z", "a"]
    one_gpu = cluster_plan(gpus_per_node=1)
    assert gate.worker_nodes(one_gpu, [{"NodeID": "c", "Alive": True, "Resources": {"CPU": 8}}]) == []


def test_a_report_of_a_gate_that_could_not_run_has_no_numbers_and_says_why():
    report = gate.GateReport((), 0.0, 2, error="ModuleNotFoundError: No module named 'torch'")
    assert report.check("storage") is None and report.number("storage", "writeGBps") is None
    assert report.outputs()["passed"] is False and report.outputs()["lustreWriteGBps"] is None
    assert report.lines() == [
        "gate error: ModuleNotFoundError: No module named 'torch'",
        "gate cost: 2 GPU node(s) x 0 s = 0.000 node-hours",
        "acceptance gate could not run: ModuleNotFoundError: No module named 'torch'",
    ]
    assert gate.parse_result(gate.RESULT_MARKER + json.dumps(report.to_dict())) == report
    # What an older driver left out reads as nothing.
    assert gate.GateReport.from_dict({}) == gate.GateReport((), 0.0, 0, "")


def test_the_log_lines_say_ok_or_failed_per_check_and_each_summary_joins_with_semicolons():
    report = failed_report()
    assert report.lines()[:3] == [
        "gate gpus: ok: 16 healthy B200 GPUs on 2 nodes",
        "gate fabric: FAILED: all_gather busbw 23.5 GB/s: NCCL used the Socket transport, not gIB; "
        "below the floor 162.06 GB/s",
        "gate storage: ok: Lustre write 6.2 GB/s, read 5 GB/s >= floor 4.395 GB/s",
    ]
    two_failed = gate.GateReport((gate.Check("gpus", False, "g"), gate.Check("storage", False, "s")), 1.0, 1)
    assert two_failed.summary() == "acceptance gate FAILED: gpus: g; storage: s"
    passed = gate.GateReport((gate.Check("gpus", True, "g"), gate.Check("storage", True, "s")), 131.26, 2)
    assert passed.summary() == "acceptance gate passed in 131 s: g; s"
    assert (passed.outputs()["seconds"], passed.outputs()["nodeHours"]) == (131.3, 0.0729)


def test_an_unknown_gate_policy_is_refused_naming_the_allowed_ones():
    with pytest.raises(ValueError, match=r"^gate policy 'strict'; allowed: enforce, warn, off$"):
        gate.enforce(failed_report(), "strict")


class FakeJobClient:
    """Just enough of JobSubmissionClient for `result_on_cluster`: the job's info and its log."""

    def __init__(self, log: str):
        self.log = log

    def get_address(self) -> str:
        return "http://fake"

    def get_job_info(self, job_id: str):
        assert job_id == "gate-1", job_id
        return SimpleNamespace(status="FAILED")

    def get_job_logs(self, job_id: str) -> str:
        assert job_id == "gate-1", job_id
        return self.log


def test_the_result_of_an_ended_gate_job_is_its_report_or_an_error_quoting_its_last_line():
    report = failed_report()
    logged = FakeJobClient("driver output\n" + gate.RESULT_MARKER + json.dumps(report.to_dict()) + "\n")
    assert gate.result_on_cluster(logged, cluster_plan(), "gate-1", "SUCCEEDED") == report
    crashed = FakeJobClient("starting\nimporting torch\nImportError: no torch" + "!" * 400 + "\n\n")
    assert gate.result_on_cluster(crashed, cluster_plan(), "gate-1", "FAILED") == gate.GateReport(
        (),
        0.0,
        2,
        error="gate job gate-1 ended FAILED without a report: " + ("ImportError: no torch" + "!" * 400)[:300],
    )
    silent = gate.result_on_cluster(FakeJobClient(""), cluster_plan(), "gate-1", "FAILED")
    assert silent.error == "gate job gate-1 ended FAILED without a report: no log" and not silent.ok


# ------------------------------------------------------------------------------------ on a Ray head


def test_the_gate_runs_end_to_end_on_a_local_head_and_a_failing_one_stops_the_submission(head, client, tmp_path):
    """GPUs and fabric pass for real (two gloo ranks), storage fails on an unreachable floor; under
    enforce, `submit` raises before anything is submitted, and the gate's files are gone."""
    mount = tmp_path / "lustre"
    mount.mkdir()
    plan = cpu_plan(mount, storage_expected_gbps=2000.0, storage_floor_gbps=1000.0)
    lines: list[str] = []
    spec = jobs_spec("t-gate-e2e")

    def before_submit() -> None:
        report = gate.run_on_cluster(client, plan, label="t-gate-e2e", on_line=lines.append, poll_interval=0.2)
        lines.extend(report.lines())
        before_submit.report = report  # type: ignore[attr-defined]
        gate.enforce(report, "enforce")

    with pytest.raises(gate.GateFailed) as raised:
        jobs.submit(client, spec, before_submit=before_submit)
    report = before_submit.report  # type: ignore[attr-defined]
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


def jobs_spec(stack: str):
    from workloads.job_spec import JobSpec

    return JobSpec.create(
        stack=stack, recipe="r", entrypoint=f"{shlex.quote(sys.executable)} -c 'print(1)'", runtime_env={}
    )


def test_gate_on_demand_and_submit_under_enforce_report_the_stacks_gate_in_one_line(head, client, monkeypatch):
    """The CLI builds the stacks' real plans; the local head has no GPU node, so the gate fails at
    once, and `submit` under the stack's default policy (enforce) submits nothing."""
    real = cli_commands.gate_plan
    # The head's `python` is not this venv's; everything else is the stack's own plan.
    monkeypatch.setattr(
        cli_commands, "gate_plan", lambda stack: dataclasses.replace(real(stack), python=sys.executable, timeout_s=60)
    )
    out, err = io.StringIO(), io.StringIO()
    assert cli.main(["gate", "--stack", "h200", "--address", head.address], out=out, err=err) == exit_codes.GATE_FAILED
    text = out.getvalue()
    assert "acceptance gate: 2 node(s) x 8 GPUs" in text
    assert "acceptance gate FAILED: gpus: 0 of 2 worker nodes in the Ray cluster" in text and err.getvalue() == ""

    # b200: eight nodes, enforce by default, and a recipe that needs no Hugging Face token to build.
    out, err = io.StringIO(), io.StringIO()
    assert (
        cli.main(["submit", "--stack", "b200", "--address", head.address], out=out, err=err) == exit_codes.GATE_FAILED
    )
    assert (
        err.getvalue().startswith("error: acceptance gate FAILED: gpus: 0 of 8 worker nodes")
        and err.getvalue().count("\n") == 1
    )
    assert jobs.list_jobs(client, "b200") == []


# ------------------------------------------------------------------------------------ verdicts at their boundaries


@pytest.mark.parametrize("floor", [162.06, 4.395])
def test_a_figure_just_below_a_floor_fails_and_just_above_or_at_it_passes(floor):
    plan = cluster_plan(busbw_floor_gbps=162.06, storage_floor_gbps=4.395)
    below, above = round(floor - 0.01, 3), round(floor + 0.01, 3)
    if floor == plan.busbw_floor_gbps:
        assert not gate.check_fabric(plan, below, GIB_LOG).ok
        assert gate.check_fabric(plan, floor, GIB_LOG).ok and gate.check_fabric(plan, above, GIB_LOG).ok
    else:
        for write, read in ((below, above), (above, below)):
            assert not gate.check_storage(plan, write, read).ok, (write, read)
        assert gate.check_storage(plan, floor, floor).ok and gate.check_storage(plan, above, above).ok


def test_one_gpu_short_of_a_nodes_count_fails_and_the_full_count_passes():
    def ranks(per_node: int):
        return [
            {"node_rank": n, "rank": n * 8 + i, "host": f"gpu-{n}", "device_name": "NVIDIA B200", "device_ok": True}
            for n in range(2)
            for i in range(per_node if n else 8)
        ]

    assert gate.check_gpus(cluster_plan(), ranks(8), 2).ok
    short = gate.check_gpus(cluster_plan(), ranks(7), 2)
    assert not short.ok and short.summary == "gpu-1: 7 of 8 healthy B200 GPUs" and short.numbers["healthyGpus"] == 15


def test_every_storage_read_is_of_files_another_node_wrote(tmp_path, monkeypatch):
    """`_storage` hands node i the files node (i+1) % n wrote, so no node reads its own page cache; and a
    read opens the named node's files (node<r>-<k>.bin), so it cannot quietly read its own instead."""
    from types import SimpleNamespace

    import ray

    calls: list[tuple[str, int, int]] = []

    def probe(i: int):
        def run(kind):
            def remote(directory, node_rank, size, streams):
                calls.append((kind, i, node_rank))
                return gate._parallel_io(Path(directory), node_rank, size, streams, write=kind == "write")

            return SimpleNamespace(remote=remote)

        return SimpleNamespace(write=run("write"), read=run("read"))

    monkeypatch.setattr(ray, "get", lambda refs, timeout=None: refs)
    plan = cpu_plan(tmp_path, node_count=3, storage_bytes_per_node=gate.BLOCK * 2, storage_streams=2)
    check = gate._storage(plan, [probe(i) for i in range(3)], tmp_path / "run", lambda share: 60.0)
    assert check.numbers["writeGBps"] > 0 and check.numbers["readGBps"] > 0, check.summary
    reads = [(reader, owner) for kind, reader, owner in calls if kind == "read"]
    assert reads == [(0, 1), (1, 2), (2, 0)] and all(reader != owner for reader, owner in reads)
    # A node whose files are missing cannot be read in their stead.
    (tmp_path / "other").mkdir()
    gate._parallel_io(tmp_path / "other", 0, gate.BLOCK * 2, 2, write=True)
    result = gate._parallel_io(tmp_path / "other", 1, gate.BLOCK * 2, 2, write=False)
    assert [e.split(":")[0] for e in result["errors"]] == ["node1-0.bin", "node1-1.bin"]
