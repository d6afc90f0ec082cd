"""RayCluster: the chart values, the RayCluster they render to, sizing, and the Helm release.

How the rendered object is checked (the chart ships no values schema: ray-project/kuberay v1.7.0
helm-chart/ray-cluster):
`render_raycluster` below re-does, in Python, what helm-chart/ray-cluster/templates/raycluster-cluster.yaml
does with our values: Helm's merge over the chart defaults (maps merged, lists replaced), then the
RayCluster with the head group and the `worker` group (additional groups only when not disabled),
each pod template built field by field as the template builds it, nulls dropped as the API server
prunes them. It is an approximation: it reproduces the template as read, it does not execute Helm,
and chart defaults we override entirely are only sketched.
The result is then checked three ways:
- against the KubeRay CRD of the chart version the release pins (tests/reference/kuberay-v<version>/
  ray.io_rayclusters.yaml, v1 openAPIV3Schema; source in tests/reference/README.md) with jsonschema;
- for fields the CRD does not know: the API server would silently prune them, so a misspelt key
  would pass jsonschema and be lost on the cluster;
- each pod template against the Kubernetes OpenAPI schema as a core/v1 PodTemplate (strict).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from conftest import ALL_STACKS, STACKS, stack_plan
from k8s_support import gpu_pool, record, sample_nics, schema_problems

from infra.config import RayConfig
from infra.flavours import FLAVOURS
from infra.gke_networks import interfaces_annotation
from infra.machines import GKE_EVICTION_GIB, NodeFit, gke_reserved_cpu, gke_reserved_memory_gib, gpu_node_allocatable
from infra.ray_cluster import (
    CHART_LABEL_KEYS,
    GPU_LIBRARY_PATH,
    NCCL_ENV_SCRIPT,
    RayCluster,
    RayClusterArgs,
    ray_values,
    worker_start_command,
)
from workloads.recipes import IMAGES, RECIPES

REFERENCE = Path(__file__).resolve().parent / "reference"
CHART_VERSION = RayConfig.model_fields["chart_version"].default
RELEASE = "kubernetes:helm.sh/v3:Release"
IMAGE = IMAGES["v0.5.0"]


# ---------------------------------------------------------------- rendering like the chart


# The chart defaults that matter when a value is NOT given (ray-cluster README/values, 1.6-1.7).
CHART_DEFAULTS: dict[str, Any] = {
    "image": {"repository": "rayproject/ray", "tag": "2.52.0", "pullPolicy": "IfNotPresent"},
    "nameOverride": "kuberay",
    "fullnameOverride": "",
    "imagePullSecrets": [],
    "common": {"containerEnv": []},
    "head": {
        "labels": {},
        "serviceAccountName": "",
        "containerEnv": [],
        "envFrom": [],
        "resources": {"limits": {"cpu": "1", "memory": "2G"}, "requests": {"cpu": "1", "memory": "2G"}},
        "annotations": {},
        "nodeSelector": {},
        "tolerations": [],
        "affinity": {},
        "podSecurityContext": {},
        "securityContext": {},
        "volumes": [{"name": "log-volume", "emptyDir": {}}],
        "volumeMounts": [{"mountPath": "/tmp/ray", "name": "log-volume"}],
        "sidecarContainers": [],
        "command": [],
        "args": [],
        "headService": {},
        "rayStartParams": {},
    },
    "worker": {
        "groupName": "workergroup",
        "replicas": 1,
        "minReplicas": 1,
        "maxReplicas": 3,
        "labels": {},
        "serviceAccountName": "",
        "initContainers": [],
        "containerEnv": [],
        "envFrom": [],
        "resources": {"limits": {"cpu": "1", "memory": "1G"}, "requests": {"cpu": "1", "memory": "1G"}},
        "annotations": {},
        "nodeSelector": {},
        "tolerations": [],
        "affinity": {},
        "podSecurityContext": {},
        "securityContext": {},
        "volumes": [{"name": "log-volume", "emptyDir": {}}],
        "volumeMounts": [{"mountPath": "/tmp/ray", "name": "log-volume"}],
        "sidecarContainers": [],
        "command": [],
        "args": [],
        "rayStartParams": {},
    },
    "additionalWorkerGroups": {"smallGroup": {"disabled": True, "replicas": 0, "minReplicas": 0, "maxReplicas": 3}},
    "service": {"type": "ClusterIP"},
}


def helm_merge(base: Any, override: Any) -> Any:
    """Helm's values coalescing: maps merge key by key, anything else (lists included) replaces."""
    if isinstance(base, dict) and isinstance(override, dict):
        merged = dict(base)
        for key, value in override.items():
            merged[key] = helm_merge(base.get(key), value) if key in base else copy.deepcopy(value)
        return merged
    return copy.deepcopy(override)


def prune_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: prune_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [prune_nulls(v) for v in value]
    return value


def chart_labels(values: dict, release: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": values.get("nameOverride") or "ray-cluster",
        "helm.sh/chart": "ray-cluster-1.7.0",
        "app.kubernetes.io/instance": release,
        "app.kubernetes.io/managed-by": "Helm",
    }


def pod_template(group: dict, values: dict, container: str, release: str, head: bool) -> dict[str, Any]:
    image = group.get("image") or values["image"]
    ray = {
        "name": container,
        "image": f"{image['repository']}:{image['tag']}",
        "imagePullPolicy": image["pullPolicy"],
        "resources": group.get("resources"),
        "securityContext": group.get("securityContext"),
        "env": (values["common"]["containerEnv"] + group.get("containerEnv", [])) or None,
        "envFrom": group.get("envFrom") or None,
        "volumeMounts": group.get("volumeMounts") or None,
        "command": group.get("command") or None,
        "args": group.get("args") or None,
        "ports": group.get("ports") or None,
    }
    labels = group.get("labels") or {}
    overlap = set(labels) & set(chart_labels(values, release))
    assert not overlap, f"duplicate YAML keys in the rendered pod labels (Helm would fail): {overlap}"
    spec = {
        "imagePullSecrets": values["imagePullSecrets"],
        "serviceAccountName": group.get("serviceAccountName") or None,
        "initContainers": group.get("initContainers") or None,
        "containers": [ray, *group.get("sidecarContainers", [])],
        "volumes": group.get("volumes") or None,
        "affinity": group.get("affinity"),
        "tolerations": group.get("tolerations"),
        "nodeSelector": group.get("nodeSelector"),
        "securityContext": group.get("podSecurityContext") or None,
    }
    return {
        "metadata": {"annotations": group.get("annotations"), "labels": {**labels, **chart_labels(values, release)}},
        "spec": spec,
    }


