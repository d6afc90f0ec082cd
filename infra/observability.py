"""A Cloud Monitoring dashboard for one stack: GPUs, the GPU pool, Lustre, spot preemptions, training attempts
and their spend.

Every chart is filtered to this stack's objects, with names taken from the components (the cluster's
name and zone, the Lustre instance id, the GPU pool's facts, the Ray namespace), never retyped.

Metric types are only those of `METRICS` (an allow-list; a test checks the dashboard against it),
each with the page that documents it (the lists were read as generated on 2026-04-10; the resource
labels are from `RESOURCES_URL`):

- Managed Lustre, `lustre.googleapis.com/instance/*` on the `lustre.googleapis.com/Instance` resource
  (labels `resource_container`, `location`, `instance_id`; metric labels `component`, `target`):
  `read_bytes_total` / `write_bytes_total` (DELTA bytes per Object Storage Target) and
  `capacity_bytes` / `free_bytes` (GAUGE per target; "the total ... space for an instance can be
  obtained by adding the capacity of all targets for a given type of Lustre target"). BETA metrics.
- GKE system metrics on `k8s_node` / `k8s_container` (labels `cluster_name`, `location`, `node_name`,
  `namespace_name`, `pod_name`): `kubernetes.io/node/accelerator/duty_cycle` (percent of the last 10 s
  the GPU was busy, per GPU) and `kubernetes.io/container/accelerator/duty_cycle`. Only GPU nodes report
  them, and in this cluster only the GPU pool has GPUs, so "nodes reporting a GPU duty cycle" is the
  GPU pool's live node count.
- Spot preemptions: Compute Engine records each one as a system-event audit log entry with
  `protoPayload.methodName="compute.instances.preempted"` (`resource.type="gce_instance"`, labels
  `instance_id`, `zone`). There is no built-in metric for it, so this component creates a log-based
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
  Monitoring's aggregations cannot sum a distribution's values (`AGGREGATION_URL`: ALIGN_SUM and
  REDUCE_SUM merge distributions into one; ALIGN_MEAN takes numeric values only; REDUCE_MEAN gives the
  mean of the values as a DOUBLE), so each chart is the mean of a number the ledger already computed
  (`workloads/ledger.py`: `Ledger.spend`, the total `python -m jobctl status` prints, and
  `Ledger.usd_per_step`): ALIGN_DELTA, then REDUCE_MEAN.
  A distribution keeps the exact count and mean beside its buckets, so the means are exact; the
  buckets only matter for heatmaps and percentiles. Not chosen: PromQL, which reads a distribution's
  `<metric>_sum` (https://cloud.google.com/monitoring/promql/promql-mapping), because how it sums a
  DELTA log-based metric over a range is unverified here, and every other chart is a timeSeriesFilter
  checked against the proto's table of aggregations (tests/test_observability.py).

Also not verified on a real cloud: the `component` label values of the Lustre metrics (the charts group
by it instead of filtering on a guessed value), that `jsonPayload.<field>>=0` leaves out a line whose
field is null, that REDUCE_MEAN of distributions is the mean of their values as the proto describes,
and that the dashboard JSON renders as intended (it is checked against the documented structure:
mosaicLayout, tiles, xyChart dataSets with timeSeriesFilter, and the proto's aggregation rules).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional, Protocol

import pulumi
import pulumi_gcp as gcp

from infra.gke_common import ClusterComponent
from infra.naming import PREEMPTION_WATCHER, PREEMPTION_WATCHER_CONTAINER
from infra.options import child_options
from infra.stack_context import GpuPoolFacts, StackContext

COMPONENT_TYPE = "nemo-rl-gke:infra:MonitoringDashboard"

METRICS_LUSTRE_URL = "https://cloud.google.com/monitoring/api/metrics_gcp_i_o"
METRICS_GKE_URL = "https://cloud.google.com/monitoring/api/metrics_kubernetes"
LOG_METRICS_URL = "https://cloud.google.com/logging/docs/logs-based-metrics"
SPOT_PREEMPTION_URL = "https://cloud.google.com/compute/docs/instances/create-use-spot"
RESOURCES_URL = "https://cloud.google.com/logging/docs/api/v2/resource-list"
"""Labels of the monitored resources the filters use (k8s_node, k8s_container, lustre.googleapis.com/Instance)."""
DISTRIBUTION_METRICS_URL = "https://cloud.google.com/logging/docs/logs-based-metrics/distribution-metrics"
"""A log-based distribution metric: a filter, a value extractor (`EXTRACT(jsonPayload.<field>)`) and
bucket options; it records count, mean and sum of squared deviation with the bucket counts."""
AGGREGATION_URL = "https://github.com/googleapis/googleapis/blob/master/google/monitoring/v3/common.proto"
"""`Aggregation.Aligner` / `Aggregation.Reducer`: which aligner and reducer each value type allows (the
dashboard's `google.monitoring.dashboard.v1.Aggregation` uses the same enums)."""
DCGM_METRICS_URL = "https://cloud.google.com/kubernetes-engine/docs/how-to/dcgm-metrics"
"""GKE's managed DCGM metrics (monitoringConfig component DCGM, infra/cluster.py): DCGM-Exporter fields
scraped into Managed Service for Prometheus as `prometheus.googleapis.com/<field>/gauge` on the
`prometheus_target` resource (labels project_id, location, cluster, namespace, job, instance)."""


@dataclass(frozen=True)
class MetricSource:
    resource_type: str
    kind: str
    url: str


METRICS: dict[str, MetricSource] = {
    "lustre.googleapis.com/instance/read_bytes_total": MetricSource(
        "lustre.googleapis.com/Instance", "DELTA", METRICS_LUSTRE_URL
    ),
    "lustre.googleapis.com/instance/write_bytes_total": MetricSource(
        "lustre.googleapis.com/Instance", "DELTA", METRICS_LUSTRE_URL
    ),
    "lustre.googleapis.com/instance/capacity_bytes": MetricSource(
        "lustre.googleapis.com/Instance", "GAUGE", METRICS_LUSTRE_URL
    ),
    "lustre.googleapis.com/instance/free_bytes": MetricSource(
        "lustre.googleapis.com/Instance", "GAUGE", METRICS_LUSTRE_URL
    ),
    "kubernetes.io/node/accelerator/duty_cycle": MetricSource("k8s_node", "GAUGE", METRICS_GKE_URL),
    "kubernetes.io/container/accelerator/duty_cycle": MetricSource("k8s_container", "GAUGE", METRICS_GKE_URL),
    "prometheus.googleapis.com/DCGM_FI_DEV_GPU_UTIL/gauge": MetricSource(
        "prometheus_target", "GAUGE", DCGM_METRICS_URL
    ),
    "prometheus.googleapis.com/DCGM_FI_PROF_PIPE_TENSOR_ACTIVE/gauge": MetricSource(
        "prometheus_target", "GAUGE", DCGM_METRICS_URL
    ),
    "prometheus.googleapis.com/DCGM_FI_DEV_FB_USED/gauge": MetricSource("prometheus_target", "GAUGE", DCGM_METRICS_URL),
}
"""Built-in metric types the dashboard may use, with the Cloud Monitoring reference page of each."""

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


def display_name(stack: str) -> str:
    return f"nemo-rl-gke {stack}: GPUs, Lustre, preemptions"


def _q(value: str) -> str:
    """A quoted string literal for a Monitoring/Logging filter."""
    return json.dumps(value)


def preemption_log_filter(project: str, zone: str, cluster_name: str, node_prefix: str = "gke") -> str:
    """The audit log entries of this cluster's node VMs being preempted. `node_prefix`: how GKE starts
    the node VM names, `gke` (Standard) or `gk3` (Autopilot). Only on the real cloud: the `gk3-` names."""
    prefix = f"{node_prefix}-{cluster_name[:GKE_NODE_NAME_CLUSTER_CHARS]}"
    return " AND ".join(
        [
            f"logName={_q(f'projects/{project}/logs/cloudaudit.googleapis.com%2Fsystem_event')}",
            'resource.type="gce_instance"',
            'protoPayload.methodName="compute.instances.preempted"',
            f"resource.labels.zone={_q(zone)}",
            f"protoPayload.resourceName:{_q(f'/instances/{prefix}')}",
        ]
    )


def attempt_log_filter(cluster_name: str, namespace: str, number: Optional[str] = None) -> str:
    """The watcher's `attempt-ended` lines in Cloud Logging (logging query language); with `number`,
    only those where that field of jsonPayload holds a number (the line writes null when the ledger
    does not know it: no price, or steps not known), so a distribution gets no entry without a value."""
    return " AND ".join(
        [
            'resource.type="k8s_container"',
            f"resource.labels.cluster_name={_q(cluster_name)}",
            f"resource.labels.namespace_name={_q(namespace)}",
            f"resource.labels.container_name={_q(PREEMPTION_WATCHER_CONTAINER)}",
            'jsonPayload.nemoRlGke="attempt-ended"',
            *([f"jsonPayload.{number}>=0"] if number else []),
        ]
    )


def _series(
    metric_type: str, resource_filter: str, aggregation: dict[str, Any], secondary: Optional[dict[str, Any]] = None
) -> dict[str, Any]:
    filt: dict[str, Any] = {"filter": f"metric.type={_q(metric_type)} {resource_filter}", "aggregation": aggregation}
    if secondary:
        filt["secondaryAggregation"] = secondary
    return {"timeSeriesFilter": filt}


def _chart(
    title: str,
    datasets: list[tuple[dict[str, Any], str, str]],
    y_label: str,
    thresholds: Optional[list[dict[str, Any]]] = None,
) -> dict[str, Any]:
    chart: dict[str, Any] = {
        "dataSets": [
            {"timeSeriesQuery": query, "plotType": plot, "legendTemplate": legend, "targetAxis": "Y1"}
            for query, plot, legend in datasets
        ],
        "yAxis": {"label": y_label, "scale": "LINEAR"},
    }
    if thresholds:
        chart["thresholds"] = thresholds
    return {"title": title, "xyChart": chart}


def _distribution_mean(group: Optional[list[str]] = None) -> dict[str, Any]:
    """A DELTA DISTRIBUTION metric charted as the mean of its values per hour (`AGGREGATION_URL`):
    ALIGN_DELTA keeps each series' distribution of the period (ALIGN_MEAN is for numeric values only),
    REDUCE_MEAN turns the distributions of the series (one per watcher pod) into the mean, a DOUBLE."""
    agg: dict[str, Any] = {
        "alignmentPeriod": "3600s",
        "perSeriesAligner": "ALIGN_DELTA",
        "crossSeriesReducer": "REDUCE_MEAN",
    }
    if group:
        agg["groupByFields"] = group
    return agg


def _attempt_charts(metrics: AttemptMetrics, container: str) -> list[dict[str, Any]]:
    """The charts of the watcher's attempt lines: how attempts ended, steps lost, spend, $ per step."""
    by_cause = ['metric.label."cause"']

    def series(metric: str, aggregation: dict[str, Any]) -> dict[str, Any]:
        return _series(f"{USER_METRIC_PREFIX}{metric}", container, aggregation)

    return [
        _chart(
            "Training attempts ended, by how (per hour; the preemption watcher's log)",
            [
                (
                    series(
                        metrics.attempts,
                        {
                            "alignmentPeriod": "3600s",
                            "perSeriesAligner": "ALIGN_SUM",
                            "crossSeriesReducer": "REDUCE_SUM",
                            "groupByFields": by_cause,
                        },
                    ),
                    "STACKED_BAR",
                    "${metric.labels.cause}",
                )
            ],
            "attempts",
        ),
        _chart(
            "Steps lost per ended attempt (redone from the last complete step_N; mean per hour)",
            [(series(metrics.steps_lost, _distribution_mean(by_cause)), "STACKED_BAR", "${metric.labels.cause}")],
            "steps",
        ),
        # Cumulative: the ledger's own sum over the run's attempts, written on each attempt's line. A sum
        # of the per-attempt spends cannot be charted from a distribution (module doc), and the ledger's
        # total is the one `status` and the budget use. One bar per hour an attempt ended in (two ends in
        # one hour show the mean of their totals); a new spec starts a new run, from $0.
        _chart(
            "Spend of the run so far, USD (the run ledger's total at each attempt's end; as `jobctl status`)",
            [(series(metrics.run_spend, _distribution_mean()), "STACKED_BAR", "run spend")],
            "USD",
        ),
        # Per attempt, then the mean of the attempts ended in the hour: a ratio of two series (spend over
        # steps) would need sums of distributions too, and a ratio of two means divides over different
        # entries as soon as one line lacks the steps.
        _chart(
            "$ per training step of the ended attempts (its spend / the steps it ran, lost ones included)",
            [(series(metrics.usd_per_step, _distribution_mean()), "STACKED_BAR", "USD per step")],
            "USD/step",
        ),
    ]


def dashboard_document(
    *,
    stack: str,
    project: str,
    zone: str,
    cluster_name: str,
    gpu_pool: GpuPoolFacts,
    lustre_instance_id: str,
    ray_namespace: str,
    preemption_metric: str,
    attempt_metrics: Optional[AttemptMetrics] = None,
    cluster_location: Optional[str] = None,
) -> dict[str, Any]:
    """The dashboard as the Monitoring API's `Dashboard` JSON (`mosaicLayout`, 48 columns). Pure.

    `cluster_location`: where the cluster is, when not `zone` (a regional Autopilot cluster); the `k8s_*`
    resources carry the cluster's location, Lustre and the GPU VMs the zone. Only on the real cloud: that
    GKE labels a regional cluster's `k8s_node` series with the region."""
    where = cluster_location or zone
    node = (
        f'resource.type="k8s_node" resource.label."cluster_name"={_q(cluster_name)} '
        f'resource.label."location"={_q(where)}'
    )
    container = (
        f'resource.type="k8s_container" resource.label."cluster_name"={_q(cluster_name)} '
        f'resource.label."location"={_q(where)} resource.label."namespace_name"={_q(ray_namespace)}'
    )
    lustre = (
        f'resource.type="lustre.googleapis.com/Instance" resource.label."instance_id"={_q(lustre_instance_id)} '
        f'resource.label."location"={_q(zone)}'
    )
    preempted = f'resource.type="gce_instance" resource.label."zone"={_q(zone)}'
    # One DCGM-Exporter target per GPU node; its `instance` label tells the nodes apart. Only on the real
    # cloud: the target's other labels (which namespace GKE runs the exporter in), so the filter names
    # the cluster only.
    dcgm = f'resource.type="prometheus_target" resource.label."cluster"={_q(cluster_name)}'
    per_target = ['resource.label."instance"']

    def mean(
        period: str = "60s",
        group: Optional[list[str]] = None,
        aligner: str = "ALIGN_MEAN",
        reducer: str = "REDUCE_MEAN",
    ) -> dict[str, Any]:
        agg: dict[str, Any] = {"alignmentPeriod": period, "perSeriesAligner": aligner, "crossSeriesReducer": reducer}
        if group:
            agg["groupByFields"] = group
        return agg

    tiles = [
        _chart(
            f"GPU utilisation per node of pool {gpu_pool.pool_name} (DCGM, mean of its {gpu_pool.gpus_per_node} GPUs)",
            [
                (
                    _series("prometheus.googleapis.com/DCGM_FI_DEV_GPU_UTIL/gauge", dcgm, mean(group=per_target)),
                    "LINE",
                    "${resource.labels.instance}",
                )
            ],
            "% busy",
        ),
        _chart(
            "Tensor-core activity per GPU node (DCGM, fraction of cycles; how much of the time is real math)",
            [
                (
                    _series(
                        "prometheus.googleapis.com/DCGM_FI_PROF_PIPE_TENSOR_ACTIVE/gauge", dcgm, mean(group=per_target)
                    ),
                    "LINE",
                    "${resource.labels.instance}",
                )
            ],
            "fraction",
        ),
        _chart(
            "GPU memory in use per GPU node (DCGM, sum of its GPUs)",
            [
                (
                    _series(
                        "prometheus.googleapis.com/DCGM_FI_DEV_FB_USED/gauge",
                        dcgm,
                        mean(reducer="REDUCE_SUM", group=per_target),
                    ),
                    "LINE",
                    "${resource.labels.instance}",
                )
            ],
            "MiB",
        ),
        _chart(
            f"GPU utilisation per Ray pod in namespace {ray_namespace}",
            [
                (
                    _series(
                        "kubernetes.io/container/accelerator/duty_cycle",
                        container,
                        mean(group=['resource.label."pod_name"']),
                    ),
                    "LINE",
                    "${resource.labels.pod_name}",
                )
            ],
            "% busy",
        ),
        _chart(
            f"Nodes of GPU pool {gpu_pool.pool_name} (nodes reporting a GPU duty cycle; configured: "
            f"{gpu_pool.node_count})",
            [
                (
                    _series(
                        "kubernetes.io/node/accelerator/duty_cycle",
                        node,
                        mean(group=['resource.label."node_name"']),
                        {
                            "alignmentPeriod": "60s",
                            "perSeriesAligner": "ALIGN_MEAN",
                            "crossSeriesReducer": "REDUCE_COUNT",
                        },
                    ),
                    "LINE",
                    "GPU nodes",
                )
            ],
            "nodes",
            thresholds=[
                {
                    "label": "gpuPool.nodeCount",
                    "value": gpu_pool.node_count,
                    "color": "YELLOW",
                    "direction": "BELOW",
                    "targetAxis": "Y1",
                }
            ],
        ),
        _chart(
            f"Spot preemptions of {cluster_name} nodes in {zone} (per hour)",
            [
                (
                    _series(
                        f"{USER_METRIC_PREFIX}{preemption_metric}",
                        preempted,
                        mean("3600s", ['metric.label."instance"'], "ALIGN_SUM", "REDUCE_SUM"),
                    ),
                    "STACKED_BAR",
                    "${metric.labels.instance}",
                )
            ],
            "preemptions",
        ),
        *(_attempt_charts(attempt_metrics, container) if attempt_metrics else []),
        _chart(
            f"Lustre {lustre_instance_id}: read and write throughput",
            [
                (
                    _series(
                        "lustre.googleapis.com/instance/read_bytes_total",
                        lustre,
                        mean(aligner="ALIGN_RATE", reducer="REDUCE_SUM"),
                    ),
                    "LINE",
                    "read",
                ),
                (
                    _series(
                        "lustre.googleapis.com/instance/write_bytes_total",
                        lustre,
                        mean(aligner="ALIGN_RATE", reducer="REDUCE_SUM"),
                    ),
                    "LINE",
                    "write",
                ),
            ],
            "bytes/s",
        ),
        _chart(
            f"Lustre {lustre_instance_id}: capacity and free space per target type (used = the gap)",
            [
                (
                    _series(
                        "lustre.googleapis.com/instance/capacity_bytes",
                        lustre,
                        mean(reducer="REDUCE_SUM", group=['metric.label."component"']),
                    ),
                    "LINE",
                    "capacity ${metric.labels.component}",
                ),
                (
                    _series(
                        "lustre.googleapis.com/instance/free_bytes",
                        lustre,
                        mean(reducer="REDUCE_SUM", group=['metric.label."component"']),
                    ),
                    "LINE",
                    "free ${metric.labels.component}",
                ),
            ],
            "bytes",
        ),
    ]
    note = {
        "title": "How to read this dashboard",
        "text": {
            "format": "MARKDOWN",
            "content": (
                f"Stack **{stack}**: cluster `{cluster_name}` ({cluster_location}), nodes in `{zone}`, GPU pool "
                f"`{gpu_pool.pool_name}` "
                f"({gpu_pool.node_count} x {gpu_pool.machine_type}), Lustre `{lustre_instance_id}`, Ray namespace "
                f"`{ray_namespace}`.\n\nA preemption shows as a bar in *Spot preemptions*, a dip in *Nodes of GPU "
                "pool* "
                "and GPU utilisation (DCGM, from GKE's managed DCGM-Exporter) falling to zero; the preemption "
                "watcher resubmits the job "
                f"(`kubectl -n {ray_namespace} logs deploy/{PREEMPTION_WATCHER}`) and utilisation returns once the "
                "replacement node has joined and the job has loaded its last checkpoint (a read burst on Lustre). "
                "Checkpoint saves show as write bursts. Each ended attempt adds a bar to *Training attempts* "
                "and *Steps lost*, and the run ledger's numbers (`python -m jobctl status`) to *Spend of the "
                "run so far* and *$ per training step*."
            ),
        },
    }
    width, height = 24, 16
    mosaic = [{"xPos": 0, "yPos": 0, "width": 48, "height": 8, "widget": note}]
    for i, widget in enumerate(tiles):
        mosaic.append(
            {"xPos": (i % 2) * width, "yPos": 8 + (i // 2) * height, "width": width, "height": height, "widget": widget}
        )
    return {
        "displayName": display_name(stack),
        "mosaicLayout": {"columns": 48, "tiles": mosaic},
    }


@dataclass(frozen=True)
class MonitoringDashboardArgs:
    """What `MonitoringDashboard` charts (see `build_dashboard` for each value's source)."""

    ctx: StackContext
    cluster_name: pulumi.Input[str]
    zone: str
    gpu_pool: GpuPoolFacts
    lustre_instance_id: pulumi.Input[str]
    ray_namespace: str
    cluster_location: Optional[str] = None
    """Where the cluster is when not `zone` (a regional cluster)."""
    node_prefix: str = "gke"
    """How GKE starts the cluster's node VM names (`ClusterComponent.node_name_prefix`)."""


class LustreInstance(Protocol):
    """What the dashboard takes from the `Lustre` component."""

    instance_id: pulumi.Output[str]


class RayNamespace(Protocol):
    """What the dashboard takes from the `RayCluster` component."""

    namespace: str


class MonitoringDashboard(pulumi.ComponentResource):
    """The stack's Cloud Monitoring dashboard and its log-based metrics: spot preemptions (audit log) and
    the training attempts, steps lost, run spend and $ per step (the preemption watcher's log).

    Outputs: `dashboard_id` (the dashboard's resource id), `display_name`, and `console_url` (the
    project's dashboard list, where it appears under `display_name`).
    """

    dashboard: gcp.monitoring.Dashboard
    preemption_metric: gcp.logging.Metric
    preemption_metric_name: str
    attempts_metric: gcp.logging.Metric
    steps_lost_metric: gcp.logging.Metric
    run_spend_metric: gcp.logging.Metric
    usd_per_step_metric: gcp.logging.Metric
    dashboard_json: pulumi.Output[str]
    dashboard_id: pulumi.Output[str]
    display_name: str
    console_url: str

    def __init__(self, name: str, args: MonitoringDashboardArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__(COMPONENT_TYPE, name, None, opts)
        child = child_options(self, opts)
        ctx, zone, node_prefix = args.ctx, args.zone, args.node_prefix
        cluster_name, lustre_instance_id = args.cluster_name, args.lustre_instance_id
        self.preemption_metric_name = ctx.name("gpu-preemptions")
        names = pulumi.Output.all(pulumi.Output.from_input(cluster_name), pulumi.Output.from_input(lustre_instance_id))
        self.preemption_metric = gcp.logging.Metric(
            f"{name}-preemptions",
            name=self.preemption_metric_name,
            project=ctx.project,
            description=f"Spot preemptions of the GKE nodes of stack {ctx.stack} (Compute Engine system-event "
            "audit log).",
            filter=names.apply(lambda a: preemption_log_filter(ctx.project, zone, a[0], node_prefix)),
            metric_descriptor={
                "metric_kind": "DELTA",
                "value_type": "INT64",
                "unit": "1",
                "labels": [{"key": "instance", "value_type": "STRING", "description": "Preempted VM"}],
            },
            label_extractors={"instance": 'REGEXP_EXTRACT(protoPayload.resourceName, "instances/([^/]+)$")'},
            opts=child,
        )

        # What each training attempt cost in steps and money, from the watcher's log (ATTEMPT_METRIC_SOURCE).
        def attempt_filter(number: Optional[str] = None) -> pulumi.Output[str]:
            return names.apply(lambda a: attempt_log_filter(a[0], args.ray_namespace, number))

        cause = [{"key": "cause", "value_type": "STRING", "description": "How the attempt ended (workloads/ledger.py)"}]
        self.attempts_metric = gcp.logging.Metric(
            f"{name}-attempts",
            name=ctx.name("training-attempts"),
            project=ctx.project,
            description=f"Training attempts of stack {ctx.stack} that ended, by cause (the preemption watcher's log).",
            filter=attempt_filter(),
            metric_descriptor={"metric_kind": "DELTA", "value_type": "INT64", "unit": "1", "labels": cause},
            label_extractors={"cause": "EXTRACT(jsonPayload.cause)"},
            opts=child,
        )

        def distribution(
            suffix: str, field: str, unit: str, description: str, buckets: dict[str, Any], labelled: bool = False
        ) -> gcp.logging.Metric:
            """A log-based DISTRIBUTION metric of one number of the attempt line (DISTRIBUTION_METRICS_URL)."""
            return gcp.logging.Metric(
                f"{name}-{suffix}",
                name=ctx.name(f"training-{suffix}"),
                project=ctx.project,
                description=description,
                filter=attempt_filter(field),
                metric_descriptor={
                    "metric_kind": "DELTA",
                    "value_type": "DISTRIBUTION",
                    "unit": unit,
                    **({"labels": cause} if labelled else {}),
                },
                value_extractor=f"EXTRACT(jsonPayload.{field})",
                label_extractors={"cause": "EXTRACT(jsonPayload.cause)"} if labelled else None,
                bucket_options=buckets,
                opts=child,
            )

        self.steps_lost_metric = distribution(
            "steps-lost",
            "stepsLost",
            "1",
            f"Steps each ended training attempt of stack {ctx.stack} lost (ran past its last complete checkpoint).",
            {"linear_buckets": {"num_finite_buckets": 20, "width": 1, "offset": 0}},
            labelled=True,
        )
        # Buckets doubling from $1 (run spend) and from 1 cent (per step) to 2^24 times that: every value a
        # run can reach has a bucket; the charts read the exact mean, the buckets only shape a heatmap.
        self.run_spend_metric = distribution(
            "run-spend",
            "runSpendUsd",
            "USD",
            f"The spend so far of the training run of stack {ctx.stack} at each attempt's end (the run ledger's "
            "GPU node-hours x node-hour price).",
            {"exponential_buckets": {"num_finite_buckets": 24, "growth_factor": 2, "scale": 1}},
        )
        self.usd_per_step_metric = distribution(
            "usd-per-step",
            "usdPerStep",
            "USD",
            f"Spend per training step of each ended attempt of stack {ctx.stack} (its spend / the steps it ran).",
            {"exponential_buckets": {"num_finite_buckets": 24, "growth_factor": 2, "scale": 0.01}},
        )
        log_metrics = [
            self.preemption_metric,
            self.attempts_metric,
            self.steps_lost_metric,
            self.run_spend_metric,
            self.usd_per_step_metric,
        ]

        def document(names: list[Any]) -> str:
            cluster, instance, metric, *attempts = names
            doc = dashboard_document(
                stack=ctx.stack,
                project=ctx.project,
                zone=zone,
                cluster_name=cluster,
                gpu_pool=args.gpu_pool,
                # The instance's full resource name ends in the id the metric's label holds.
                lustre_instance_id=str(instance).rsplit("/", 1)[-1],
                ray_namespace=args.ray_namespace,
                preemption_metric=metric,
                attempt_metrics=AttemptMetrics(*attempts),
                cluster_location=args.cluster_location,
            )
            return json.dumps(doc, sort_keys=True)

        self.dashboard_json = pulumi.Output.all(cluster_name, lustre_instance_id, *(m.name for m in log_metrics)).apply(
            document
        )
        self.dashboard = gcp.monitoring.Dashboard(
            f"{name}-dashboard",
            project=ctx.project,
            dashboard_json=self.dashboard_json,
            opts=child_options(self, opts, depends_on=log_metrics),
        )
        self.dashboard_id = self.dashboard.id
        self.display_name = display_name(ctx.stack)
        self.console_url = f"https://console.cloud.google.com/monitoring/dashboards?project={ctx.project}"
        self.register_outputs(
            {
                "dashboardId": self.dashboard_id,
                "displayName": self.display_name,
                "consoleUrl": self.console_url,
                "preemptionMetric": f"{USER_METRIC_PREFIX}{self.preemption_metric_name}",
            }
        )


def build_dashboard(
    ctx: StackContext,
    *,
    cluster: ClusterComponent,
    lustre: LustreInstance,
    ray: RayNamespace,
    opts: Optional[pulumi.ResourceOptions] = None,
) -> MonitoringDashboard:
    """The stack's `MonitoringDashboard`, named from the components.

    Args:
        ctx: the stack context (project, stack name, name prefix).
        cluster: the `GkeCluster` or `AutopilotCluster` (`name`, `location`, `gpu_pool_facts`); the GPU VMs
            and Lustre are in the stack's zone, a regional cluster's location is its region.
        lustre: the `Lustre` component (`instance_id`).
        ray: the `RayCluster` (`namespace`).
        opts: resource options (no provider needed: the default gcp provider).
    """
    args = MonitoringDashboardArgs(
        ctx,
        cluster_name=cluster.name,
        zone=ctx.zone,
        cluster_location=None if cluster.location == ctx.zone else cluster.location,
        node_prefix=cluster.node_name_prefix,
        gpu_pool=cluster.gpu_pool_facts,
        lustre_instance_id=lustre.instance_id,
        ray_namespace=ray.namespace,
    )
    return MonitoringDashboard("monitoring", args, opts)
