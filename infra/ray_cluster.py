"""The Ray cluster: the upstream KubeRay `ray-cluster` Helm chart, with values built here.

Why the upstream chart and a Helm release: the GKE Ray operator add-on already runs KubeRay and serves
the ray.io CRDs (https://cloud.google.com/kubernetes-engine/docs/add-on/ray-on-gke/how-to/enable-ray-on-gke),
so all that is needed is one RayCluster object, and the upstream
chart renders pod-template annotations and labels (the sample chart drops them, losing the RDMA NICs).
`helm.v3.Release` also shows its values to the offline plan, so tests can render and validate them.

Readiness: Helm's wait does not understand the RayCluster custom resource, so the release reports
deployed before the head and GPU workers are up; the training job's provider (`workloads.hook`) enforces
readiness instead, waiting for the RayCluster's `RayClusterProvisioned`/`HeadPodReady` conditions.

Chart facts used below, checked in ray-project/kuberay helm-chart/ray-cluster (templates and the chart's
helm-unittest suite):
- `head.rayVersion` becomes `spec.rayVersion` (unit test "Should set Ray version when `head.rayVersion`
  is set"); it is not in the README's value table but is a real value;
- `fullnameOverride` is the RayCluster's name (otherwise `<release>-kuberay`), `service.type` the head
  service type, `image.{repository,tag,pullPolicy}` the Ray container image;
- `head.*` / `worker.*` take rayStartParams, containerEnv, envFrom, resources, nodeSelector, tolerations,
  affinity, annotations, labels, securityContext, volumes, volumeMounts, initContainers, command,
  serviceAccountName; `worker.*` adds groupName, replicas, minReplicas, maxReplicas;
- lists given here REPLACE the chart's default lists (Helm merges maps, not lists), so the chart's
  default `/tmp/ray` log volume is dropped on purpose; maps are merged, so every map we care about is
  set in full.

Start command: KubeRay (ray-operator/controllers/ray/common/pod.go BuildPod, v1.1 to v1.7) runs
`/bin/bash -c -- "<container command + args> && ulimit -n ...; ray start ..."` unless the RayCluster carries
`ray.io/overwrite-container-cmd: "true"` or the command already contains `ray start` (KubeRay docs
"Specify container commands for Ray head/worker Pods",
https://docs.ray.io/en/latest/cluster/kubernetes/user-guides/pod-command.html). We use that prepend behaviour rather
than the overwrite annotation: the generated `ray start` line stays KubeRay's own, and the worker's
command registers the GPU libraries with `ldconfig` and sources the gIB NCCL environment into the same
shell. Because `a && b; c` runs `c` even when `a` fails, the command exits the shell itself when a step
fails, so a worker never starts Ray without them.
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
RAY_CLUSTER_NAME = "nemo-rl"
"""The RayCluster (and Helm release) name: one Ray cluster per GKE cluster, so a fixed name is unique."""
HEAD_SERVICE_SUFFIX = "-head-svc"


@dataclass(frozen=True)
class RayTarget:
    """The RayCluster the run's owner looks at (the gang wait's pods, the worker group it releases), as plain
    values known at plan time: `__main__.py` builds it once (`ray_target_for`) and hands it to the `RayCluster`
    component (its name) and to the run plan (`infra.run_plan.run_plan_for_stack`), so both name one cluster."""

    cluster_name: str
    namespace: str
    worker_group: str = WORKER_GROUP


def ray_target_for(ray: RayConfig) -> RayTarget:
    """The stack's RayCluster: the one fixed name (`RAY_CLUSTER_NAME`) in `ray.namespace`, which the workload
    environment creates and the release installs into, and the GPU worker group (`WORKER_GROUP`)."""
    return RayTarget(RAY_CLUSTER_NAME, ray.namespace)


MAX_CLUSTER_NAME = 40
"""Leaves room for KubeRay's suffixes (`-head-svc`, `-<group>-worker-<hash>`) within 63 characters."""
CHART_LABEL_KEYS = frozenset(
    {
        "app.kubernetes.io/name",
        "helm.sh/chart",
        "app.kubernetes.io/instance",
        "app.kubernetes.io/version",
        "app.kubernetes.io/managed-by",
    }
)
"""The chart's common labels (`ray-cluster.labels` in templates/_helpers.tpl), added to every pod template."""

