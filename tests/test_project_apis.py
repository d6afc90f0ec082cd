"""The API list covers every Google Cloud resource type a stack registers."""

from __future__ import annotations

import pytest

from conftest import STACKS, stack_plan
from infra.project_apis import API_BY_RESOURCE_TYPE, REQUIRED_APIS


@pytest.mark.parametrize("stack", STACKS)
def test_every_google_resource_type_of_the_plan_names_its_api(stack):
    types = {r.type for r in stack_plan(stack).resources if r.type.startswith("gcp:")}
    assert types, stack
    missing = sorted(types - set(API_BY_RESOURCE_TYPE))
    assert not missing, f"{stack}: no API listed in infra/project_apis.py for {missing}"


def test_the_required_list_holds_each_api_once_and_the_ones_a_fresh_project_lacks():
    assert list(REQUIRED_APIS) == sorted(set(REQUIRED_APIS))
    assert {"compute.googleapis.com", "container.googleapis.com", "lustre.googleapis.com",
            "servicenetworking.googleapis.com", "iam.googleapis.com", "cloudresourcemanager.googleapis.com"} <= set(REQUIRED_APIS)
