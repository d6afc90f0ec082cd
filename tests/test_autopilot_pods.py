"""Pods on Autopilot (infra/autopilot_pods.py, infra/nccl.py): GPU and Spot through node
selectors, requests Autopilot accepts, and nothing it refuses, checked on the committed autopilot stack
and on planted bad specs."""

import copy
import json

import pytest
from conftest import stack_plan
from k8s_support import k8s_doc, schema_problems
from test_ray_cluster import render_raycluster

from infra.autopilot_pods import (
    READ_ONLY_HOST_PATHS,
    admission_problems,
    gpu_node_labels,
    ray_values_for_autopilot,
)
from infra.config import Provisioning
from infra.flavours import FLAVOURS
from infra.machines import AUTOPILOT_GENERAL_PURPOSE_MAX_CPU, AUTOPILOT_GENERAL_PURPOSE_MAX_MEMORY_GIB
from infra.nccl import AUTOPILOT_NAMESPACE as NAMESPACE
from infra.nccl import daemonset_manifest

RELEASE = "kubernetes:helm.sh/v3:Release"
DAEMONSET = "kubernetes:apps/v1:DaemonSet"
H200 = FLAVOURS["h200"]


def plan():
    return stack_plan("autopilot")


def values():
    return plan().one(RELEASE).inputs["values"]


def rendered():
    release = plan().one(RELEASE)
    return render_raycluster(
        release.inputs["values"], release=release.inputs["name"], namespace=release.inputs["namespace"]
    )


def pod_specs(p):
    """Every pod template of the plan: the RayCluster's groups and the built-in workload objects."""
    cluster = render_raycluster(p.one(RELEASE).inputs["values"])
    yield "ray head", cluster["spec"]["headGroupSpec"]["template"]["spec"]
    for group in cluster["spec"]["workerGroupSpecs"]:
        yield f"ray worker group {group['groupName']}", group["template"]["spec"]
    for r in p.resources:
        if r.type in (DAEMONSET, "kubernetes:apps/v1:Deployment"):
            yield r.name, r.inputs["spec"]["template"]["spec"]


def containers(spec):
    return [*(spec.get("initContainers") or []), *spec["containers"]]


# ---------------------------------------------------------------- placement


def test_every_gpu_pod_selects_the_accelerator_its_count_spot_and_the_rdma_zone():
    cluster = rendered()
    groups = cluster["spec"]["workerGroupSpecs"]
    assert len(groups) == 1
    for group in groups:
        spec = group["template"]["spec"]
        gpus = spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"]
        assert gpus == str(H200.gpus_per_node), group["groupName"]
        assert spec["nodeSelector"] == {
            "cloud.google.com/gke-accelerator": "nvidia-h200-141gb",
            "cloud.google.com/gke-accelerator-count": "8",
            "cloud.google.com/gke-spot": "true",
            "topology.kubernetes.io/zone": "europe-west1-b",
        }, group["groupName"]
        assert (group["replicas"], group["maxReplicas"]) == (0, 2)  # asked for by each attempt


def test_only_the_gpu_workers_ask_for_gpus_and_the_head_takes_the_default_general_purpose_class():
    head = rendered()["spec"]["headGroupSpec"]["template"]["spec"]
    assert "nodeSelector" not in head or head["nodeSelector"] == {}, "the head must not select a node pool or GPU"
    for name, spec in pod_specs(plan()):
        if name.startswith("ray worker"):
            continue
        for c in containers(spec):
            assert "nvidia.com/gpu" not in ((c.get("resources") or {}).get("limits") or {}), f"{name}/{c['name']}"
        assert "cloud.google.com/gke-nodepool" not in (spec.get("nodeSelector") or {}), name


@pytest.mark.parametrize(
    "provisioning,reservation,expected",
    [
        (Provisioning.ON_DEMAND, None, {}),
        (
            Provisioning.RESERVATION,
            "my-res",
            {"cloud.google.com/reservation-name": "my-res", "cloud.google.com/reservation-affinity": "specific"},
        ),
    ],
)
def test_capacity_other_than_spot_is_selected_by_its_own_labels(provisioning, reservation, expected):
    labels = dict(
        gpu_node_labels(
            zone="us-east1-b",
            accelerator_type="nvidia-b200",
            gpus_per_node=8,
            provisioning=provisioning,
            reservation_name=reservation,
        )
    )
    assert "cloud.google.com/gke-spot" not in labels
    assert {k: v for k, v in labels.items() if k.startswith("cloud.google.com/reservation")} == expected


# ---------------------------------------------------------------- admission


