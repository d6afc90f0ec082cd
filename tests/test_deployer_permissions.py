"""The deployer's permission list matches what each stack registers."""

from __future__ import annotations

import pytest
from conftest import STACKS, stack_plan

from infra.stack_file import load_stack
from tools.deployer_permissions import BY_RESOURCE_TYPE, IN_CLUSTER, required_permissions, resource_types


@pytest.mark.parametrize("stack", STACKS)
def test_the_resource_types_the_doctor_assumes_are_those_the_plan_registers(stack):
    planned = {r.type for r in stack_plan(stack).resources if r.type.startswith("gcp:")}
    assert resource_types(load_stack(stack).config) == planned


def test_every_listed_type_names_a_role_and_permissions():
    for typ, grants in BY_RESOURCE_TYPE.items():
        assert grants, typ
        for grant in grants:
            assert grant.role.startswith("roles/") and grant.permissions, typ
            assert all(p.count(".") >= 2 for p in grant.permissions), typ


def test_lustre_transfers_ask_for_their_permissions_only_when_configured():
    export = load_stack("b200").config  # exportOnDestroy: true (the default)
    scratch = load_stack("dev").config  # exportOnDestroy: false
    assert "lustre.instances.exportData" in required_permissions(export)
    assert "lustre.instances.exportData" not in required_permissions(scratch)
    assert "lustre.instances.importData" not in required_permissions(export)


# ----------------------------------------------------------------------------- every type of the plan


@pytest.mark.parametrize("stack", STACKS)
def test_every_custom_resource_type_of_the_plan_has_what_it_needs_listed(stack):
    # The Kubernetes provider calls no API when created: it is only configured.
    listed = {*BY_RESOURCE_TYPE, *IN_CLUSTER, "pulumi:providers:kubernetes"}
    types = {r.type for r in stack_plan(stack).resources if r.custom}
    missing = sorted(t for t in types if t not in listed and not t.startswith("kubernetes:"))
    assert missing == [], f"resource types with no entry in tools/deployer_permissions.py: {missing}"


def test_the_deploy_page_names_the_roles_the_issue_lists():
    from tools.deployer_permissions import roles_table

    table = roles_table()
    for role in (
        "roles/serviceusage.serviceUsageAdmin",
        "roles/compute.networkAdmin",
        "roles/servicenetworking.networksAdmin",
        "roles/iam.serviceAccountAdmin",
        "roles/resourcemanager.projectIamAdmin",
        "roles/iam.serviceAccountUser",
        "roles/lustre.admin",
        "roles/container.admin",
        "roles/storage.admin",
        "roles/monitoring.dashboardEditor",
        "roles/logging.configWriter",
    ):
        assert f"--role={role}" in table, role


def test_private_service_access_asks_for_the_internal_range_its_labels_the_network_and_the_peering():
    needed = required_permissions(load_stack("dev").config)
    for permission, role in (
        ("compute.globalAddresses.createInternal", "roles/compute.networkAdmin"),
        ("compute.globalAddresses.setLabels", "roles/compute.networkAdmin"),  # the range is labelled
        ("compute.networks.use", "roles/compute.networkAdmin"),
        ("servicenetworking.services.addPeering", "roles/servicenetworking.networksAdmin"),
    ):
        assert needed.get(permission) == role, permission


def test_destroy_asks_for_the_delete_of_every_type_it_deletes_and_for_the_psa_teardown():
    needed = required_permissions(load_stack("dev").config)  # storage.deleteBucketOnDestroy: true
    for permission in (
        "compute.networks.delete",
        "compute.subnetworks.delete",
        "compute.firewalls.delete",
        "compute.routers.delete",
        "compute.globalAddresses.deleteInternal",
        "container.clusters.delete",
        "iam.serviceAccounts.delete",
        "lustre.instances.delete",
        "storage.buckets.delete",
        "storage.objects.delete",
        "logging.logMetrics.delete",
        "monitoring.dashboards.delete",
        "servicenetworking.services.deleteConnection",
        "compute.networks.removePeering",
    ):
        assert permission in needed, permission


def test_a_kept_bucket_asks_for_no_delete():
    kept = load_stack("h200").config  # deleteBucketOnDestroy: false (the default): Pulumi only forgets it
    assert not kept.storage.delete_bucket_on_destroy
    assert "storage.buckets.delete" not in required_permissions(kept)
