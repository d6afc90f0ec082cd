"""tools/gate_vs_nccl_tests.py on CPU: what it reads from nccl-tests and NCCL, on output of its real run
on one H200 (tests/nccl_logs/README.md); the measurement itself needs GPUs and is not run here."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools import gate_vs_nccl_tests as tool
from workloads import gate

LOGS = Path(__file__).resolve().parent / "nccl_logs"
PERF_OUT = (LOGS / "h200-1gpu-nccl-tests-2.17.6-all_gather_perf.out").read_text()
PERF_NCCL_LOG = (LOGS / "h200-1gpu-nccl-2.28.9-all_gather_perf-socket.log").read_text()
GATE_RANK_LOG = (LOGS / "h200-1gpu-nccl-2.28.9-gate-rank-socket.log").read_text()


def test_the_out_of_place_figures_are_read_from_the_row_of_the_gates_message_size():
    # The row: 1073741824 ... 505.46 2124.3 0.00 0 | in-place 0.83 1e+06 0.00 0: out-of-place, not in-place.
    assert tool.parse_nccl_tests(PERF_OUT, 1 << 30) == {"time_us": 505.46, "algbw": 2124.3, "busbw": 0.0}


def test_a_table_without_the_gates_size_is_an_environment_fault_naming_the_size():
    with pytest.raises(tool.Fault, match="no row for 536870912 bytes"):
        tool.parse_nccl_tests(PERF_OUT, 1 << 29)
    with pytest.raises(tool.Fault, match=r"\(no table header\)"):
        tool.parse_nccl_tests("# nccl-tests version 2.17.6\n", 1 << 30)


def test_the_nccl_tests_build_and_the_library_it_ran_on_are_named():
    assert tool.nccl_tests_versions(PERF_OUT) == "nccl-tests 2.17.6 (nccl-headers=22809 nccl-library=22809)"


def test_both_sides_of_the_real_run_loaded_the_same_nccl():
    # The script's same-library check reads these two logs (gate rank, then all_gather_perf).
    assert (
        gate.parse_nccl_log(PERF_NCCL_LOG).versions
        == gate.parse_nccl_log(GATE_RANK_LOG).versions
        == {"2.28.9+cuda13.0"}
    )
    assert gate.parse_nccl_log(PERF_NCCL_LOG).networks == {"Socket": 1}


def test_the_busbw_ratio_is_undefined_at_one_gpu_and_a_number_from_two():
    assert "undefined at 1 GPU" in tool.ratio_line(0.0, 0.0, 1)
    assert tool.ratio_line(150.0, 300.0, 8) == "ratio gate/nccl-tests busbw: 0.500"
    assert "undefined (a side measured nothing)" in tool.ratio_line(150.0, 0.0, 8)


def test_the_gates_message_size_and_iterations_are_those_the_cluster_plan_reads():
    from infra.gate_plan import load_thresholds

    fabric = load_thresholds()["fabric"]
    settings = tool.fabric_settings()
    assert (
        settings == {k: fabric[k] for k in ("message_bytes", "warmup_iters", "iters")} and settings["message_bytes"] > 0
    )


def test_a_path_that_is_no_nccl_tests_checkout_is_one_line_and_exit_2(tmp_path, capsys):
    assert tool.main([str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("nccl_tests: ") and "v2.17.6" in err[0]
