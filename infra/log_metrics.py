"""The log-based metrics of the stack's dashboard (pure: names, filters, value extractors, buckets; the
`MonitoringDashboard` component in infra/observability.py creates them).

- Spot preemptions: Compute Engine's system-event audit log entry `compute.instances.preempted` on
  `gce_instance` has no built-in metric and does not name the GKE cluster (thought-machine/spot-interruption-exporter
  says the same), so a counter keeps the stack's zone's VMs named `gke-<cluster name>...`. NOT VERIFIED: that GKE
  keeps 20 characters of the cluster name in node VM names (kubernetes/ingress-gce#1623); ours are at most 24.
  The system pool is on-demand, so every preemption kept is a GPU node's.
- Training attempts, from the watcher's one JSON line per ended attempt: a counter by cause and one
  DISTRIBUTION metric per number of the line (`DISTRIBUTION_METRICS_URL`). A log-based metric records one value
  per entry (`LOG_METRIC_URL`), so each badput bucket is its own distribution of `jsonPayload.badputUsd.<bucket>`.

Not verified on a real cloud: that `jsonPayload.<field>>=0` leaves out a null field, and that `EXTRACT` reads a
nested field path (`jsonPayload.badputUsd.gate`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional

from infra.naming import PREEMPTION_WATCHER_CONTAINER
from workloads.goodput import BUCKETS, GOODPUT

LOG_METRICS_URL = "https://cloud.google.com/logging/docs/logs-based-metrics"
SPOT_PREEMPTION_URL = "https://cloud.google.com/compute/docs/instances/create-use-spot"
DISTRIBUTION_METRICS_URL = "https://cloud.google.com/logging/docs/logs-based-metrics/distribution-metrics"
LOG_METRIC_URL = "https://cloud.google.com/logging/docs/reference/v2/rest/v2/projects.metrics"
"""The `LogMetric` resource: one `valueExtractor` value per entry, `labelExtractors`, `bucketOptions`."""
BADPUT_BUCKETS = tuple(b for b in BUCKETS if b not in GOODPUT)
"""The keys of the attempt line's `badputUsd` map (`workloads/recovery/owner_loop.py`)."""


@dataclass(frozen=True)
class MetricSource:
    resource_type: str
    kind: str
    url: str


PREEMPTION_METRIC_SOURCE = MetricSource("gce_instance", "DELTA", f"{LOG_METRICS_URL} (entries: {SPOT_PREEMPTION_URL})")
STRUCTURED_LOGS_URL = "https://cloud.google.com/logging/docs/structured-logging"
ATTEMPT_METRIC_SOURCE = MetricSource("k8s_container", "DELTA", f"{LOG_METRICS_URL} (entries: {STRUCTURED_LOGS_URL})")
"""Over the watcher's `attempt-ended` JSON line (`workloads/recovery/owner_loop.py` `Watcher._finish`), which GKE's
logging agent stores as jsonPayload: log-based, since the watcher has no Google credentials by design."""
USER_METRIC_PREFIX = "logging.googleapis.com/user/"
GKE_NODE_NAME_CLUSTER_CHARS = 20  # of the cluster name in node VM names (unverified, module doc)


@dataclass(frozen=True)
class AttemptMetrics:
    """The names of the log-based metrics over the watcher's attempt lines (`MonitoringDashboard`)."""

    attempts: str
    """Counter: attempts ended, label `cause`; the rest are distributions (`attempt_distributions`)."""
    steps_lost: str
    run_spend: str
    usd_per_step: str
    goodput: str
    badput: dict[str, str]
    """By badput bucket (`BADPUT_BUCKETS`, in order)."""


@dataclass(frozen=True)
class Distribution:
    """One log-based DISTRIBUTION metric of a number of the attempt line (`DISTRIBUTION_METRICS_URL`)."""

    suffix: str
    """The metric is `<prefix>-training-<suffix>`, its resource `<component>-<suffix>`."""
    field: str
    """The number's path below jsonPayload."""
    unit: str
    description: str
    buckets: dict[str, Any]
    by_cause: bool = False


