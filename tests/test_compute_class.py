"""The capacity ladder's ComputeClass and its pools: the manifest against the schema derived from Google's
Go API types (tests/computeclass_schema.py), and the ladder stack's plan (one autoscaled pool per rung, the
class over them, workers select it)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from conftest import merged, run_plan, stack_plan

from infra.compute_class import compute_class_manifest
from infra.naming import COMPUTE_CLASS_LABEL, NODE_POOL_LABEL

SCHEMA = json.loads(
    (Path(__file__).parent / "reference" / "gke-computeclass" / "computeclass-v1.schema.json").read_text()
)
POOL = "gcp:container/nodePool:NodePool"
COMPUTE_CLASS = "kubernetes:cloud.google.com/v1:ComputeClass"
RELEASE = "kubernetes:helm.sh/v3:Release"
LADDER = "b200-ladder"


def problems(manifest) -> list[str]:
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}"
        for e in jsonschema.Draft202012Validator(SCHEMA).iter_errors(manifest)
    ]


def test_the_kept_schema_names_the_upstream_commit_it_was_derived_from():
    from tests import computeclass_schema

    readme = (Path(__file__).parent / "reference" / "README.md").read_text()
    assert computeclass_schema.COMMIT in SCHEMA["$comment"] and computeclass_schema.COMMIT in readme
    assert computeclass_schema.SOURCE_SHA256 in readme


GO_TYPES = """
// +kubebuilder:object:root=true
type ComputeClass struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec ClassSpec `json:"spec"`
}