def worker_spec(group: dict, name: str, values: dict, release: str) -> dict[str, Any]:
    return {
        "rayStartParams": {k: str(v) for k, v in (group.get("rayStartParams") or {}).items()},
        "replicas": group.get("replicas"),
        "minReplicas": group.get("minReplicas") or 0,
        "maxReplicas": group.get("maxReplicas") or 2147483647,
        "numOfHosts": group.get("numOfHosts") or 1,
        "groupName": name,
        "template": pod_template(group, values, "ray-worker", release, head=False),
    }


def render_raycluster(user_values: dict, release: str = "nemo-rl", namespace: str = "nemo-rl") -> dict[str, Any]:
    values = helm_merge(CHART_DEFAULTS, user_values)
    head = values["head"]
    fullname = values["fullnameOverride"] or f"{release}-{values['nameOverride']}"
    groups = [
        worker_spec(g, name, values, release)
        for name, g in values["additionalWorkerGroups"].items()
        if g.get("disabled") is not True
    ]
    if values["worker"].get("disabled") is not True:
        groups.append(worker_spec(values["worker"], values["worker"]["groupName"], values, release))
    doc = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {
            "name": fullname,
            "namespace": namespace,
            "labels": chart_labels(values, release),
            "annotations": values.get("annotations") or None,
        },
        "spec": {
            "rayVersion": head.get("rayVersion"),
            "enableInTreeAutoscaling": head.get("enableInTreeAutoscaling") or None,
            "headGroupSpec": {
                "headService": head.get("headService") or None,
                "serviceType": values["service"]["type"],
                "rayStartParams": {k: str(v) for k, v in (head.get("rayStartParams") or {}).items()},
                "template": pod_template(head, values, "ray-head", release, head=True),
            },
            "workerGroupSpecs": groups,
        },
    }
    return prune_nulls(doc)