def test_no_container_of_the_ray_cluster_or_the_watcher_is_privileged_or_uses_host_namespaces():
    for name, spec in pod_specs(plan()):
        if spec.get("hostNetwork") and name.startswith("nccl"):
            continue  # upstream's allowlisted installer: checked below
        assert admission_problems(spec) == [], name
        for c in containers(spec):
            assert not (c.get("securityContext") or {}).get("privileged"), f"{name}/{c['name']}"


def test_the_only_privileged_pod_is_upstreams_autopilot_installer_in_rdma_system():
    p = plan()
    privileged = [
        r
        for r in p.by_type(DAEMONSET)
        if any(
            (c.get("securityContext") or {}).get("privileged") for c in containers(r.inputs["spec"]["template"]["spec"])
        )
    ]
    assert [r.inputs["metadata"]["namespace"] for r in privileged] == [NAMESPACE] == ["rdma-system"]
    spec = privileged[0].inputs["spec"]["template"]["spec"]
    (init,) = spec["initContainers"]
    assert init["name"] == "nccl-rdma-installer" and init["image"].endswith("nccl-plugin-gib:v1.1.1")
    assert "/scripts/container_entry.sh install --install-nccl" in init["args"][0]
    assert spec["tolerations"] == [{"operator": "Exists"}]
    assert sorted(v["hostPath"]["path"] for v in spec["volumes"]) == [
        "/home/kubernetes/bin/gib",
        "/home/kubernetes/bin/nvidia/lib64",
    ]
    assert [c["name"] for c in spec["containers"]] == ["pause"] and "securityContext" not in spec["containers"][0]


def test_the_installer_namespace_exists_before_the_daemonset():
    p = plan()
    ns = next(r for r in p.by_type("kubernetes:core/v1:Namespace") if r.inputs["metadata"]["name"] == NAMESPACE)
    ds = p.one(DAEMONSET)
    assert ns.urn in ds.dependencies, f"{ds.name} may be created before namespace {NAMESPACE}"


def test_the_installer_refuses_an_accelerator_upstreams_manifest_does_not_list():
    with pytest.raises(ValueError, match="nvidia-gb200"):
        daemonset_manifest("img:v1", ["nvidia-gb200"], autopilot=True)


def test_workers_mount_only_the_gpu_library_and_gib_host_paths_and_read_only():
    spec = rendered()["spec"]["workerGroupSpecs"][0]["template"]["spec"]
    host = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    assert sorted(host.values()) == sorted(READ_ONLY_HOST_PATHS)
    for c in containers(spec):
        for m in c.get("volumeMounts") or []:
            if m["name"] in host:
                assert m.get("readOnly") is True, f"{c['name']} mounts {host[m['name']]} writable"


@pytest.mark.parametrize(
    "plant,problem",
    [
        (lambda s: s["containers"][0].setdefault("securityContext", {}).update(privileged=True), "privileged"),
        (lambda s: s.update(hostNetwork=True), "hostNetwork"),
        (lambda s: s["volumes"].append({"name": "root", "hostPath": {"path": "/"}}), "hostPath /"),
        (
            lambda s: next(m for m in s["containers"][0]["volumeMounts"] if m["name"] == "gib").pop("readOnly"),
            "writable",
        ),
    ],
)
def test_the_admission_check_catches_what_autopilot_refuses(plant, problem):
    spec = copy.deepcopy(rendered()["spec"]["workerGroupSpecs"][0]["template"]["spec"])
    assert admission_problems(spec) == []
    plant(spec)
    assert any(problem in p for p in admission_problems(spec)), admission_problems(spec)


def test_a_privileged_container_slipped_into_the_values_fails_the_plan_offline():
    standard = stack_plan("h200").one(RELEASE).inputs["values"]
    planted = copy.deepcopy(standard)
    planted["worker"]["initContainers"].append(
        {"name": "tuner", "image": "x:1", "securityContext": {"privileged": True}}
    )
    with pytest.raises(
        ValueError, match="Autopilot would refuse the Ray pods: Ray worker: initContainers/tuner: privileged"
    ):
        ray_values_for_autopilot(planted, H200.autopilot_pod)


def test_the_worker_keeps_the_multi_network_annotations_of_the_standard_stack():
    assert (
        values()["worker"]["annotations"] == stack_plan("h200").one(RELEASE).inputs["values"]["worker"]["annotations"]
    )
    interfaces = json.loads(values()["worker"]["annotations"]["networking.gke.io/interfaces"])
    assert [i["network"] for i in interfaces] == ["default", "gvnic-1", *(f"rdma-{n}" for n in range(8))]


# ---------------------------------------------------------------- requests


