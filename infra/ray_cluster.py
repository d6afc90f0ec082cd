"""The Ray cluster: the upstream KubeRay `ray-cluster` Helm chart (ray-project/kuberay helm-chart/ray-cluster) with
values built here, on the CRDs of GKE's Ray operator add-on
(https://cloud.google.com/kubernetes-engine/docs/add-on/ray-on-gke/how-to/enable-ray-on-gke); unlike the sample
chart it keeps pod-template annotations (the RDMA NICs). Helm cannot wait for a RayCluster: `workloads.hook` does.
Lists given here replace the chart's (Helm merges maps, not lists); `head.rayVersion` is `spec.rayVersion` (the
chart's helm-unittest "Should set Ray version").

KubeRay (ray-operator/controllers/ray/common/pod.go BuildPod, v1.1 to v1.7) runs `/bin/bash -c -- "<command> &&
ulimit -n ...; ray start ..."` unless the command contains `ray start`
(https://docs.ray.io/en/latest/cluster/kubernetes/user-guides/pod-command.html): our setup is prepended, and since
`a && b; c` runs `c` when `a` fails, it exits the shell itself.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Optional, Protocol, Union

import pulumi
import pulumi_kubernetes as k8s

from infra.config import RayConfig
from infra.machines import NodeFit
from infra.naming import MANAGED_LABELS, NODE_POOL_LABEL
from infra.options import child_options
from infra.pod_facts import DASHBOARD_PORT, GPU_RESOURCE, SECRET_MOUNT_PATH, worker_tolerations
from infra.stack_context import GpuPoolFacts
from workloads.job_types import hf_home, results_dirs
from workloads.recipes import NemoRLImage

CHART = "ray-cluster"
CHART_REPO = "https://ray-project.github.io/kuberay-helm/"
WORKER_GROUP = "gpu"
RAY_CLUSTER_NAME = "nemo-rl"  # one Ray cluster per GKE cluster, so a fixed name is unique
HEAD_SERVICE_SUFFIX = "-head-svc"


@dataclass(frozen=True)
class RayTarget:
    """The RayCluster the run's owner looks at: built once (`ray_target_for`) for the component and the run plan."""

    cluster_name: str
    namespace: str
    worker_group: str = WORKER_GROUP


def ray_target_for(ray: RayConfig) -> RayTarget:
    return RayTarget(RAY_CLUSTER_NAME, ray.namespace)


MAX_CLUSTER_NAME = 40  # room for KubeRay's suffixes (`-head-svc`, `-<group>-worker-<hash>`) within 63
# The chart's common labels (`ray-cluster.labels` in templates/_helpers.tpl), added to every pod template.
CHART_LABEL_KEYS = frozenset(
    {
        "app.kubernetes.io/name",
        "helm.sh/chart",
        "app.kubernetes.io/instance",
        "app.kubernetes.io/version",
        "app.kubernetes.io/managed-by",
    }
)

# Host paths the NCCL installer fills (infra/nccl.py) and where the workers see them.
HOST_NVIDIA_DIR, POD_NVIDIA_DIR = "/home/kubernetes/bin/nvidia", "/usr/local/nvidia"
HOST_GIB_DIR, POD_GIB_DIR = "/home/kubernetes/bin/gib", "/usr/local/gib"
NCCL_ENV_SCRIPT = f"{POD_GIB_DIR}/scripts/set_nccl_env.sh"


def _resources(cpu: Union[int, str], memory_gib: int, gpus: int = 0) -> dict[str, Any]:
    # Requests == limits (Guaranteed QoS): Ray sizes itself from the limits; strings so Helm never prints a float.
    amounts: dict[str, Any] = {"cpu": str(cpu), "memory": f"{memory_gib}Gi"}
    if gpus:
        amounts[GPU_RESOURCE] = str(gpus)
    return {"requests": dict(amounts), "limits": dict(amounts)}


def _env(pairs: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"name": k, "value": v} for k, v in pairs.items()]


# PREPENDED to the image's LD_LIBRARY_PATH in the start command, never a container `env` entry (which would
# replace the image's ENV: NeMo-RL v0.6.0 puts the pip cuDNN first so Transformer Engine does not load the
# system one, NVIDIA-NeMo/RL docker/Dockerfile at 5fb58893). On the head too: NeMo-RL copies the head's
# environment into every actor's runtime env (nemo_rl/distributed/virtual_cluster.py `init_ray`).
GPU_LIBRARY_PATH = f"{POD_NVIDIA_DIR}/lib64:{POD_GIB_DIR}/lib64"
# `${...}` is the shell's: Kubernetes expands only `$(VAR)` in a command, and Helm does not template values.
PREPEND_GPU_LIBRARY_PATH = f"export LD_LIBRARY_PATH={GPU_LIBRARY_PATH}${{LD_LIBRARY_PATH:+:${{LD_LIBRARY_PATH}}}}"


