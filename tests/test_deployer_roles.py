"""Every resource type a plan can hold has the roles its calls need listed (docs/deploy.md)."""

from __future__ import annotations

import pytest

from conftest import ROOT, STACKS, run_plan, stack_plan
from tools import deployer_roles, reference_docs

VARIANTS = {
    "without API management": {"manageApis": False},
    "with an import": {"lustre": {"capacityGib": 9000, "perUnitStorageThroughput": 1000,
                                  "exportOnDestroy": False, "importFrom": "gs://other-bucket/lustre-export/"}},
}


def custom_types(plan) -> set[str]:
    return {r.type for r in plan.resources if r.custom}


@pytest.mark.parametrize("stack", STACKS)
def test_every_resource_type_of_the_stack_has_its_roles_listed(stack):
    missing = sorted(t for t in custom_types(stack_plan(stack))
                     if not t.startswith("kubernetes:") and t not in deployer_roles.ROLES_OF_TYPE)
    assert missing == [], f"resource types without a role entry in tools/deployer_roles.py: {missing}"


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_resource_type_of_a_variant_has_its_roles_listed(variant):
    for t in custom_types(run_plan("dev", **VARIANTS[variant])):
        deployer_roles.roles_of(t)  # KeyError names the type


def test_the_table_lists_no_type_that_no_plan_holds():
    seen = set().union(*(custom_types(stack_plan(s)) for s in STACKS))
    stale = sorted(set(deployer_roles.ROLES_OF_TYPE) - seen)
    assert stale == [], f"entries for types no committed stack creates: {stale}"


def test_a_new_resource_type_without_an_entry_is_refused():
    with pytest.raises(KeyError):
        deployer_roles.roles_of("gcp:compute/instance:Instance")


def test_the_roles_cover_what_the_issue_names():
    roles = deployer_roles.all_roles()
    for role in ("roles/serviceusage.serviceUsageAdmin", "roles/compute.networkAdmin", "roles/servicenetworking.networksAdmin",
                 "roles/iam.serviceAccountAdmin", "roles/resourcemanager.projectIamAdmin", "roles/iam.serviceAccountUser",
                 "roles/lustre.admin", "roles/container.admin", "roles/storage.admin", "roles/monitoring.dashboardEditor",
                 "roles/logging.configWriter"):
        assert role in roles, role


def test_docs_deploy_lists_the_current_roles_and_apis():
    text = (ROOT / "docs" / "deploy.md").read_text()
    assert reference_docs.render(text, reference_docs.DEPLOY_SECTIONS, "docs/deploy.md") == text, (
        "docs/deploy.md roles or API list is stale: run `make docs`"
    )
