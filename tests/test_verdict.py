"""The acceptance gate's verdict (workloads/gate/verdict.py): the checks on recorded NCCL logs and measured
numbers, at their boundaries, the report and its one line, and the policy's consequence."""

from __future__ import annotations

import json

import pytest
from gate_support import cluster_plan, failed_report, nccl_log

from workloads import gate
from workloads.gate import verdict

GIB_LOG = nccl_log("gib_a4_2x8.log")
SOCKET_LOG = nccl_log("socket_fallback_a3u_2x8.log")
# Captured from real runs of the gate's rank process on one H200 with NCCL 2.28.9 (tests/nccl_logs/README.md).
H200_RANK_LOG = nccl_log("h200-1gpu-nccl-2.28.9-gate-rank-socket.log")


def test_a_log_of_the_gib_plugin_shows_every_communicator_and_channel_on_gib_with_gpudirect():
    info = gate.parse_nccl_log(GIB_LOG)
    assert info.networks == {"gIB": 16} and info.channel_nets == {"gIB": 64} and info.gdr_channels == 64
    assert info.versions == {"2.27.7+cuda12.9"}
    assert verdict.net_check(info, "gIB") is None
    assert verdict.net_check(info, "gib") is None  # NCCL matches plugin names case-insensitively


def test_a_socket_fallback_log_fails_the_net_check_naming_the_transport():
    info = gate.parse_nccl_log(SOCKET_LOG)
    assert info.networks == {"Socket": 16} and info.channel_nets == {"Socket": 32} and info.gdr_channels == 0
    assert verdict.net_check(info, "gIB") == "NCCL used the Socket transport, not gIB"


def test_a_socket_fallback_fails_the_fabric_even_at_a_bandwidth_above_the_floor():
    check = verdict.check_fabric(cluster_plan(), 300.0, SOCKET_LOG)
    assert not check.ok and "Socket" in check.summary and check.numbers["network"] == "Socket"
    assert verdict.check_fabric(cluster_plan(), 300.0, GIB_LOG).ok


def test_a_log_that_never_says_which_network_cannot_prove_gib():
    only_channels = "\n".join(line for line in GIB_LOG.splitlines() if "Using network" not in line)
    assert "cannot prove" in verdict.net_check(gate.parse_nccl_log(only_channels), "gIB")
    assert "cannot prove" in verdict.check_fabric(cluster_plan(), 300.0, "").summary


def test_gib_communicators_with_a_channel_over_sockets_fail():
    mixed = GIB_LOG + "host:1:2 [0] NCCL INFO Channel 03/0 : 0[0] -> 8[0] [send] via NET/Socket/0\n"
    assert verdict.net_check(gate.parse_nccl_log(mixed), "gIB") == "NCCL channels ran over NET/Socket, not NET/gIB"


def test_a_real_h200_rank_without_gib_is_read_as_socket_and_fails_the_fabric_naming_it():
    info = gate.parse_nccl_log(H200_RANK_LOG)
    assert info.networks == {"Socket": 1} and info.versions == {"2.28.9+cuda13.0"}
    # One rank: its "Channel 00/64 : 0" lines are rings of one, not NET connections.
    assert info.channel_nets == {} and info.gdr_channels == 0
    check = verdict.check_fabric(
        cluster_plan(node_count=1, gpus_per_node=1, gpu_name="H200", busbw_floor_gbps=0.0), 0.0, H200_RANK_LOG
    )
    assert not check.ok and check.summary == "all_gather busbw 0 GB/s: NCCL used the Socket transport, not gIB"
    assert check.numbers["network"] == "Socket" and check.numbers["gdrChannels"] == 0


def test_a_fabric_below_its_floor_fails_with_both_numbers():
    check = verdict.check_fabric(cluster_plan(), 41.3, GIB_LOG)
    assert not check.ok and check.summary == "all_gather busbw 41.3 GB/s: below the floor 162.06 GB/s"
    assert check.numbers == {"busbwGBps": 41.3, "floorGBps": 162.06, "network": "gIB", "gdrChannels": 64}


