"""Checkpoint sizing: bytes per checkpoint, Lustre write time, capacity for keep_top_k, advice."""

import math

import pytest
from conftest import stack_plan

from infra.config import LUSTRE_TIERS
from tools import estimates, sizing
from tools.offline_plan import render_tree

GIB = 1024**3


def policy(*overrides: str, steps: int = 20) -> sizing.CheckpointPolicy:
    return sizing.CheckpointPolicy.from_overrides(overrides, steps)


def test_a_72b_model_with_adam_mixed_precision_checkpoints_about_1_16_tb():
    est = sizing.estimate(model="m", params_billion=72.7, policy=policy(), capacity_gib=36000, tier=500)
    assert sizing.BYTES_PER_PARAM_CHECKPOINT == 16
    assert est.checkpoint_bytes == pytest.approx(1.1632e12)
    assert est.hf_export_bytes == pytest.approx(145.4e9)


def test_lustre_writes_at_capacity_in_tib_times_the_tier_rate():
    seconds = sizing.checkpoint_write_seconds(1.1632e12, 36000, 500)
    assert seconds == pytest.approx(1.1632e12 / (36000 / 1024 * 500 * 1e6))
    assert round(seconds, 1) == 66.2


def test_keep_top_k_is_the_last_override_and_nemo_rls_default_3_otherwise():
    assert policy().keep_top_k == 3 and policy().keep_top_k_source == "NeMo-RL's default"
    assert policy("checkpointing.keep_top_k=2").keep_top_k == 2
    assert policy("checkpointing.keep_top_k=2", "++checkpointing.keep_top_k=5").keep_top_k == 5
    assert policy("checkpointing.keep_top_k=null").keep_top_k is None
    assert policy("checkpointing.keep_top_k=2", "~checkpointing.keep_top_k").keep_top_k is None
    assert policy("checkpointing.save_period=4").save_period == 4
    assert policy().save_period == 10


def test_keep_top_k_deleted_with_a_value_is_deleted_as_hydra_deletes_it():
    # `~key=value` deletes like `~key`: NeMo-RL then keeps every checkpoint.
    assert policy("checkpointing.keep_top_k=2", "~checkpointing.keep_top_k=2").keep_top_k is None


def test_a_run_keeps_no_more_checkpoints_than_it_saves():
    assert policy("checkpointing.keep_top_k=2", "checkpointing.save_period=2", steps=20).kept_checkpoints == 2
    assert policy(steps=10).kept_checkpoints == 1  # one save in 10 steps at the default period 10
    assert policy("checkpointing.keep_top_k=null", "checkpointing.save_period=5", steps=20).kept_checkpoints == 4


def test_capacity_holds_the_kept_checkpoints_one_in_flight_and_the_hf_cache_with_headroom():
    est = sizing.estimate(
        model="m",
        params_billion=72.7,
        policy=policy("checkpointing.keep_top_k=2", "checkpointing.save_period=2"),
        capacity_gib=36000,
        tier=500,
    )
    needed = 1.1632e12 * (2 + 1) + 72.7e9 * 2 * sizing.HF_CACHE_FACTOR
    assert est.required_bytes == pytest.approx(needed)
    assert est.required_gib == math.ceil(needed * sizing.HEADROOM / GIB) == 3799
    assert est.fits and est.fast_enough and not est.warnings


def test_a_too_small_instance_is_warned_and_a_big_enough_one_suggested():
    est = sizing.estimate(
        model="m",
        params_billion=72.7,
        policy=policy("checkpointing.keep_top_k=8", "checkpointing.save_period=1"),
        capacity_gib=9000,
        tier=1000,
    )
    assert not est.fits
    assert est.warnings[0].startswith("Lustre too small: 8 kept + 1 in-flight checkpoint(s) of 1.16 TB")
    s = est.suggestion
    assert s.capacity_gib >= est.required_gib
    assert sizing.checkpoint_write_seconds(est.checkpoint_bytes, s.capacity_gib, s.tier) <= est.target_seconds


def test_a_write_slower_than_the_target_is_warned():
    est = sizing.estimate(
        model="m", params_billion=72.7, policy=policy(), capacity_gib=72000, tier=125, target_seconds=60
    )
    assert not est.fast_enough
    assert any(w.startswith("checkpoint write too slow: 132 s at 8789 MB/s, target 60 s") for w in est.warnings)


@pytest.mark.parametrize("params_billion", [1.5, 27.4, 72.7, 405.0])
@pytest.mark.parametrize("target", [30, 300])
def test_the_suggestion_is_a_valid_lustre_shape_that_meets_both_needs(params_billion, target):
    nbytes = params_billion * 1e9 * 16
    required = sizing.required_capacity_gib(nbytes, 3, params_billion * 1e9 * 2)
    s = sizing.suggest_lustre(required, nbytes, target)
    assert LUSTRE_TIERS[s.tier].accepts(s.capacity_gib), s
    assert s.capacity_gib >= required
    assert sizing.checkpoint_write_seconds(nbytes, s.capacity_gib, s.tier) <= target + 1e-9


def test_with_prices_the_suggestion_is_the_cheapest_valid_shape():
    prices = {125: 0.145, 250: 0.21, 500: 0.34, 1000: 0.60}
    s = sizing.suggest_lustre(100, 24e9, 300, prices.get)
    assert (s.capacity_gib, s.tier) == (9000, 1000) and s.monthly_usd == pytest.approx(9000 * 0.60)


def test_the_b200_stack_checkpoints_1_16_tb_in_66_seconds_with_room_to_spare():
    est = estimates.compute(stack_plan("b200")).checkpoints
    assert est.policy.keep_top_k == 2 and est.policy.kept_checkpoints == 2
    assert round(est.write_seconds, 1) == 66.2
    assert est.required_gib == 3799 and est.fits and est.fast_enough


def test_the_h200_stack_uses_nemo_rls_default_keep_top_k():
    est = estimates.compute(stack_plan("h200")).checkpoints
    # One save a step (the derived save period), so keep_top_k decides what is kept.
    assert est.policy.keep_top_k == 3 and est.policy.save_period == 1 and est.policy.kept_checkpoints == 3
    assert est.checkpoint_bytes == pytest.approx(27.4e9 * 16)
    assert est.write_seconds == pytest.approx(27.4e9 * 16 / (18000 / 1024 * 500 * 1e6))


@pytest.mark.parametrize(
    "stack, size, seconds",
    [("b200", "1.16 TB", "66.2 s"), ("h200", "438.40 GB", "49.9 s"), ("dev", "24.00 GB", "2.7 s")],
)
def test_the_plan_text_prints_checkpoint_size_write_time_and_capacity_advice(stack, size, seconds):
    text = render_tree(stack_plan(stack))
    block = text[text.index("\nCheckpoints (") : text.index("\nDeploy time")]
    assert f"one checkpoint        {size}" in block
    assert f"write to Lustre       {seconds}" in block
    assert "capacity needed" in block and "smallest valid Lustre" in block
