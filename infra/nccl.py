"""The NCCL gIB (GPUDirect RDMA) plugin installer DaemonSet: copies Google's gIB plugin, not in the NeMo-RL image,
onto every GPU node for the Ray workers to mount; NCCL itself stays the image's own.

Upstream's manifest (GoogleCloudPlatform/container-engine-accelerators gpudirect-rdma/nccl-rdma-installer.yaml
at 992db812), following 2da1c92f (dropped `--install-nccl`, which put gIB's NCCL ahead of the image's); only
the image comes from config, pinned to a tag (upstream `master` moves).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s

from infra.naming import MANAGED_LABELS
from infra.options import child_options
from infra.pod_facts import (
    HOST_GIB_DIR,
    HOST_NVIDIA_LIB_DIR,
    INSTALLER_MNT_GIB,
    INSTALLER_MNT_NVIDIA,
    PAUSE_IMAGE,
    accelerator_affinity,
    require_pinned,
)
from infra.pod_facts import NCCL_INSTALLER as NAME

NAMESPACE = "kube-system"


_INSTALL = "\n".join(
    [
        "set -ex",
        "/scripts/container_entry.sh install",
        f"cp -r /var/lib/gib/lib64/. {INSTALLER_MNT_NVIDIA}",
        f"cp -r /var/lib/gib/. {INSTALLER_MNT_GIB}",
        'echo "gIB NCCL plugin installed"',
    ]
)


def daemonset_manifest(image: str, accelerator_types: Sequence[str]) -> dict[str, Any]:
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
                    "affinity": accelerator_affinity(sorted(set(accelerator_types))),
                    # Every taint, as upstream: the plugin must be on a GPU node before any worker needs it.
                    "tolerations": [{"operator": "Exists"}],
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
                                {"name": "nvidia-lib64", "mountPath": INSTALLER_MNT_NVIDIA},
                                {"name": "gib", "mountPath": INSTALLER_MNT_GIB},
                            ],
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
class NcclRdmaInstallerArgs:
    image: str
    accelerator_types: tuple[str, ...]


class NcclRdmaInstaller(pulumi.ComponentResource):
    """The Ray workers' `wait-for-gib` init container waits for its output on a fresh node."""

    def __init__(self, name: str, args: NcclRdmaInstallerArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        require_pinned(args.image, "NcclRdmaInstaller")
        manifest = daemonset_manifest(args.image, args.accelerator_types)
        super().__init__("nemo-rl-gke:infra:NcclRdmaInstaller", name, None, opts)
        self.name, self.namespace, self.image = NAME, NAMESPACE, args.image
        self.daemonset = k8s.apps.v1.DaemonSet(
            f"{name}-daemonset", metadata=manifest["metadata"], spec=manifest["spec"], opts=child_options(self, opts)
        )
        self.register_outputs({"name": self.name, "namespace": self.namespace, "image": self.image})