type ClassSpec struct {
	// +kubebuilder:validation:Required
	Priority int `json:"priority,omitempty"`
	// +optional
	Label string `json:"label"`
	// +kubebuilder:validation:Enum=a;b
	Mode string `json:"mode"`
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=8
	Count *int `json:"count,omitempty"`
}
"""


def test_the_derivation_follows_controller_gens_rules_for_required_fields_and_markers():
    from tests import computeclass_schema

    schema = computeclass_schema.derive(GO_TYPES)
    spec = schema["$defs"].get("ClassSpec") or schema["properties"]["spec"]
    # Required: a `Required` marker beats omitempty; a plain field without omitempty is required; `+optional`
    # and omitempty are not.
    assert sorted(spec["required"]) == ["mode", "priority"]
    assert spec["properties"]["mode"]["enum"] == ["a", "b"]
    assert (spec["properties"]["count"]["minimum"], spec["properties"]["count"]["maximum"]) == (1, 8)
    assert spec["additionalProperties"] is False


def test_the_derivation_refuses_a_go_file_other_than_the_pinned_one(tmp_path, capsys):
    from tests import computeclass_schema

    other = tmp_path / "types.go"
    other.write_text(GO_TYPES)
    assert computeclass_schema.main([str(other), "--check"]) == 2
    assert capsys.readouterr().err.startswith(f"error: {other}: not ")


@pytest.mark.parametrize(
    "section, required",
    [("activeMigration", "optimizeRulePriority"), ("nodePoolAutoCreation", "enabled")],
)
def test_the_schema_requires_what_the_go_types_mark_required(section, required):
    # types.go: `+kubebuilder:validation:Required` on ActiveMigration.OptimizeRulePriority and
    # NodePoolAutoCreation.Enabled (compute-class-api 8067eaeb).
    manifest = compute_class_manifest("c", ["a", "b"])
    del manifest["spec"][section][required]
    assert any(f"'{required}' is a required property" in p for p in problems(manifest)), section


def test_the_schema_refuses_a_spec_without_when_unsatisfiable_which_the_go_type_does_not_omit():
    manifest = compute_class_manifest("c", ["a", "b"])
    del manifest["spec"]["whenUnsatisfiable"]
    assert problems(manifest) == ["spec: 'whenUnsatisfiable' is a required property"]


def test_the_manifest_passes_the_schema_derived_from_googles_go_types():
    manifest = compute_class_manifest("b200-ladder-gpu-ladder", ["p-spot", "p-flex", "p-ondemand"])
    assert problems(manifest) == []


@pytest.mark.parametrize(
    "broken, where",
    [
        (lambda m: m["spec"].update(nodePoolAutoCreation={"enable": False}), "nodePoolAutoCreation"),
        (lambda m: m["spec"].update(whenUnsatisfiable="DoNotScale"), "whenUnsatisfiable"),
        (lambda m: m["spec"]["priorities"].append({"nodePools": ["x"]}), "priorities"),
        (lambda m: m.update(apiVersion="cloud.google.com/v1beta1"), "apiVersion"),
    ],
)
def test_the_schema_refuses_what_the_reference_does_not_have(broken, where):
    manifest = compute_class_manifest("c", ["a", "b"])
    broken(manifest)
    assert any(where in p for p in problems(manifest)), f"the schema lets a broken {where} through"


def test_each_rung_is_its_own_priority_in_ladder_order_and_nothing_is_auto_created():
    spec = compute_class_manifest("c", ["spot", "flex", "od"])["spec"]
    # Pools listed in one entry are not ordered among themselves: one entry per rung.
    assert spec["priorities"] == [{"nodepools": ["spot"]}, {"nodepools": ["flex"]}, {"nodepools": ["od"]}]
    assert spec["nodePoolAutoCreation"] == {"enabled": False}
    assert spec["whenUnsatisfiable"] == "DoNotScaleUp"
    assert spec["activeMigration"] == {"optimizeRulePriority": False}


# ----------------------------------------------------------------------------- the ladder stack's plan


def ladder_pools(plan):
    return sorted(
        (p for p in plan.by_type(POOL) if (p.inputs["nodeConfig"].get("guestAccelerators"))), key=lambda p: p.name
    )


def test_the_ladder_stack_has_one_autoscaled_pool_per_rung_with_the_same_machine_and_networks():
    plan = stack_plan(LADDER)
    pools = ladder_pools(plan)
    assert [p.inputs["name"] for p in pools] == [
        "b200-ladder-gpu-flex",
        "b200-ladder-gpu-ondemand",
        "b200-ladder-gpu-spot",
    ]
    shared = {
        json.dumps(
            {k: p.inputs["nodeConfig"][k] for k in ("machineType", "guestAccelerators", "gvnic")}, sort_keys=True
        )
        for p in pools
    }
    assert len(shared) == 1, "every rung's pool runs the same machine and GPUs"
    nets = {json.dumps(p.inputs["networkConfig"], sort_keys=True) for p in pools}
    assert len(nets) == 1, "every rung's pool attaches the same gVNIC and RDMA networks"
    for p in pools:
        assert p.inputs["nodeLocations"] == ["us-east1-b"], p.name
        assert p.inputs["initialNodeCount"] == 0 and "nodeCount" not in p.inputs, p.name
        assert p.inputs["autoscaling"]["totalMinNodeCount"] == 0, p.name
        assert p.inputs["autoscaling"]["totalMaxNodeCount"] == 8, p.name
        node = p.inputs["nodeConfig"]
        assert node["labels"] == {COMPUTE_CLASS_LABEL: "b200-ladder-gpu-ladder"}, p.name
        assert {"key": COMPUTE_CLASS_LABEL, "value": "b200-ladder-gpu-ladder", "effect": "NO_SCHEDULE"} in node[
            "taints"
        ], p.name
    by_name = {p.inputs["name"]: p.inputs["nodeConfig"] for p in pools}
    assert by_name["b200-ladder-gpu-spot"].get("spot") is True
    assert by_name["b200-ladder-gpu-flex"].get("flexStart") is True and "spot" not in by_name["b200-ladder-gpu-flex"]
    assert not {"spot", "flexStart"} & set(by_name["b200-ladder-gpu-ondemand"])


def test_the_class_names_the_pools_in_ladder_order_and_passes_the_schema():
    plan = stack_plan(LADDER)
    (cc,) = plan.by_type(COMPUTE_CLASS)
    manifest = {
        "apiVersion": "cloud.google.com/v1",
        "kind": "ComputeClass",
        "metadata": cc.inputs["metadata"],
        "spec": cc.inputs["spec"],
    }
    assert problems(manifest) == [], cc.name
    assert [p["nodepools"] for p in cc.inputs["spec"]["priorities"]] == [
        ["b200-ladder-gpu-spot"],
        ["b200-ladder-gpu-flex"],
        ["b200-ladder-gpu-ondemand"],
    ], cc.name
    pool_urns = {p.urn for p in ladder_pools(plan)}
    assert pool_urns <= set(cc.dependencies), f"{cc.name} is created after (and deleted before) the pools it names"


def test_the_ray_workers_select_the_class_and_wait_for_it():
    plan = stack_plan(LADDER)
    release = plan.one(RELEASE)
    worker = release.inputs["values"]["worker"]
    assert worker["nodeSelector"] == {COMPUTE_CLASS_LABEL: "b200-ladder-gpu-ladder"}, release.name
    assert NODE_POOL_LABEL not in worker["nodeSelector"], release.name
    assert {
        "key": COMPUTE_CLASS_LABEL,
        "operator": "Equal",
        "value": "b200-ladder-gpu-ladder",
        "effect": "NoSchedule",
    } in worker["tolerations"], release.name
    (cc,) = plan.by_type(COMPUTE_CLASS)
    assert cc.urn in release.dependencies, f"{release.name} is created after the ComputeClass its workers select"


def test_the_image_is_pulled_on_every_rungs_pool_and_the_plan_prices_one_gang():
    plan = stack_plan(LADDER)
    prepull = next(r for r in plan.resources if r.name == "image-prepull-daemonset")
    text = json.dumps(prepull.inputs)
    for pool in ("b200-ladder-gpu-spot", "b200-ladder-gpu-flex", "b200-ladder-gpu-ondemand"):
        assert pool in text, f"{prepull.name} does not pull on {pool}"
    from tools.offline_plan import summary

    assert summary(plan)["gpuNodes"] == 8, "three rungs' pools hold one gang of 8, not 24"


def test_one_rung_written_as_a_ladder_plans_as_the_single_pool():
    flat = run_plan("dev")
    ladder = run_plan("dev", gpuPool={"nodeCount": 1, "capacity": {"ladder": ["spot"]}})
    pools = lambda plan: {p.name: p.inputs for p in plan.by_type(POOL)}  # noqa: E731
    assert pools(ladder) == pools(flat)
    assert not ladder.by_type(COMPUTE_CLASS)


def test_flex_start_runs_the_job_on_an_empty_autoscaled_pool_without_queued_provisioning():
    plan = run_plan("dev", gpuPool=merged("dev", "gpuPool", {"provisioning": "flexStart", "nodeCount": 2}))
    pool = plan.one(POOL, "-gpu-pool")
    assert pool.inputs["nodeConfig"]["flexStart"] is True, pool.name
    assert "queuedProvisioning" not in pool.inputs, f"{pool.name}: queued provisioning needs a ProvisioningRequest"
    assert pool.inputs["autoscaling"] == {"totalMinNodeCount": 0, "totalMaxNodeCount": 2, "locationPolicy": "ANY"}, (
        pool.name
    )
    assert any(r.type.endswith("JobSubmission") for r in plan.resources), "the job is submitted on a flex-start pool"


# ----------------------------------------------------------------------------- a live ladder's edits (issue 21)


FOUR_RUNGS = {"nodeCount": 2, "capacity": {"ladder": [{"reservation": "my-a4-block"}, "flexStart", "spot", "onDemand"]}}


def test_each_rung_pool_takes_the_reservation_affinity_of_its_capacity_type():
    pools = {p.inputs["name"]: p.inputs["nodeConfig"] for p in ladder_pools(run_plan(LADDER, gpuPool=FOUR_RUNGS))}
    assert pools["b200-ladder-gpu-res-my-a4-block"]["reservationAffinity"] == {
        "consumeReservationType": "SPECIFIC_RESERVATION",
        "key": "compute.googleapis.com/reservation-name",
        "values": ["my-a4-block"],
    }
    # Spot and flex-start VMs never come out of a reservation (Cluster Toolkit's spot precondition; the
    # flex-start pool flags' --reservation-affinity=none); on-demand may use a matching automatic one.
    assert pools["b200-ladder-gpu-spot"]["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
    assert pools["b200-ladder-gpu-flex"]["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
    assert "reservationAffinity" not in pools["b200-ladder-gpu-ondemand"]


def test_every_rung_pool_is_deleted_before_it_is_replaced_and_the_job_is_replaced_with_each():
    plan = run_plan(LADDER, gpuPool=FOUR_RUNGS)
    pools = ladder_pools(plan)
    assert len(pools) == 4
    (job,) = [r for r in plan.resources if r.type.endswith("JobSubmission")]
    for pool in pools:
        assert pool.options.get("deleteBeforeReplace") is True, f"{pool.name}: created first, GKE would answer 409"
        assert pool.urn in job.options.get("replaceWith", []), (
            f"{job.name} is not stopped before {pool.name} is replaced"
        )


def test_the_class_is_deleted_with_the_cluster():
    plan = stack_plan(LADDER)
    (cluster,) = plan.by_type("gcp:container/cluster:Cluster")
    (cc,) = plan.by_type(COMPUTE_CLASS)
    assert cc.options.get("deletedWith") == cluster.urn, cc.name


def test_the_text_plan_names_the_capacity_key_for_every_rung_pool():
    from tools.pool_replacement import summary_lines

    lines = summary_lines(stack_plan(LADDER).resources)
    for role in ("spot", "flex", "ondemand"):
        (line,) = [line for line in lines if f"-{role}-pool:" in line]
        assert "gpuPool.capacity" in line and "flavour" in line, line


def test_an_edit_of_a_rung_pools_force_new_input_is_reported_as_replacing_that_pool_only():
    from tools.pool_replacement import compare

    before = stack_plan(LADDER)
    after = run_plan(LADDER, gpuPool=merged(LADDER, "gpuPool", {"gpuDriverVersion": "DEFAULT"}))
    lines = list(compare(before.to_json(), after.to_json()))
    replaced = [line for line in lines if "REPLACED" in line]
    assert len(replaced) == 3 and all("nodeConfig.guestAccelerators" in line for line in replaced), lines
    assert any("system-pool: unchanged" in line for line in lines), lines