def test_one_node_has_no_fabric_floor_but_still_needs_gib():
    plan = cluster_plan(node_count=1, busbw_floor_gbps=0.0)
    assert verdict.check_fabric(plan, 620.0, GIB_LOG).ok
    assert not verdict.check_fabric(plan, 620.0, SOCKET_LOG).ok


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
    assert gate.fabric_from(plan, [{"ranks": ok, "nccl_log": GIB_LOG}], ok, 1).numbers["busbwGBps"] == 305.9
    crashed = [
        ok[0],
        {"node_rank": 0, "rank": 1, "collective_error": "DistBackendError: NCCL error: remote process exited"},
    ]
    check = gate.fabric_from(plan, [{"ranks": crashed, "nccl_log": GIB_LOG}], crashed, 1)
    assert not check.ok and "1 distinct collective error(s), e.g. DistBackendError: NCCL error" in check.summary
    corrupt = [ok[0], {**ok[1], "wrong": 12}]
    assert (
        "12 wrong elements in the gathered data"
        in gate.fabric_from(plan, [{"ranks": corrupt, "nccl_log": GIB_LOG}], corrupt, 1).summary
    )
    lost = gate.fabric_from(plan, [{"ranks": [], "nccl_log": "", "timed_out": True}], [], 1)
    assert not lost.ok and "0 of 2 ranks finished the collective (timed out)" in lost.summary


def test_storage_below_its_floor_fails_naming_what_was_slow():
    check = verdict.check_storage(cluster_plan(), 6.2, 1.1)
    assert not check.ok
    assert (
        check.summary == "Lustre write 6.2 GB/s, read 1.1 GB/s: read below the floor 4.395 GB/s (expected 8.789 GB/s)"
    )
    assert verdict.check_storage(cluster_plan(), 6.2, 5.0).ok


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
    again = verdict.parse_result(log)
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
    assert verdict.parse_result("no marker here") is None


def test_a_failed_gate_is_one_line_and_one_that_could_not_run_never_passes():
    report = failed_report()
    assert str(gate.GateFailed(report)) == report.summary() and not report.ok
    assert gate.GateReport((gate.Check("gpus", True, "ok"),), 1.0, 1).ok
    could_not_run = gate.GateReport((), 0.0, 2, error="ModuleNotFoundError: No module named 'torch'")
    assert not could_not_run.ok
    assert (
        str(gate.GateFailed(could_not_run))
        == "acceptance gate could not run: ModuleNotFoundError: No module named 'torch'"
    )


def test_gb_per_second_keeps_one_decimal_from_100_and_three_significant_digits_below():
    assert [verdict.gbps(v) for v in (320.44, 100.0, 41.3, 0.0123)] == ["320.4", "100.0", "41.3", "0.0123"]


def test_two_wrong_transports_or_channel_nets_are_both_named():
    two = "h:1:1 [0] NCCL INFO Using network Socket\nh:2:2 [0] NCCL INFO Using network IB\n"
    assert verdict.net_check(gate.parse_nccl_log(two), "gIB") == "NCCL used the IB/Socket transport, not gIB"
    channels = GIB_LOG + "".join(
        f"h:1:2 [0] NCCL INFO Channel 0{i}/0 : 0[0] -> 8[0] [send] via NET/{net}/0\n"
        for i, net in enumerate(("Socket", "IB"))
    )
    assert (
        verdict.net_check(gate.parse_nccl_log(channels), "gIB") == "NCCL channels ran over NET/IB/Socket, not NET/gIB"
    )
    # The fabric's numbers list every network the communicators used.
    assert verdict.check_fabric(cluster_plan(), 300.0, GIB_LOG + SOCKET_LOG).numbers["network"] == "Socket,gIB"


def test_a_passing_fabric_is_one_line_naming_the_transport_and_the_floor():
    fabric = verdict.check_fabric(cluster_plan(), 300.0, GIB_LOG)
    numbers = {"busbwGBps": 300.0, "floorGBps": 162.06, "network": "gIB", "gdrChannels": 64}
    assert fabric == gate.Check("fabric", True, "all_gather busbw 300.0 GB/s over gIB >= floor 162.06 GB/s", numbers)
    one_node = verdict.check_fabric(cluster_plan(node_count=1, busbw_floor_gbps=0.0), 620.0, GIB_LOG)
    assert one_node.summary == "all_gather busbw 620.0 GB/s over gIB (one node: no floor)"
    gloo = verdict.check_fabric(cluster_plan(expect_net=None, backend="gloo"), 300.0, "")
    assert gloo == gate.Check(
        "fabric",
        True,
        "all_gather busbw 300.0 GB/s (gloo) >= floor 162.06 GB/s",
        {"busbwGBps": 300.0, "floorGBps": 162.06},
    )
    nothing = verdict.check_fabric(cluster_plan(), None, GIB_LOG)
    assert (nothing.ok, nothing.summary) == (False, "all_gather: no bandwidth measured")