FAST_YAML = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader where PyYAML has it: the CRD is a large file."""


def crd_path(chart_version: str) -> Path:
    """The RayCluster CRD kept for a `ray-cluster` chart version (KubeRay tags chart and CRDs together)."""
    return REFERENCE / f"kuberay-v{chart_version}" / "ray.io_rayclusters.yaml"


@functools.cache
def crd_schema(chart_version: str = CHART_VERSION) -> dict[str, Any]:
    path = crd_path(chart_version)
    assert path.is_file(), f"no RayCluster CRD for chart {chart_version}: add {path} (see tests/reference/README.md)"
    docs = [d for d in yaml.load_all(path.read_text(), Loader=FAST_YAML) if d]
    (crd,) = [d for d in docs if d["kind"] == "CustomResourceDefinition"]
    (v1,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    return v1["schema"]["openAPIV3Schema"]


def unknown_fields(value: Any, schema: dict[str, Any], path: str) -> list[str]:
    """Keys the structural schema does not declare (the API server would prune them silently)."""
    found: list[str] = []
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return found
    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        for key, sub in value.items():
            where = f"{path}.{key}"
            if props is not None and key in props:
                found += unknown_fields(sub, props[key], where)
            elif isinstance(extra, dict):
                found += unknown_fields(sub, extra, where)
            elif props is not None and extra is not True:
                found.append(where)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            found += unknown_fields(item, schema["items"], f"{path}[{i}]")
    return found


@functools.cache
def crd_validator(chart_version: str) -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(crd_schema(chart_version))


def crd_problems(doc: dict[str, Any], chart_version: str = CHART_VERSION) -> list[str]:
    schema = crd_schema(chart_version)
    validator = crd_validator(chart_version)
    problems = [f"{'/'.join(map(str, e.path))}: {e.message[:200]}" for e in validator.iter_errors(doc)]
    body = {k: v for k, v in doc.items() if k != "metadata"}  # metadata is ObjectMeta, not in the CRD
    problems += [f"{p}: not in the RayCluster CRD (would be pruned)" for p in unknown_fields(body, schema, "")]
    return problems


def pod_template_problems(cluster: dict[str, Any]) -> list[str]:
    templates = {"head": cluster["spec"]["headGroupSpec"]["template"]}
    templates |= {f"worker group {g['groupName']}": g["template"] for g in cluster["spec"]["workerGroupSpecs"]}
    problems = []
    for label, template in templates.items():
        doc = {
            "apiVersion": "v1",
            "kind": "PodTemplate",
            "metadata": {"name": f"{cluster['metadata']['name']}-x"},
            "template": template,
        }
        problems += schema_problems(doc, f"{cluster['metadata']['name']} {label} pod template")
    return problems


# ---------------------------------------------------------------- values fixtures


def fit_for(flavour: str = "h200", cpu=None, memory_gib=None, shm_gib=240) -> NodeFit:
    f = FLAVOURS[flavour]
    alloc_cpu, alloc_mem = gpu_node_allocatable(f.vcpus, f.memory_gib)
    return NodeFit(
        f.machine_type, cpu or f.worker_cpu, memory_gib or f.worker_memory_gib, shm_gib, alloc_cpu, alloc_mem
    )


def values_for(flavour: str = "h200", nodes: int = 2, image=IMAGE, **overrides) -> dict[str, Any]:
    args = dict(
        cluster_name="nemo-rl",
        image=image,
        service_account="ray",
        secret_name="nemo-rl-secrets",
        secret_env={"HF_TOKEN_PATH": "/var/run/secrets/nemo-rl/hf-token", "NETRC": "/var/run/secrets/nemo-rl/netrc"},
        pvc_name="lustre",
        mount_path="/lustre",
        head_cpu=8,
        head_memory_gib=32,
        system_pool_name="t-system",
        gpu_pool=gpu_pool(flavour, nodes),
        worker=fit_for(flavour),
        interfaces_annotation=interfaces_annotation(sample_nics()),
    )
    args.update(overrides)
    return ray_values(**args)


def env_of(container: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}


def ray_container(template: dict) -> dict:
    return template["spec"]["containers"][0]


def worker_template(cluster: dict) -> dict:
    (group,) = cluster["spec"]["workerGroupSpecs"]
    return group["template"]


# ---------------------------------------------------------------- the rendered RayCluster


@pytest.mark.parametrize("flavour", sorted(FLAVOURS))
def test_the_rendered_raycluster_validates_against_the_kuberay_crd_with_no_unknown_field(flavour):
    cluster = render_raycluster(values_for(flavour))
    assert not crd_problems(cluster), "\n".join(crd_problems(cluster))


@pytest.mark.parametrize("flavour", sorted(FLAVOURS))
def test_head_and_worker_pod_templates_are_valid_kubernetes_pod_templates(flavour):
    problems = pod_template_problems(render_raycluster(values_for(flavour)))
    assert not problems, "\n".join(problems)


def test_the_kept_crd_is_the_upstream_file_of_the_pinned_chart_version_named_in_the_reference_readme():
    path = crd_path(CHART_VERSION)
    rows = [line.split("|") for line in (REFERENCE / "README.md").read_text().splitlines() if line.startswith("| `")]
    recorded = {cells[1].strip(" `"): cells[4].strip() for cells in rows}
    assert recorded[str(path.relative_to(REFERENCE))] == hashlib.sha256(path.read_bytes()).hexdigest()
    crd = next(d for d in yaml.load_all(path.read_text(), Loader=FAST_YAML) if d)
    assert crd["spec"]["names"]["kind"] == "RayCluster" and crd["spec"]["group"] == "ray.io"


def test_a_chart_version_with_no_kept_crd_fails_naming_the_file_to_add():
    with pytest.raises(AssertionError, match=r"kuberay-v9\.9\.9/ray.io_rayclusters.yaml"):
        crd_schema("9.9.9")


def test_the_crd_check_catches_a_misspelt_field():
    cluster = render_raycluster(values_for())
    cluster["spec"]["headGroupSpec"]["serviceTyp"] = "ClusterIP"
    assert any("serviceTyp" in p for p in crd_problems(cluster))


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_ray_version_equals_the_ray_inside_each_recipes_image(recipe):
    image = RECIPES[recipe].image
    cluster = render_raycluster(values_for(image=image))
    assert cluster["spec"]["rayVersion"] == image.ray_version
    for template in (cluster["spec"]["headGroupSpec"]["template"], worker_template(cluster)):
        assert ray_container(template)["image"] == image.ref


def test_the_name_is_stable_and_names_the_head_service():
    cluster = render_raycluster(values_for(), release="nemo-rl")
    assert cluster["metadata"]["name"] == "nemo-rl", "fullnameOverride must name the RayCluster (not <release>-kuberay)"


def test_exactly_one_worker_group_installed_with_no_worker_and_room_for_the_pool():
    # Helm writes no worker count the run's owner would have to undo: the chart renders `replicas: 0` as is (no
    # `default` in its template), and the owner asks for up to `maxReplicas` (workloads/worker_group.py).
    (group,) = render_raycluster(values_for(nodes=5))["spec"]["workerGroupSpecs"]
    assert group["groupName"] == "gpu"
    assert (group["replicas"], group["minReplicas"], group["maxReplicas"]) == (0, 0, 5)


def test_the_head_runs_on_the_system_pool_without_a_gpu_with_the_configured_resources():
    cluster = render_raycluster(values_for(head_cpu=6, head_memory_gib=24))
    head = cluster["spec"]["headGroupSpec"]
    spec = head["template"]["spec"]
    assert spec["nodeSelector"] == {"cloud.google.com/gke-nodepool": "t-system"}
    resources = ray_container(head["template"])["resources"]
    assert resources["requests"] == resources["limits"] == {"cpu": "6", "memory": "24Gi"}
    assert "nvidia.com/gpu" not in json.dumps(resources)
    assert head["serviceType"] == "ClusterIP", "the dashboard must not be exposed outside the cluster"
    assert head["rayStartParams"]["num-cpus"] == "0"


def test_workers_take_all_gpus_and_run_on_the_gpu_pool():
    template = worker_template(render_raycluster(values_for()))
    resources = ray_container(template)["resources"]
    assert resources["limits"]["nvidia.com/gpu"] == resources["requests"]["nvidia.com/gpu"] == "8"
    assert template["spec"]["nodeSelector"] == {"cloud.google.com/gke-nodepool": "t-gpu-h200"}


def test_workers_tolerate_every_pool_taint_and_imminent_spot_termination():
    taints = (
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
        {"key": "team", "value": "rl", "effect": "NoExecute"},
    )
    template = worker_template(render_raycluster(values_for(gpu_pool=gpu_pool(taints=taints))))
    tolerations = template["spec"]["tolerations"]
    for taint in taints:
        assert {
            "key": taint["key"],
            "operator": "Equal",
            "value": taint["value"],
            "effect": taint["effect"],
        } in tolerations, taint
    assert {"key": "cloud.google.com/impending-node-termination", "operator": "Exists"} in tolerations


def test_worker_pods_ask_for_every_network_object_in_nic_order():
    template = worker_template(render_raycluster(values_for()))
    annotations = template["metadata"]["annotations"]
    assert annotations["networking.gke.io/default-interface"] == "eth0"
    entries = json.loads(annotations["networking.gke.io/interfaces"])
    assert [e["network"] for e in entries] == ["default", *(n.network_object for n in sample_nics())]
    assert [e["interfaceName"] for e in entries] == ["eth0", *(n.interface for n in sample_nics())]


@pytest.mark.parametrize("flavour", sorted(FLAVOURS))
def test_workers_get_the_gib_nccl_environment_with_the_flavours_tuner_file(flavour):
    env = env_of(ray_container(worker_template(render_raycluster(values_for(flavour)))))
    assert env == {
        "NCCL_NET": "gIB",
        "NCCL_IB_GID_INDEX": "3",
        "NCCL_CROSS_NIC": "0",
        "NCCL_NET_GDR_LEVEL": "PIX",
        "NCCL_SOCKET_IFNAME": "eth0",
        "GLOO_SOCKET_IFNAME": "eth0",
        "TP_SOCKET_IFNAME": "eth0",
        "NCCL_TUNER_CONFIG_PATH": FLAVOURS[flavour].nccl_tuner_config,
        "HF_HOME": "/lustre/hf-cache",
        "HF_TOKEN_PATH": "/var/run/secrets/nemo-rl/hf-token",
        "NETRC": "/var/run/secrets/nemo-rl/netrc",
    }


def test_workers_mount_the_host_driver_and_gib_dirs_shared_memory_and_lustre():
    template = worker_template(render_raycluster(values_for()))
    volumes = {v["name"]: v for v in template["spec"]["volumes"]}
    mounts = {m["mountPath"]: volumes[m["name"]] for m in ray_container(template)["volumeMounts"]}
    assert mounts["/usr/local/nvidia"]["hostPath"]["path"] == "/home/kubernetes/bin/nvidia"
    assert mounts["/usr/local/gib"]["hostPath"]["path"] == "/home/kubernetes/bin/gib"
    assert mounts["/dev/shm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "240Gi"}
    assert mounts["/lustre"]["persistentVolumeClaim"] == {"claimName": "lustre"}


def test_workers_run_unprivileged_and_mount_the_host_driver_and_gib_dirs_read_only():
    # As upstream's GPUDirect RDMA test pods run (container-engine-accelerators gpudirect-rdma/nccl-test.yaml).
    template = worker_template(render_raycluster(values_for()))
    container = ray_container(template)
    assert not container["securityContext"].get("privileged"), "Ray worker: privileged"
    host = {v["name"] for v in template["spec"]["volumes"] if "hostPath" in v}
    assert host == {"nvidia", "gib"}
    for c in [container, *template["spec"]["initContainers"]]:
        for m in c.get("volumeMounts") or ():
            assert m["name"] not in host or m.get("readOnly") is True, (
                f"Ray worker/{c['name']}: {m['mountPath']} writable"
            )


def test_no_ray_container_sets_ld_library_path_so_the_images_own_value_survives():
    cluster = render_raycluster(values_for("b200"))
    for template in (cluster["spec"]["headGroupSpec"]["template"], worker_template(cluster)):
        for c in [*template["spec"]["containers"], *(template["spec"].get("initContainers") or ())]:
            assert "LD_LIBRARY_PATH" not in env_of(c), f"{c['name']}: LD_LIBRARY_PATH would replace the image's"


def test_head_and_workers_mount_lustre_at_the_configured_path_and_use_the_service_account():
    cluster = render_raycluster(values_for(mount_path="/data"))
    for template in (cluster["spec"]["headGroupSpec"]["template"], worker_template(cluster)):
        mounts = {m["name"]: m["mountPath"] for m in ray_container(template)["volumeMounts"]}
        assert mounts["lustre"] == "/data"
        assert env_of(ray_container(template))["HF_HOME"] == "/data/hf-cache"
        assert template["spec"]["serviceAccountName"] == "ray"


def test_secrets_reach_the_pods_as_read_only_files_and_the_environment_only_says_where():
    # NeMo-RL copies os.environ into the Ray runtime env, which Ray stores and shows: no token may be
    # in the environment, not even through envFrom or secretKeyRef.
    cluster = render_raycluster(values_for())
    for template in (cluster["spec"]["headGroupSpec"]["template"], worker_template(cluster)):
        container = ray_container(template)
        assert not container.get("envFrom"), "a Secret as envFrom puts the tokens into the Ray runtime env"
        assert not [e for e in container.get("env", []) if "valueFrom" in e], container.get("env")
        env = env_of(container)
        assert not set(env) & {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "WANDB_API_KEY"}
        assert (env["HF_TOKEN_PATH"], env["NETRC"]) == (
            "/var/run/secrets/nemo-rl/hf-token",
            "/var/run/secrets/nemo-rl/netrc",
        )
        (volume,) = [v for v in template["spec"]["volumes"] if "secret" in v]
        assert volume["secret"] == {"secretName": "nemo-rl-secrets", "defaultMode": 0o400}
        (mount,) = [m for m in container["volumeMounts"] if m["name"] == volume["name"]]
        assert mount == {"name": volume["name"], "mountPath": "/var/run/secrets/nemo-rl", "readOnly": True}


def test_the_head_creates_the_directories_destroy_exports_before_ray_starts():
    head = render_raycluster(values_for(mount_path="/lustre"))["spec"]["headGroupSpec"]["template"]
    (init,) = head["spec"]["initContainers"]
    assert init["command"] == ["mkdir", "-p", "/lustre/checkpoints", "/lustre/logs"], init["command"]
    assert init["volumeMounts"] == [{"name": "lustre", "mountPath": "/lustre"}] and init["image"] == IMAGE.ref


def test_our_pod_labels_never_collide_with_the_charts_own_labels():
    values = values_for()
    for group in ("head", "worker"):
        assert not set(values[group]["labels"]) & CHART_LABEL_KEYS, group


def test_the_worker_waits_for_the_installer_output_before_ray_starts():
    (init,) = worker_template(render_raycluster(values_for()))["spec"]["initContainers"]
    assert NCCL_ENV_SCRIPT in init["command"][-1] and init["image"] == IMAGE.ref
    assert init["volumeMounts"] == [{"name": "gib", "mountPath": "/usr/local/gib", "readOnly": True}]


# ---------------------------------------------------------------- the start command


def kuberay_args(container: dict) -> str:
    """The shell line KubeRay v1.7.0 gives the Ray container (ray-operator/controllers/ray/common/pod.go
    BuildPod, convertCmdToString, generateRayStartCommand): every command and args element wrapped in
    spaces, then `&& ulimit -n ${RAY_START_ULIMIT_OPEN_FILES:-65536}; ray start ...`, run by
    `/bin/bash -c --`. Only when the command does not already contain `ray start`."""
    user = "".join(f" {part} " for part in [*container.get("command", []), *container.get("args", [])])
    assert "ray start" not in user, "KubeRay would stop prepending and never start Ray"
    start = "ray start --address=nemo-rl-head-svc:6379 --block --num-cpus=206"
    generated = f"ulimit -n ${{RAY_START_ULIMIT_OPEN_FILES:-65536}}; {start}"
    return f"{user} && {generated}" if user.strip() else generated


IMAGE_LD_LIBRARY_PATH = "/opt/nemo_rl_venv/lib/python3.13/site-packages/nvidia/cudnn/lib:/usr/local/cuda/lib64"
"""The kind of value the NeMo-RL v0.6.0 image's `ENV LD_LIBRARY_PATH` holds (pip cuDNN first)."""


