"""Pull the NeMo-RL image onto every node as soon as the node exists, in parallel with Managed Lustre.

The Ray pods mount Lustre, so they can only start once the instance is up, typically 40-80 minutes
into a first deploy (tools/deploy_time.py). Pulling a multi-GB image with one huge layer only then
would add the whole pull to the time to the first training step. This DaemonSet waits for nothing but
the node pools and its namespace: on every system and GPU node an init container with the NeMo-RL
image exits at once (pulling the image is the point), then a pause container keeps the pod Running (a
DaemonSet pod may not exit). The Ray pods pull with `IfNotPresent`, so they start from the node's copy.
It stays: a replacement spot node starts pulling as soon as it joins the pool. Every GPU pool autoscales
from 0 (infra/cluster.py), so on a first deploy the DaemonSet pulls on the system node only, and a GPU node
pulls when it arrives for the Ray workers, on the path to the first step (tools/deploy_time.py) unless:
- `gpuPool.warmMinutes` (off by default): a Job of placeholder pods, one whole GPU node each, with a
  PriorityClass of -10 (`warmup_manifests`). It is GKE's documented way to get capacity ahead of the pods that
  need it ("Provision extra compute capacity for rapid Pod scaling",
  https://cloud.google.com/kubernetes-engine/docs/how-to/capacity-provisioning: low-priority placeholder pods;
  the one-time variant is a Job; higher-priority pods evict them). -10 is the lowest priority that still makes
  the autoscaler scale up: pods below `--expendable-pods-priority-cutoff` (default -10,
  kubernetes/autoscaler cluster-autoscaler main.go) neither scale up nor keep a node. The Ray workers (priority
  0) preempt them; `backoffLimit: 0` fails the Job on the first preempted pod, and the Job controller then
  deletes the others, so no placeholder is left to hold a node after the run; `activeDeadlineSeconds` ends it
  at the latest `warmMinutes` after it starts. The placeholders run the NeMo-RL image (`sleep`), so the
  nodes pull it while Lustre is still being created. `pulumi.com/skipAwait`: `pulumi up` does not wait for the
  Job to finish (pulumi-kubernetes awaits a Job's completion otherwise). Created once: a later `pulumi up`
  leaves the finished Job as it is and warms nothing.
- `gpuPool.imageCacheDiskImage`: the image on a secondary boot disk of every GPU node (infra/cluster.py).

`pulumi up` waits for the rollout (pulumi-kubernetes awaits a DaemonSet until every scheduled pod is
ready, provider/pkg/await/daemonset.go, 10 minutes unless told otherwise), and the Ray release waits
for it, so the pull is a step of its own in the deploy and shows up in `pulumi up`'s progress.

Not adopted, after Google's docs:
- image streaming (kubernetes-engine/docs/how-to/image-streaming): the image must be in Artifact
  Registry (or Docker Hub), and the first pull gains nothing; the NeMo-RL image is on nvcr.io;
- secondary boot disks as the default (kubernetes-engine/docs/how-to/data-container-image-preloading): a
  disk image must be built from the container image beforehand (a separate build per image tag), and a new
  disk image replaces the node pool, so every recipe image change would replace the GPU pool. It is an
  option instead (`gpuPool.imageCacheDiskImage`).
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
    if not pool_names:
        raise ValueError("ImagePrePull: at least one node pool is needed, or the DaemonSet runs nowhere")
    selector = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/component": COMPONENT_LABEL}
    tiny = {"requests": {"cpu": "10m", "memory": "16Mi"}}
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
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchExpressions": [
                                            {
                                                "key": NODE_POOL_LABEL,
                                                "operator": "In",
                                                "values": sorted(set(pool_names)),
                                            }
                                        ]
                                    }
                                ]
                            }
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
                            "resources": tiny,
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


WARMUP_PRIORITY = -10
"""The placeholders' priority: the lowest that still scales up (cluster-autoscaler's default
`--expendable-pods-priority-cutoff` is -10 and only pods BELOW it are expendable)."""


@dataclass(frozen=True)
class GpuWarmup:
    """`gpuPool.warmMinutes` with what the placeholders need of the GPU nodes (`infra.placement.gpu_pool_facts`)."""

    minutes: int
    node_count: int
    gpus_per_node: int
    node_selector: Mapping[str, str]
    gpu_taints: tuple[Mapping[str, str], ...]


def warmup_manifests(image: NemoRLImage, namespace: str, warm: GpuWarmup) -> tuple[dict[str, Any], dict[str, Any]]:
    """The PriorityClass and the Job of `warm.node_count` placeholders (camelCase objects). Pure: no Outputs."""
    labels = {"app.kubernetes.io/name": GPU_WARMUP, "app.kubernetes.io/component": GPU_WARMUP}
    priority_class = {
        "metadata": {"name": GPU_WARMUP_PRIORITY_CLASS, "labels": {**labels, **MANAGED_LABELS}},
        "value": WARMUP_PRIORITY,
        # A placeholder never evicts anything; the run's pods (priority 0) evict it.
        "preemptionPolicy": "Never",
        "globalDefault": False,
        "description": "nemo-rl-gke gpuPool.warmMinutes: placeholders the Ray workers preempt",
    }
    seconds = warm.minutes * 60
    whole_node = {GPU_RESOURCE: str(warm.gpus_per_node), "cpu": "10m", "memory": "64Mi"}
    job = {
        "metadata": {
            "name": GPU_WARMUP,
            "namespace": namespace,
            "labels": {**labels, **MANAGED_LABELS},
            "annotations": {"pulumi.com/skipAwait": "true"},
        },
        "spec": {
            "parallelism": warm.node_count,
            "completions": warm.node_count,
            "backoffLimit": 0,
            "activeDeadlineSeconds": seconds,
            "template": {
                "metadata": {"labels": dict(labels)},
                "spec": {
                    "priorityClassName": GPU_WARMUP_PRIORITY_CLASS,
                    "restartPolicy": "Never",
                    "nodeSelector": dict(warm.node_selector),
                    "tolerations": worker_tolerations(warm.gpu_taints),
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
                                "requests": dict(whole_node),
                                "limits": {GPU_RESOURCE: str(warm.gpus_per_node)},
                            },
                        }
                    ],
                },
            },
        },
    }
    return priority_class, job


@dataclass(frozen=True)
class ImagePrePullArgs:
    """What `ImagePrePull` needs: the image, the namespace, the pools to pull on and the GPU pool's taints."""

    image: NemoRLImage
    namespace: str
    pool_names: tuple[str, ...]
    """The system and GPU pools."""
    gpu_taints: tuple[Mapping[str, str], ...]
    """The GPU pool's taints (Kubernetes spelling)."""
    warm: Optional[GpuWarmup] = None
    """`gpuPool.warmMinutes`: the placeholder Job; None (the default): no warming."""