# Host paths the NCCL installer fills (infra/nccl.py) and where the workers see them.
HOST_NVIDIA_DIR, POD_NVIDIA_DIR = "/home/kubernetes/bin/nvidia", "/usr/local/nvidia"
HOST_GIB_DIR, POD_GIB_DIR = "/home/kubernetes/bin/gib", "/usr/local/gib"
NCCL_ENV_SCRIPT = f"{POD_GIB_DIR}/scripts/set_nccl_env.sh"

# ---------------------------------------------------------------- values


def _resources(cpu: Union[int, str], memory_gib: int, gpus: int = 0) -> dict[str, Any]:
    # Requests == limits (Guaranteed QoS): the workers own their nodes, and Ray sizes itself from the
    # limits (num-cpus, memory); quantities as strings so Helm never prints a float.
    amounts: dict[str, Any] = {"cpu": str(cpu), "memory": f"{memory_gib}Gi"}
    if gpus:
        amounts[GPU_RESOURCE] = str(gpus)
    return {"requests": dict(amounts), "limits": dict(amounts)}


def _env(pairs: Mapping[str, str]) -> list[dict[str, str]]:
    return [{"name": k, "value": v} for k, v in pairs.items()]


GPU_LIBRARY_PATH = f"{POD_NVIDIA_DIR}/lib64:{POD_GIB_DIR}/lib64"
"""The GPU driver and gIB plugin libraries, the directories upstream's test pods and Google's NeMo-RL
sample put on `LD_LIBRARY_PATH`. PREPENDED to the image's own value in the start command, never set as a
container variable: a container `env` entry replaces the image's `ENV`, and the NeMo-RL v0.6.0 image
sets `LD_LIBRARY_PATH` to the pip cuDNN directory first so Transformer Engine does not load the
system cuDNN and crash on the version mismatch (NVIDIA-NeMo/RL docker/Dockerfile at v0.6.0, 5fb58893,
the `ENV LD_LIBRARY_PATH=".../site-packages/nvidia/cudnn/lib:${LD_LIBRARY_PATH}"` line). Prepended on
the head as well: NeMo-RL's driver runs on the head and copies the head's environment into every
actor's runtime env (NVIDIA-NeMo/RL nemo_rl/distributed/virtual_cluster.py `init_ray`), so the actors
that run NCCL get the driver, gIB and pip cuDNN paths whichever way the environment flows."""

PREPEND_GPU_LIBRARY_PATH = f"export LD_LIBRARY_PATH={GPU_LIBRARY_PATH}${{LD_LIBRARY_PATH:+:${{LD_LIBRARY_PATH}}}}"
"""Bash, in the shell KubeRay starts Ray from. `${...}` is the shell's: Kubernetes expands only `$(VAR)`
in a command, and Helm does not template values."""


def head_start_command() -> list[str]:
    """Prepended by KubeRay to the head's `ray start` line: the GPU library path before the image's own."""
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
    """Prepended by KubeRay to its `ray start` line (module docstring). Registers the driver and gIB
        libraries with the dynamic loader (`ldconfig`, as Google's NeMo-RL sample does), so every process
        on the worker finds them whatever `LD_LIBRARY_PATH` its runtime env carries (which starts with them,
    `GPU_LIBRARY_PATH`, prepended to the image's own), then loads the gIB NCCL
        settings into the shell that runs Ray. A failed `ldconfig` or a missing script ends the container
        instead of starting Ray without them. The script's own exit status is only reported: it is a list
        of exports whose last command may well return non-zero (upstream's test pods do not check it
        either), and KubeRay's `&& ulimit` must still run. The command must never contain the words KubeRay
        looks for to stop prepending (`ray` + ` start`, ray-operator/controllers/ray/common/pod.go BuildPod)."""
    return [
        f"{PREPEND_GPU_LIBRARY_PATH}; "
        f"{{ ldconfig {POD_NVIDIA_DIR}/lib64 {POD_GIB_DIR}/lib64 && [ -f {NCCL_ENV_SCRIPT} ]; }} || "
        f"{{ echo 'worker setup failed: ldconfig of the GPU libraries, or no {NCCL_ENV_SCRIPT} (is the "
        "nccl-rdma-installer DaemonSet running on this node?)' >&2; exit 1; }; "
        f'source {NCCL_ENV_SCRIPT} || echo "warning: {NCCL_ENV_SCRIPT} returned $?" >&2'
    ]