def head_start_command() -> list[str]:
    return [PREPEND_GPU_LIBRARY_PATH]


def worker_nccl_env(pool: GpuPoolFacts) -> dict[str, str]:
    """GPUDirect RDMA over the gIB plugin (GoogleCloudPlatform/container-engine-accelerators
    gpudirect-rdma; kubernetes-engine-samples ai-ml/nemo-rl-on-gke values); bootstrap over eth0."""
    return {
        "NCCL_NET": "gIB",
        "NCCL_IB_GID_INDEX": "3",
        "NCCL_CROSS_NIC": "0",
        "NCCL_NET_GDR_LEVEL": "PIX",
        "NCCL_SOCKET_IFNAME": "eth0",
        "GLOO_SOCKET_IFNAME": "eth0",
        "TP_SOCKET_IFNAME": "eth0",
        "NCCL_TUNER_CONFIG_PATH": pool.nccl_tuner_config,
    }


def worker_start_command() -> list[str]:
    """`ldconfig` of the driver and gIB libraries (as Google's NeMo-RL sample) and the gIB NCCL settings sourced
    (their status only reported, as upstream's test pods). Must never contain `ray` + ` start` (KubeRay BuildPod)."""
    return [
        f"{PREPEND_GPU_LIBRARY_PATH}; "
        f"{{ ldconfig {POD_NVIDIA_DIR}/lib64 {POD_GIB_DIR}/lib64 && [ -f {NCCL_ENV_SCRIPT} ]; }} || "
        f"{{ echo 'worker setup failed: ldconfig of the GPU libraries, or no {NCCL_ENV_SCRIPT} (is the "
        "nccl-rdma-installer DaemonSet running on this node?)' >&2; exit 1; }; "
        f'source {NCCL_ENV_SCRIPT} || echo "warning: {NCCL_ENV_SCRIPT} returned $?" >&2'
    ]


def pod_labels(component: str) -> dict[str, str]:
    """No chart label keys (CHART_LABEL_KEYS): the chart appends them to the same YAML map, and Helm fails on
    a duplicate key."""
    part_of = MANAGED_LABELS["app.kubernetes.io/part-of"]
    return {"app.kubernetes.io/part-of": part_of, "app.kubernetes.io/component": component}


def check_cluster_name(cluster_name: str) -> None:
    if len(cluster_name) > MAX_CLUSTER_NAME or not re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", cluster_name):
        raise ValueError(
            f"Ray cluster name {cluster_name!r} must be a DNS-1035 label of at most {MAX_CLUSTER_NAME} characters "
            "(it names the head Service and the pods)"
        )


def _init_container(image: NemoRLImage, name: str, command: list[str], memory: str, mount: dict) -> dict[str, Any]:
    return {
        "name": name,
        "image": image.ref,
        "imagePullPolicy": "IfNotPresent",
        "command": command,
        "resources": {"requests": {"cpu": "100m", "memory": memory}},
        "volumeMounts": [mount],
    }