class ImagePrePull(pulumi.ComponentResource):
    """DaemonSet `nemo-rl-image-prepull` in the Ray namespace, on the system and GPU pools.

    Give it `opts.depends_on` the node pools and the namespace only: anything under the workload
    environment component would make it wait for Lustre, which is the point of not waiting.
    """

    daemonset: k8s.apps.v1.DaemonSet
    name: str
    image: str

    def __init__(self, name: str, args: ImagePrePullArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        manifest = daemonset_manifest(args.image, args.namespace, args.pool_names, args.gpu_taints)
        super().__init__("nemo-rl-gke:infra:ImagePrePull", name, None, opts)
        self.name, self.image = NAME, args.image.ref
        namespace = args.namespace
        self.daemonset = k8s.apps.v1.DaemonSet(
            f"{name}-daemonset",
            metadata=manifest["metadata"],
            spec=manifest["spec"],
            opts=child_options(self, opts, custom_timeouts=PULL_TIMEOUT),
        )
        if args.warm is not None:
            priority_class, job = warmup_manifests(args.image, namespace, args.warm)
            pc = k8s.scheduling.v1.PriorityClass(
                f"{name}-warmup-priority",
                metadata=priority_class["metadata"],
                value=priority_class["value"],
                preemption_policy=priority_class["preemptionPolicy"],
                global_default=priority_class["globalDefault"],
                description=priority_class["description"],
                opts=child_options(self, opts),
            )
            k8s.batch.v1.Job(
                f"{name}-warmup-job",
                metadata=job["metadata"],
                spec=job["spec"],
                opts=child_options(self, opts, depends_on=[pc]),
            )
        self.register_outputs({"name": self.name, "namespace": namespace, "image": self.image})


def gpu_warmup(cfg: StackConfig, gpu_pool: GpuPoolFacts) -> Optional[GpuWarmup]:
    """`gpuPool.warmMinutes` of the stack config with the GPU pool facts; None when unset (the default)."""
    minutes = cfg.gpu_pool.warm_minutes
    if minutes is None:
        return None
    return GpuWarmup(minutes, gpu_pool.node_count, gpu_pool.gpus_per_node, gpu_pool.node_selector, gpu_pool.taints)
