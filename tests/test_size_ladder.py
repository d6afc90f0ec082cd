"""The size ladder (workloads/size_ladder.py): which node counts a run can train on, computed once at plan time
(infra/run_plan.py), shown in the plan's text and JSON, shipped in run.json, and the resized job an attempt on
fewer nodes submits."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
from conftest import spec_of, stack_plan
from test_run_plan import run_json

from infra.config import ConfigError
from infra.placement import gpu_pool_facts
from infra.run_plan import run_plan_for_stack, size_ladder
from infra.stack_context import StackContext
from jobctl.stack import load_stack
from tools.offline_plan import plan_document, size_ladder_lines, size_ladder_report
from workloads import size_ladder as sl
from workloads.job_spec import build_job
from workloads.run_owner import RunPlan


def test_b200_trains_on_8_4_or_2_nodes_and_6_fails_the_batch_check():
    doc = plan_document(stack_plan("b200"))["sizeLadder"]
    assert doc["nodes"] == [8, 4, 2]
    refused = {r["nodes"]: r["why"] for r in doc["refused"]}
    assert sorted(refused) == [1, 3, 5, 6, 7]
    assert refused[6] == "data parallel 3 (48 GPUs / 16) does not divide policy.train_global_batch_size 256"
    assert refused[7] == "56 training GPUs are not a multiple of TP 4 x PP 4 x CP 1 = 16"
    assert doc["cannotShrink"] is None and doc["shrink"]["enabled"] is True and doc["shrink"]["minNodes"] == 2


def test_b200s_text_plan_prints_the_ladder_and_each_refusal():
    lines = size_ladder_lines(size_ladder_report(stack_plan("b200")))
    assert lines[0].startswith("Size ladder: 8, 4, 2 nodes; recovery.shrink on: 10 min")
    assert "  6 refused: data parallel 3 (48 GPUs / 16) does not divide policy.train_global_batch_size 256" in lines


def test_b200s_run_json_ships_each_smaller_size_with_its_node_count_and_lease():
    run = RunPlan.from_dict(run_json(stack_plan("b200")))
    assert run.shrink_sizes == [
        {"nodes": 4, "overrides": ["cluster.num_nodes=4", "checkpointing.checkpoint_must_save_by=00:01:00:00"]},
        {"nodes": 2, "overrides": ["cluster.num_nodes=2", "checkpointing.checkpoint_must_save_by=00:01:00:00"]},
    ]
    assert (run.shrink_wait_minutes, run.shrink_lease_minutes) == (10, 60)


def test_h200_cannot_shrink_because_generation_keeps_its_own_node_and_the_plan_says_so():
    doc = size_ladder_report(stack_plan("h200"))
    assert doc["nodes"] == [2] and doc["shrink"]["enabled"] is False
    assert doc["cannotShrink"] == "1: generation keeps its own 1 node(s) (not colocated): none left to train on"
    assert size_ladder_lines(doc)[0].startswith("Size ladder: 2 node(s); cannot shrink (1: generation keeps")
    assert RunPlan.from_dict(run_json(stack_plan("h200"))).shrink_sizes == []


def _pool(stack: str, cfg):
    return gpu_pool_facts(StackContext.from_config(stack, cfg), cfg)


def test_shrinking_a_run_that_cannot_shrink_is_refused_in_one_line_naming_the_key():
    cfg = load_stack("h200").config
    cfg = cfg.model_copy(
        update={
            "recovery": cfg.recovery.model_copy(
                update={"shrink": cfg.recovery.shrink.model_copy(update={"enabled": True})}
            )
        }
    )
    with pytest.raises(ConfigError) as err:
        run_plan_for_stack("h200", cfg, _pool("h200", cfg), None)
    assert str(err.value).startswith("nemo-rl-gke:recovery.shrink.enabled: job.recipe 'gemma3-27b-gsm8k' on 2 node(s)")
    assert str(err.value).endswith("; allowed: false") and "\n" not in str(err.value)


def test_rollouts_that_are_no_multiple_of_the_global_batch_refuse_every_size():
    shape = sl.Shape(full_nodes=2, gpus_per_node=8, train_tensor_parallel=8, global_batch=64, rollouts_per_step=96)
    assert all(
        r.refused == "96 rollouts per step are not a multiple of policy.train_global_batch_size 64"
        for r in sl.ladder(shape)
    )


def test_vllm_tensor_parallel_that_does_not_divide_the_gpus_refuses_the_size():
    shape = sl.Shape(
        full_nodes=2, gpus_per_node=4, train_tensor_parallel=1, generation_tensor_parallel=8, global_batch=8
    )
    assert [(r.nodes, r.refused) for r in sl.ladder(shape)] == [
        (2, None),
        (1, "4 generation GPUs are not a multiple of vLLM TP x PP = 8"),
    ]


def test_min_nodes_leaves_the_smaller_sizes_out_and_data_parallel_must_divide_the_batch():
    rungs = sl.ladder(sl.Shape(full_nodes=8, gpus_per_node=8, train_tensor_parallel=8, global_batch=64))
    assert sl.smaller_sizes(rungs) == (4, 2, 1)
    assert sl.smaller_sizes(rungs, min_nodes=3) == (4,)


def test_the_lease_is_nemo_rls_days_hours_minutes_seconds():
    assert sl.lease_text(60) == "00:01:00:00"
    assert sl.lease_text(1500.5) == "01:01:00:30"


def test_the_largest_size_the_alive_nodes_hold_is_chosen():
    sizes = [{"nodes": 4}, {"nodes": 2}]
    assert sl.choose(sizes, 7)["nodes"] == 4
    assert sl.choose(sizes, 3)["nodes"] == 2
    assert sl.choose(sizes, 1) is None


@dataclass(frozen=True)
class Pool:
    node_count: int
    gpus_per_node: int


def test_the_resized_spec_is_the_job_builders_at_that_size_with_the_lease_and_the_same_run():
    """One route per fact: only `cluster.num_nodes` of the entrypoint depends on the pool's size."""
    stack, cfg = "b200", load_stack("b200").config
    full = spec_of(stack, cfg, wandb_key_set=False)
    run = run_plan_for_stack(stack, cfg, _pool(stack, cfg), None)
    four = build_job(cfg.recipe, cfg.job, Pool(4, 8), cfg.ray.mount_path, stack, False, run.save_period)
    (size,) = [s for s in run.shrink_sizes if s["nodes"] == 4]
    resized = sl.resized_spec(full, 4, size["overrides"])
    assert resized.entrypoint == four.entrypoint + " checkpointing.checkpoint_must_save_by=00:01:00:00"
    assert "cluster.num_nodes=8" in full.entrypoint and "cluster.num_nodes=8" not in resized.entrypoint
    assert (resized.submission_id, resized.spec_hash, resized.run_id) == (
        full.submission_id,
        full.spec_hash,
        full.run_id,
    )
    assert resized.metadata[sl.META_NODES] == "4" and sl.META_NODES not in full.metadata
    assert sl.attempt_nodes(resized, 8) == 4 and sl.attempt_nodes(full, 8) == 8


