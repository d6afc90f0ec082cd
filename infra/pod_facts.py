"""What the pods of several components share: taints and the tolerations that match them, the GPU
resource, the pause image, the Ray dashboard port and where the secret files are mounted.

Plain values and pure functions, no resources: each component module imports these from here and
none imports another component's module (docs/architecture.md, "One route per fact"). Names and
label keys are in `infra.naming`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

GPU_RESOURCE = "nvidia.com/gpu"
"""The extended resource the NVIDIA device plugin advertises, and the key of GKE's GPU node taint."""
IMPENDING_TERMINATION_TAINT = "cloud.google.com/impending-node-termination"

PAUSE_IMAGE = "gke.gcr.io/pause:3.8@sha256:880e63f94b145e46f1b1082bb71b85e21f16b99b180b9996407d61240ceb9830"
"""Pinned by digest, as upstream's NCCL installers do: it only keeps a DaemonSet pod alive."""

DASHBOARD_PORT = 8265
"""KubeRay's default head port named `dashboard` (the Ray job API is served on it)."""

SECRET_MOUNT_PATH = "/var/run/secrets/nemo-rl"
"""Where the Ray pods mount the workload Secret's files (infra/workload_env.py)."""

TAINT_EFFECTS = {"NO_SCHEDULE": "NoSchedule", "PREFER_NO_SCHEDULE": "PreferNoSchedule", "NO_EXECUTE": "NoExecute"}
"""GKE spells node-pool taint effects as the API enum; Kubernetes (and so pods) as the core/v1 string."""


def kubernetes_taint(gke_taint: Mapping[str, str]) -> dict[str, str]:
    """A GKE node pool taint ({key, value, effect: NO_SCHEDULE}) in the form pods tolerate."""
    return {"key": gke_taint["key"], "value": gke_taint["value"], "effect": TAINT_EFFECTS[gke_taint["effect"]]}


def toleration_for(taint: Mapping[str, str]) -> dict[str, str]:
    """The toleration matching one node taint exactly (key, value, effect), in either spelling of the effect."""
    effect = TAINT_EFFECTS.get(taint["effect"], taint["effect"])
    if not taint.get("value", ""):
        return {"key": taint["key"], "operator": "Exists", "effect": effect}
    return {"key": taint["key"], "operator": "Equal", "value": taint["value"], "effect": effect}


def worker_tolerations(taints: Sequence[Mapping[str, str]]) -> list[dict[str, str]]:
    """Every GPU pool taint, the GPU taint even if the pool facts omit it, and the spot-preemption taint."""
    tolerations = [toleration_for(t) for t in taints]
    if not any(t["key"] == GPU_RESOURCE for t in taints):
        tolerations.append({"key": GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"})
    # GKE taints a spot node about to be preempted; tolerating it keeps a restarting worker from
    # being refused by the node it is bound to during the shutdown window (GoogleCloudPlatform/kubernetes-engine-samples
    # ai-ml/nemo-rl-on-gke values).
    tolerations.append({"key": IMPENDING_TERMINATION_TAINT, "operator": "Exists"})
    return tolerations


def require_pinned(image: str, component: str) -> None:
    """Refuse an installer image without a tag or digest: upstream's `latest` moves under a running pool."""
    if ":" not in image.rsplit("/", 1)[-1] and "@" not in image:
        raise ValueError(f"{component}: image {image!r} has no tag or digest; pin a version")
