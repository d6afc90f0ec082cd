"""Managed Lustre on the cluster VPC, and the artifact bucket reachable through Workload Identity."""

from __future__ import annotations

import re

import pytest
from conftest import STACKS, merged, run_plan, stack_plan

from infra.storage import parse_mount_point

LUSTRE = "gcp:lustre/instance:Instance"
CONNECTION = "gcp:servicenetworking/connection:Connection"
CLUSTER = "gcp:container/cluster:Cluster"
BUCKET = "gcp:storage/bucket:Bucket"
IAM_MEMBER = "gcp:storage/bucketIAMMember:BucketIAMMember"

# Pulumi.<stack>.yaml: capacity and tier as the API must receive them (strings).
LUSTRE_SIZES = {"dev": ("9000", "1000"), "b200": ("36000", "500"), "h200": ("18000", "500")}
ZONES = {"dev": "us-east1-b", "b200": "us-east1-b", "h200": "europe-west1-b"}
REGIONS = {"dev": "us-east1", "b200": "us-east1", "h200": "europe-west1"}
BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{1,61}[a-z0-9]$")


def dependency_closure(plan, resource):
    """Every URN `resource` waits for, directly or through other resources."""
    by_urn = plan.by_urn()
    seen: set[str] = set()
    todo = list(resource.dependencies)
    while todo:
        urn = todo.pop()
        if urn in seen:
            continue
        seen.add(urn)
        if urn in by_urn:
            todo.extend(by_urn[urn].dependencies)
    return seen


@pytest.mark.parametrize("stack", STACKS)
def test_lustre_capacity_and_throughput_are_sent_as_strings(stack):
    instance = stack_plan(stack).one(LUSTRE)
    capacity, tier = LUSTRE_SIZES[stack]
    assert instance.inputs["capacityGib"] == capacity, instance.name
    assert instance.inputs["perUnitStorageThroughput"] == tier, instance.name


@pytest.mark.parametrize("stack", STACKS)
def test_lustre_lives_in_the_stack_zone_on_the_cluster_vpc(stack):
    plan = stack_plan(stack)
    instance, cluster = plan.one(LUSTRE), plan.one(CLUSTER)
    # Lustre is in the zone of the nodes (the cluster's control plane is regional, its nodes are there).
    assert instance.inputs["location"] == ZONES[stack], instance.name
    assert cluster.inputs["nodeLocations"] == [ZONES[stack]], cluster.name
    assert instance.inputs["network"] == f"projects/my-gcp-project/global/networks/{stack}-vpc", instance.name
    assert instance.inputs["network"] == cluster.inputs["network"] == plan.one(CONNECTION).inputs["network"], (
        instance.name
    )
    assert instance.inputs["instanceId"] == f"{stack}-lustre", instance.name
    assert instance.inputs["filesystem"] == "lustrefs", instance.name
    assert instance.inputs["project"] == "my-gcp-project", instance.name


@pytest.mark.parametrize("stack", STACKS)
def test_lustre_waits_for_the_psa_connection(stack):
    plan = stack_plan(stack)
    instance, connection = plan.one(LUSTRE), plan.one(CONNECTION)
    assert connection.urn in instance.dependencies, f"{instance.name} does not wait for {connection.name}"


@pytest.mark.parametrize("stack", STACKS)
def test_lustre_and_the_cluster_are_created_independently_of_each_other(stack):
    plan = stack_plan(stack)
    instance, cluster = plan.one(LUSTRE), plan.one(CLUSTER)
    pools = plan.by_type("gcp:container/nodePool:NodePool")
    assert cluster.urn not in dependency_closure(plan, instance), f"{instance.name} waits for {cluster.name}"
    assert instance.urn not in dependency_closure(plan, cluster), f"{cluster.name} waits for {instance.name}"
    for pool in pools:
        assert instance.urn not in dependency_closure(plan, pool), f"{pool.name} waits for {instance.name}"


@pytest.mark.parametrize("stack", STACKS)
def test_gke_support_is_off_so_the_csi_driver_mounts_on_port_988(stack):
    plan = stack_plan(stack)
    instance, cluster = plan.one(LUSTRE), plan.one(CLUSTER)
    assert instance.inputs["gkeSupportEnabled"] is False, instance.name
    assert cluster.inputs["addonsConfig"]["lustreCsiDriverConfig"]["enableLegacyLustrePort"] is False, cluster.name


def test_legacy_port_enables_gke_support_and_the_cluster_flag_together():
    plan = run_plan("dev", lustre=merged("dev", "lustre", {"legacyPort": True}))
    instance, cluster = plan.one(LUSTRE), plan.one(CLUSTER)
    assert instance.inputs["gkeSupportEnabled"] is True, instance.name
    assert cluster.inputs["addonsConfig"]["lustreCsiDriverConfig"] == {
        "enabled": True,
        "enableLegacyLustrePort": True,
        "disableMultiNic": True,
    }, cluster.name


@pytest.mark.parametrize("stack", STACKS)
def test_lustre_has_generous_timeouts_and_is_a_child_of_its_component(stack):
    plan = stack_plan(stack)
    instance, component = plan.one(LUSTRE), plan.one("nemo-rl-gke:infra:Lustre")
    assert instance.parent == component.urn, instance.name
    # The provider's own create default (magic-modules PR #16046), for a service whose P99 is 40-80 minutes (PR #14878).
    assert instance.options["customTimeouts"]["create"] == "120m", instance.name
    outputs = plan.component_outputs[component.urn]
    assert outputs["mountIp"] == "10.16.0.2"
    assert outputs["volumeHandle"] == f"my-gcp-project/{ZONES[stack]}/{stack}-lustre"
    assert outputs["capacityGib"] == int(LUSTRE_SIZES[stack][0]) and outputs["location"] == ZONES[stack]


