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
from infra.naming import GPU_WARMUP, GPU_WARMUP_PRIORITY_CLASS, MANAGED_LABELS, NODE_POOL_LABEL
from infra.options import child_options
from infra.pod_facts import GPU_RESOURCE, PAUSE_IMAGE, worker_tolerations
from infra.stack_context import GpuPoolFacts
from workloads.recipes import NemoRLImage

NAME = "nemo-rl-image-prepull"
COMPONENT_LABEL = "image-prepull"
"""`app.kubernetes.io/component` of the DaemonSet and its pods (the deploy-time model finds it by this)."""
PULL_TIMEOUT = pulumi.CustomTimeouts(create="60m", update="60m", delete="10m")
"""Room for a slow pull: ~20 GB at 10 MB/s is 34 minutes (tools/deploy_time.py has the typical time)."""


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
    """`gpuPool.warmMinutes` and the GPU nodes the placeholders take (`infra.placement.gpu_pool_facts`)."""

    minutes: int
    pool: GpuPoolFacts


def warmup_job(image: NemoRLImage, namespace: str, warm: GpuWarmup) -> dict[str, Any]:
    """The Job of one placeholder per GPU node (a camelCase object). Pure: no Outputs."""
    labels = {"app.kubernetes.io/name": GPU_WARMUP, "app.kubernetes.io/component": GPU_WARMUP}
    seconds, gpus = warm.minutes * 60, str(warm.pool.gpus_per_node)
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
            "activeDeadlineSeconds": seconds,
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
            k8s.batch.v1.Job(
                f"{name}-warmup-job",
                metadata=job["metadata"],
                spec=job["spec"],
                opts=child_options(self, opts, depends_on=[priority]),
            )
        self.register_outputs({"name": self.name, "namespace": args.namespace, "image": self.image})


def gpu_warmup(cfg: StackConfig, gpu_pool: GpuPoolFacts) -> Optional[GpuWarmup]:
    """None when `gpuPool.warmMinutes` is unset (the default)."""
    minutes = cfg.gpu_pool.warm_minutes
    return None if minutes is None else GpuWarmup(minutes, gpu_pool)
