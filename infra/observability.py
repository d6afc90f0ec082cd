"""A Cloud Monitoring dashboard for one stack: GPUs, the GPU pool, Lustre, spot preemptions.

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

Also not verified on a real cloud: the `component` label values of the Lustre metrics (the charts group
by it instead of filtering on a guessed value), and that the dashboard JSON renders as intended (it is
checked against the documented structure: mosaicLayout, tiles, xyChart dataSets with timeSeriesFilter).
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
(`workloads/preemption.py` `Watcher._finish`: `{"nemoRlGke": "attempt-ended", "cause": ..., "stepsLost": ...}`),
which GKE's logging agent stores as the entry's jsonPayload (a single-line JSON object on stdout).
Log-based rather than a custom metric the watcher writes: the watcher has no Google credentials by
design (infra/watcher_deployment.py), and Cloud Logging already collects its stdout. Only on the real
cloud: that the agent parses the line as documented and the distribution charts render as intended."""
USER_METRIC_PREFIX = "logging.googleapis.com/user/"
GKE_NODE_NAME_CLUSTER_CHARS = 20
"""How much of the cluster name GKE keeps in node VM names (unverified, see the module doc)."""


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


def attempt_log_filter(cluster_name: str, namespace: str) -> str:
    """The watcher's `attempt-ended` lines in Cloud Logging (logging query language)."""
    return " AND ".join(
        [
            'resource.type="k8s_container"',
            f"resource.labels.cluster_name={_q(cluster_name)}",
            f"resource.labels.namespace_name={_q(namespace)}",
            f"resource.labels.container_name={_q(PREEMPTION_WATCHER_CONTAINER)}",
            'jsonPayload.nemoRlGke="attempt-ended"',
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
    attempts_metric: Optional[str] = None,
    steps_lost_metric: Optional[str] = None,
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
        *(
            [
                _chart(
                    "Training attempts ended, by how (per hour; the preemption watcher's log)",
                    [
                        (
                            _series(
                                f"{USER_METRIC_PREFIX}{attempts_metric}",
                                container,
                                mean("3600s", ['metric.label."cause"'], "ALIGN_SUM", "REDUCE_SUM"),
                            ),
                            "STACKED_BAR",
                            "${metric.labels.cause}",
                        )
                    ],
                    "attempts",
                ),
                _chart(
                    "Steps lost per ended attempt (redone from the last complete step_N)",
                    [
                        (
                            _series(
                                f"{USER_METRIC_PREFIX}{steps_lost_metric}",
                                container,
                                mean("3600s", ['metric.label."cause"'], "ALIGN_MEAN", "REDUCE_MEAN"),
                            ),
                            "STACKED_BAR",
                            "${metric.labels.cause}",
                        )
                    ],
                    "steps",
                ),
            ]
            if attempts_metric and steps_lost_metric
            else []
        ),
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
                "Checkpoint saves show as write bursts."
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
    """The stack's Cloud Monitoring dashboard and the log-based metric that counts its spot preemptions.

    Outputs: `dashboard_id` (the dashboard's resource id), `display_name`, and `console_url` (the
    project's dashboard list, where it appears under `display_name`).
    """

    dashboard: gcp.monitoring.Dashboard
    preemption_metric: gcp.logging.Metric
    preemption_metric_name: str
    attempts_metric: gcp.logging.Metric
    steps_lost_metric: gcp.logging.Metric
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

        # What each training attempt cost in steps, from the watcher's log (ATTEMPT_METRIC_SOURCE).
        attempt_filter = names.apply(lambda a: attempt_log_filter(a[0], args.ray_namespace))
        cause = [{"key": "cause", "value_type": "STRING", "description": "How the attempt ended (workloads/ledger.py)"}]
        self.attempts_metric = gcp.logging.Metric(
            f"{name}-attempts",
            name=ctx.name("training-attempts"),
            project=ctx.project,
            description=f"Training attempts of stack {ctx.stack} that ended, by cause (the preemption watcher's log).",
            filter=attempt_filter,
            metric_descriptor={"metric_kind": "DELTA", "value_type": "INT64", "unit": "1", "labels": cause},
            label_extractors={"cause": "EXTRACT(jsonPayload.cause)"},
            opts=child,
        )
        self.steps_lost_metric = gcp.logging.Metric(
            f"{name}-steps-lost",
            name=ctx.name("training-steps-lost"),
            project=ctx.project,
            description=f"Steps each ended training attempt of stack {ctx.stack} lost (ran past its last complete "
            "checkpoint).",
            filter=attempt_filter,
            metric_descriptor={"metric_kind": "DELTA", "value_type": "DISTRIBUTION", "unit": "1", "labels": cause},
            value_extractor="EXTRACT(jsonPayload.stepsLost)",
            label_extractors={"cause": "EXTRACT(jsonPayload.cause)"},
            bucket_options={"linear_buckets": {"num_finite_buckets": 20, "width": 1, "offset": 0}},
            opts=child,
        )

        def document(names: list[Any]) -> str:
            cluster, instance, metric, attempts, steps_lost = names
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
                attempts_metric=attempts,
                steps_lost_metric=steps_lost,
                cluster_location=args.cluster_location,
            )
            return json.dumps(doc, sort_keys=True)

        self.dashboard_json = pulumi.Output.all(
            cluster_name,
            lustre_instance_id,
            self.preemption_metric.name,
            self.attempts_metric.name,
            self.steps_lost_metric.name,
        ).apply(document)
        self.dashboard = gcp.monitoring.Dashboard(
            f"{name}-dashboard",
            project=ctx.project,
            dashboard_json=self.dashboard_json,
            opts=child_options(
                self, opts, depends_on=[self.preemption_metric, self.attempts_metric, self.steps_lost_metric]
            ),
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