def test_worker_requests_equal_limits_within_the_flavours_autopilot_size_and_the_node():
    resources = values()["worker"]["resources"]
    assert resources["requests"] == resources["limits"]
    limits = H200.autopilot_pod
    assert resources["requests"] == {
        "cpu": str(limits.cpu),
        "memory": f"{limits.memory_gib}Gi",
        "ephemeral-storage": f"{limits.ephemeral_storage_gib}Gi",
        "nvidia.com/gpu": "8",
    }
    assert limits.cpu < H200.vcpus and limits.memory_gib < H200.memory_gib


def test_a_smaller_standard_size_is_kept_rather_than_raised_to_the_autopilot_size():
    standard = copy.deepcopy(stack_plan("h200").one(RELEASE).inputs["values"])
    standard["worker"]["resources"]["requests"].update(cpu="100", memory="1000Gi")
    out = ray_values_for_autopilot(standard, H200.autopilot_pod)
    assert (out["worker"]["resources"]["requests"]["cpu"], out["worker"]["resources"]["requests"]["memory"]) == (
        "100",
        "1000Gi",
    )


def test_the_head_requests_ephemeral_storage_within_the_general_purpose_class():
    head = values()["head"]["resources"]
    assert head["requests"] == head["limits"]
    assert head["requests"]["ephemeral-storage"] == "10Gi"
    assert int(head["requests"]["cpu"]) <= AUTOPILOT_GENERAL_PURPOSE_MAX_CPU
    assert int(head["requests"]["memory"].removesuffix("Gi")) <= AUTOPILOT_GENERAL_PURPOSE_MAX_MEMORY_GIB


def test_the_ray_pod_templates_are_valid_kubernetes_with_the_new_quantities():
    cluster = rendered()
    for label, tmpl in [("head", cluster["spec"]["headGroupSpec"]["template"])] + [
        (g["groupName"], g["template"]) for g in cluster["spec"]["workerGroupSpecs"]
    ]:
        doc = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": label}, "template": tmpl}
        assert schema_problems(doc, label) == []


def test_the_installer_daemonset_is_a_valid_kubernetes_object():
    ds = plan().one(DAEMONSET)
    assert schema_problems(k8s_doc(ds), ds.name) == []


@pytest.mark.parametrize("flavour", sorted(FLAVOURS))
def test_each_flavours_autopilot_pod_size_fits_its_machine_after_gkes_node_reservations(flavour):
    from infra.machines import GKE_EVICTION_GIB, KERNEL_MEMORY_FRACTION, gke_reserved_cpu, gke_reserved_memory_gib

    f = FLAVOURS[flavour]
    size = f.autopilot_pod
    assert size is not None, f"{flavour}: no Autopilot pod size"
    assert size.cpu <= f.vcpus - gke_reserved_cpu(f.vcpus) - 2, flavour
    room = f.memory_gib * (1 - KERNEL_MEMORY_FRACTION) - gke_reserved_memory_gib(f.memory_gib) - GKE_EVICTION_GIB
    assert size.memory_gib <= room - 16, flavour


def test_the_ray_container_is_the_workers_first_container_where_gke_attaches_the_rdma_devices():
    spec = rendered()["spec"]["workerGroupSpecs"][0]["template"]["spec"]
    assert spec["containers"][0]["name"] == "ray-worker"
    assert spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"


def test_the_job_is_laid_out_on_the_gpu_pods_and_the_cli_builds_the_same_submission():
    import shlex

    from jobctl.stack import build_spec, load_stack

    p = plan()
    submission = p.one("pulumi-python:dynamic/nemo-rl-gke:JobSubmission", "training-job-submission")
    worker = values()["worker"]
    words = shlex.split(submission.inputs["entrypoint"])
    assert f"cluster.num_nodes={worker['maxReplicas']}" in words and worker["maxReplicas"] == 2
    assert f"cluster.gpus_per_node={worker['resources']['limits']['nvidia.com/gpu']}" in words
    assert submission.inputs["ray_cluster_name"] == values()["fullnameOverride"]
    assert build_spec(load_stack("autopilot")).submission_id == submission.inputs["submission_id"]


@pytest.mark.parametrize(
    "cpu,memory,expected",
    [
        ("8", "32Gi", ("8", "32Gi")),
        ("8", "64Gi", ("10", "64Gi")),
        ("16", "8Gi", ("16", "16Gi")),
        ("30", "110Gi", ("30", "110Gi")),
    ],
)
def test_a_head_outside_the_general_purpose_ratio_gets_the_requests_autopilot_would_set(cpu, memory, expected):
    from infra.autopilot_pods import general_purpose_resources

    resources = general_purpose_resources({"cpu": cpu, "memory": memory})
    assert resources["requests"] == resources["limits"]
    assert (resources["requests"]["cpu"], resources["requests"]["memory"]) == expected
    assert resources["requests"]["ephemeral-storage"] == "10Gi"
