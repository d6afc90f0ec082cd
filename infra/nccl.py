"""The NCCL gIB (GPUDirect RDMA) plugin installer DaemonSet.

NCCL on A4 / A3 Ultra reaches the MRDMA NICs only through Google's gIB network plugin, which is not in
the NeMo-RL image: a DaemonSet copies it onto every GPU node under /home/kubernetes/bin/gib (plugin,
`scripts/set_nccl_env.sh`, tuner configs) and its NCCL build into /home/kubernetes/bin/nvidia/lib64,
which the Ray workers mount as /usr/local/gib and /usr/local/nvidia (FACTS.md "Worker pod settings").

Layout checked against the upstream installer (GoogleCloudPlatform/container-engine-accelerators,
gpudirect-rdma/nccl-rdma-installer.yaml): kube-system, node affinity on
`cloud.google.com/gke-accelerator`, hostNetwork + hostPID, privileged init containers that do the work,
then a pause container so the pod stays Running (a DaemonSet pod may not exit). Differences, on purpose:
- the image is pinned from config (upstream's manifest on `master` moves);
- upstream's extra `alpine:latest` init container that turns off martian-packet logging on the RDMA
  interfaces (gpu<N>rdma0, which otherwise flood the kernel log) is done here with the installer
  image's own shell, writing /proc/sys directly; that saves an unpinned image, and a missing
  interface does not fail the pod;
- tolerations name the GPU pool's taints instead of tolerating every taint.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s

from infra.kube_provider import MANAGED_LABELS
from infra.options import child_options

NAME = "nccl-rdma-installer"
NAMESPACE = "kube-system"
HOST_GIB_DIR = "/home/kubernetes/bin/gib"
HOST_NVIDIA_LIB_DIR = "/home/kubernetes/bin/nvidia/lib64"
PAUSE_IMAGE = "gke.gcr.io/pause:3.8@sha256:880e63f94b145e46f1b1082bb71b85e21f16b99b180b9996407d61240ceb9830"
"""Pinned by digest, as upstream does: it only keeps the pod alive."""
ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
GPU_TAINT_KEY = "nvidia.com/gpu"

# GKE node-pool taints spell effects as the API enum; pods tolerate the core/v1 spelling.
_EFFECTS = {"NO_SCHEDULE": "NoSchedule", "PREFER_NO_SCHEDULE": "PreferNoSchedule", "NO_EXECUTE": "NoExecute"}

# Where the installer container sees the host directories (upstream's mount points; the install
# script copies out of the image's /var/lib/gib).
_MNT_NVIDIA = "/usr/local/home/kubernetes/bin/nvidia/lib64"
_MNT_GIB = "/usr/local/home/kubernetes/bin/gib"

_QUIET_MARTIANS = (
    "for f in /proc/sys/net/ipv4/conf/gpu*rdma*/log_martians; do "
    '[ -e "$f" ] && echo 0 > "$f" || true; '
    "done"
)

_INSTALL = "\n".join(
    [
        "set -ex",
        "/scripts/container_entry.sh install --install-nccl",
        f"cp -r /var/lib/gib/lib64/. {_MNT_NVIDIA}",
        f"cp -r /var/lib/gib/. {_MNT_GIB}",
        'echo "gIB NCCL plugin installed"',
    ]
)


def toleration_for(taint: Mapping[str, str]) -> dict[str, str]:
    """The toleration matching one node taint exactly (key, value, effect)."""
    effect = _EFFECTS.get(taint["effect"], taint["effect"])
    tol = {"key": taint["key"], "operator": "Equal", "value": taint.get("value", ""), "effect": effect}
    if not tol["value"]:
        tol = {"key": taint["key"], "operator": "Exists", "effect": effect}
    return tol


def installer_tolerations(taints: Sequence[Mapping[str, str]]) -> list[dict[str, str]]:
    """The GPU taint (any value, any effect: GKE's own and ours) plus every extra taint of the pool."""
    tolerations = [{"key": GPU_TAINT_KEY, "operator": "Exists"}]
    tolerations += [toleration_for(t) for t in taints if t["key"] != GPU_TAINT_KEY]
    return tolerations


def daemonset_manifest(image: str, accelerator_types: Sequence[str], taints: Sequence[Mapping[str, str]] = ()) -> dict[str, Any]:
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
                                            {"key": ACCELERATOR_LABEL, "operator": "In", "values": sorted(set(accelerator_types))}
                                        ]
                                    }
                                ]
                            }
                        }
                    },
                    "tolerations": installer_tolerations(taints),
                    # The host's network namespace, to reach the RDMA interfaces' sysctls.
                    "hostNetwork": True,
                    "hostPID": True,
                    "volumes": [
                        {"name": "nvidia-lib64", "hostPath": {"path": HOST_NVIDIA_LIB_DIR, "type": "DirectoryOrCreate"}},
                        {"name": "gib", "hostPath": {"path": HOST_GIB_DIR, "type": "DirectoryOrCreate"}},
                    ],
                    "initContainers": [
                        {
                            "name": "quiet-martian-logs",
                            "image": image,
                            "command": ["/bin/sh", "-c", _QUIET_MARTIANS],
                            "securityContext": privileged,
                            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                        },
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

    def __init__(
        self,
        name: str,
        image: str,
        accelerator_types: list[str],
        opts: Optional[pulumi.ResourceOptions] = None,
        *,
        taints: Sequence[Mapping[str, str]] = (),
    ) -> None:
        """`taints`: the GPU pool's node taints (Kubernetes or GKE spelling) beyond nvidia.com/gpu."""
        if ":" not in image.rsplit("/", 1)[-1] and "@" not in image:
            raise ValueError(f"NcclRdmaInstaller: image {image!r} has no tag or digest; pin a version")
        manifest = daemonset_manifest(image, accelerator_types, taints)
        super().__init__("nemo-rl-gke:infra:NcclRdmaInstaller", name, None, opts)
        self.name, self.namespace, self.image = NAME, NAMESPACE, image
        self.daemonset = k8s.apps.v1.DaemonSet(
            f"{name}-daemonset",
            metadata=manifest["metadata"],
            spec=manifest["spec"],
            opts=child_options(self, opts),
        )
        self.register_outputs({"name": self.name, "namespace": self.namespace, "image": self.image})