def kebab(name: str) -> str:
    """`gangWait` -> `gang-wait`: a bucket's name in a metric name."""
    return "".join(f"-{c.lower()}" if c.isupper() else c for c in name)


def attempt_distributions(stack: str) -> list[Distribution]:
    """The distributions over the watcher's attempt line, in the order the component creates them."""
    # Buckets doubling from $1 (run spend) and from 1 cent (per step, per badput bucket) to 2^24 times that:
    # every value a run can reach has a bucket; the charts read the exact mean, the buckets only shape a
    # heatmap. The goodput fraction is in [0, 1]: twenty buckets of 5 %.
    cents = {"exponential_buckets": {"num_finite_buckets": 24, "growth_factor": 2, "scale": 0.01}}
    return [
        Distribution(
            "steps-lost",
            "stepsLost",
            "1",
            f"Steps each ended training attempt of stack {stack} lost (ran past its last complete checkpoint).",
            {"linear_buckets": {"num_finite_buckets": 20, "width": 1, "offset": 0}},
            by_cause=True,
        ),
        Distribution(
            "run-spend",
            "runSpendUsd",
            "USD",
            f"The spend so far of the training run of stack {stack} at each attempt's end (the run ledger's "
            "GPU node-hours x node-hour price).",
            {"exponential_buckets": {"num_finite_buckets": 24, "growth_factor": 2, "scale": 1}},
        ),
        Distribution(
            "usd-per-step",
            "usdPerStep",
            "USD",
            f"Spend per training step of each ended attempt of stack {stack} (its spend / the steps it ran).",
            cents,
        ),
        Distribution(
            "goodput",
            "goodputFraction",
            "1",
            f"Goodput of each ended training attempt of stack {stack}: the fraction of its paid GPU node-time "
            "in kept steps (workloads/goodput.py).",
            {"linear_buckets": {"num_finite_buckets": 20, "width": 0.05, "offset": 0}},
        ),
        *(
            Distribution(
                f"badput-{kebab(bucket)}",
                f"badputUsd.{bucket}",
                "USD",
                f"Dollars of each ended training attempt of stack {stack} paid for GPU node-time in the badput "
                f"bucket {bucket} (workloads/goodput.py).",
                cents,
            )
            for bucket in BADPUT_BUCKETS
        ),
    ]


def quoted(value: str) -> str:
    """A quoted string literal for a Monitoring/Logging filter."""
    return json.dumps(value)


def preemption_log_filter(project: str, zone: str, cluster_name: str, node_prefix: str = "gke") -> str:
    """The audit log entries of this cluster's node VMs being preempted. `node_prefix`: how GKE starts
    the node VM names, `gke` (Standard) or `gk3` (Autopilot). Only on the real cloud: the `gk3-` names."""
    prefix = f"{node_prefix}-{cluster_name[:GKE_NODE_NAME_CLUSTER_CHARS]}"
    return " AND ".join(
        [
            f"logName={quoted(f'projects/{project}/logs/cloudaudit.googleapis.com%2Fsystem_event')}",
            'resource.type="gce_instance"',
            'protoPayload.methodName="compute.instances.preempted"',
            f"resource.labels.zone={quoted(zone)}",
            f"protoPayload.resourceName:{quoted(f'/instances/{prefix}')}",
        ]
    )


def attempt_log_filter(cluster_name: str, namespace: str, number: Optional[str] = None) -> str:
    """The watcher's `attempt-ended` lines in Cloud Logging (logging query language); with `number`,
    only those where that field of jsonPayload holds a number (the line writes null when the ledger
    does not know it: no price, or steps not known), so a distribution gets no entry without a value."""
    return " AND ".join(
        [
            'resource.type="k8s_container"',
            f"resource.labels.cluster_name={quoted(cluster_name)}",
            f"resource.labels.namespace_name={quoted(namespace)}",
            f"resource.labels.container_name={quoted(PREEMPTION_WATCHER_CONTAINER)}",
            'jsonPayload.nemoRlGke="attempt-ended"',
            *([f"jsonPayload.{number}>=0"] if number else []),
        ]
    )
