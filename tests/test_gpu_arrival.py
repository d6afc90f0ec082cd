"""The GPU nodes' arrival (tools/gpu_arrival.py): which way a plan's nodes come and how long their image takes
(pulled, overlapped by the pre-pull, cached or streamed), and the cold / just in time / warm comparison's arithmetic
at a late Lustre."""

import dataclasses

import pytest
from conftest import merged, run_plan, stack_plan

from tools import deploy_time, gpu_arrival

# ----------------------------------------------------------------------------- which way and which pull


def test_a_cold_gpu_node_pulls_during_its_driver_install_only_where_the_pre_pull_runs_on_it():
    """The pre-pull pod asks for no GPU, so it pulls from the node's boot on; a Ray worker waits for the driver.
    Without the DaemonSet the whole pull follows the scale-up; from the image cache there is nothing to overlap."""
    plan = stack_plan("dev")
    arrival = gpu_arrival.gpu_arrival(plan)
    assert arrival.prepull and arrival.pull is gpu_arrival.IMAGE_PULL
    assert arrival.image_after_driver == pytest.approx(11.1 - 4.0)
    assert arrival.minutes == pytest.approx(6.0 + 7.1)
    without = dataclasses.replace(plan, resources=[r for r in plan.resources if not gpu_arrival.is_image_prepull(r)])
    assert gpu_arrival.gpu_arrival(without).minutes == pytest.approx(6.0 + 11.1)
    cached = gpu_arrival.GpuArrival(False, gpu_arrival.IMAGE_CACHE_PULL, prepull=True)
    assert cached.minutes == pytest.approx(6.0 + gpu_arrival.IMAGE_CACHE_PULL.minutes)


def streaming_plan(on: bool):
    return run_plan("b200", cluster=merged("b200", "cluster", {"imageStreaming": on}))


def test_a_streamed_image_starts_the_container_in_a_minute_and_adds_the_remote_reads_to_nemo_rls_start_up():
    """cluster.imageStreaming: no whole pull after the driver install, nothing to overlap; the doc's remote-read
    latency is paid in NeMo-RL's start-up, both assumed and said so."""
    streamed, pulled = gpu_arrival.gpu_arrival(streaming_plan(True)), gpu_arrival.gpu_arrival(streaming_plan(False))
    assert streamed.pull is gpu_arrival.IMAGE_STREAM_PULL and streamed.streamed and not streamed.overlapped
    assert streamed.minutes == pytest.approx(6.0 + 1.0) and streamed.image_after_driver == 1.0
    assert streamed.startup_minutes == gpu_arrival.NEMO_RL_STARTUP.minutes + gpu_arrival.STREAM_READ_MINUTES
    assert pulled.pull is gpu_arrival.IMAGE_PULL and not pulled.streamed
    assert pulled.startup_minutes == gpu_arrival.NEMO_RL_STARTUP.minutes
    assert gpu_arrival.ASSUMED in gpu_arrival.IMAGE_STREAM_PULL.source


def test_the_plan_json_says_which_pull_applies_to_the_gpu_nodes():
    on = deploy_time.estimate(streaming_plan(True)).to_json()["gpuNodes"]
    off = deploy_time.estimate(streaming_plan(False)).to_json()["gpuNodes"]
    assert (on["pull"], on["imageStreamed"], on["imageMinutes"]) == ("IMAGE_STREAM_PULL", True, 1.0)
    assert (off["pull"], off["imageStreamed"], off["imageMinutes"]) == ("IMAGE_PULL", False, 11.1)
    assert on["startupMinutes"] - off["startupMinutes"] == gpu_arrival.STREAM_READ_MINUTES


def test_image_streaming_on_a_pool_without_the_mirror_is_still_a_pull():
    """gcfs alone (the image cache's) streams nothing from nvcr.io: the model streams only with the repository."""
    plan = streaming_plan(True)
    without = dataclasses.replace(plan, resources=[r for r in plan.resources if r.type != gpu_arrival.MIRROR])
    assert gpu_arrival.gpu_arrival(without).pull is gpu_arrival.IMAGE_PULL


# ----------------------------------------------------------------------------- the late-Lustre bound


def timing(**kw) -> gpu_arrival.ArrivalTiming:
    base = dict(
        lustre_ready=63.8,
        claim_ready=64.0,
        tail=2.3,
        pools_ready=14.1,
        timer_at=14.3,
        delay=42.5,
        hold=22.0,
        lead=7.0,
        startup=13.0,
        install=1.5,  # the Ray release's own install (tools/deploy_time.py CREATION_MINUTES)
    )
    return gpu_arrival.ArrivalTiming(**{**base, **kw})


def test_on_time_the_nodes_are_ready_with_lustre_and_paid_from_the_timers_start():
    s = gpu_arrival.scenario(timing(), "justInTime", 60.0)
    assert s.gpu_from == pytest.approx(14.3 + 42.5)
    # The release's install after the claim (the nodes are there), then the gate and the submission.
    assert s.submit == pytest.approx(64.0 + 1.5 + 2.3)
    assert s.gpu_minutes == pytest.approx(s.submit - 56.8)


def test_a_late_lustre_within_the_scale_down_delay_finds_the_given_back_nodes_still_there():
    # Started at 56.8, given back at 78.8, removed ten minutes later; the workers come at 83.8 + 0.2 + 1.5.
    s = gpu_arrival.scenario(timing(), "justInTime", 80.0)
    assert "given back at 78.8" in s.note
    assert s.submit == pytest.approx(84.0 + 1.5 + 2.3) and s.gpu_from == pytest.approx(56.8)


def test_a_very_late_lustre_pays_the_hold_and_the_scale_down_once_then_the_nodes_come_cold():
    s = gpu_arrival.scenario(timing(), "justInTime", 100.0)
    cold = gpu_arrival.scenario(timing(), "cold", 100.0)
    assert s.submit == cold.submit, "asked for again by the Ray workers, as cold"
    assert s.gpu_minutes == pytest.approx(cold.gpu_minutes + 22.0 + gpu_arrival.SCALE_DOWN_MINUTES)


def test_an_early_lustre_never_starts_the_placeholders_and_is_cold():
    s, cold = (gpu_arrival.scenario(timing(), mode, 40.0) for mode in ("justInTime", "cold"))
    assert (s.submit, s.gpu_from, s.gpu_minutes) == (cold.submit, cold.gpu_from, cold.gpu_minutes)
    assert "cold" in s.note
