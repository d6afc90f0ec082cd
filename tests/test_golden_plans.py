"""Every committed stack's plan equals its golden file (tests/golden/), resource by resource.

A failure names the stack, the resource and the input path that changed. When the change is
intended, regenerate with `make golden` and review the diff of tests/golden/ like code."""

from __future__ import annotations

import json

import pytest
from conftest import stack_plan

from infra.stack_file import available_stacks
from tools.golden_plans import GOLDEN_DIR, differences, golden_path, render
from tools.offline_plan import ROOT, plan_document


def test_every_committed_stack_has_a_golden_plan_and_no_golden_is_orphaned():
    assert sorted(p.stem for p in GOLDEN_DIR.glob("*.json")) == available_stacks(ROOT)


@pytest.mark.parametrize("stack", available_stacks(ROOT))
def test_the_plan_of_the_committed_stack_equals_its_golden_file(stack):
    got = json.loads(render(plan_document(stack_plan(stack))))
    want = json.loads(golden_path(stack).read_text())
    diffs = list(differences(want, got))
    assert not diffs, (
        f"{stack}: plan differs from tests/golden/{stack}.json (run `make golden` if intended):\n"
        + "\n".join(diffs[:20])
    )


def test_a_changed_input_is_named_by_resource_and_path():
    want = {
        "resources": [{"urn": "urn:pulumi:s::p::gcp:compute/network:Network::network-vpc", "inputs": {"mtu": 8896}}]
    }
    got = {"resources": [{"urn": "urn:pulumi:s::p::gcp:compute/network:Network::network-vpc", "inputs": {"mtu": 1460}}]}
    assert list(differences(want, got)) == ["resource network-vpc.inputs.mtu: 8896 -> 1460"]


def test_a_dropped_input_and_a_new_resource_are_named():
    urn = "urn:pulumi:s::p::gcp:servicenetworking/connection:Connection::network-psa"
    want = {"resources": [{"urn": urn, "inputs": {"deletionPolicy": "ABANDON"}}]}
    got = {"resources": [{"urn": urn, "inputs": {}}, {"urn": urn + "-2", "inputs": {}}]}
    assert list(differences(want, got)) == [
        'resource network-psa.inputs.deletionPolicy: missing (golden has "ABANDON")',
        "resource network-psa-2: new",
    ]
