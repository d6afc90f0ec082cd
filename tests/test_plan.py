"""The offline plan command: its JSON contract, tree output, manifests and exit codes."""

import json
import subprocess
import sys

import pytest

from conftest import ROOT, STACKS


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "infra.plan", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("stack", STACKS)
def test_plan_json_follows_the_documented_contract(stack):
    proc = run_cli("--stack", stack, "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert set(doc) == {"project", "stack", "resources", "outputs", "estimates"}
    assert doc["project"] == "nemo-rl-gke" and doc["stack"] == stack
    urns = {r["urn"] for r in doc["resources"]}
    for r in doc["resources"]:
        assert set(r) == {"urn", "type", "name", "parent", "custom", "provider", "inputs", "dependencies", "options"}, r["name"]
        for dep in r["dependencies"]:
            assert dep in urns, f"{r['name']} depends on unknown {dep}"


def test_plan_without_a_stack_runs_the_dev_stack():
    proc = run_cli()
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == "nemo-rl-gke / dev"
    assert "Resources:" in proc.stdout and "GPU nodes:" in proc.stdout


def test_plan_of_an_unknown_stack_fails_with_a_one_line_error():
    proc = run_cli("--stack", "nope")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: stack file Pulumi.nope.yaml not found (stacks here: b200, dev, h200)"
    assert "Traceback" not in proc.stderr


def test_the_same_stack_plans_to_the_same_document_every_time():
    # Apply callbacks finish in a different order on every run; the plan must not.
    from infra.plan import run_program

    first, *others = (json.dumps(run_program("h200").to_json()) for _ in range(3))
    assert all(o == first for o in others), "two runs of the h200 plan listed resources differently"


def test_the_plan_lists_every_parent_before_its_children_and_siblings_by_name():
    from conftest import stack_plan

    plan = stack_plan("b200")
    position = {r.urn: i for i, r in enumerate(plan.resources)}
    for r in plan.resources:
        if r.parent in position:
            assert position[r.parent] < position[r.urn], f"{r.name} is listed before its parent"
    siblings: dict[str, list[str]] = {}
    for r in plan.resources:
        siblings.setdefault(r.parent, []).append(r.name)
    for parent, names in siblings.items():
        assert names == sorted(names), f"children of {parent} are not in name order: {names}"
