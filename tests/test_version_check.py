"""The acceptance gate's version verdict (workloads/version_check.py, through check_fabric): recorded NCCL
logs of two NCCL releases read against the version-matrix row's NCCL (tests/nccl_logs/README.md)."""

from __future__ import annotations

from gate_support import cluster_plan, nccl_log, two_node_report

from workloads import gate
from workloads.gate import verdict
from workloads.version_check import nccl_release, plugin_apis, version_problem

# Composed from NCCL 2.27.7's format strings: the gIB plugin loaded on 2 x 8 B200.
GIB_2_27_7 = nccl_log("gib_a4_2x8.log")
# Written by NCCL 2.28.9 itself in the gate's rank process on one H200 (no gIB there: Socket).
REAL_2_28_9 = nccl_log("h200-1gpu-nccl-2.28.9-gate-rank-socket.log")


def test_the_nccl_release_drops_the_cuda_build_suffix():
    assert nccl_release("2.27.7+cuda12.9") == "2.27.7" and nccl_release("2.28.9+cuda13.0") == "2.28.9"


def test_a_gib_log_of_the_rows_nccl_passes_and_reports_what_it_saw():
    check = verdict.check_fabric(cluster_plan(expect_nccl="2.27.7", expect_gib="v1.1.1"), 300.0, GIB_2_27_7)
    assert check.ok, check.summary
    assert check.numbers["ncclVersions"] == ["2.27.7"] and check.numbers["netPlugins"] == ["gIB v10"]
    assert (check.numbers["expectedNccl"], check.numbers["expectedGib"]) == ("2.27.7", "v1.1.1")


def test_a_gib_log_of_another_nccl_fails_the_fabric_under_enforce_naming_both_releases():
    # NeMo-RL v0.5.0 / v0.6.0 bring NCCL 2.27.5 (data/version_matrix.yaml); this log loaded 2.27.7.
    check = verdict.check_fabric(cluster_plan(expect_nccl="2.27.5", expect_gib="v1.1.1"), 300.0, GIB_2_27_7)
    assert not check.ok
    assert "NCCL 2.27.7 loaded, not 2.27.5 of the version matrix row" in check.summary
    assert "NCCL 2.27.7 loaded, not 2.27.5" in str(gate.GateFailed(two_node_report(check)))


def test_a_real_nccl_2_28_9_log_is_read_as_that_release():
    info = gate.parse_nccl_log(REAL_2_28_9)
    assert version_problem(info.versions, "2.28.9") is None
    assert version_problem(info.versions, "2.27.5") == (
        "NCCL 2.28.9 loaded, not 2.27.5 of the version matrix row (data/version_matrix.yaml)"
    )
    assert plugin_apis(REAL_2_28_9) == []  # no net plugin on that machine: NCCL's internal Socket


def test_the_real_2_28_9_log_fails_on_both_the_transport_and_the_release():
    check = verdict.check_fabric(cluster_plan(expect_nccl="2.27.5"), 300.0, REAL_2_28_9)
    assert not check.ok
    assert "Socket transport, not gIB" in check.summary and "NCCL 2.28.9 loaded, not 2.27.5" in check.summary
    assert check.numbers["ncclVersions"] == ["2.28.9"]


def test_a_log_without_a_version_line_cannot_prove_the_rows_nccl():
    no_version = "\n".join(line for line in GIB_2_27_7.splitlines() if "NCCL version" not in line)
    check = verdict.check_fabric(cluster_plan(expect_nccl="2.27.7"), 300.0, no_version)
    assert not check.ok and "cannot prove NCCL 2.27.7" in check.summary


def test_a_plan_that_expects_no_release_checks_none():
    # A stack outside the matrix (allowUntestedVersions) or the Autopilot row: reported, not checked.
    check = verdict.check_fabric(cluster_plan(expect_gib="v1.1.1"), 300.0, GIB_2_27_7)
    assert check.ok and check.numbers["ncclVersions"] == ["2.27.7"] and check.numbers["expectedNccl"] is None
    assert "ncclVersions" not in verdict.check_fabric(cluster_plan(), 300.0, GIB_2_27_7).numbers