def run_rendered_worker_start(
    tmp_path: Path, *, with_script: bool = True, script_status: int = 0, ldconfig_status: int = 0, group: str = "worker"
) -> tuple[subprocess.CompletedProcess, list[str]]:
    """Runs the RENDERED worker container's start line in bash with stand-ins: the pod's /usr/local/nvidia
    and /usr/local/gib become temp dirs, `ldconfig` and `ray` are scripts on PATH that log their calls,
    set_nccl_env.sh logs that it was sourced and exports a variable the `ray` stub records."""
    cluster = render_raycluster(values_for("b200"))
    template = worker_template(cluster) if group == "worker" else cluster["spec"]["headGroupSpec"]["template"]
    container = ray_container(template)
    nvidia, gib, bin_dir, log = tmp_path / "nvidia", tmp_path / "gib", tmp_path / "bin", tmp_path / "calls.log"
    for d in (nvidia / "lib64", gib / "lib64", gib / "scripts", bin_dir):
        d.mkdir(parents=True)
    if with_script:
        (gib / "scripts" / "set_nccl_env.sh").write_text(
            f'echo "source set_nccl_env.sh" >> {log}\nexport NCCL_FROM_SCRIPT=loaded\n(exit {script_status})\n'
        )
    for tool, line in {
        "ldconfig": 'echo "ldconfig $*"',
        "ray": f'echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH" > {log}.env; echo "ray $1 '
        'NCCL_FROM_SCRIPT=${NCCL_FROM_SCRIPT:-unset}"',
    }.items():
        stub = bin_dir / tool
        status = ldconfig_status if tool == "ldconfig" else 0
        stub.write_text(f"#!/bin/bash\n{line} >> {log}\nexit {status}\n")
        stub.chmod(0o755)
    line = kuberay_args(container).replace("/usr/local/nvidia", str(nvidia)).replace("/usr/local/gib", str(gib))
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "RAY_START_ULIMIT_OPEN_FILES": subprocess.run(
            ["/bin/bash", "-c", "ulimit -n"], capture_output=True, text=True
        ).stdout.strip(),
    }
    # What the container starts with: the image's ENV, then the pod's env entries on top (a pod entry
    # of the same name replaces the image's, as the kubelet does).
    env |= {"LD_LIBRARY_PATH": IMAGE_LD_LIBRARY_PATH, **env_of(container)}
    proc = subprocess.run(["/bin/bash", "-c", "--", line], capture_output=True, text=True, timeout=30, env=env)
    calls = log.read_text().splitlines() if log.exists() else []
    return proc, [c.replace(str(nvidia), "/usr/local/nvidia").replace(str(gib), "/usr/local/gib") for c in calls]


