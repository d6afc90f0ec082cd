"""Cloud names and labels, and the Kubernetes label keys and object names components share: the one place that
builds them. A truncated name keeps a short hash of the full name so two long roles never collide."""

from __future__ import annotations

import hashlib
import re
from enum import IntEnum

PROJECT = "nemo-rl-gke"  # the config namespace, the type-token prefix and the `app` label


class Limit(IntEnum):
    COMPUTE = 63  # networks, subnets, firewalls, addresses, routers (RFC 1035)
    GKE_CLUSTER = 40
    GKE_NODE_POOL = 40
    BUCKET = 63
    SERVICE_ACCOUNT_ID = 30
    LABEL_VALUE = 63


def cloud_name(prefix: str, role: str, limit: Limit | int = Limit.COMPUTE) -> str:
    full = f"{prefix}-{role}" if role else prefix
    full = full.lower()
    if len(full) <= limit:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:6]
    head = full[: int(limit) - len(digest) - 1].rstrip("-")
    return f"{head}-{digest}"


def _own_labels(stack: str, component: str) -> dict[str, str]:
    return {
        "managed-by": "pulumi",
        "app": PROJECT,
        # Pulumi allows upper case and dots in stack names; label values allow neither.
        "stack": cloud_name(re.sub(r"[^a-z0-9_-]", "-", stack.lower()), "", Limit.LABEL_VALUE),
        "component": component,
    }


RESERVED_LABEL_KEYS = tuple(_own_labels("stack", "component"))  # a stack's `labels` may not use them


def labels(stack: str, component: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    # User labels cannot override ours.
    merged = dict(extra or {})
    merged |= _own_labels(stack, component)
    return merged


MANAGED_LABELS = {"app.kubernetes.io/managed-by": "pulumi", "app.kubernetes.io/part-of": PROJECT}
NODE_POOL_LABEL = "cloud.google.com/gke-nodepool"
# Label and taint key of a ComputeClass's manual pools, and the pods' selector key for the class
# (GoogleCloudPlatform/kubernetes-engine-samples autoscaling/custom-compute-classes/dra README.md @2b503651).
COMPUTE_CLASS_LABEL = "cloud.google.com/compute-class"
ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
PREEMPTION_WATCHER = "preemption-watcher"  # the watcher's Deployment and service account
PREEMPTION_WATCHER_CONTAINER = "watcher"  # its log lines feed the dashboard's log-based metrics


def watcher_node_reader(namespace: str) -> str:
    """The ClusterRole letting the watcher of `namespace` read nodes: named after the namespace, since
    cluster-scoped names are shared by every namespace."""
    return cloud_name(PROJECT, f"{namespace}-{PREEMPTION_WATCHER}-nodes", Limit.LABEL_VALUE)


GPU_WARMUP = "gpu-warmup"  # `gpuPool.warmMinutes`' placeholder Job and its pods' component (infra/image_prepull.py)
GPU_WARMUP_PRIORITY_CLASS = "nemo-rl-gpu-warmup"  # value -10, below every pod of the run
