"""The plan's goodput and first-run spend with and without cluster.imageStreaming (tools/goodput_estimate.py)."""

from __future__ import annotations

import pytest
from conftest import merged, run_plan, stack_plan

from tools import deploy_time, estimates, goodput_estimate


def plan_with(streaming: bool):
    return run_plan("b200", cluster=merged("b200", "cluster", {"imageStreaming": streaming}))


def buckets(plan) -> dict[str, float]:
    est = estimates.compute(plan)
    doc = goodput_estimate.goodput_json(est, estimates.stack_config(plan))
    return {b["name"]: b["minutes"] for b in doc["buckets"]} | {"preemptions": doc["expectedPreemptions"]}


def test_a_streamed_image_is_a_minute_per_attempt_and_its_remote_reads_are_start_up():
    on, off = buckets(plan_with(True)), buckets(plan_with(False))
    attempts = 1 + on["preemptions"]
    assert on["imagePull"] == pytest.approx(attempts * deploy_time.IMAGE_STREAM_PULL.minutes, abs=0.06)
    assert off["imagePull"] == pytest.approx(attempts * (11.1 - deploy_time.GPU_DRIVER_MINUTES), abs=0.06)
    assert on["startup"] - off["startup"] == pytest.approx(attempts * deploy_time.STREAM_READ_MINUTES, abs=0.06)
    assert on["stepsKept"] == off["stepsKept"] and on["gangWait"] == off["gangWait"]


def test_the_committed_b200_stack_spends_under_50_dollars_before_the_job_and_streaming_is_why():
    """Issue 32's bound, on the plan's own assumptions (IMAGE_STREAM_PULL, STREAM_READ_MINUTES: both assumed)."""
    streamed, pulled = (estimates.first_run(estimates.compute(p), p) for p in (stack_plan("b200"), plan_with(False)))
    assert streamed.before_job["spot"] < 50 < pulled.before_job["spot"]
    assert streamed.first_step_minutes < pulled.first_step_minutes