def test_an_entrypoint_not_of_the_builders_form_is_not_resized():
    with pytest.raises(ValueError, match="does not end with"):
        sl.resized_entrypoint("bash run.sh cluster.num_nodes=8", ["cluster.num_nodes=4"])


def test_the_ladder_of_a_stack_counts_down_from_its_pool():
    cfg = load_stack("dev").config
    assert [r.nodes for r in size_ladder(cfg, _pool("dev", cfg))] == [cfg.gpu_pool.node_count]


@pytest.mark.filterwarnings("ignore:Failed to initialize NumPy:UserWarning")
@pytest.mark.filterwarnings("ignore:torch.distributed is disabled:UserWarning")
def test_a_dcp_checkpoint_saved_at_world_size_2_resumes_at_world_size_1_with_the_same_global_batch(tmp_path):
    """The proof on real code that a smaller size resumes where the run was: FSDP2 over gloo at world size 2 saves
    with torch DCP; a fresh world-size-2 run and a world-size-1 run that accumulates gradients over the same global
    batch each resume from it, and their losses agree within 1 % (NVIDIA-NeMo/RL's DTensor path loads through DCP,
    which reshards at load). A run that loads nothing is far off: the comparison would see a failed load."""
    import socket

    import size_change_support as run
    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    checkpoint, out = str(tmp_path / "step_3"), tmp_path / "losses.json"
    # Forked, not spawned: torch is already imported here, and two fresh interpreters importing it cost ~15 s of CPU.
    mp.start_processes(run.at_world_size_2, args=(port, checkpoint, str(out)), nprocs=2, start_method="fork")
    same_size = json.loads(out.read_text())
    smaller = run.at_world_size_1(checkpoint)
    for a, b in zip(same_size, smaller, strict=True):
        assert abs(a - b) <= 0.01 * abs(a), (same_size, smaller)
    not_loaded = run.at_world_size_1(checkpoint, load=False)
    assert abs(not_loaded[0] - same_size[0]) > 0.01 * abs(same_size[0]), (same_size, not_loaded)


def test_a_one_node_pool_has_no_smaller_size_and_the_plan_says_so():
    doc = size_ladder_report(stack_plan("dev"))
    assert doc["nodes"] == [1] and doc["refused"] == []
    assert doc["cannotShrink"] == "the pool has 1 node: no smaller size"