@pytest.mark.parametrize("stack", STACKS)
def test_lustre_mount_ip_is_exported_from_the_mount_point(stack):
    outputs = stack_plan(stack).outputs
    assert outputs["lustreMountIp"] == "10.16.0.2"
    assert outputs["lustreInstanceId"] == f"{stack}-lustre"


def test_mount_point_parsing_takes_the_address_before_the_lnet_suffix():
    assert parse_mount_point("10.90.1.4@tcp:/lustrefs") == "10.90.1.4"
    with pytest.raises(ValueError, match="unexpected Lustre mount point"):
        parse_mount_point("/lustrefs")


@pytest.mark.parametrize("stack", STACKS)
def test_artifact_bucket_is_regional_hierarchical_uniform_and_never_public(stack):
    plan = stack_plan(stack)
    bucket = plan.one(BUCKET)
    assert bucket.inputs["location"] == REGIONS[stack].upper(), bucket.name
    assert bucket.inputs["hierarchicalNamespace"] == {"enabled": True}, bucket.name
    assert bucket.inputs["uniformBucketLevelAccess"] is True, bucket.name
    assert bucket.inputs["publicAccessPrevention"] == "enforced", bucket.name
    assert bucket.inputs["labels"]["component"] == "artifacts" and bucket.inputs["labels"]["stack"] == stack, (
        bucket.name
    )
    assert plan.outputs["bucketName"] == bucket.inputs["name"] == f"my-gcp-project-{stack}-artifacts"


@pytest.mark.parametrize("stack, delete", [("dev", True), ("b200", False), ("h200", False)])
def test_destroy_keeps_the_bucket_and_its_objects_unless_the_stack_opts_in(stack, delete):
    bucket = stack_plan(stack).one(BUCKET)
    assert bucket.inputs["forceDestroy"] is delete, bucket.name
    assert bucket.options.get("retainOnDelete", False) is (not delete), f"{bucket.name}: {bucket.options}"
    assert "protect" not in bucket.options, f"{bucket.name} is protected: `pulumi destroy` would stop at it"


def test_deletion_protection_of_the_cluster_no_longer_decides_the_fate_of_the_bucket():
    cluster = merged("b200", "cluster", {"deletionProtection": False})
    bucket = run_plan("b200", cluster=cluster).one(BUCKET)
    assert bucket.inputs["forceDestroy"] is False and bucket.options["retainOnDelete"] is True, bucket.name


def test_a_kept_bucket_can_be_adopted_by_a_stack_recreated_under_the_same_name():
    plan = run_plan("b200", storage={"adoptExistingBucket": True})
    bucket = plan.one(BUCKET)
    assert bucket.options["import"] == "my-gcp-project-b200-artifacts" == bucket.inputs["name"], bucket.name
    assert "import" not in stack_plan("b200").one(BUCKET).options, bucket.name


def test_bucket_name_stays_a_valid_global_name_for_long_project_ids():
    project = "a-very-long-project-id-1234567"  # 30 characters, the maximum
    plan = run_plan("dev", project=project, namePrefix="averylongprefix12345")
    name = plan.one(BUCKET).inputs["name"]
    assert len(name) <= 63 and BUCKET_NAME.match(name), name
    assert name.startswith(project), name


@pytest.mark.parametrize("stack", STACKS)
def test_ray_service_account_may_use_objects_of_the_bucket_through_workload_identity(stack):
    plan = stack_plan(stack)
    member, bucket = plan.one(IAM_MEMBER, "-object-user"), plan.one(BUCKET)
    assert member.inputs["role"] == "roles/storage.objectUser", member.name
    assert member.inputs["member"] == (
        "principal://iam.googleapis.com/projects/123456789012/locations/global/"
        "workloadIdentityPools/my-gcp-project.svc.id.goog/subject/ns/nemo-rl/sa/ray"
    ), member.name
    assert member.inputs["bucket"] == bucket.inputs["name"], member.name
    assert bucket.urn in member.dependencies, f"{member.name} does not wait for {bucket.name}"


@pytest.mark.parametrize("stack", STACKS)
def test_the_workload_identity_grant_waits_for_the_cluster_whose_pool_it_names(stack):
    # The pool exists only once a Workload Identity cluster does; the principal is built from the
    # cluster's reported pool, so the grant depends on the cluster through its data.
    plan = stack_plan(stack)
    member, cluster = plan.one(IAM_MEMBER, "-object-user"), plan.one("gcp:container/cluster:Cluster")
    assert cluster.urn in member.dependencies, f"{member.name} does not wait for {cluster.name}"
    pool = cluster.inputs["workloadIdentityConfig"]["workloadPool"]
    assert f"/workloadIdentityPools/{pool}/subject/" in member.inputs["member"], member.name


def test_principal_follows_the_configured_namespace_and_service_account():
    plan = run_plan("dev", ray=merged("dev", "ray", {"namespace": "rl", "serviceAccount": "trainer"}))
    assert plan.one(IAM_MEMBER, "-object-user").inputs["member"].endswith("/subject/ns/rl/sa/trainer")


@pytest.mark.parametrize("stack", STACKS)
def test_bucket_resources_are_children_of_the_bucket_component(stack):
    plan = stack_plan(stack)
    component = plan.one("nemo-rl-gke:infra:ArtifactBucket")
    for r in (plan.one(BUCKET), plan.one(IAM_MEMBER, "-object-user")):
        assert r.parent == component.urn, f"{r.name} is not parented by {component.name}"
    assert plan.component_outputs[component.urn]["bucketUrl"] == f"gs://my-gcp-project-{stack}-artifacts"
