"""The NCCL gIB (GPUDirect RDMA) plugin installer on GKE Autopilot (`cluster.mode: autopilot`).

The same job as infra/nccl.py (copy the gIB plugin and its NCCL build onto every A4 / A3 Ultra node,
under /home/kubernetes/bin/gib and /home/kubernetes/bin/nvidia/lib64), but as Google ships it for
Autopilot: container-engine-accelerators gpudirect-rdma/nccl-rdma-installer-autopilot.yaml @992db812
(2026-06-11). It is privileged with the host's network and PID namespaces, which Autopilot refuses to
any pod that does not match an allowlist GKE approves (GKE "Run privileged workloads from GKE
Autopilot partners"); so the pod template here is upstream's, field for field: namespace `rdma-system`,
names, labels, volumes, mounts, the `install --install-nccl` script, requests, tolerating every taint.
Only the image comes from config (`ray.ncclInstallerImage`, upstream's v1.1.1 by default): another tag
may not match the allowlist. Only on the real cloud: that GKE admits this pod on the cluster's version.

Autopilot has no GPU nodes until the Ray workers ask for them, so the DaemonSet rolls out to zero pods
at deploy time; each GPU node GKE makes gets an installer pod, and the workers wait for its output
(their `wait-for-gib` init container, infra/ray_cluster.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s

from infra.naming import ACCELERATOR_LABEL, MANAGED_LABELS
from infra.options import child_options
from infra.pod_facts import PAUSE_IMAGE, require_pinned

NAME = "nccl-rdma-installer"
NAMESPACE = "rdma-system"
HOST_NVIDIA_LIB_DIR = "/home/kubernetes/bin/nvidia/lib64"
HOST_GIB_DIR = "/home/kubernetes/bin/gib"
UPSTREAM_ACCELERATORS = ("nvidia-h200-141gb", "nvidia-b200")
"""The accelerators upstream's node affinity lists, in its order (the allowlist matches the pod spec)."""

_MNT_NVIDIA = "/usr/local/home/kubernetes/bin/nvidia/lib64"
_MNT_GIB = "/usr/local/home/kubernetes/bin/gib"
_INSTALL = (
    "set -ex\n"
    "/scripts/container_entry.sh install --install-nccl\n"
    f"cp -r /var/lib/gib/lib64/. {_MNT_NVIDIA}\n"
    f"cp -r /var/lib/gib/. {_MNT_GIB}\n"
    'echo "installation finishes"\n'
)


def namespace_manifest() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": NAMESPACE, "labels": {"name": NAMESPACE, **MANAGED_LABELS}},
    }


def daemonset_manifest(image: str, accelerator_types: Sequence[str]) -> dict[str, Any]:
    """Upstream's Autopilot DaemonSet as a Kubernetes object (camelCase).

    `accelerator_types` must be among upstream's list: the affinity stays upstream's either way.
    """
    unknown = sorted(set(accelerator_types) - set(UPSTREAM_ACCELERATORS))
    if unknown:
        raise ValueError(
            f"NcclRdmaInstallerAutopilot: upstream's Autopilot installer does not run on {', '.join(unknown)}"
        )
    labels = {"k8s-app": NAME}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": {**labels, **MANAGED_LABELS}},
        "spec": {
            "selector": {"matchLabels": labels},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": {"name": NAME, **labels}},
                "spec": {
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchExpressions": [
                                            {
                                                "key": ACCELERATOR_LABEL,
                                                "operator": "In",
                                                "values": list(UPSTREAM_ACCELERATORS),
                                            }
                                        ]
                                    }
                                ]
                            }
                        }
                    },
                    "tolerations": [{"operator": "Exists"}],
                    "hostNetwork": True,
                    "hostPID": True,
                    "volumes": [
                        {
                            "name": "library-dir-host",
                            "hostPath": {"path": HOST_NVIDIA_LIB_DIR, "type": "DirectoryOrCreate"},
                        },
                        {"name": "gib", "hostPath": {"path": HOST_GIB_DIR}},
                    ],
                    "initContainers": [
                        {
                            "image": image,
                            "name": NAME,
                            "resources": {"requests": {"cpu": "150m"}},
                            "securityContext": {"privileged": True},
                            "volumeMounts": [
                                {"name": "library-dir-host", "mountPath": _MNT_NVIDIA},
                                {"name": "gib", "mountPath": _MNT_GIB},
                            ],
                            "command": ["/bin/sh", "-c"],
                            "args": [_INSTALL],
                        }
                    ],
                    "containers": [{"image": PAUSE_IMAGE, "name": "pause"}],
                },
            },
        },
    }


@dataclass(frozen=True)
class NcclRdmaInstallerAutopilotArgs:
    """What `NcclRdmaInstallerAutopilot` needs: the installer image and the GPU types (among upstream's)."""

    image: str
    accelerator_types: tuple[str, ...]


class NcclRdmaInstallerAutopilot(pulumi.ComponentResource):
    """Namespace `rdma-system` and upstream's Autopilot `nccl-rdma-installer` DaemonSet in it."""

    namespace_resource: k8s.core.v1.Namespace
    daemonset: k8s.apps.v1.DaemonSet
    name: str
    namespace: str
    image: str

    def __init__(
        self, name: str, args: NcclRdmaInstallerAutopilotArgs, opts: Optional[pulumi.ResourceOptions] = None
    ) -> None:
        require_pinned(args.image, "NcclRdmaInstallerAutopilot")
        namespace = namespace_manifest()
        manifest = daemonset_manifest(args.image, args.accelerator_types)
        super().__init__("nemo-rl-gke:infra:NcclRdmaInstallerAutopilot", name, None, opts)
        self.name, self.namespace, self.image = NAME, NAMESPACE, args.image
        self.namespace_resource = k8s.core.v1.Namespace(
            f"{name}-namespace", metadata=namespace["metadata"], opts=child_options(self, opts)
        )
        self.daemonset = k8s.apps.v1.DaemonSet(
            f"{name}-daemonset",
            metadata=manifest["metadata"],
            spec=manifest["spec"],
            opts=child_options(self, opts, depends_on=[self.namespace_resource]),
        )
        self.register_outputs({"name": self.name, "namespace": self.namespace, "image": self.image})
