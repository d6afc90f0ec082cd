"""The plan's goodput and first-run spend with and without cluster.imageStreaming (tools/goodput_estimate.py)."""

from __future__ import annotations

import pytest
from conftest import merged, run_plan

from tools import estimates, goodput_estimate, gpu_arrival


def plan_with(streaming: bool):
    return run_plan("b200", cluster=merged("b200", "cluster", {"imageStreaming": streaming}))


def buckets(plan) -> dict[str, float]:
    est = estimates.compute(plan)
    doc = goodput_estimate.goodput_json(est, estimates.stack_config(plan))
    return {b["name"]: b["minutes"] for b in doc["buckets"]} | {"preemptions": doc["expectedPreemptions"]}


def test_a_streamed_image_is_a_minute_per_attempt_and_its_remote_reads_are_start_up():
    on, off = buckets(plan_with(True)), buckets(plan_with(False))
    attempts = 1 + on["preemptions"]
    assert on["imagePull"] == pytest.approx(attempts * gpu_arrival.IMAGE_STREAM_PULL.minutes, abs=0.06)
    assert off["imagePull"] == pytest.approx(attempts * (11.1 - gpu_arrival.GPU_DRIVER_MINUTES), abs=0.06)
    assert on["startup"] - off["startup"] == pytest.approx(attempts * gpu_arrival.STREAM_READ_MINUTES, abs=0.06)
    assert on["stepsKept"] == off["stepsKept"] and on["gangWait"] == off["gangWait"]


def test_the_committed_b200_stack_spends_under_50_dollars_before_the_job_and_streaming_is_why():
    """Issue 32's bound, on the plan's own assumptions (IMAGE_STREAM_PULL, STREAM_READ_MINUTES: both assumed), for
    cold GPU nodes (gpuPool.justInTime false; issue 44's bound for just in time is in tests/test_jit_gpu_nodes.py)."""
    cold = {"justInTime": False}
    plans = (
        run_plan("b200", gpuPool=merged("b200", "gpuPool", cold)),
        run_plan(
            "b200",
            cluster=merged("b200", "cluster", {"imageStreaming": False}),
            gpuPool=merged("b200", "gpuPool", cold),
        ),
    )
    streamed, pulled = (estimates.first_run(estimates.compute(p), p) for p in plans)
    assert streamed.before_job["spot"] < 50 < pulled.before_job["spot"]
    assert streamed.first_step_minutes < pulled.first_step_minutes


def test_after_the_run_the_plan_pays_half_a_check_period_idle_and_gkes_scale_down_delay_and_without_release_neither():
    released = buckets(run_plan("b200", recovery=merged("b200", "recovery", {"checkIntervalSeconds": 120})))
    assert released["idleAfterRun"] == 1.0 and released["scaleDown"] == 10.0
    kept = buckets(run_plan("b200", recovery=merged("b200", "recovery", {"releaseWorkersAfterRun": False})))
    assert kept["idleAfterRun"] == kept["scaleDown"] == 0.0


def test_a_two_hour_half_gang_stock_out_keeps_b200_above_0_6_by_training_on_four_nodes():
    """Issue 43's bound, on a stated assumption (`STOCK_OUT_SOURCE`): 4 of 8 nodes gone for 2 hours once."""
    from conftest import stack_plan

    plan = stack_plan("b200")
    doc = goodput_estimate.goodput_json(estimates.compute(plan), estimates.stack_config(plan))
    out = doc["stockOut"]
    assert (out["hours"], out["nodesLost"], out["size"]) == (2.0, 4, 4)
    assert out["fraction"] >= 0.6 and out["fraction"] > out["fractionWaiting"]
    assert "assumed" in out["source"] and "stepsReduced" in [b["name"] for b in doc["buckets"]]


def test_a_stack_that_cannot_shrink_models_the_stock_out_waiting_for_its_gang():
    from conftest import stack_plan

    plan = stack_plan("h200")
    out = goodput_estimate.goodput_json(estimates.compute(plan), estimates.stack_config(plan))["stockOut"]
    assert out["size"] is None and out["fraction"] == out["fractionWaiting"] < 1
    lines = goodput_estimate.render(
        goodput_estimate.goodput_json(estimates.compute(plan), estimates.stack_config(plan))
    )
    assert lines[-1].startswith("  with 1 of 2 nodes gone for 2 h: ") and "waiting for the gang" in lines[-1]
