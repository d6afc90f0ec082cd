"""Every input the program sends uses the provider's real property names and JSON types."""

import copy

import pytest

from conftest import STACKS, stack_plan
from provider_schema import check_inputs, is_checked


@pytest.mark.parametrize("stack", STACKS)
def test_every_resource_input_exists_in_the_provider_schema_with_its_type(stack):
    plan = stack_plan(stack)
    checked = [r for r in plan.resources if r.custom and is_checked(r.type)]
    problems = [f"{r.name} ({r.type}): {p}" for r in checked for p in check_inputs(r.type, r.inputs)]
    assert not problems, "\n".join(problems)


def test_a_misspelt_nested_key_is_reported_with_its_path():
    problems = check_inputs(
        "gcp:container/nodePool:NodePool",
        {"cluster": "c", "nodeConfig": {"machineTyp": "a4-highgpu-8g", "guestAccelerators": [{"type": "nvidia-b200", "count": 8}]}},
    )
    assert len(problems) == 1 and problems[0].startswith("nodeConfig.machineTyp: no such property"), problems


def test_an_integer_where_the_schema_says_string_is_reported():
    problems = check_inputs("gcp:lustre/instance:Instance", {"capacityGib": 18000, "perUnitStorageThroughput": "500"})
    assert problems == ["capacityGib: expected string, got int 18000"]


def test_a_string_where_the_schema_says_boolean_is_reported_inside_an_array():
    problems = check_inputs(
        "gcp:container/cluster:Cluster", {"addonsConfig": {"rayOperatorConfigs": [{"enabled": "true"}]}}
    )
    assert problems == ["addonsConfig.rayOperatorConfigs[0].enabled: expected boolean, got str 'true'"]


def test_resources_missing_from_the_subset_are_checked_against_the_installed_sdk():
    good = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "x"},
            "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "i", "volumeMounts": [{"name": "v", "mountPath": "/v"}]}]}}}}
    assert check_inputs("kubernetes:apps/v1:DaemonSet", good) == []
    bad = copy.deepcopy(good)
    bad["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]["mountpath"] = "/v"
    assert check_inputs("kubernetes:apps/v1:DaemonSet", bad) == [
        next(p for p in check_inputs("kubernetes:apps/v1:DaemonSet", bad))
    ] and "volumeMounts[0].mountpath: no such property" in check_inputs("kubernetes:apps/v1:DaemonSet", bad)[0]
    assert check_inputs("gcp:compute/router:Router", {"name": "r", "network": "n", "bgp": {"asn": "64514"}}) == [
        "bgp.asn: expected integer, got str '64514'"
    ]


def test_a_plan_resource_with_a_planted_misspelling_fails_the_check():
    plan = stack_plan("b200")
    pool = plan.one("gcp:container/nodePool:NodePool", "gpu-pool")
    assert check_inputs(pool.type, pool.inputs) == [], pool.name
    inputs = copy.deepcopy(pool.inputs)
    inputs["nodeConfig"]["spott"] = inputs["nodeConfig"].pop("spot")
    assert any(p.startswith("nodeConfig.spott: no such property") for p in check_inputs(pool.type, inputs)), pool.name
