"""Cloud names and labels: the one place that builds them.

Every cloud-side name is `<prefix>-<role>`, truncated to the API's limit. A truncated name keeps
a short hash of the full name so two long roles never collide.

The Kubernetes side lives here too: the labels every object of ours carries (`MANAGED_LABELS`), the
node label keys GKE sets and several components select by, and the object names one component
creates and another refers to.
"""

from __future__ import annotations

import hashlib
import re
from enum import IntEnum

PROJECT = "nemo-rl-gke"
"""The Pulumi project name: the config namespace, the type-token prefix and the `app` label."""


class Limit(IntEnum):
    """Name length limits of the APIs we create names for."""

    COMPUTE = 63  # networks, subnets, firewalls, addresses, routers (RFC 1035)
    GKE_CLUSTER = 40
    GKE_NODE_POOL = 40
    BUCKET = 63
    SERVICE_ACCOUNT_ID = 30
    LABEL_VALUE = 63


def cloud_name(prefix: str, role: str, limit: Limit | int = Limit.COMPUTE) -> str:
    """`<prefix>-<role>` in lowercase, at most `limit` characters, ending with a letter or digit."""
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


RESERVED_LABEL_KEYS = tuple(_own_labels("stack", "component"))
"""The keys of the program's own labels (`managed-by`, `app`, `stack`, `component`): a stack's
`labels` may not use them (the config refuses them)."""


def labels(stack: str, component: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The labels every labelled resource carries; user labels cannot override ours."""
    merged = dict(extra or {})
    merged |= _own_labels(stack, component)
    return merged


# ---------------------------------------------------------------- Kubernetes labels and names

MANAGED_LABELS = {"app.kubernetes.io/managed-by": "pulumi", "app.kubernetes.io/part-of": PROJECT}
"""Kubernetes labels on every object this program creates directly (Helm labels its own objects)."""

NODE_POOL_LABEL = "cloud.google.com/gke-nodepool"
"""The node label GKE sets to the node pool's name: pods of the Standard cluster select pools by it."""
COMPUTE_CLASS_LABEL = "cloud.google.com/compute-class"
"""The node label (and taint key) a custom ComputeClass's manually created pools carry, and the pods' nodeSelector
key that requests the class (GoogleCloudPlatform/kubernetes-engine-samples autoscaling/custom-compute-classes/dra
README.md @2b503651: `--node-labels=cloud.google.com/compute-class=NAME --node-taints=...=NAME:NoSchedule`)."""
ACCELERATOR_LABEL = "cloud.google.com/gke-accelerator"
"""The node label GKE sets to the GPU type (`nvidia-b200`, ...)."""

PREEMPTION_WATCHER = "preemption-watcher"
"""The watcher's Deployment and service account (infra/watcher_deployment.py); the dashboard's note names it."""
PREEMPTION_WATCHER_CONTAINER = "watcher"
"""The watcher's container: its log lines (one JSON line per ended attempt) feed the dashboard's log-based
metrics (infra/observability.py)."""


def watcher_node_reader(namespace: str) -> str:
    """The cluster-scoped ClusterRole (and its binding) that lets the watcher of `namespace` read nodes for the
    gang wait (infra/watcher_deployment.py): named after the namespace, since cluster-scoped names are shared by
    every namespace of the cluster."""
    return cloud_name(PROJECT, f"{namespace}-{PREEMPTION_WATCHER}-nodes", Limit.LABEL_VALUE)


GPU_WARMUP = "gpu-warmup"
"""`gpuPool.warmMinutes`: the placeholder Job (in the Ray namespace) and its pods' `app.kubernetes.io/component`
(infra/image_prepull.py). The run owner may delete the Job once the gang is whole (docs/capacity.md)."""
GPU_WARMUP_PRIORITY_CLASS = "nemo-rl-gpu-warmup"
"""The placeholders' PriorityClass (cluster-scoped): value -10, below every pod of the run (priority 0)."""
