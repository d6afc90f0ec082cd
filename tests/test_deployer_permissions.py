"""The deployer's permission list matches what each stack registers."""

from __future__ import annotations

import pytest

from conftest import STACKS, stack_plan
from infra.stack_file import load_stack
from tools.deployer_permissions import BY_RESOURCE_TYPE, required_permissions, resource_types


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