def ray_values(
    *,
    cluster_name: str,
    image: NemoRLImage,
    service_account: str,
    secret_name: str,
    secret_env: Mapping[str, str],
    pvc_name: str,
    mount_path: str,
    head_cpu: int,
    head_memory_gib: int,
    system_pool_name: Optional[str],
    gpu_pool: GpuPoolFacts,
    worker: NodeFit,
    interfaces_annotation: str,
    worker_group: str = WORKER_GROUP,
) -> dict[str, Any]:
    """The `ray-cluster` chart values for one CPU head and one GPU worker group. Pure: no Outputs."""
    check_cluster_name(cluster_name)
    lustre_volume = {"name": "lustre", "persistentVolumeClaim": {"claimName": pvc_name}}
    lustre_mount = {"name": "lustre", "mountPath": mount_path}
    # The job's Hugging Face cache, and secrets as files (infra/workload_env.py) so no token is in the
    # environment NeMo-RL copies into the Ray runtime env.
    common_env = {"HF_HOME": hf_home(mount_path), **secret_env}
    secrets_volume = {"name": "secrets", "secret": {"secretName": secret_name, "defaultMode": 0o400}}
    secrets_mount = {"name": "secrets", "mountPath": SECRET_MOUNT_PATH, "readOnly": True}
    gib_mount = {"name": "gib", "mountPath": POD_GIB_DIR, "readOnly": True}
    results = ["mkdir", "-p", *(posixpath.join(mount_path, d) for d in results_dirs())]
    wait_gib = f"until [ -f {NCCL_ENV_SCRIPT} ]; do echo waiting for the gIB NCCL plugin; sleep 10; done"
    return {
        "fullnameOverride": cluster_name,
        "image": {"repository": image.repository, "tag": image.tag, "pullPolicy": "IfNotPresent"},
        "service": {"type": "ClusterIP"},
        "head": {
            "rayVersion": image.ray_version,  # must equal the Ray inside the image
            "serviceAccountName": service_account,
            # No Ray tasks on the small CPU head: a stray CPU actor there could OOM the GCS.
            "rayStartParams": {"dashboard-host": "0.0.0.0", "num-cpus": "0"},
            "containerEnv": _env(common_env),
            "command": head_start_command(),
            "resources": _resources(head_cpu, head_memory_gib),
            # The CPU system pool; on Autopilot (None) GKE's default class, whose nodes have no GPUs.
            "nodeSelector": {NODE_POOL_LABEL: system_pool_name} if system_pool_name else {},
            "tolerations": [],
            "affinity": {},
            "annotations": {},
            "labels": pod_labels("ray-head"),
            # The directories `pulumi destroy` exports (infra/lustre_guard.py) exist from the first deploy on.
            "initContainers": [_init_container(image, "make-results-dirs", results, "64Mi", lustre_mount)],
            "volumes": [lustre_volume, secrets_volume],
            "volumeMounts": [lustre_mount, secrets_mount],
        },
        "worker": {
            "groupName": worker_group,
            # No workers until an attempt asks for them: the run's owner is the one writer of `replicas`
            # (workloads/worker_group.py), so no Helm upgrade or reinstall brings released, billed workers back.
            "replicas": 0,
            "minReplicas": 0,
            "maxReplicas": gpu_pool.node_count,
            "serviceAccountName": service_account,
            "rayStartParams": {},
            # The NCCL installer may still be copying the plugin onto a fresh node.
            "initContainers": [
                _init_container(image, "wait-for-gib", ["/bin/bash", "-c", wait_gib], "128Mi", gib_mount)
            ],
            "containerEnv": _env({**worker_nccl_env(gpu_pool), **common_env}),
            "resources": _resources(worker.cpu, worker.memory_gib, gpu_pool.gpus_per_node),
            "nodeSelector": dict(gpu_pool.node_selector),
            "tolerations": worker_tolerations(gpu_pool.taints),
            "affinity": {},
            "annotations": {
                "networking.gke.io/default-interface": "eth0",
                "networking.gke.io/interfaces": interfaces_annotation,
            },
            "labels": pod_labels("ray-worker"),
            # GPUDirect RDMA needs no privilege: upstream's A4/A3 Ultra RDMA test pods run NCCL over gIB with no
            # securityContext (GoogleCloudPlatform/container-engine-accelerators gpudirect-rdma/nccl-test.yaml
            # and nccl-test-a4.yaml at 992db812); the acceptance gate (job.gate) measures busbw before the job.
            "securityContext": {"privileged": False},
            "command": worker_start_command(),
            "volumes": [
                lustre_volume,
                secrets_volume,
                {"name": "nvidia", "hostPath": {"path": HOST_NVIDIA_DIR}},
                {"name": "gib", "hostPath": {"path": HOST_GIB_DIR}},
                # NCCL and the object store use /dev/shm (64 MiB by default); bounded as in Google's sample.
                {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{worker.shm_gib}Gi"}},
            ],
            "volumeMounts": [
                lustre_mount,
                secrets_mount,
                {"name": "nvidia", "mountPath": POD_NVIDIA_DIR, "readOnly": True},
                gib_mount,
                {"name": "dshm", "mountPath": "/dev/shm"},
            ],
        },
        "additionalWorkerGroups": {"smallGroup": {"disabled": True}},
    }


class RayEnvironment(Protocol):
    namespace: str
    service_account: str
    secret_name: str
    secret_env: dict[str, str]
    pvc_name: str


class PodNetworks(Protocol):
    interfaces_annotation: str


@dataclass(frozen=True)
class RayClusterArgs:
    """`environment` and `networks`, when they are resources, are waited for by the release."""

    cluster_name: str
    ray: RayConfig
    image: NemoRLImage
    environment: RayEnvironment
    networks: PodNetworks
    gpu_pool: GpuPoolFacts
    worker: NodeFit
    system_pool_name: Optional[str]  # None where there are no node pools (Autopilot)
    timeout_seconds: int = 3600
    adapt_values: Optional[Callable[[dict[str, Any]], dict[str, Any]]] = None  # ClusterMode.adapt_ray_values

    def values(self) -> dict[str, Any]:
        env = self.environment
        values = ray_values(
            cluster_name=self.cluster_name,
            image=self.image,
            service_account=env.service_account,
            secret_name=env.secret_name,
            secret_env=env.secret_env,
            pvc_name=env.pvc_name,
            mount_path=self.ray.mount_path,
            head_cpu=self.ray.head_cpu,
            head_memory_gib=self.ray.head_memory_gib,
            system_pool_name=self.system_pool_name,
            gpu_pool=self.gpu_pool,
            worker=self.worker,
            interfaces_annotation=self.networks.interfaces_annotation,
        )
        values = self.adapt_values(values) if self.adapt_values is not None else values
        check_no_in_tree_autoscaler(values)
        return values


def check_no_in_tree_autoscaler(values: Mapping[str, Any]) -> None:
    """The gang wait releases workers by scaling the group to 0, and KubeRay deletes surplus pods only with the
    in-tree autoscaler off (ray-project/kuberay v1.7.0 (59d663ae) ray-operator/controllers/ray/
    raycluster_controller.go `reconcilePods`: `if !enableInTreeAutoscaling || enableRandomPodDelete`)."""
    if (values.get("head") or {}).get("enableInTreeAutoscaling"):
        raise ValueError(
            "ray-cluster values: head.enableInTreeAutoscaling must stay off: the gang wait releases workers by "
            "scaling the group to 0, which KubeRay carries out only without the in-tree autoscaler"
        )


class RayCluster(pulumi.ComponentResource):
    """A RayCluster from the upstream chart (its GPU workers at 0 until an attempt asks for them), replaced
    (deleted first: the name is fixed) whenever values or chart change, since KubeRay does not roll Ray pods. No
    `atomic`: it would lose a failed install's events."""

    def __init__(self, name: str, args: RayClusterArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        cluster_name, image, ray = args.cluster_name, args.image, args.ray
        self.cluster_name = cluster_name
        self.namespace = args.environment.namespace
        self.head_service = f"{cluster_name}{HEAD_SERVICE_SUFFIX}"
        self.dashboard_port = DASHBOARD_PORT
        self.worker_group = WORKER_GROUP
        # https://kubernetes.io/docs/tasks/access-application-cluster/access-cluster-services/
        self.dashboard_proxy_path = f"/api/v1/namespaces/{self.namespace}/services/{self.head_service}:dashboard/proxy"
        values = args.values()
        super().__init__("nemo-rl-gke:infra:RayCluster", name, None, opts)
        self.values = values
        self.release = self._release(name, args, opts)
        self.register_outputs(
            {
                "clusterName": self.cluster_name,
                "namespace": self.namespace,
                "headService": self.head_service,
                "dashboardPort": self.dashboard_port,
                "workerGroup": self.worker_group,
                "rayVersion": image.ray_version,
                "image": image.ref,
                "chartVersion": ray.chart_version,
                "workerFit": args.worker.to_json(),
                "releaseStatus": self.release.status.apply(lambda s: s.status if s else None),
            }
        )

    def _release(self, name: str, args: RayClusterArgs, opts: Optional[pulumi.ResourceOptions]) -> k8s.helm.v3.Release:
        image, timeout_seconds = args.image, args.timeout_seconds
        waits_for = [r for r in (args.environment, args.networks) if isinstance(r, pulumi.Resource)]
        minutes = f"{timeout_seconds // 60 + 10}m"
        return k8s.helm.v3.Release(
            f"{name}-release",
            name=args.cluster_name,
            chart=CHART,
            version=args.ray.chart_version,
            repository_opts={"repo": CHART_REPO},
            namespace=self.namespace,
            create_namespace=False,
            values=self.values,
            description=f"NeMo-RL Ray cluster ({image.ref}, Ray {image.ray_version})",
            skip_await=False,
            timeout=timeout_seconds,
            atomic=False,
            cleanup_on_fail=True,
            max_history=10,
            opts=child_options(
                self,
                opts,
                depends_on=waits_for,
                replace_on_changes=["values", "version", "chart", "repositoryOpts"],
                delete_before_replace=True,
                custom_timeouts=pulumi.CustomTimeouts(create=minutes, update=minutes, delete="20m"),
            ),
        )