def pod_labels(component: str) -> dict[str, str]:
    """Our pod labels. The chart appends its own common labels to the same map in YAML, so reusing one
    of its keys (CHART_LABEL_KEYS) would make Helm fail on a duplicate key: no managed-by here."""
    labels = {
        "app.kubernetes.io/part-of": MANAGED_LABELS["app.kubernetes.io/part-of"],
        "app.kubernetes.io/component": component,
    }
    assert not set(labels) & CHART_LABEL_KEYS
    return labels


def check_cluster_name(cluster_name: str) -> None:
    if len(cluster_name) > MAX_CLUSTER_NAME or not re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", cluster_name):
        raise ValueError(
            f"Ray cluster name {cluster_name!r} must be a DNS-1035 label of at most {MAX_CLUSTER_NAME} characters "
            "(it names the head Service and the pods)"
        )


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
    # The same Hugging Face cache on Lustre as the job's runtime env (workloads.job_spec.build_job), and
    # where the secret files are (infra/workload_env.py: files, so no token is in the environment
    # NeMo-RL copies into the Ray runtime env). The release values (kept in the state and in a Helm
    # release Secret) hold only the Secret's name and these paths.
    common_env = {"HF_HOME": hf_home(mount_path), **secret_env}
    secrets_volume = {"name": "secrets", "secret": {"secretName": secret_name, "defaultMode": 0o400}}
    secrets_mount = {"name": "secrets", "mountPath": SECRET_MOUNT_PATH, "readOnly": True}
    return {
        "fullnameOverride": cluster_name,
        "image": {"repository": image.repository, "tag": image.tag, "pullPolicy": "IfNotPresent"},
        # Dashboard and job API reachable inside the cluster (or through the API server proxy) only.
        "service": {"type": "ClusterIP"},
        "head": {
            # Must equal the Ray inside the image (the image tag's NVIDIA-NeMo/RL pyproject.toml).
            "rayVersion": image.ray_version,
            "serviceAccountName": service_account,
            "rayStartParams": {
                "dashboard-host": "0.0.0.0",
                # No Ray tasks on the small CPU head: a stray CPU actor there could OOM the GCS.
                "num-cpus": "0",
            },
            "containerEnv": _env(common_env),
            "command": head_start_command(),
            "resources": _resources(head_cpu, head_memory_gib),
            # The head never takes a GPU node: it lives on the CPU system pool (on Autopilot, None: GKE's
            # default general-purpose class, whose nodes have no GPUs).
            "nodeSelector": {NODE_POOL_LABEL: system_pool_name} if system_pool_name else {},
            "tolerations": [],
            "affinity": {},
            "annotations": {},
            "labels": pod_labels("ray-head"),
            "initContainers": [
                {
                    # The directories `pulumi destroy` exports (infra/lustre_guard.py) exist from the
                    # first deploy on, so destroying a stack that never ran a job needs no workaround.
                    "name": "make-results-dirs",
                    "image": image.ref,
                    "imagePullPolicy": "IfNotPresent",
                    "command": ["mkdir", "-p", *(posixpath.join(mount_path, d) for d in results_dirs())],
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                    "volumeMounts": [lustre_mount],
                }
            ],
            "volumes": [lustre_volume, secrets_volume],
            "volumeMounts": [lustre_mount, secrets_mount],
        },
        "worker": {
            "groupName": worker_group,
            # A fixed-size group, one worker per GPU node: the training job is laid out on all of them.
            "replicas": gpu_pool.node_count,
            "minReplicas": gpu_pool.node_count,
            "maxReplicas": gpu_pool.node_count,
            "serviceAccountName": service_account,
            "rayStartParams": {},
            "initContainers": [
                {
                    # The NCCL installer may still be copying the plugin onto a fresh node.
                    "name": "wait-for-gib",
                    "image": image.ref,
                    "imagePullPolicy": "IfNotPresent",
                    "command": [
                        "/bin/bash",
                        "-c",
                        f"until [ -f {NCCL_ENV_SCRIPT} ]; do echo waiting for the gIB NCCL plugin; sleep 10; done",
                    ],
                    "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
                    "volumeMounts": [{"name": "gib", "mountPath": POD_GIB_DIR, "readOnly": True}],
                }
            ],
            "containerEnv": _env({**worker_nccl_env(gpu_pool), **common_env}),
            # The flavour's reference size or ray.workerCpu/workerMemoryGib, checked against the node's room
            # by the config (infra/machines.py); requests == limits.
            "resources": _resources(worker.cpu, worker.memory_gib, gpu_pool.gpus_per_node),
            "nodeSelector": dict(gpu_pool.node_selector),
            "tolerations": worker_tolerations(gpu_pool.taints),
            "affinity": {},
            "annotations": {
                "networking.gke.io/default-interface": "eth0",
                "networking.gke.io/interfaces": interfaces_annotation,
            },
            "labels": pod_labels("ray-worker"),
            # Not privileged: GPUDirect RDMA needs no privilege. Upstream's RDMA test pods for A4 and
            # A3 Ultra run NCCL over gIB with no securityContext at all (GoogleCloudPlatform/
            # container-engine-accelerators gpudirect-rdma/nccl-test.yaml and nccl-test-a4.yaml at
            # 992db812): GKE's multi-networking gives the pod its RDMA NICs and devices, the GPU device
            # plugin the GPUs. Google's NeMo-RL sample (kubernetes-engine-samples ai-ml/nemo-rl-on-gke
            # values) runs privileged, but names no need for it. `ldconfig` writes the container's own
            # /etc/ld.so.cache (the image runs as root); the host directories are only read.
            # Only on the real cloud: NCCL's busbw unprivileged equals the privileged figure (the
            # acceptance gate, job.gate, measures it before the job).
            "securityContext": {"privileged": False},
            "command": worker_start_command(),
            "volumes": [
                lustre_volume,
                secrets_volume,
                {"name": "nvidia", "hostPath": {"path": HOST_NVIDIA_DIR}},
                {"name": "gib", "hostPath": {"path": HOST_GIB_DIR}},
                # NCCL and the Ray object store use /dev/shm; a container's default is 64 MiB. Memory-backed,
                # it counts against the worker's memory: bounded as in Google's NeMo-RL sample (240Gi).
                {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{worker.shm_gib}Gi"}},
            ],
            "volumeMounts": [
                lustre_mount,
                secrets_mount,
                # Read-only: the NCCL installer (infra/nccl.py) writes these host directories, the
                # workers never do (upstream's test pods need no write either).
                {"name": "nvidia", "mountPath": POD_NVIDIA_DIR, "readOnly": True},
                {"name": "gib", "mountPath": POD_GIB_DIR, "readOnly": True},
                {"name": "dshm", "mountPath": "/dev/shm"},
            ],
        },
        # The chart's example extra group is disabled by default; say so explicitly.
        "additionalWorkerGroups": {"smallGroup": {"disabled": True}},
    }


# ---------------------------------------------------------------- component


class RayEnvironment(Protocol):
    """What the Ray pods take from their namespace (a `WorkloadEnvironment`)."""

    namespace: str
    service_account: str
    secret_name: str
    secret_env: dict[str, str]
    pvc_name: str


class PodNetworks(Protocol):
    """What the GPU workers take from the GKE Network objects (a `GkeNetworkObjects`)."""

    interfaces_annotation: str


@dataclass(frozen=True)
class RayClusterArgs:
    """What `RayCluster` needs. `environment` and `networks`, when they are resources, are waited for by
    the release and deleted after it."""

    cluster_name: str
    ray: RayConfig
    image: NemoRLImage
    environment: RayEnvironment
    networks: PodNetworks
    gpu_pool: GpuPoolFacts
    worker: NodeFit
    """Each worker's requests (`StackConfig.worker_fit`)."""
    system_pool_name: Optional[str]
    """None where there are no node pools (Autopilot)."""
    timeout_seconds: int = 3600
    adapt_values: Optional[Callable[[dict[str, Any]], dict[str, Any]]] = None
    """A pure rewrite of the values for the cluster mode (`infra.cluster_mode.ClusterMode.adapt_ray_values`)."""

    def values(self) -> dict[str, Any]:
        """The chart values (pure, plan-time): a bad name fails before any resource is registered."""
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
    """Refuse values that turn on the RayCluster's in-tree autoscaler: the gang wait releases the partial
    workers by scaling the worker group to 0 (`workloads.gang_wait.KubeGangView.release`), and KubeRay
    deletes surplus worker pods only while that autoscaler is off (with it on, the autoscaler alone decides
    which pods go, and a group scaled to 0 keeps them: ray-project/kuberay v1.7.0 (59d663ae)
    ray-operator/controllers/ray/raycluster_controller.go `reconcilePods`, `diff < 0`:
    `if !enableInTreeAutoscaling || enableRandomPodDelete`). The fixed-size group needs no autoscaler."""
    if (values.get("head") or {}).get("enableInTreeAutoscaling"):
        raise ValueError(
            "ray-cluster values: head.enableInTreeAutoscaling must stay off: the gang wait releases workers by "
            "scaling the group to 0, which KubeRay carries out only without the in-tree autoscaler"
        )


class RayCluster(pulumi.ComponentResource):
    """A fixed-size RayCluster (CPU head + one GPU worker group) from the upstream `ray-cluster` chart.

    Release behaviour:
    - `skipAwait: false` with a long timeout. Helm's wait knows built-in kinds only; for a RayCluster
      custom resource it has nothing to wait on, so the release is "deployed" when the object is
      accepted, not when the pods are Ready. The job hook (`workloads.hook`, via `workloads.readiness`)
      waits for the RayCluster's `HeadPodReady` / `RayClusterProvisioned` conditions (ray-project/kuberay
      v1.7.0 ray-operator/apis/ray/v1/raycluster_types.go)
      before it submits. How Helm's wait treats the CR can
      only be confirmed on a real cluster; the timeout is sized for the case where it does wait on pods
      (NeMo-RL images are tens of GB).
    - No `atomic`: a failed install would be uninstalled and reinstalled on the next `up`, throwing
      away the pods' events; `cleanupOnFail` still removes what a failed upgrade created.
    - Replaced (uninstall, then install) whenever values, chart or version change: KubeRay does not
      roll existing Ray pods when the pod template changes, so an in-place upgrade would leave old
      pods running with old settings. Deleting first is required because the release name is fixed.
      A running job dies with the old cluster; NeMo-RL resumes from its last checkpoint on Lustre.
    """

    release: k8s.helm.v3.Release
    cluster_name: str
    namespace: str
    head_service: str
    dashboard_port: int
    worker_group: str
    dashboard_proxy_path: str
    """API-server service-proxy path to the dashboard
    (https://kubernetes.io/docs/tasks/access-application-cluster/access-cluster-services/)."""
    values: dict[str, Any]
    """The Helm values (plain data, built once at plan time)."""

    def __init__(self, name: str, args: RayClusterArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        cluster_name, image, ray = args.cluster_name, args.image, args.ray
        check_cluster_name(cluster_name)
        self.cluster_name = cluster_name
        self.namespace = args.environment.namespace
        self.head_service = f"{cluster_name}{HEAD_SERVICE_SUFFIX}"
        self.dashboard_port = DASHBOARD_PORT
        self.worker_group = WORKER_GROUP
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
                # What each worker requests and what that leaves on its node (estimates: GKE's published
                # reservations; the real allocatable is only known on a node).
                "workerFit": args.worker.to_json(),
                "releaseStatus": self.release.status.apply(lambda s: s.status if s else None),
            }
        )

    def _release(self, name: str, args: RayClusterArgs, opts: Optional[pulumi.ResourceOptions]) -> k8s.helm.v3.Release:
        """The Helm release of the chart with these values, replaced (deleted first) when they change."""
        image, timeout_seconds = args.image, args.timeout_seconds
        waits_for = [r for r in (args.environment, args.networks) if isinstance(r, pulumi.Resource)]
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
                custom_timeouts=pulumi.CustomTimeouts(
                    create=f"{timeout_seconds // 60 + 10}m",
                    update=f"{timeout_seconds // 60 + 10}m",
                    delete="20m",
                ),
            ),
        )
