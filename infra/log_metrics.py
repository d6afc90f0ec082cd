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
  (`DISTRIBUTION_METRICS_URL`): steps lost, the run's spend so far and the attempt's $ per step.
  The dashboard charts each as the mean of its values (infra/dashboard_document.py says why).

Also not verified on a real cloud: that `jsonPayload.<field>>=0` leaves out a line whose field is null.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Optional

from infra.naming import PREEMPTION_WATCHER_CONTAINER

LOG_METRICS_URL = "https://cloud.google.com/logging/docs/logs-based-metrics"
SPOT_PREEMPTION_URL = "https://cloud.google.com/compute/docs/instances/create-use-spot"
DISTRIBUTION_METRICS_URL = "https://cloud.google.com/logging/docs/logs-based-metrics/distribution-metrics"
"""A log-based distribution metric: a filter, a value extractor (`EXTRACT(jsonPayload.<field>)`) and
bucket options; it records count, mean and sum of squared deviation with the bucket counts."""


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
