"""Every input the program sends uses the installed provider SDK's real property names, types and
required inputs (tests/provider_schema.py reads them from pulumi-gcp and pulumi-kubernetes)."""

import copy
import dataclasses

import pulumi_gcp
import pytest
from conftest import ALL_STACKS, stack_plan
from provider_schema import (
    args_class,
    check_inputs,
    is_checked,
    reachable_input_types,
    resource_problems,
    sdk_disagreements,
)

NODE_POOL = "gcp:container/nodePool:NodePool"


def gpu_pool_inputs():
    pool = stack_plan("b200").one(NODE_POOL, "gpu-pool")
    return pool, copy.deepcopy(pool.inputs)


def problems_with(pool, inputs):
    """The SDK check of the plan's GPU pool with its inputs replaced (the plan itself is not touched)."""
    return resource_problems(dataclasses.replace(pool, inputs=inputs))


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_every_resource_input_of_every_stack_exists_in_the_installed_sdk_with_its_type(stack):
    plan = stack_plan(stack)
    checked = [r for r in plan.resources if r.custom and is_checked(r.type)]
    problems = [p for r in checked for p in resource_problems(r)]
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_only_providers_and_dynamic_resources_escape_the_sdk_check(stack):
    skipped = {r.type for r in stack_plan(stack).resources if r.custom and not is_checked(r.type)}
    assert skipped == {
        "pulumi:providers:kubernetes",
        "pulumi-python:dynamic/nemo-rl-gke:JobSubmission",
        "pulumi-python:dynamic/nemo-rl-gke:LustreGuard",
        # The staged weights' import (infra/weight_staging.py): Standard stacks only.
        *(["pulumi-python:dynamic/nemo-rl-gke:WeightsImport"] if stack != "autopilot" else []),
    }


def test_type_tokens_resolve_to_the_sdk_args_classes():
    assert args_class(NODE_POOL) is pulumi_gcp.container.NodePoolArgs
    assert args_class("kubernetes:core/v1:ConfigMap").__name__ == "ConfigMapInitArgs"
    assert args_class("kubernetes:networking.gke.io/v1:Network").__name__ == "CustomResourceArgs"
    with pytest.raises(LookupError, match="gcp:container/nodePol:NodePol"):
        args_class("gcp:container/nodePol:NodePol")


def test_a_misspelt_nested_key_fails_naming_the_resource_and_the_path():
    pool, inputs = gpu_pool_inputs()
    inputs["nodeConfig"]["guestAccelerator"] = inputs["nodeConfig"].pop("guestAccelerators")
    problems = problems_with(pool, inputs)
    assert problems and problems[0].startswith(
        f"{pool.name} ({NODE_POOL}): nodeConfig.guestAccelerator: no such input in NodePoolNodeConfigArgs (did you "
        "mean guestAccelerators?)"
    ), problems


def test_a_string_where_the_sdk_says_integer_fails_naming_the_resource_and_the_path():
    pool, inputs = gpu_pool_inputs()
    inputs["nodeConfig"]["guestAccelerators"][0]["count"] = "8"
    problems = problems_with(pool, inputs)
    assert problems == [
        f"{pool.name} ({NODE_POOL}): nodeConfig.guestAccelerators[0].count: expected integer, got str '8'"
    ]


def test_a_missing_required_nested_input_fails_naming_the_resource_and_the_path():
    pool, inputs = gpu_pool_inputs()
    del inputs["nodeConfig"]["guestAccelerators"][0]["type"]
    problems = problems_with(pool, inputs)
    assert problems == [
        f"{pool.name} ({NODE_POOL}): nodeConfig.guestAccelerators[0].type: required input missing"
        " (NodePoolNodeConfigGuestAcceleratorArgs)"
    ]


def test_a_missing_required_top_level_input_fails():
    _, inputs = gpu_pool_inputs()
    del inputs["cluster"]
    assert check_inputs(NODE_POOL, inputs) == ["cluster: required input missing (NodePoolArgs)"]


