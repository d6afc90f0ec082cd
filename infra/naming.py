"""Cloud names and labels: the one place that builds them.

Every cloud-side name is `<prefix>-<role>`, truncated to the API's limit. A truncated name keeps
a short hash of the full name so two long roles never collide.
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
