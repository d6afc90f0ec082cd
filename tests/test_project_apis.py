"""The API list covers every Google Cloud resource type a stack registers."""

from __future__ import annotations

import pytest
from conftest import STACKS, merged, run_plan, stack_plan

from infra.project_apis import API_BY_RESOURCE_TYPE, IMAGE_STREAMING_APIS, REQUIRED_APIS, required_apis
from tools.estimates import stack_config


@pytest.mark.parametrize("stack", STACKS)
def test_every_google_resource_type_of_the_plan_names_its_api(stack):
    types = {r.type for r in stack_plan(stack).resources if r.type.startswith("gcp:")}
    assert types, stack
    missing = sorted(types - set(API_BY_RESOURCE_TYPE))
    assert not missing, f"{stack}: no API listed in infra/project_apis.py for {missing}"


def test_the_required_list_holds_each_api_once_and_the_ones_a_fresh_project_lacks():
    assert list(REQUIRED_APIS) == sorted(set(REQUIRED_APIS))
    assert {
        "compute.googleapis.com",
        "container.googleapis.com",
        "lustre.googleapis.com",
        "servicenetworking.googleapis.com",
        "iam.googleapis.com",
        "cloudresourcemanager.googleapis.com",
    } <= set(REQUIRED_APIS)


SERVICE = "gcp:projects/service:Service"


def services_by_api(plan) -> dict[str, object]:
    return {r.inputs["service"]: r for r in plan.by_type(SERVICE)}


@pytest.mark.parametrize("stack", STACKS)
def test_every_api_the_stack_calls_is_enabled_and_left_on_by_destroy(stack):
    plan = stack_plan(stack)
    services = services_by_api(plan)
    assert sorted(services) == sorted(required_apis(stack_config(plan)))
    for api, service in services.items():
        assert service.inputs["project"] == "my-gcp-project", service.name
        assert service.inputs["disableOnDestroy"] is False, f"{service.name} would turn {api} off on destroy"


@pytest.mark.parametrize("stack", STACKS)
def test_every_google_cloud_resource_waits_for_the_api_it_calls(stack):
    plan = stack_plan(stack)
    services = services_by_api(plan)
    checked = 0
    for r in plan.resources:
        if not r.type.startswith("gcp:") or r.type == SERVICE:
            continue
        assert r.type in API_BY_RESOURCE_TYPE, (
            f"{r.name}: resource type {r.type} has no API in infra.project_apis.API_BY_RESOURCE_TYPE"
        )
        api = API_BY_RESOURCE_TYPE[r.type]
        assert services[api].urn in r.dependencies, f"{r.name} ({r.type}) does not wait for {api}"
        checked += 1
    assert checked > 20


def test_manage_apis_false_enables_nothing_and_adds_no_api_dependency():
    plan = run_plan("dev", manageApis=False)
    assert plan.by_type(SERVICE) == []
    assert plan.by_type("gcp:container/cluster:Cluster"), "the stack itself is still built"
    service_urns = {r.urn for r in stack_plan("dev").by_type(SERVICE)}
    for r in plan.resources:
        assert not service_urns & set(r.dependencies), r.name


def test_image_streaming_adds_artifact_registry_and_the_container_file_system_api_and_only_it_does():
    assert not set(IMAGE_STREAMING_APIS) & set(REQUIRED_APIS)
    off = services_by_api(run_plan("b200", cluster={"imageStreaming": False}))
    on = services_by_api(run_plan("b200", cluster={"imageStreaming": True}))
    assert set(on) - set(off) == {"artifactregistry.googleapis.com", "containerfilesystem.googleapis.com"}
    assert sorted(off) == sorted(REQUIRED_APIS)


def test_an_image_cache_disk_enables_the_container_file_system_api_its_streaming_needs():
    cached = run_plan("dev", gpuPool=merged("dev", "gpuPool", {"imageCacheDiskImage": "global/images/nemo-rl-v0-6"}))
    assert "containerfilesystem.googleapis.com" in services_by_api(cached)
    assert "artifactregistry.googleapis.com" not in services_by_api(cached)