def test_the_rendered_worker_registers_the_gpu_libraries_then_loads_the_nccl_settings_then_starts_ray(tmp_path):
    proc, calls = run_rendered_worker_start(tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert calls == [
        "ldconfig /usr/local/nvidia/lib64 /usr/local/gib/lib64",
        "source set_nccl_env.sh",
        "ray start NCCL_FROM_SCRIPT=loaded",
    ]


def test_without_the_nccl_script_the_worker_exits_instead_of_starting_ray(tmp_path):
    proc, calls = run_rendered_worker_start(tmp_path, with_script=False)
    assert proc.returncode == 1
    assert not any(c.startswith("ray ") for c in calls), "ray must not start without the gIB settings"
    assert "nccl-rdma-installer" in proc.stderr


def test_a_failed_ldconfig_ends_the_worker_before_ray(tmp_path):
    proc, calls = run_rendered_worker_start(tmp_path, ldconfig_status=1)
    assert proc.returncode == 1 and calls == ["ldconfig /usr/local/nvidia/lib64 /usr/local/gib/lib64"]


def test_a_script_whose_last_command_fails_still_loads_its_settings_and_ray_starts(tmp_path):
    proc, calls = run_rendered_worker_start(tmp_path, script_status=3)
    assert proc.returncode == 0, proc.stderr
    assert calls[-1] == "ray start NCCL_FROM_SCRIPT=loaded"
    assert "returned 3" in proc.stderr


def test_the_worker_command_never_names_ray_start_so_kuberay_keeps_prepending():
    command = " ".join(worker_start_command())
    assert "ray start" not in command and "ldconfig" in command


@pytest.mark.parametrize("group", ["head", "worker"])
def test_ray_starts_with_the_gpu_libraries_prepended_to_the_images_library_path(tmp_path, group):
    proc, _ = run_rendered_worker_start(tmp_path, group=group)
    assert proc.returncode == 0, proc.stderr
    (seen,) = (tmp_path / "calls.log.env").read_text().splitlines()
    assert GPU_LIBRARY_PATH == "/usr/local/nvidia/lib64:/usr/local/gib/lib64"
    assert seen == f"LD_LIBRARY_PATH=/usr/local/nvidia/lib64:/usr/local/gib/lib64:{IMAGE_LD_LIBRARY_PATH}".replace(
        "/usr/local/nvidia", str(tmp_path / "nvidia")
    ).replace("/usr/local/gib", str(tmp_path / "gib")), f"Ray {group}"


def test_the_head_keeps_kuberays_own_start_command():
    values = values_for()
    assert "ray start" not in " ".join(values["head"]["command"]) and "args" not in values["head"]
    assert "annotations" not in values, "no ray.io/overwrite-container-cmd: the prepend behaviour is relied on"


# ---------------------------------------------------------------- sizing


def test_gke_reservations_follow_the_documented_tiers():
    # 150 GiB: 25% of 4 + 20% of 4 + 10% of 8 + 6% of 112 + 2% of 22 = 9.76 GiB (+ 100 MiB eviction = 9.8577).
    assert gke_reserved_memory_gib(150) == pytest.approx(9.76)
    assert gke_reserved_memory_gib(150) + GKE_EVICTION_GIB == pytest.approx(9.8577, abs=1e-4)
    # 4 vCPUs: 6% + 1% + 2 x 0.5% = 80 millicores (allocatable 3920m on a 4-vCPU node).
    assert gke_reserved_cpu(4) == pytest.approx(0.08)
    assert gke_reserved_cpu(224) == pytest.approx(0.08 + 220 * 0.0025)


@pytest.mark.parametrize("flavour", sorted(FLAVOURS))
def test_workers_request_the_reference_size_by_default_and_leave_headroom(flavour):
    # Google's NeMo-RL on GKE sample: 206 CPU / 2400Gi on A4 and A3 Ultra (the old default took 221 / 3786).
    resources = values_for(flavour)["worker"]["resources"]
    assert resources["requests"] == resources["limits"] == {"cpu": "206", "memory": "2400Gi", "nvidia.com/gpu": "8"}
    fit = fit_for(flavour)
    assert fit.headroom_cpu >= 17 and fit.headroom_memory_gib >= 300, f"{flavour}: {fit.to_json()}"


def test_a_configured_worker_size_and_shm_limit_are_used():
    template = worker_template(
        render_raycluster(values_for("b200", worker=fit_for("b200", cpu=200, memory_gib=3000, shm_gib=100)))
    )
    container = ray_container(template)
    assert container["resources"]["limits"] == {"cpu": "200", "memory": "3000Gi", "nvidia.com/gpu": "8"}
    (shm,) = [v for v in template["spec"]["volumes"] if v["name"] == "dshm"]
    assert shm["emptyDir"] == {"medium": "Memory", "sizeLimit": "100Gi"}


def test_shared_memory_is_bounded_as_in_googles_sample():
    template = worker_template(render_raycluster(values_for("b200")))
    (shm,) = [v for v in template["spec"]["volumes"] if v["name"] == "dshm"]
    assert shm["emptyDir"] == {"medium": "Memory", "sizeLimit": "240Gi"}


# ---------------------------------------------------------------- the component and the release


def component(**overrides):
    from infra.gke_networks import GkeNetworkObjects, GkeNetworkObjectsArgs
    from infra.workload_env import LustreVolume, WorkloadEnvironment, WorkloadEnvironmentArgs

    def build():
        volume = LustreVolume("test-project", "us-east1-b", "t-lustre", "10.16.0.2", "lustrefs", 18000)
        env = WorkloadEnvironment("workload", WorkloadEnvironmentArgs("nemo-rl", "ray", None, None, volume))
        networks = GkeNetworkObjects("gke-networks", GkeNetworkObjectsArgs(sample_nics()))
        args = dict(
            cluster_name="nemo-rl",
            ray=RayConfig(),
            image=IMAGE,
            environment=env,
            networks=networks,
            gpu_pool=gpu_pool(),
            worker=fit_for(),
            system_pool_name="t-system",
        )
        args.update(overrides)
        return RayCluster("ray", RayClusterArgs(**args))

    return record(build)


def test_the_release_installs_the_pinned_upstream_chart_under_the_stable_name():
    rec = component()
    release = rec.one(RELEASE)
    inputs = release.inputs
    assert inputs["chart"] == "ray-cluster" and inputs["version"] == RayConfig().chart_version == "1.7.0"
    assert inputs["repositoryOpts"] == {"repo": "https://ray-project.github.io/kuberay-helm/"}
    assert inputs["name"] == inputs["values"]["fullnameOverride"] == "nemo-rl", release.name
    assert inputs["namespace"] == "nemo-rl" and inputs.get("createNamespace") is False


def test_the_release_waits_long_enough_and_is_replaced_cleanly_when_values_change():
    release = component().one(RELEASE)
    inputs, options = release.inputs, release.options
    assert inputs["skipAwait"] is False and inputs["timeout"] >= 1800, release.name
    assert inputs.get("atomic") is False and inputs["cleanupOnFail"] is True
    assert {"values", "version"} <= set(options["replaceOnChanges"]), options
    assert options["deleteBeforeReplace"] is True, "a fixed release name cannot be created before the old one is gone"
    assert int(options["customTimeouts"]["create"].rstrip("m")) * 60 > inputs["timeout"]


def test_the_release_values_carry_the_environment_objects_and_only_the_configured_secret_paths():
    rec = component()
    values = rec.one(RELEASE).inputs["values"]
    for group in ("head", "worker"):
        env = {e["name"]: e["value"] for e in values[group]["containerEnv"]}
        # The component's environment has no secret configured: no path to a file that is not there.
        assert "HF_TOKEN_PATH" not in env and "NETRC" not in env, group
        assert values[group]["serviceAccountName"] == "ray", group
        assert {"name": "secrets", "secret": {"secretName": "nemo-rl-secrets", "defaultMode": 0o400}} in values[group][
            "volumes"
        ]
        assert {"name": "lustre", "persistentVolumeClaim": {"claimName": "lustre"}} in values[group]["volumes"]
    assert values["head"]["nodeSelector"] == {"cloud.google.com/gke-nodepool": "t-system"}


def test_the_release_waits_for_the_environment_and_the_network_objects():
    rec = component()
    release = rec.one(RELEASE)
    needed = [r for r in rec.resources if r.custom and r is not release]
    missing = [r.name for r in needed if r.urn not in release.dependencies]
    assert not missing, f"{release.name} does not wait for {missing}"


def test_the_component_publishes_how_to_reach_the_dashboard():
    rec = component()
    published = rec.outputs_of("nemo-rl-gke:infra:RayCluster")
    assert published["clusterName"] == "nemo-rl" and published["namespace"] == "nemo-rl"
    assert published["headService"] == "nemo-rl-head-svc" and published["dashboardPort"] == 8265
    assert published["workerGroup"] == "gpu" and published["rayVersion"] == IMAGE.ray_version
    ray = rec.result
    assert ray.dashboard_proxy_path == "/api/v1/namespaces/nemo-rl/services/nemo-rl-head-svc:dashboard/proxy"


@pytest.mark.parametrize("bad", ["Nemo", "1ray", "x" * 41, "ray_cluster"])
def test_a_cluster_name_kuberay_could_not_use_is_refused(bad):
    with pytest.raises(ValueError, match="DNS-1035"):
        values_for(cluster_name=bad)


# ---------------------------------------------------------------- whole program


def stack_release(stack: str):
    plan = stack_plan(stack)
    (release,) = plan.by_type(RELEASE)
    return plan, release


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_each_stacks_raycluster_renders_valid_against_the_crd_and_the_pod_schema(stack):
    _, release = stack_release(stack)
    cluster = render_raycluster(
        release.inputs["values"], release=release.inputs["name"], namespace=release.inputs["namespace"]
    )
    problems = crd_problems(cluster, release.inputs["version"]) + pod_template_problems(cluster)
    assert not problems, f"{release.name}:\n" + "\n".join(problems)


@pytest.mark.parametrize("stack", STACKS)
def test_each_stack_sizes_its_workers_to_its_gpu_pool_and_flavour(stack):
    plan, release = stack_release(stack)
    (gke,) = plan.by_type("nemo-rl-gke:infra:GkeCluster")
    facts = plan.component_outputs[gke.urn]["gpuPoolFacts"]
    pools = {p.inputs["name"]: p for p in plan.by_type("gcp:container/nodePool:NodePool")}
    worker = release.inputs["values"]["worker"]
    sizes = (worker["replicas"], worker["minReplicas"], worker["maxReplicas"])
    assert sizes == (0, 0, facts["nodeCount"]), release.name
    assert worker["nodeSelector"] == {"cloud.google.com/gke-nodepool": facts["poolName"]} and facts["poolName"] in pools
    head_pool = release.inputs["values"]["head"]["nodeSelector"]["cloud.google.com/gke-nodepool"]
    assert head_pool in pools and head_pool != facts["poolName"], f"{release.name}: head must be on the CPU pool"
    flavour = next(f for f in FLAVOURS.values() if f.accelerator_type == facts["acceleratorType"])
    env = {e["name"]: e["value"] for e in worker["containerEnv"]}
    assert env["NCCL_TUNER_CONFIG_PATH"] == flavour.nccl_tuner_config


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_each_stack_runs_its_recipes_image_with_the_matching_ray_version(stack):
    from conftest import plan_mod, read_stack_file

    from tools.estimates import stack_config

    plan, release = stack_release(stack)
    recipe = json.loads(read_stack_file(plan_mod.ROOT / f"Pulumi.{stack}.yaml")[0]["nemo-rl-gke:job"])["recipe"]
    image = RECIPES[recipe].image
    values = release.inputs["values"]
    cfg = stack_config(plan)
    # cluster.imageStreaming: the same image through the stack's Artifact Registry mirror of nvcr.io.
    mirrored = f"{cfg.region}-docker.pkg.dev/{cfg.project}/{stack}-nvcr/{image.repository.removeprefix('nvcr.io/')}"
    repository = mirrored if cfg.cluster.image_streaming else image.repository
    assert (values["image"]["repository"], values["image"]["tag"]) == (repository, image.tag), release.name
    assert values["head"]["rayVersion"] == image.ray_version


def test_the_stack_wires_secret_claim_and_service_account_by_their_object_names():
    plan, release = stack_release("h200")
    values = release.inputs["values"]
    (secret,) = plan.by_type("kubernetes:core/v1:Secret")
    (pvc,) = plan.by_type("kubernetes:core/v1:PersistentVolumeClaim")
    sa = plan.one("kubernetes:core/v1:ServiceAccount", "workload-service-account")
    for group in ("head", "worker"):
        assert {
            "name": "secrets",
            "secret": {"secretName": secret.inputs["metadata"]["name"], "defaultMode": 0o400},
        } in values[group]["volumes"]
        assert {"name": "lustre", "persistentVolumeClaim": {"claimName": pvc.inputs["metadata"]["name"]}} in values[
            group
        ]["volumes"]
        assert values[group]["serviceAccountName"] == sa.inputs["metadata"]["name"]
    assert release.inputs["namespace"] == pvc.inputs["metadata"]["namespace"] == secret.inputs["metadata"]["namespace"]


def test_the_stack_annotation_names_exactly_the_network_objects_it_creates():
    plan, release = stack_release("h200")
    annotated = [
        e["network"]
        for e in json.loads(release.inputs["values"]["worker"]["annotations"]["networking.gke.io/interfaces"])
    ]
    created = {r.inputs["metadata"]["name"] for r in plan.by_type("kubernetes:networking.gke.io/v1:Network")}
    assert annotated[0] == "default"
    assert sorted(annotated[1:]) == sorted(created) and len(annotated[1:]) == len(created)


def transitive_dependencies(plan, urn: str) -> set[str]:
    by_urn = plan.by_urn()
    seen, todo = set(), [urn]
    while todo:
        for dep in by_urn[todo.pop()].dependencies:
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


def test_destroy_removes_the_release_before_every_in_cluster_object_and_those_before_the_pools_and_cluster():
    plan, release = stack_release("h200")
    pools = {p.urn for p in plan.by_type("gcp:container/nodePool:NodePool")}
    (cluster,) = plan.by_type("gcp:container/cluster:Cluster")
    (provider,) = plan.by_type("pulumi:providers:kubernetes")
    in_cluster = [r for r in plan.resources if r.custom and r.type.startswith("kubernetes:") and r is not release]
    release_deps = set(release.dependencies)
    # Objects that use the Ray cluster (the preemption watcher) wait for the release and so go before it.
    users = sorted(r.name for r in in_cluster if release.urn in r.dependencies)
    assert users == [
        "preemption-watcher-code",
        "preemption-watcher-deployment",
        "preemption-watcher-gang-node-reader",  # the worker pods' nodes, for each attempt's goodput marks
        "preemption-watcher-gang-node-reader-binding",
        "preemption-watcher-gang-role",  # it scales the RayCluster's workers (to 0 once the run has ended)
        "preemption-watcher-gang-role-binding",
        "preemption-watcher-sa",
    ], users
    below = [r for r in in_cluster if release.urn not in r.dependencies]
    # Beside the release, on purpose: the weights' download must not delay it (issue 44); a finished CPU Job whose
    # delete neither the release nor its pods notice.
    beside = [r.name for r in below if r.urn not in release_deps]
    assert beside == ["weights-job"], "the release must go first"
    assert pools <= release_deps
    on_nodes = [r for r in below if "networking.gke.io" not in r.type]
    late = [r.name for r in on_nodes if not pools <= set(r.dependencies)]
    assert not late, f"deleted after the node pools: {late}"
    assert cluster.urn in transitive_dependencies(plan, provider.urn)
    assert all(r.provider == provider.urn for r in in_cluster + [release])


def test_no_plaintext_secret_is_in_the_release_values():
    plan, release = stack_release("h200")
    text = json.dumps(release.inputs["values"])
    # With the token set the pods get HF_TOKEN_PATH (a file path), never a variable holding a token.
    assert "[secret]" not in text and not re.search(r'"(HF_TOKEN|HUGGING_FACE_HUB_TOKEN|WANDB_API_KEY)"', text), text[
        :300
    ]


@pytest.mark.parametrize("stack", STACKS)
def test_the_head_of_a_big_recipes_stack_is_no_smaller_than_the_codelabs(stack):
    from conftest import plan_mod

    _, release = stack_release(stack)
    recipe = RECIPES[
        json.loads(plan_mod.read_stack_file(plan_mod.ROOT / f"Pulumi.{stack}.yaml")[0]["nemo-rl-gke:job"])["recipe"]
    ]
    requests = release.inputs["values"]["head"]["resources"]["requests"]
    cpu, memory_gib = int(requests["cpu"]), int(requests["memory"].removesuffix("Gi"))
    if recipe.model_params_billion >= 20:
        # Codelab "Scale RL with GKE and Managed Lustre" (72B): head requests 8 CPU / 64Gi.
        assert (cpu, memory_gib) >= (8, 64) and cpu >= 8 and memory_gib >= 64, f"{release.name}: {requests}"
    (fit,) = [o["workerFit"] for o in stack_plan(stack).component_outputs.values() if "workerFit" in o]
    assert fit["headroomCpu"] > 0 and fit["headroomMemoryGib"] > 0


def test_the_plan_text_shows_the_worker_requests_and_the_headroom_they_leave():
    from tools.offline_plan import render_tree

    text = render_tree(stack_plan("b200"))
    block = text[text.index("Ray worker pod on each a4-highgpu-8g node") : text.index("\nDeploy time")]
    assert "requests  206 CPU / 2,400 GiB (/dev/shm up to 240 GiB" in block
    # 224 - 0.63 = 223.37 CPU; 3968 x 0.98 - 86.12 - 0.1 = 3802.4 GiB allocatable.
    assert "headroom  17.37 CPU / 1,402.4 GiB" in block


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_no_stack_turns_on_the_in_tree_autoscaler_so_a_released_worker_group_loses_its_pods(stack):
    # KubeRay v1.7.0 reconcilePods deletes surplus worker pods only while the in-tree autoscaler is off
    # (infra/ray_cluster.py check_no_in_tree_autoscaler): the gang wait's release depends on it.
    import json

    plan = stack_plan(stack)
    (cm,) = [r for r in plan.by_type("kubernetes:core/v1:ConfigMap") if r.name == "preemption-watcher-code"]
    releases = json.loads(cm.inputs["data"]["run.json"]).get("gang_on_timeout") == "releaseWorkers"
    assert releases or stack != "b200-ladder", "the ladder stack releases its workers: the case this guards"
    (release,) = plan.by_type(RELEASE)
    spec = render_raycluster(release.inputs["values"])["spec"]
    assert "enableInTreeAutoscaling" not in spec, release.name
    assert "autoscalerOptions" not in release.inputs["values"]["head"], release.name


def test_values_that_turn_on_the_in_tree_autoscaler_are_refused_before_any_resource():
    def autoscaled(values):
        return {**values, "head": {**values["head"], "enableInTreeAutoscaling": True}}

    with pytest.raises(ValueError, match="head.enableInTreeAutoscaling must stay off"):
        component(adapt_values=autoscaled)
