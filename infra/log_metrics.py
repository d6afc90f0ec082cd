"""The log-based metrics of the stack's dashboard (pure: names, filters, value extractors, buckets; the
`MonitoringDashboard` component in infra/observability.py creates them).

- Spot preemptions: Compute Engine records each one as a system-event audit log entry with
  `protoPayload.methodName="compute.instances.preempted"` (`resource.type="gce_instance"`, labels
  `instance_id`, `zone`). There is no built-in metric for it, so the dashboard's component creates a log-based
  counter metric (`logging.googleapis.com/user/<prefix>-gpu-preemptions`) over those entries and charts it.
  The entry does not name the GKE cluster (thought-machine/spot-interruption-exporter documents the same
  limitation); the filter keeps preemptions in the stack's zone of VMs named `gke-<cluster name>...`.
  NOT VERIFIED on a real cloud: that GKE keeps the first 20 characters of the cluster name in node VM
  names (inferred from kubernetes/ingress-gce#1623, "instance names created by gke truncated up to 24
  characters" for the `gke-<cluster>` prefix); cluster names here are `<prefix>-gke`, at most 24 long.
  The system pool is on-demand, so every preemption the filter keeps is one of the GPU pool's nodes.
- Training attempts, from the preemption watcher's one JSON line per ended attempt
  (`ATTEMPT_METRIC_SOURCE`): a log-based counter of the lines by cause, and log-based DISTRIBUTION
  metrics, each with a value extractor over one number of the line and bucket options
  (`DISTRIBUTION_METRICS_URL`): steps lost, the run's spend so far, the attempt's $ per step, its
  goodput fraction (`goodputFraction`) and the dollars of each badput bucket (`badputUsd`, a map by bucket
  name, `workloads/goodput.py`). A log-based metric records one value per entry (its `valueExtractor`,
  `LOG_METRIC_URL`), so a map of seven numbers cannot be one metric with a `bucket` label: each badput
  bucket is its own distribution, extracting `jsonPayload.badputUsd.<bucket>`.
  The dashboard charts each as the mean of its values (infra/dashboard_document.py says why).

Also not verified on a real cloud: that `jsonPayload.<field>>=0` leaves out a line whose field is null
(or whose `badputUsd` is null), and that `EXTRACT` reads a nested field path (`jsonPayload.badputUsd.gate`;
the API names its argument "the name of the log entry field", and the logging query language addresses
nested jsonPayload fields by such paths).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional

from infra.naming import PREEMPTION_WATCHER_CONTAINER
from workloads.goodput import BUCKETS, GOOD

LOG_METRICS_URL = "https://cloud.google.com/logging/docs/logs-based-metrics"
SPOT_PREEMPTION_URL = "https://cloud.google.com/compute/docs/instances/create-use-spot"
DISTRIBUTION_METRICS_URL = "https://cloud.google.com/logging/docs/logs-based-metrics/distribution-metrics"
"""A log-based distribution metric: a filter, a value extractor (`EXTRACT(jsonPayload.<field>)`) and
bucket options; it records count, mean and sum of squared deviation with the bucket counts."""
LOG_METRIC_URL = "https://cloud.google.com/logging/docs/reference/v2/rest/v2/projects.metrics"
"""The `LogMetric` resource: `valueExtractor` (`EXTRACT(field)` or `REGEXP_EXTRACT(field, regex)`, one value
per entry, "convertible to a double"), `labelExtractors` (label key -> extractor), `bucketOptions`; the
pulumi-gcp `gcp.logging.Metric` args `value_extractor`, `label_extractors`, `bucket_options`."""
BADPUT_BUCKETS = tuple(b for b in BUCKETS if b != GOOD)
"""The keys of the attempt line's `badputUsd` map: every goodput bucket but the kept steps
(`workloads/recovery/owner_loop.py` `Watcher._goodput_fields`)."""


@dataclass(frozen=True)
class MetricSource:
    resource_type: str
    kind: str
    url: str


PREEMPTION_METRIC_SOURCE = MetricSource("gce_instance", "DELTA", f"{LOG_METRICS_URL} (entries: {SPOT_PREEMPTION_URL})")
"""A user-defined metric: the log-based preemption counter this component creates."""
STRUCTURED_LOGS_URL = "https://cloud.google.com/logging/docs/structured-logging"
ATTEMPT_METRIC_SOURCE = MetricSource("k8s_container", "DELTA", f"{LOG_METRICS_URL} (entries: {STRUCTURED_LOGS_URL})")
"""The user-defined metrics over the preemption watcher's log: one JSON line per ended training attempt
(`workloads/recovery/owner_loop.py` `Watcher._finish`: `{"nemoRlGke": "attempt-ended", "cause": ..., "stepsLost": ...,
"runSpendUsd": ..., "usdPerStep": ...}`), which GKE's logging agent stores as the entry's jsonPayload (a
single-line JSON object on stdout).
Log-based rather than a custom metric the watcher writes: the watcher has no Google credentials by
design (infra/watcher_deployment.py), and Cloud Logging already collects its stdout. Only on the real
cloud: that the agent parses the line as documented and the distribution charts render as intended."""
USER_METRIC_PREFIX = "logging.googleapis.com/user/"
GKE_NODE_NAME_CLUSTER_CHARS = 20
"""How much of the cluster name GKE keeps in node VM names (unverified, see the module doc)."""


@dataclass(frozen=True)
class AttemptMetrics:
    """The names of the log-based metrics over the watcher's attempt lines (`MonitoringDashboard`)."""

    attempts: str
    """Counter: attempts ended, label `cause`."""
    steps_lost: str
    """Distribution of `stepsLost`, label `cause`."""
    run_spend: str
    """Distribution of `runSpendUsd`: the run's spend so far (the ledger's sum over its attempts)."""
    usd_per_step: str
    """Distribution of `usdPerStep`: the ended attempt's spend over the steps it ran."""
    goodput: str
    """Distribution of `goodputFraction`: the attempt's kept steps over its paid GPU node-time."""
    badput: dict[str, str]
    """Per badput bucket (`BADPUT_BUCKETS`, in order): the distribution of `badputUsd.<bucket>`."""


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
    """With the label `cause` (how the attempt ended)."""


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