def test_an_integer_where_the_sdk_says_string_is_reported():
    problems = check_inputs(
        "gcp:lustre/instance:Instance",
        {
            "instanceId": "l",
            "location": "z",
            "network": "n",
            "filesystem": "fs",
            "capacityGib": 18000,
            "perUnitStorageThroughput": "500",
        },
    )
    assert problems == ["capacityGib: expected string, got int 18000"]


def test_a_string_where_the_sdk_says_boolean_is_reported_inside_an_array():
    problems = check_inputs(
        "gcp:container/cluster:Cluster", {"addonsConfig": {"rayOperatorConfigs": [{"enabled": "true"}]}}
    )
    assert problems == ["addonsConfig.rayOperatorConfigs[0].enabled: expected boolean, got str 'true'"]


def test_kubernetes_objects_are_checked_down_to_container_fields_and_their_api_version():
    good = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "x"},
        "spec": {
            "selector": {},
            "template": {
                "spec": {
                    "containers": [{"name": "c", "image": "i", "volumeMounts": [{"name": "v", "mountPath": "/v"}]}]
                }
            },
        },
    }
    assert check_inputs("kubernetes:apps/v1:DaemonSet", good) == []
    bad = copy.deepcopy(good)
    bad["apiVersion"] = "apps/v1beta2"
    mount = bad["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]
    mount["mountpath"] = mount.pop("mountPath")
    api_version, misspelt, missing = check_inputs("kubernetes:apps/v1:DaemonSet", bad)
    assert api_version == "apiVersion: expected one of ['apps/v1'], got str 'apps/v1beta2'"
    mount_path = "spec.template.spec.containers[0].volumeMounts[0]"
    assert misspelt == (
        f"{mount_path}.mountpath: no such input in VolumeMountArgs (did you mean mountPath or mountPropagation?)"
    )
    assert missing == f"{mount_path}.mountPath: required input missing (VolumeMountArgs)"


@pytest.mark.parametrize(("value", "ok"), [("100%", True), (1, True), ([1], False), (True, False)])
def test_an_int_or_string_input_takes_either_and_nothing_else(value, ok):
    ds = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "x"},
        "spec": {
            "selector": {},
            "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": value}},
        },
    }
    problems = check_inputs("kubernetes:apps/v1:DaemonSet", ds)
    assert (problems == []) is ok, problems
    if not ok:
        assert problems[0].startswith("spec.updateStrategy.rollingUpdate.maxUnavailable: expected integer")


def test_a_crd_kind_needs_api_version_and_kind_and_standard_metadata():
    problems = check_inputs(
        "kubernetes:networking.gke.io/v1:Network", {"metadata": {"nam": "x"}, "spec": {"type": "Device"}}
    )
    assert problems[0].startswith("metadata.nam: no such input in ObjectMetaArgs")
    assert problems[1:] == [
        "apiVersion: required input missing (CustomResourceArgs)",
        "kind: required input missing (CustomResourceArgs)",
    ]


def test_placeholders_for_secrets_and_unknowns_pass_any_type():
    assert (
        check_inputs("gcp:compute/router:Router", {"name": "r", "network": "[unknown]", "bgp": {"asn": "[secret]"}})
        == []
    )
    assert check_inputs("gcp:compute/router:Router", {"name": "r", "network": "n", "bgp": {"asn": "64514"}}) == [
        "bgp.asn: expected integer, got str '64514'"
    ]


def test_the_sdk_args_classes_and_their_typed_dicts_agree_for_every_type_the_plans_reach():
    roots = {args_class(r.type) for s in ALL_STACKS for r in stack_plan(s).resources if r.custom and is_checked(r.type)}
    reached = set().union(*(reachable_input_types(c) for c in roots))
    assert len(reached) > 500  # the Cluster alone reaches hundreds; a walk that stops early fails here
    problems = [p for cls in reached for p in sdk_disagreements(cls)]
    assert not problems, "\n".join(problems)
