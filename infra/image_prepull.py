"""Pull the NeMo-RL image onto every node as soon as the node exists, in parallel with Managed Lustre.

The Ray pods mount Lustre, so they start only once it is up (40-80 minutes into a first deploy,
tools/deploy_time.py). This DaemonSet waits only for the node pools and its namespace: an init container with the
image exits at once (the pull is the point), a pause container keeps the pod Running, and the Ray pods
(`IfNotPresent`) find the node's copy. With GPU pools that scale from 0 (infra/cluster.py) that still shortens:
- the Ray head's pull on the system node, done during Lustre's creation: on the path to the first step whenever
  the GPU nodes arrive sooner than one pull (`gpuPool.warmMinutes`, `gpuPool.imageCacheDiskImage`);
- a new GPU node's pull (first run, spot replacement), started once the node is Ready: a Ray worker asks for
  `nvidia.com/gpu`, offered only after GKE's driver installer has run (GoogleCloudPlatform/
  container-engine-accelerators nvidia-driver-installer/cos/daemonset-preloaded.yaml).
`pulumi up` waits for the rollout (pulumi-kubernetes provider/pkg/await/daemonset.go), the Ray release for it.

`gpuPool.warmMinutes`: a Job of placeholder pods, one whole GPU node each, running the image's `sleep`, so GPU
nodes come and pull during Lustre's creation (https://cloud.google.com/kubernetes-engine/docs/how-to/
capacity-provisioning). Priority -10 is the lowest that still scales up (`--expendable-pods-priority-cutoff`,
kubernetes/autoscaler cluster-autoscaler main.go); the Ray workers (priority 0) preempt them, `backoffLimit: 0`
then ends the Job, `activeDeadlineSeconds` at the latest; `pulumi.com/skipAwait`: `pulumi up` does not wait.
`gpuPool.justInTime` (the default when `warmMinutes` is unset): the same Job, created suspended and started by a CPU
timer at the model's lead time before the Ray release is expected (infra/jit_gpu_nodes.py).

Options: image streaming, `cluster.imageStreaming` (infra/image_mirror.py: the image through an Artifact Registry
remote repository of nvcr.io; the DaemonSet stays, and its pull on the system node during Lustre's creation is the
image's first, which fills the repository and the streaming cache before the GPU nodes come; on a GPU node it starts
the background download at the node's boot); secondary boot disks (kubernetes-engine/docs/how-to/data-container-
image-preloading: a disk image per image tag, and a new one replaces the GPU pool): `gpuPool.imageCacheDiskImage`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s

from infra.config import StackConfig
from infra.jit_gpu_nodes import JitTimerArgs, JitTiming, build_jit_timer, jit_timing
from infra.naming import GPU_WARMUP, GPU_WARMUP_PRIORITY_CLASS, MANAGED_LABELS, NODE_POOL_LABEL
from infra.options import child_options
from infra.pod_facts import GPU_RESOURCE, PAUSE_IMAGE, worker_tolerations
from infra.stack_context import GpuPoolFacts
from workloads.recipes import NemoRLImage

NAME = "nemo-rl-image-prepull"
COMPONENT_LABEL = "image-prepull"
"""`app.kubernetes.io/component` of the DaemonSet and its pods (the deploy-time model finds it by this)."""
PULL_TIMEOUT = pulumi.CustomTimeouts(create="60m", update="60m", delete="10m")
"""Room for a slow pull: ~20 GB at 10 MB/s is 34 minutes (tools/gpu_arrival.py IMAGE_PULL has the typical time)."""


def daemonset_manifest(
    image: NemoRLImage, namespace: str, pool_names: Sequence[str], gpu_taints: Sequence[Mapping[str, str]]
) -> dict[str, Any]:
    """The DaemonSet as a Kubernetes object (camelCase). Pure: no Outputs."""
    selector = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/component": COMPONENT_LABEL}
    on_pools = {"matchExpressions": [{"key": NODE_POOL_LABEL, "operator": "In", "values": sorted(set(pool_names))}]}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": NAME, "namespace": namespace, "labels": {**selector, **MANAGED_LABELS}},
        "spec": {
            "selector": {"matchLabels": selector},
            # A new image (another recipe) is pulled on every node at once, not one node at a time.
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "100%"}},
            "template": {
                "metadata": {"labels": dict(selector)},
                "spec": {
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [on_pools]}
                        }
                    },
                    # The GPU pool's taints (the system pool has none), as the Ray workers tolerate them.
                    "tolerations": worker_tolerations(gpu_taints),
                    "terminationGracePeriodSeconds": 5,
                    # It talks to nothing: no Kubernetes API token in the pod.
                    "automountServiceAccountToken": False,
                    "initContainers": [
                        {
                            "name": "pull",
                            "image": image.ref,
                            # The Ray pods use IfNotPresent too: they find this copy.
                            "imagePullPolicy": "IfNotPresent",
                            "command": ["/bin/sh", "-c", "exit 0"],
                            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                        }
                    ],
                    "containers": [
                        {
                            "name": "pause",
                            "image": PAUSE_IMAGE,
                            "resources": {"requests": {"cpu": "1m", "memory": "8Mi"}},
                        }
                    ],
                },
            },
        },
    }


WARMUP_PRIORITY = -10  # the lowest that still scales up: only pods BELOW the cutoff (default -10) are expendable


@dataclass(frozen=True)
class GpuWarmup:
    """`gpuPool.warmMinutes` and the GPU nodes the placeholders take (`infra.placement.gpu_pool_facts`); with `jit`
    (`gpuPool.justInTime`, infra/jit_gpu_nodes.py) the Job is created suspended and the timer starts it, and
    `minutes` is then unused (the deadline is the timing's backstop)."""

    minutes: int
    pool: GpuPoolFacts
    jit: Optional[JitTiming] = None
    system_pool: Optional[str] = None  # where the just-in-time timer runs
    ray_cluster: str = ""  # the RayCluster the timer watches

    @property
    def deadline_seconds(self) -> int:
        return self.jit.backstop_seconds if self.jit is not None else self.minutes * 60


def warmup_job(image: NemoRLImage, namespace: str, warm: GpuWarmup) -> dict[str, Any]:
    """The Job of one placeholder per GPU node (a camelCase object). Pure: no Outputs."""
    labels = {"app.kubernetes.io/name": GPU_WARMUP, "app.kubernetes.io/component": GPU_WARMUP}
    seconds, gpus = warm.deadline_seconds, str(warm.pool.gpus_per_node)
    return {
        "metadata": {
            "name": GPU_WARMUP,
            "namespace": namespace,
            "labels": {**labels, **MANAGED_LABELS},
            "annotations": {"pulumi.com/skipAwait": "true"},
        },
        "spec": {
            "parallelism": warm.pool.node_count,
            "completions": warm.pool.node_count,
            "backoffLimit": 0,
            # Counted from the start: for just-in-time nodes from the timer's resume (the suspension stops and resets
            # it: Kubernetes JobSpec.activeDeadlineSeconds).
            "activeDeadlineSeconds": seconds,
            **({"suspend": True} if warm.jit is not None else {}),
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "priorityClassName": GPU_WARMUP_PRIORITY_CLASS,
                    "restartPolicy": "Never",
                    "nodeSelector": dict(warm.pool.node_selector),
                    "tolerations": worker_tolerations(warm.pool.taints),
                    "terminationGracePeriodSeconds": 5,
                    "automountServiceAccountToken": False,
                    "containers": [
                        {
                            "name": "warm",
                            "image": image.ref,
                            "imagePullPolicy": "IfNotPresent",
                            "command": ["sleep", str(seconds)],
                            # All the node's GPUs: one placeholder per node, and a worker can only take its place.
                            "resources": {
                                "requests": {GPU_RESOURCE: gpus, "cpu": "10m", "memory": "64Mi"},
                                "limits": {GPU_RESOURCE: gpus},
                            },
                        }
                    ],
                },
            },
        },
    }