def test_the_fabric_reports_the_nccl_and_gib_releases_and_fails_on_another_nccl_than_the_rows():
    # The log's processes loaded NCCL 2.27.7 with the gIB plugin (tests/nccl_logs/gib_a4_2x8.log).
    seen = {"ncclVersions": ["2.27.7"], "netPlugins": ["gIB v10"]}
    both = verdict.check_fabric(cluster_plan(expect_nccl="2.27.7", expect_gib="v1.1.1"), 300.0, GIB_LOG)
    assert both.ok and both.numbers == {
        "busbwGBps": 300.0,
        "floorGBps": 162.06,
        "network": "gIB",
        "gdrChannels": 64,
        **seen,
        "expectedNccl": "2.27.7",
        "expectedGib": "v1.1.1",
    }
    nccl_only = verdict.check_fabric(cluster_plan(expect_nccl="2.27.7"), 300.0, GIB_LOG)
    assert nccl_only.ok and nccl_only.numbers["expectedGib"] is None and nccl_only.numbers["ncclVersions"] == ["2.27.7"]
    other = verdict.check_fabric(cluster_plan(expect_nccl="2.27.5"), 300.0, GIB_LOG)
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
    passed = gate.fabric_from(plan, logs, ok, 1)
    assert passed.ok and passed.numbers["busbwGBps"] == 305.46 and passed.numbers["network"] == "gIB", passed
    assert gate.fabric_from(plan, logs, ok, 0).summary == ("all_gather busbw 305.5 GB/s: only 0 of 1 nodes took part")
    broken = [ok[0], {"node_rank": 0, "rank": 1, "device_error": "RuntimeError: CUDA error: ECC"}]
    assert gate.fabric_from(plan, logs, broken, 1).summary == (
        "all_gather busbw 310.2 GB/s: not every GPU joined the collective"
    )
    assert gate.fabric_from(plan, logs, ok[:1], 1).summary == (
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

    assert verdict.check_storage(plan, 6.2, None) == gate.Check(
        "storage", False, "Lustre at /lustre: nothing measured", numbers(6.2, None)
    )
    assert verdict.check_storage(plan, 6.2, 5.0, "timed out") == gate.Check(
        "storage", False, "Lustre at /lustre: timed out", numbers(6.2, 5.0)
    )
    assert verdict.check_storage(plan, 1.2, 2.0) == gate.Check(
        "storage",
        False,
        "Lustre write 1.2 GB/s, read 2 GB/s: write below the floor 4.395 GB/s; read below the floor 4.395 GB/s "
        "(expected 8.789 GB/s)",
        numbers(1.2, 2.0),
    )
    assert verdict.check_storage(plan, 6.2, 5.0) == gate.Check(
        "storage", True, "Lustre write 6.2 GB/s, read 5 GB/s >= floor 4.395 GB/s", numbers(6.2, 5.0)
    )


def test_a_report_of_a_gate_that_could_not_run_has_no_numbers_and_says_why():
    report = gate.GateReport((), 0.0, 2, error="ModuleNotFoundError: No module named 'torch'")
    assert report.check("storage") is None and report.number("storage", "writeGBps") is None
    assert report.outputs()["passed"] is False and report.outputs()["lustreWriteGBps"] is None
    assert report.lines() == [
        "gate error: ModuleNotFoundError: No module named 'torch'",
        "gate cost: 2 GPU node(s) x 0 s = 0.000 node-hours",
        "acceptance gate could not run: ModuleNotFoundError: No module named 'torch'",
    ]
    assert verdict.parse_result(gate.RESULT_MARKER + json.dumps(report.to_dict())) == report
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
    from workloads.run_owner import GateSetup

    with pytest.raises(ValueError, match=r"^gate policy 'strict'; allowed: enforce, warn, off$"):
        GateSetup("strict")


@pytest.mark.parametrize("floor", [162.06, 4.395])
def test_a_figure_just_below_a_floor_fails_and_just_above_or_at_it_passes(floor):
    plan = cluster_plan(busbw_floor_gbps=162.06, storage_floor_gbps=4.395)
    below, above = round(floor - 0.01, 3), round(floor + 0.01, 3)
    if floor == plan.busbw_floor_gbps:
        assert not verdict.check_fabric(plan, below, GIB_LOG).ok
        assert verdict.check_fabric(plan, floor, GIB_LOG).ok and verdict.check_fabric(plan, above, GIB_LOG).ok
    else:
        for write, read in ((below, above), (above, below)):
            assert not verdict.check_storage(plan, write, read).ok, (write, read)
        assert verdict.check_storage(plan, floor, floor).ok and verdict.check_storage(plan, above, above).ok


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
