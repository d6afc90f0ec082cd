"""The NCCL gIB (GPUDirect RDMA) plugin installer DaemonSet: copies Google's gIB plugin, not in the NeMo-RL image,
onto every GPU node for the Ray workers to mount. Upstream's manifests (GoogleCloudPlatform/container-engine-
accelerators at 992db812); only the image comes from config (`ray.ncclInstallerImage`), pinned to a tag:
- Standard: gpudirect-rdma/nccl-rdma-installer.yaml, following 2da1c92f (dropped `--install-nccl`, which put gIB's
  NCCL ahead of the image's: NCCL stays the image's own). gIB v1.1.2's manifest (2433eeed1cf4, the merge ref of
  container-engine-accelerators PR 609, open) runs the same `install`; data/version_matrix.yaml records it per row
  (`gib.installer`) and tests/test_nccl.py holds this script to it;
- Autopilot: gpudirect-rdma/nccl-rdma-installer-autopilot.yaml field for field, in its own namespace. Autopilot
  admits a privileged host-namespace pod only when it matches an allowlist (GKE "Run privileged workloads from GKE
  Autopilot partners"), so its differences below are upstream's, not ours.
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
AUTOPILOT_NAMESPACE = "rdma-system"
UPSTREAM_ACCELERATORS = ("nvidia-h200-141gb", "nvidia-b200")  # upstream's order: the allowlist matches the spec
_COPY = f"cp -r /var/lib/gib/lib64/. {INSTALLER_MNT_NVIDIA}\ncp -r /var/lib/gib/. {INSTALLER_MNT_GIB}\n"
_ENTRY = "set -ex\n/scripts/container_entry.sh install"
_INSTALL = f'{_ENTRY}\n{_COPY}echo "gIB NCCL plugin installed"'
_AUTOPILOT_INSTALL = f'{_ENTRY} --install-nccl\n{_COPY}echo "installation finishes"\n'


def daemonset_manifest(image: str, accelerator_types: Sequence[str], autopilot: bool = False) -> dict[str, Any]:
    """On Autopilot the affinity stays upstream's, and `accelerator_types` must be among it."""
    unknown = sorted(set(accelerator_types) - set(UPSTREAM_ACCELERATORS))
    if autopilot and unknown:
        raise ValueError(f"NcclRdmaInstaller: upstream's Autopilot installer does not run on {', '.join(unknown)}")
    labels = {"k8s-app": NAME}
    lib = "library-dir-host" if autopilot else "nvidia-lib64"
    shell = ["/bin/sh", "-c"]
    install = {"command": shell, "args": [_AUTOPILOT_INSTALL]} if autopilot else {"command": [*shell, _INSTALL]}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": NAME,
            "namespace": AUTOPILOT_NAMESPACE if autopilot else NAMESPACE,
            "labels": {**labels, **MANAGED_LABELS},
        },
        "spec": {
            "selector": {"matchLabels": labels},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": {**labels, "name": NAME}},
                "spec": {
                    # Allowed in kube-system only; keeps the installer from being preempted by workloads.
                    **({} if autopilot else {"priorityClassName": "system-node-critical"}),
                    "affinity": accelerator_affinity(
                        list(UPSTREAM_ACCELERATORS) if autopilot else sorted(set(accelerator_types))
                    ),
                    # Every taint, as upstream: the plugin must be on a GPU node before any worker needs it.
                    "tolerations": [{"operator": "Exists"}],
                    "hostNetwork": True,
                    "hostPID": True,
                    "volumes": [
                        {"name": lib, "hostPath": {"path": HOST_NVIDIA_LIB_DIR, "type": "DirectoryOrCreate"}},
                        {
                            "name": "gib",
                            "hostPath": {"path": HOST_GIB_DIR, **({} if autopilot else {"type": "DirectoryOrCreate"})},
                        },
                    ],
                    "initContainers": [
                        {
                            "name": NAME,
                            "image": image,
                            **install,
                            "securityContext": {"privileged": True},
                            "resources": {"requests": {"cpu": "150m", **({} if autopilot else {"memory": "64Mi"})}},
                            "volumeMounts": [
                                {"name": lib, "mountPath": INSTALLER_MNT_NVIDIA},
                                {"name": "gib", "mountPath": INSTALLER_MNT_GIB},
                            ],
                        }
                    ],
                    "containers": [
                        {
                            "name": "pause",
                            "image": PAUSE_IMAGE,
                            **({} if autopilot else {"resources": {"requests": {"cpu": "1m", "memory": "8Mi"}}}),
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
    autopilot: bool = False  # upstream's Autopilot installer, in its own namespace (created here)


class NcclRdmaInstaller(pulumi.ComponentResource):
    """The Ray workers' `wait-for-gib` init container waits for its output on a fresh node."""

    def __init__(self, name: str, args: NcclRdmaInstallerArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        kind = "NcclRdmaInstallerAutopilot" if args.autopilot else "NcclRdmaInstaller"
        require_pinned(args.image, kind)
        manifest = daemonset_manifest(args.image, args.accelerator_types, args.autopilot)
        super().__init__(f"nemo-rl-gke:infra:{kind}", name, None, opts)
        self.name, self.namespace, self.image = NAME, manifest["metadata"]["namespace"], args.image
        waits: list[pulumi.Resource] = []
        if args.autopilot:
            metadata = {"name": self.namespace, "labels": {"name": self.namespace, **MANAGED_LABELS}}
            waits.append(k8s.core.v1.Namespace(f"{name}-namespace", metadata=metadata, opts=child_options(self, opts)))
        self.daemonset = k8s.apps.v1.DaemonSet(
            f"{name}-daemonset",
            metadata=manifest["metadata"],
            spec=manifest["spec"],
            opts=child_options(self, opts, depends_on=waits),
        )
        self.register_outputs({"name": self.name, "namespace": self.namespace, "image": self.image})