@dataclass(frozen=True)
class ImagePrePullArgs:
    image: NemoRLImage
    namespace: str
    pool_names: tuple[str, ...]  # the system and GPU pools
    gpu_taints: tuple[Mapping[str, str], ...]  # Kubernetes spelling
    warm: Optional[GpuWarmup] = None  # None (the default): no placeholders


class ImagePrePull(pulumi.ComponentResource):
    """Give it `opts.depends_on` the node pools and the namespace only: anything under the workload environment
    component would make it wait for Lustre, which is the point of not waiting."""

    def __init__(self, name: str, args: ImagePrePullArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        manifest = daemonset_manifest(args.image, args.namespace, args.pool_names, args.gpu_taints)
        super().__init__("nemo-rl-gke:infra:ImagePrePull", name, None, opts)
        self.name, self.image = NAME, args.image.ref
        self.daemonset = k8s.apps.v1.DaemonSet(
            f"{name}-daemonset",
            metadata=manifest["metadata"],
            spec=manifest["spec"],
            opts=child_options(self, opts, custom_timeouts=PULL_TIMEOUT),
        )
        if args.warm is not None:
            labels = {"app.kubernetes.io/name": GPU_WARMUP, "app.kubernetes.io/component": GPU_WARMUP}
            priority = k8s.scheduling.v1.PriorityClass(
                f"{name}-warmup-priority",
                metadata={"name": GPU_WARMUP_PRIORITY_CLASS, "labels": {**labels, **MANAGED_LABELS}},
                value=WARMUP_PRIORITY,
                # A placeholder never evicts anything; the run's pods (priority 0) evict it.
                preemption_policy="Never",
                global_default=False,
                description="nemo-rl-gke gpuPool.warmMinutes: placeholders the Ray workers preempt",
                opts=child_options(self, opts),
            )
            job = warmup_job(args.image, args.namespace, args.warm)
            placeholders = k8s.batch.v1.Job(
                f"{name}-warmup-job",
                metadata=job["metadata"],
                spec=job["spec"],
                # The just-in-time timer owns `spec.suspend` once the Job exists: a later `pulumi up --refresh`
                # must not suspend or resume it.
                opts=child_options(
                    self,
                    opts,
                    depends_on=[priority],
                    ignore_changes=["spec.suspend"] if args.warm.jit is not None else None,
                ),
            )
            if args.warm.jit is not None:
                timer = JitTimerArgs(
                    args.image, args.namespace, args.warm.ray_cluster, args.warm.jit, args.warm.system_pool
                )
                build_jit_timer(self, name, timer, opts, placeholders)
        self.register_outputs({"name": self.name, "namespace": args.namespace, "image": self.image})


def gpu_warmup(
    cfg: StackConfig,
    gpu_pool: GpuPoolFacts,
    system_pool: Optional[str] = None,
    ray_cluster: str = "",
) -> Optional[GpuWarmup]:
    """`gpuPool.warmMinutes` when set; else the just-in-time placeholders (`gpuPool.justInTime`, the default), timed
    to be ready when the RayCluster `ray_cluster` is expected (after Lustre and its claim); None
    with both off."""
    minutes = cfg.gpu_pool.warm_minutes
    if minutes is not None:
        return GpuWarmup(minutes, gpu_pool)
    timing = jit_timing(cfg)
    if timing is None:
        return None
    return GpuWarmup(0, gpu_pool, jit=timing, system_pool=system_pool, ray_cluster=ray_cluster)
