"""The acceptance gate's plan (workloads/gate/checklist.py): nccl-tests' bandwidth arithmetic, the typical
duration, and the one rule of when a gate runs at all (`gate_in_force`)."""

from __future__ import annotations

import pytest
from gate_support import cluster_plan

from workloads import gate
from workloads.gate import checklist


def test_bus_bandwidth_is_computed_as_nccl_tests_does():
    # Google's published A3 Ultra row (data/acceptance_gate.yaml): all_gather of 1 GiB on 16 ranks in
    # 3105.7 us is algbw 345.74 GB/s, busbw 324.13 GB/s (the time is printed rounded to 0.1 us).
    algbw, busbw = checklist.bus_bandwidth("all_gather", 1073741824, 3105.7e-6, 16)
    assert (algbw, busbw) == pytest.approx((345.74, 324.13), abs=0.015)
    assert checklist.bus_bandwidth("all_reduce", 10**9, 1.0, 4) == (1.0, 1.5)  # 2(n-1)/n


def test_the_typical_duration_grows_with_what_the_storage_phase_moves():
    small = gate.estimated_seconds(cluster_plan())
    big = gate.estimated_seconds(cluster_plan(storage_bytes_per_node=16 << 30))
    assert 60 < small < big and big - small == pytest.approx(2 * 2 * 15 * (1 << 30) / (8.789e9), rel=1e-6)


def test_a_gate_runs_only_under_enforce_or_warn_with_a_plan_and_every_other_pair_reads_as_off():
    plan = cluster_plan()
    assert gate.gate_in_force("enforce", plan) == ("enforce", plan)
    assert gate.gate_in_force("warn", plan.to_dict()) == ("warn", plan.to_dict())
    for policy in ("off", None, ""):
        assert gate.gate_in_force(policy, plan) == ("off", None), policy
    assert gate.gate_in_force("enforce", None) == ("off", None)


def test_every_party_that_decides_whether_a_gate_runs_asks_the_one_rule():
    # The run's owner (and through it the watcher, the hook and `jobctl submit`), the run plan and the
    # job's props, and the deploy-time estimate: each says off exactly where the rule does.
    from types import SimpleNamespace

    from tools.deploy_time import JOB_SUBMISSION, gate_minutes
    from workloads.run_owner import GateSetup, RunPlan

    plan = cluster_plan()
    assert GateSetup("enforce", plan).on and not GateSetup("off", plan).on and not GateSetup("warn", None).on
    assert RunPlan(gate_policy="warn", gate_plan=plan.to_dict()).gate.on
    assert not RunPlan(gate_policy="enforce", gate_plan=None).gate.on

    def submission(policy, plan_dict):
        return SimpleNamespace(type=JOB_SUBMISSION, inputs={"gate_policy": policy, "gate_plan": plan_dict})

    assert gate_minutes(submission("enforce", plan.to_dict())) > 0
    assert gate_minutes(submission("off", plan.to_dict())) == gate_minutes(submission("warn", None)) == 0.0
