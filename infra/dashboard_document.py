"""The stack's Cloud Monitoring dashboard as the Monitoring API's `Dashboard` JSON (pure; the
`MonitoringDashboard` component in infra/observability.py names it from the components).

Metric types are only those of `METRICS` (an allow-list a test checks the dashboard against), each with the
page that documents it (read as generated on 2026-04-10; resource labels from `RESOURCES_URL`), and the
log-based metrics of infra/log_metrics.py:

- Managed Lustre (BETA): `read_bytes_total` / `write_bytes_total` (DELTA per Object Storage Target) and
  `capacity_bytes` / `free_bytes` (GAUGE per target; an instance's total is the sum over its targets).
- GKE's `kubernetes.io/{node,container}/accelerator/duty_cycle` (percent of the last 10 s a GPU was busy):
  only GPU nodes report it, so "nodes reporting a GPU duty cycle" is the GPU pool's live node count.
- The training attempts' DISTRIBUTION metrics: Monitoring cannot sum a distribution's values
  (`AGGREGATION_URL`: ALIGN_SUM and REDUCE_SUM merge distributions, ALIGN_MEAN takes numbers only, REDUCE_MEAN
  gives the mean as a DOUBLE), so each chart is the exact mean of a number the ledger already computed
  (`workloads/ledger.py`, `workloads/goodput.py`): ALIGN_DELTA, then REDUCE_MEAN. Not chosen: PromQL's
  `<metric>_sum` (https://cloud.google.com/monitoring/promql/promql-mapping), since how it sums a DELTA
  log-based metric over a range is unverified here.

Not verified on a real cloud: the Lustre metrics' `component` label values (the charts group by it), that
REDUCE_MEAN of distributions is the mean of their values as the proto says, and how the JSON renders.
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
AGGREGATION_URL = "https://github.com/googleapis/googleapis/blob/master/google/monitoring/v3/common.proto"
"""`Aggregation.Aligner` / `Aggregation.Reducer`: which aligner and reducer each value type allows."""
DCGM_METRICS_URL = "https://cloud.google.com/kubernetes-engine/docs/how-to/dcgm-metrics"
"""GKE's managed DCGM metrics (infra/cluster.py): `prometheus.googleapis.com/<field>/gauge` on
`prometheus_target` (labels project_id, location, cluster, namespace, job, instance)."""
_LUSTRE, _DCGM = "lustre.googleapis.com/instance/", "prometheus.googleapis.com/DCGM_FI_"

METRICS: dict[str, MetricSource] = {
    **{
        f"{_LUSTRE}{m}": MetricSource("lustre.googleapis.com/Instance", kind, METRICS_LUSTRE_URL)
        for m, kind in (
            ("read_bytes_total", "DELTA"),
            ("write_bytes_total", "DELTA"),
            ("capacity_bytes", "GAUGE"),
            ("free_bytes", "GAUGE"),
        )
    },
    "kubernetes.io/node/accelerator/duty_cycle": MetricSource("k8s_node", "GAUGE", METRICS_GKE_URL),
    "kubernetes.io/container/accelerator/duty_cycle": MetricSource("k8s_container", "GAUGE", METRICS_GKE_URL),
    **{
        f"{_DCGM}{field}/gauge": MetricSource("prometheus_target", "GAUGE", DCGM_METRICS_URL)
        for field in ("DEV_GPU_UTIL", "PROF_PIPE_TENSOR_ACTIVE", "DEV_FB_USED")
    },
}
"""Built-in metric types the dashboard may use, with the Cloud Monitoring reference page of each."""


def display_name(stack: str) -> str:
    return f"nemo-rl-gke {stack}: GPUs, Lustre, preemptions"


def _agg(
    aligner: str = "ALIGN_MEAN", reducer: str = "REDUCE_MEAN", group: Optional[list[str]] = None, period: str = "60s"
) -> dict[str, Any]:
    agg: dict[str, Any] = {"alignmentPeriod": period, "perSeriesAligner": aligner, "crossSeriesReducer": reducer}
    if group:
        agg["groupByFields"] = group
    return agg


def _data(
    metric: str,
    where: str,
    agg: dict[str, Any],
    legend: str,
    plot: str = "LINE",
    secondary: Optional[dict[str, Any]] = None,
) -> dict[str, Any]:
    """One data set of an xyChart: a timeSeriesFilter of `metric` on the resources `where` selects."""
    filt: dict[str, Any] = {"filter": f"metric.type={_q(metric)} {where}", "aggregation": agg}
    if secondary:
        filt["secondaryAggregation"] = secondary
    query = {"timeSeriesFilter": filt}
    return {"timeSeriesQuery": query, "plotType": plot, "legendTemplate": legend, "targetAxis": "Y1"}


def _chart(title: str, y_label: str, *datasets: dict[str, Any], thresholds: Optional[list] = None) -> dict[str, Any]:
    chart: dict[str, Any] = {"dataSets": list(datasets), "yAxis": {"label": y_label, "scale": "LINEAR"}}
    if thresholds:
        chart["thresholds"] = thresholds
    return {"title": title, "xyChart": chart}


def _attempt_charts(metrics: AttemptMetrics, container: str) -> list[dict[str, Any]]:
    """The charts of the watcher's attempt lines: how attempts ended, steps lost, spend, $ per step, goodput
    and badput by bucket."""
    by_cause, cause = ['metric.label."cause"'], "${metric.labels.cause}"
    # A DELTA DISTRIBUTION as the mean of its values per hour: ALIGN_DELTA keeps each series' distribution of
    # the hour, REDUCE_MEAN turns those of the series (one per watcher pod) into their mean (module doc).
    hourly_mean = _agg("ALIGN_DELTA", "REDUCE_MEAN", period="3600s")

    def bars(metric: str, agg: dict[str, Any], legend: str) -> dict[str, Any]:
        return _data(f"{USER_METRIC_PREFIX}{metric}", container, agg, legend, "STACKED_BAR")

    return [
        _chart(
            "Training attempts ended, by how (per hour; the preemption watcher's log)",
            "attempts",
            bars(metrics.attempts, _agg("ALIGN_SUM", "REDUCE_SUM", by_cause, "3600s"), cause),
        ),
        _chart(
            "Steps lost per ended attempt (redone from the last complete step_N; mean per hour)",
            "steps",
            bars(metrics.steps_lost, _agg("ALIGN_DELTA", "REDUCE_MEAN", by_cause, "3600s"), cause),
        ),
        # The ledger's own total over the run's attempts, written on each attempt's line (the one `status` and
        # the budget use): a sum of per-attempt spends cannot be charted from a distribution.
        _chart(
            "Spend of the run so far, USD (the run ledger's total at each attempt's end; as `jobctl status`)",
            "USD",
            bars(metrics.run_spend, hourly_mean, "run spend"),
        ),
        # Per attempt, then the mean: a ratio of two series would need sums of distributions too.
        _chart(
            "$ per training step of the ended attempts (its spend / the steps it ran, lost ones included)",
            "USD/step",
            bars(metrics.usd_per_step, hourly_mean, "USD per step"),
        ),
        _chart(
            "Goodput per ended attempt (fraction of its paid GPU node-time in kept steps; mean per hour)",
            "fraction",
            bars(metrics.goodput, hourly_mean, "goodput"),
        ),
        # Every line with a price holds all buckets, so the stacked means add up to the mean badput.
        _chart(
            "Badput per ended attempt by bucket, USD (paid GPU node-time not in kept steps; mean per hour)",
            "USD",
            *(bars(metric, hourly_mean, bucket) for bucket, metric in metrics.badput.items()),
        ),
    ]


def dashboard_document(
    *,
    stack: str,
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
    cluster = f'resource.label."cluster_name"={_q(cluster_name)} resource.label."location"={_q(where)}'
    node = f'resource.type="k8s_node" {cluster}'
    container = f'resource.type="k8s_container" {cluster} resource.label."namespace_name"={_q(ray_namespace)}'
    lustre = (
        f'resource.type="lustre.googleapis.com/Instance" resource.label."instance_id"={_q(lustre_instance_id)} '
        f'resource.label."location"={_q(zone)}'
    )
    preempted = f'resource.type="gce_instance" resource.label."zone"={_q(zone)}'
    # One DCGM-Exporter target per GPU node, told apart by `instance`. Only on the real cloud: the target's
    # other labels (which namespace GKE runs the exporter in), so the filter names the cluster only.
    dcgm = f'resource.type="prometheus_target" resource.label."cluster"={_q(cluster_name)}'
    per_target, instance = ['resource.label."instance"'], "${resource.labels.instance}"
    by_component = _agg(reducer="REDUCE_SUM", group=['metric.label."component"'])
    node_count = {"alignmentPeriod": "60s", "perSeriesAligner": "ALIGN_MEAN", "crossSeriesReducer": "REDUCE_COUNT"}
    below_count = {"label": "gpuPool.nodeCount", "value": gpu_pool.node_count, "color": "YELLOW", "direction": "BELOW"}
    tiles = [
        _chart(
            f"GPU utilisation per node of pool {gpu_pool.pool_name} (DCGM, mean of its {gpu_pool.gpus_per_node} GPUs)",
            "% busy",
            _data(f"{_DCGM}DEV_GPU_UTIL/gauge", dcgm, _agg(group=per_target), instance),
        ),
        _chart(
            "Tensor-core activity per GPU node (DCGM, fraction of cycles; how much of the time is real math)",
            "fraction",
            _data(f"{_DCGM}PROF_PIPE_TENSOR_ACTIVE/gauge", dcgm, _agg(group=per_target), instance),
        ),
        _chart(
            "GPU memory in use per GPU node (DCGM, sum of its GPUs)",
            "MiB",
            _data(f"{_DCGM}DEV_FB_USED/gauge", dcgm, _agg(reducer="REDUCE_SUM", group=per_target), instance),
        ),
        _chart(
            f"GPU utilisation per Ray pod in namespace {ray_namespace}",
            "% busy",
            _data(
                "kubernetes.io/container/accelerator/duty_cycle",
                container,
                _agg(group=['resource.label."pod_name"']),
                "${resource.labels.pod_name}",
            ),
        ),
        _chart(
            f"Nodes of GPU pool {gpu_pool.pool_name} (nodes reporting a GPU duty cycle; configured: "
            f"{gpu_pool.node_count})",
            "nodes",
            _data(
                "kubernetes.io/node/accelerator/duty_cycle",
                node,
                _agg(group=['resource.label."node_name"']),
                "GPU nodes",
                secondary=node_count,
            ),
            thresholds=[{**below_count, "targetAxis": "Y1"}],
        ),
        _chart(
            f"Spot preemptions of {cluster_name} nodes in {zone} (per hour)",
            "preemptions",
            _data(
                f"{USER_METRIC_PREFIX}{preemption_metric}",
                preempted,
                _agg("ALIGN_SUM", "REDUCE_SUM", ['metric.label."instance"'], "3600s"),
                "${metric.labels.instance}",
                "STACKED_BAR",
            ),
        ),
        *(_attempt_charts(attempt_metrics, container) if attempt_metrics else []),
        _chart(
            f"Lustre {lustre_instance_id}: read and write throughput",
            "bytes/s",
            *(
                _data(f"{_LUSTRE}{way}_bytes_total", lustre, _agg("ALIGN_RATE", "REDUCE_SUM"), way)
                for way in ("read", "write")
            ),
        ),
        _chart(
            f"Lustre {lustre_instance_id}: capacity and free space per target type (used = the gap)",
            "bytes",
            *(
                _data(f"{_LUSTRE}{what}_bytes", lustre, by_component, f"{what} ${{metric.labels.component}}")
                for what in ("capacity", "free")
            ),
        ),
    ]
    note = {
        "title": "How to read this dashboard",
        "text": {
            "format": "MARKDOWN",
            "content": (
                f"Stack **{stack}**: cluster `{cluster_name}` ({cluster_location}), nodes in `{zone}`, GPU pool "
                f"`{gpu_pool.pool_name}` ({gpu_pool.node_count} x {gpu_pool.machine_type}), Lustre "
                f"`{lustre_instance_id}`, Ray namespace `{ray_namespace}`.\n\nA preemption shows as a bar in *Spot "
                "preemptions*, a dip in *Nodes of GPU pool* and GPU utilisation (DCGM, from GKE's managed "
                "DCGM-Exporter) falling to zero; the preemption watcher resubmits the job "
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
    return {"displayName": display_name(stack), "mosaicLayout": {"columns": 48, "tiles": mosaic}}
