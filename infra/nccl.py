"""The NCCL gIB (GPUDirect RDMA) plugin installer DaemonSet.

NCCL on A4 / A3 Ultra reaches the MRDMA NICs only through Google's gIB network plugin, which is not in
the NeMo-RL image: a DaemonSet copies it onto every GPU node, the plugin libraries into
/home/kubernetes/bin/nvidia/lib64 and the whole gIB tree (`lib64/`, `scripts/set_nccl_env.sh`, tuner
configs) into /home/kubernetes/bin/gib, which the Ray workers mount as /usr/local/nvidia and
/usr/local/gib (GoogleCloudPlatform/container-engine-accelerators gpudirect-rdma/nccl-rdma-installer.yaml).
NCCL itself stays the image's own.

The manifest is upstream's as it runs today (GoogleCloudPlatform/container-engine-accelerators
gpudirect-rdma/nccl-rdma-installer.yaml at 992db812): kube-system, node affinity on
`cloud.google.com/gke-accelerator`, every taint tolerated, hostNetwork + hostPID, a privileged init
container that runs `/scripts/container_entry.sh install` and the two copies, then a pause container so
the pod stays Running (a DaemonSet pod may not exit). Upstream history this follows:
- 2da1c92f (2026-05-06) dropped `--install-nccl`, which also copied gIB's own NCCL build into the
  nvidia lib dir, ahead of the image's NCCL on the library path;
- bdd28b0f (2025-07-15) deleted the init container that turned off martian-packet logging.
The one difference: the image comes from config, pinned to a tag (upstream `master` moves; no digest
is published for it).
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
NAMESPACE = "kube-system"
HOST_GIB_DIR = "/home/kubernetes/bin/gib"
HOST_NVIDIA_LIB_DIR = "/home/kubernetes/bin/nvidia/lib64"

# Where the installer container sees the host directories (upstream's mount points; the install
# script copies out of the image's /var/lib/gib).
_MNT_NVIDIA = "/usr/local/home/kubernetes/bin/nvidia/lib64"
_MNT_GIB = "/usr/local/home/kubernetes/bin/gib"

_INSTALL = "\n".join(
    [
        "set -ex",
        "/scripts/container_entry.sh install",
        f"cp -r /var/lib/gib/lib64/. {_MNT_NVIDIA}",
        f"cp -r /var/lib/gib/. {_MNT_GIB}",
        'echo "gIB NCCL plugin installed"',
    ]
)


def daemonset_manifest(image: str, accelerator_types: Sequence[str]) -> dict[str, Any]:
    """The DaemonSet as a Kubernetes object (camelCase), so it can be validated as such."""
    if not accelerator_types:
        raise ValueError("NcclRdmaInstaller: at least one accelerator type is needed, or the DaemonSet runs nowhere")
    labels = {"k8s-app": NAME}
    privileged = {"privileged": True}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": NAME, "namespace": NAMESPACE, "labels": {**labels, **MANAGED_LABELS}},
        "spec": {
            "selector": {"matchLabels": labels},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": {**labels, "name": NAME}},
                "spec": {
                    # Allowed in kube-system only; keeps the installer from being preempted by workloads.
                    "priorityClassName": "system-node-critical",
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchExpressions": [
                                            {
                                                "key": ACCELERATOR_LABEL,
                                                "operator": "In",
                                                "values": sorted(set(accelerator_types)),
                                            }
                                        ]
                                    }
                                ]
                            }
                        }
                    },
                    # Every taint, as upstream: the plugin must be on a GPU node before any worker can
                    # use it, whatever taints the pool (or GKE, e.g. on a node about to be preempted) adds.
                    "tolerations": [{"operator": "Exists"}],
                    # As upstream: the installer works in the host's namespaces.
                    "hostNetwork": True,
                    "hostPID": True,
                    "volumes": [
                        {
                            "name": "nvidia-lib64",
                            "hostPath": {"path": HOST_NVIDIA_LIB_DIR, "type": "DirectoryOrCreate"},
                        },
                        {"name": "gib", "hostPath": {"path": HOST_GIB_DIR, "type": "DirectoryOrCreate"}},
                    ],
                    "initContainers": [
                        {
                            "name": NAME,
                            "image": image,
                            "command": ["/bin/sh", "-c", _INSTALL],
                            "securityContext": privileged,
                            "resources": {"requests": {"cpu": "150m", "memory": "64Mi"}},
                            "volumeMounts": [
                                {"name": "nvidia-lib64", "mountPath": _MNT_NVIDIA},
                                {"name": "gib", "mountPath": _MNT_GIB},
                            ],
                        },
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
class NcclRdmaInstallerArgs:
    """What `NcclRdmaInstaller` needs: the installer image (pinned) and the GPU types it runs on."""

    image: str
    accelerator_types: tuple[str, ...]


class NcclRdmaInstaller(pulumi.ComponentResource):
    """DaemonSet `nccl-rdma-installer` in kube-system, on the GPU nodes of the given accelerators.

    The Ray workers wait for its output (an init container polls for set_nccl_env.sh, see
    infra/ray_cluster.py), so a worker landing on a fresh node before the installer finished simply
    waits instead of starting NCCL without the plugin.
    """

    daemonset: k8s.apps.v1.DaemonSet
    name: str
    namespace: str
    image: str

    def __init__(self, name: str, args: NcclRdmaInstallerArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        require_pinned(args.image, "NcclRdmaInstaller")
        manifest = daemonset_manifest(args.image, args.accelerator_types)
        super().__init__("nemo-rl-gke:infra:NcclRdmaInstaller", name, None, opts)
        self.name, self.namespace, self.image = NAME, NAMESPACE, args.image
        self.daemonset = k8s.apps.v1.DaemonSet(
            f"{name}-daemonset",
            metadata=manifest["metadata"],
            spec=manifest["spec"],
            opts=child_options(self, opts),
        )
        self.register_outputs({"name": self.name, "namespace": self.namespace, "image": self.image})
