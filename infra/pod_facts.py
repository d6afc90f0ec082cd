"""What the pods of several components share, so none imports another component's module (docs/architecture.md,
"One route per fact")."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from infra.naming import ACCELERATOR_LABEL

GPU_RESOURCE = "nvidia.com/gpu"  # also the key of GKE's GPU node taint
IMPENDING_TERMINATION_TAINT = "cloud.google.com/impending-node-termination"

# Pinned by digest, as upstream's NCCL installers do.
PAUSE_IMAGE = "gke.gcr.io/pause:3.8@sha256:880e63f94b145e46f1b1082bb71b85e21f16b99b180b9996407d61240ceb9830"
DASHBOARD_PORT = 8265  # KubeRay's head port named `dashboard`; the Ray job API too
SECRET_MOUNT_PATH = "/var/run/secrets/nemo-rl"
# The stack's Secret, its files and the variables their readers read; the Lustre claim every pod mounts: created by
# infra/workload_env.py, named by the Ray pods and the weight-staging Job (infra/weight_staging.py).
SECRET_NAME = "nemo-rl-secrets"
PVC_NAME = "lustre"
HF_TOKEN_FILE = "hf-token"
NETRC_FILE = "netrc"
SECRET_FILE_ENV = {HF_TOKEN_FILE: "HF_TOKEN_PATH", NETRC_FILE: "NETRC"}  # file -> the variable its reader reads
# What the NCCL gIB installers fill on the host (infra/nccl.py), and where their
# container sees it (upstream's mount points).
NCCL_INSTALLER = "nccl-rdma-installer"
HOST_GIB_DIR = "/home/kubernetes/bin/gib"
HOST_NVIDIA_LIB_DIR = "/home/kubernetes/bin/nvidia/lib64"
INSTALLER_MNT_NVIDIA = "/usr/local/home/kubernetes/bin/nvidia/lib64"
INSTALLER_MNT_GIB = "/usr/local/home/kubernetes/bin/gib"
# GKE's node-pool taint effect enum -> Kubernetes core/v1 spelling.
TAINT_EFFECTS = {"NO_SCHEDULE": "NoSchedule", "PREFER_NO_SCHEDULE": "PreferNoSchedule", "NO_EXECUTE": "NoExecute"}


def kubernetes_taint(gke_taint: Mapping[str, str]) -> dict[str, str]:
    return {"key": gke_taint["key"], "value": gke_taint["value"], "effect": TAINT_EFFECTS[gke_taint["effect"]]}


def toleration_for(taint: Mapping[str, str]) -> dict[str, str]:
    effect = TAINT_EFFECTS.get(taint["effect"], taint["effect"])
    if not taint.get("value", ""):
        return {"key": taint["key"], "operator": "Exists", "effect": effect}
    return {"key": taint["key"], "operator": "Equal", "value": taint["value"], "effect": effect}


def worker_tolerations(taints: Sequence[Mapping[str, str]]) -> list[dict[str, str]]:
    tolerations = [toleration_for(t) for t in taints]
    if not any(t["key"] == GPU_RESOURCE for t in taints):
        tolerations.append({"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"})
    # A spot node about to be preempted is tainted; a restarting worker must not be refused by it
    # (GoogleCloudPlatform/kubernetes-engine-samples ai-ml/nemo-rl-on-gke values).
    tolerations.append({"key": IMPENDING_TERMINATION_TAINT, "operator": "Exists"})
    return tolerations


def require_pinned(image: str, component: str) -> None:
    # Upstream's `latest` moves under a running pool.
    if ":" not in image.rsplit("/", 1)[-1] and "@" not in image:
        raise ValueError(f"{component}: image {image!r} has no tag or digest; pin a version")


def accelerator_affinity(values: list[str]) -> dict[str, Any]:
    """Required node affinity to the GPU types `values`."""
    term = {"matchExpressions": [{"key": ACCELERATOR_LABEL, "operator": "In", "values": values}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}
