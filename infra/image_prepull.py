"""Pull the NeMo-RL image onto every node as soon as the node exists, in parallel with Managed Lustre.

The Ray pods mount Lustre, so they can only start once the instance is up, typically 40-80 minutes
into a first deploy (tools/deploy_time.py). Pulling a multi-GB image with one huge layer only then
would add the whole pull to the time to the first training step. This DaemonSet waits for nothing but
the node pools and its namespace: on every system and GPU node an init container with the NeMo-RL
image exits at once (pulling the image is the point), then a pause container keeps the pod Running (a
DaemonSet pod may not exit). The Ray pods pull with `IfNotPresent`, so they start from the node's copy.
It stays: a replacement spot node starts pulling as soon as it joins the pool.

`pulumi up` waits for the rollout (pulumi-kubernetes awaits a DaemonSet until every scheduled pod is
ready, provider/pkg/await/daemonset.go, 10 minutes unless told otherwise), and the Ray release waits
for it, so the pull is a step of its own in the deploy and shows up in `pulumi up`'s progress.

Not adopted, after Google's docs:
- image streaming (kubernetes-engine/docs/how-to/image-streaming): the image must be in Artifact
  Registry (or Docker Hub), and the first pull gains nothing; the NeMo-RL image is on nvcr.io;
- secondary boot disks (kubernetes-engine/docs/how-to/data-container-image-preloading): a disk image
  must be built from the container image beforehand (a separate build per image tag), and a new disk
  image needs a new node pool (updating it on existing nodes is not supported), so every recipe image
  change would replace the GPU pool. It would cut the pull on replacement spot nodes; a possible later
  option.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s

from infra.naming import MANAGED_LABELS, NODE_POOL_LABEL
from infra.options import child_options
from infra.pod_facts import PAUSE_IMAGE, worker_tolerations
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


@dataclass(frozen=True)
class ImagePrePullArgs:
    """What `ImagePrePull` needs: the image, the namespace, the pools to pull on and the GPU pool's taints."""

    image: NemoRLImage
    namespace: str
    pool_names: tuple[str, ...]
    """The system and GPU pools."""
    gpu_taints: tuple[Mapping[str, str], ...]
    """The GPU pool's taints (Kubernetes spelling)."""


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
        self.register_outputs({"name": self.name, "namespace": namespace, "image": self.image})
