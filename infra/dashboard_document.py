"""The stack's Cloud Monitoring dashboard as the Monitoring API's `Dashboard` JSON (pure; the
`MonitoringDashboard` component in infra/observability.py names it from the components).

Metric types are only those of `METRICS` (an allow-list; a test checks the dashboard against it),
each with the page that documents it (the lists were read as generated on 2026-04-10; the resource
labels are from `RESOURCES_URL`), and the log-based metrics of infra/log_metrics.py:

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
- The training attempts' DISTRIBUTION metrics: Monitoring's aggregations cannot sum a distribution's
  values (`AGGREGATION_URL`: ALIGN_SUM and REDUCE_SUM merge distributions into one; ALIGN_MEAN takes
  numeric values only; REDUCE_MEAN gives the mean of the values as a DOUBLE), so each chart is the mean
  of a number the ledger already computed (`workloads/ledger.py`: `Ledger.spend`, the total
  `python -m jobctl status` prints, `Ledger.usd_per_step`, and `workloads/goodput.py`'s goodput fraction
  and badput dollars per bucket of each attempt): ALIGN_DELTA, then REDUCE_MEAN.
  A distribution keeps the exact count and mean beside its buckets, so the means are exact; the
  buckets only matter for heatmaps and percentiles. Not chosen: PromQL, which reads a distribution's
  `<metric>_sum` (https://cloud.google.com/monitoring/promql/promql-mapping), because how it sums a
  DELTA log-based metric over a range is unverified here, and every other chart is a timeSeriesFilter
  checked against the proto's table of aggregations (tests/test_dashboard_document.py).

Also not verified on a real cloud: the `component` label values of the Lustre metrics (the charts group
by it instead of filtering on a guessed value), that REDUCE_MEAN of distributions is the mean of their
values as the proto describes, and that the dashboard JSON renders as intended (it is checked against
the documented structure: mosaicLayout, tiles, xyChart dataSets with timeSeriesFilter, and the proto's
aggregation rules).
"""

from __future__ import annotations

from typing import Any, Optional

from infra.log_metrics import USER_METRIC_PREFIX, AttemptMetrics, MetricSource
from infra.log_metrics import quoted as _q
from infra.naming import PREEMPTION_WATCHER
from infra.stack_context import GpuPoolFacts

METRICS_LUSTRE_URL = "https://cloud.google.com/monitoring/api/metrics_gcp_i_o"
METRICS_GKE_URL = "https://cloud.google.com/monitoring/api/metrics_kubernetes"
RESOURCES_URL = "https://cloud.google.com/logging/docs/api/v2/resource-list"
"""Labels of the monitored resources the filters use (k8s_node, k8s_container, lustre.googleapis.com/Instance)."""
AGGREGATION_URL = "https://github.com/googleapis/googleapis/blob/master/google/monitoring/v3/common.proto"
"""`Aggregation.Aligner` / `Aggregation.Reducer`: which aligner and reducer each value type allows (the
dashboard's `google.monitoring.dashboard.v1.Aggregation` uses the same enums)."""
DCGM_METRICS_URL = "https://cloud.google.com/kubernetes-engine/docs/how-to/dcgm-metrics"
"""GKE's managed DCGM metrics (monitoringConfig component DCGM, infra/cluster.py): DCGM-Exporter fields
scraped into Managed Service for Prometheus as `prometheus.googleapis.com/<field>/gauge` on the
`prometheus_target` resource (labels project_id, location, cluster, namespace, job, instance)."""

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


def display_name(stack: str) -> str:
    return f"nemo-rl-gke {stack}: GPUs, Lustre, preemptions"


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
    """The charts of the watcher's attempt lines: how attempts ended, steps lost, spend, $ per step, goodput
    and badput by bucket."""
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
        # The ledger's own split of each attempt (workloads/goodput.py), the mean of the attempts ended in
        # the hour, as the charts above: a fraction of two sums would need sums of distributions.
        _chart(
            "Goodput per ended attempt (fraction of its paid GPU node-time in kept steps; mean per hour)",
            [(series(metrics.goodput, _distribution_mean()), "STACKED_BAR", "goodput")],
            "fraction",
        ),
        # One distribution per bucket (infra/log_metrics.py); every line with a price holds all of them, so
        # the stacked means add up to the mean badput of the attempts ended in the hour.
        _chart(
            "Badput per ended attempt by bucket, USD (paid GPU node-time not in kept steps; mean per hour)",
            [
                (series(metric, _distribution_mean()), "STACKED_BAR", bucket)
                for bucket, metric in metrics.badput.items()
            ],
            "USD",
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
                "run so far*, *$ per training step*, *Goodput* and *Badput by bucket*."
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
