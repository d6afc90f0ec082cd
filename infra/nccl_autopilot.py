"""The NCCL gIB plugin installer on GKE Autopilot, as Google ships it (container-engine-accelerators
gpudirect-rdma/nccl-rdma-installer-autopilot.yaml @992db812). Autopilot admits a privileged host-namespace pod
only when it matches an allowlist (GKE "Run privileged workloads from GKE Autopilot partners"), so the pod
template is upstream's field for field; only the image comes from config (`ray.ncclInstallerImage`).
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

NAMESPACE = "rdma-system"
UPSTREAM_ACCELERATORS = ("nvidia-h200-141gb", "nvidia-b200")  # upstream's order: the allowlist matches the spec
_INSTALL = (
    "set -ex\n"
    "/scripts/container_entry.sh install --install-nccl\n"
    f"cp -r /var/lib/gib/lib64/. {INSTALLER_MNT_NVIDIA}\n"
    f"cp -r /var/lib/gib/. {INSTALLER_MNT_GIB}\n"
    'echo "installation finishes"\n'
)


def namespace_manifest() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": NAMESPACE, "labels": {"name": NAMESPACE, **MANAGED_LABELS}},
    }


def daemonset_manifest(image: str, accelerator_types: Sequence[str]) -> dict[str, Any]:
    """The affinity stays upstream's; `accelerator_types` must be among it."""
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
                    "affinity": accelerator_affinity(list(UPSTREAM_ACCELERATORS)),
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
                                {"name": "library-dir-host", "mountPath": INSTALLER_MNT_NVIDIA},
                                {"name": "gib", "mountPath": INSTALLER_MNT_GIB},
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
    image: str
    accelerator_types: tuple[str, ...]


class NcclRdmaInstallerAutopilot(pulumi.ComponentResource):
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
