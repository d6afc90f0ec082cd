"""Which node pool edits replace the pool (tools/pool_replacement.py), on real plans of the program."""

from __future__ import annotations

import pytest
from conftest import merged, run_plan, stack_plan
from provider_schema import check_inputs

from tools.pool_replacement import FORCE_NEW, NODE_POOL_TYPE, compare, config_keys, replacing_changes

GPU_POOL, SYSTEM_POOL = "gke-gpu-pool", "gke-system-pool"


def lines_for(before, after) -> dict[str, str]:
    return {
        line.split(":", 1)[0].removeprefix("node pool "): line for line in compare(before.to_json(), after.to_json())
    }


@pytest.mark.parametrize(
    "patch, cause",
    [
        ({"provisioning": "onDemand"}, "nodeConfig.spot: true -> unset"),
        ({"compactPlacement": True}, "placementPolicy: unset -> set"),
        ({"gpuDriverVersion": "DEFAULT"}, "nodeConfig.guestAccelerators"),
    ],
)
def test_an_edit_of_a_force_new_input_is_reported_as_replacing_the_gpu_pool(patch, cause):
    after = run_plan("h200", gpuPool=merged("h200", "gpuPool", patch))
    lines = lines_for(stack_plan("h200"), after)
    assert "REPLACED" in lines[GPU_POOL] and "every node of the pool is lost" in lines[GPU_POOL], lines
    assert cause in lines[GPU_POOL], lines[GPU_POOL]
    assert lines[SYSTEM_POOL] == f"node pool {SYSTEM_POOL}: unchanged"


def test_a_node_count_change_updates_the_gpu_pool_in_place():
    after = run_plan("h200", gpuPool=merged("h200", "gpuPool", {"nodeCount": 3}))
    assert lines_for(stack_plan("h200"), after)[GPU_POOL] == f"node pool {GPU_POOL}: updated in place"


def test_a_new_name_prefix_replaces_both_pools():
    lines = lines_for(stack_plan("dev"), run_plan("dev", namePrefix="dev2"))
    assert "REPLACED" in lines[GPU_POOL] and "REPLACED" in lines[SYSTEM_POOL], lines
    assert 'name: "dev-system" -> "dev2-system"' in lines[SYSTEM_POOL]


def test_a_block_that_only_changes_inside_does_not_count_as_a_replacement():
    # placementPolicy is ForceNew as a block; its `type` is updated in place upstream.
    old = {"placementPolicy": {"type": "COMPACT"}}
    assert replacing_changes(old, {"placementPolicy": {"type": "OTHER"}}) == []
    assert replacing_changes(old, {}) == ["placementPolicy: set -> unset"]


def test_every_force_new_path_is_an_input_of_the_node_pool_in_the_installed_provider():
    # A misspelt path would never match, and the plan would call a replacing edit harmless.
    for path in FORCE_NEW:
        doc: dict = {}
        cursor = doc
        parts = path.split(".")
        for part in parts[:-1]:
            cursor = cursor.setdefault(part, {})
        cursor[parts[-1]] = object()  # any value: only an unknown name is reported as such
        unknown = [p for p in check_inputs(NODE_POOL_TYPE, doc) if "no such input" in p]
        assert not unknown, f"{path}: {unknown}"


def test_the_text_plan_lists_the_config_keys_that_replace_each_pool():
    plan = stack_plan("h200")
    gpu = plan.one(NODE_POOL_TYPE, "gpu-pool")
    keys = config_keys(gpu.inputs)
    assert {"gpuPool.provisioning", "gpuPool.compactPlacement", "gpuPool.gpuDriverVersion", "flavour"} <= set(keys)
    assert "gpuPool.nodeCount" not in keys
    assert "gpuPool.provisioning" not in config_keys(plan.one(NODE_POOL_TYPE, "system-pool").inputs)
