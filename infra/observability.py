"""A Cloud Monitoring dashboard for one stack, every chart filtered to its objects by names taken from the
components, never retyped; the log-based metrics' filters are infra/log_metrics.py's, the document
infra/dashboard_document.py's.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional, Protocol

import pulumi
import pulumi_gcp as gcp

from infra import log_metrics
from infra.dashboard_document import dashboard_document, display_name
from infra.gke_common import ClusterComponent
from infra.options import child_options
from infra.stack_context import GpuPoolFacts, StackContext

COMPONENT_TYPE = "nemo-rl-gke:infra:MonitoringDashboard"


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
    instance_id: pulumi.Output[str]


class RayNamespace(Protocol):
    namespace: str


def _document_json(args: MonitoringDashboardArgs, suffixes: list[str], names: list[Any]) -> str:
    """The dashboard JSON once the names are known (the cluster, Lustre, the two counters, the distributions)."""
    cluster, instance, metric, attempts, *distributions = names
    by = dict(zip(suffixes, distributions, strict=True))
    doc = dashboard_document(
        stack=args.ctx.stack,
        zone=args.zone,
        cluster_name=cluster,
        gpu_pool=args.gpu_pool,
        # The instance's full resource name ends in the id the metric's label holds.
        lustre_instance_id=str(instance).rsplit("/", 1)[-1],
        ray_namespace=args.ray_namespace,
        preemption_metric=metric,
        attempt_metrics=log_metrics.AttemptMetrics(
            attempts,
            steps_lost=by["steps-lost"],
            run_spend=by["run-spend"],
            usd_per_step=by["usd-per-step"],
            goodput=by["goodput"],
            badput={b: by[f"badput-{log_metrics.kebab(b)}"] for b in log_metrics.BADPUT_BUCKETS},
        ),
        cluster_location=args.cluster_location,
    )
    return json.dumps(doc, sort_keys=True)


class MonitoringDashboard(pulumi.ComponentResource):
    """The stack's dashboard and its log-based metrics: spot preemptions (audit log) and the training attempts
    (the watcher's log). `console_url` is the project's dashboard list, where it appears as `display_name`."""

    dashboard: gcp.monitoring.Dashboard
    preemption_metric: gcp.logging.Metric
    preemption_metric_name: str
    attempts_metric: gcp.logging.Metric
    distribution_metrics: dict[str, gcp.logging.Metric]  # by `Distribution.suffix`
    dashboard_json: pulumi.Output[str]
    dashboard_id: pulumi.Output[str]
    display_name: str
    console_url: str

    def __init__(self, name: str, args: MonitoringDashboardArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__(COMPONENT_TYPE, name, None, opts)
        child = child_options(self, opts)
        names = pulumi.Output.all(
            pulumi.Output.from_input(args.cluster_name), pulumi.Output.from_input(args.lustre_instance_id)
        )
        self._preemptions(name, args, names, child)
        self._attempt_metrics(name, args, names, child)
        self._dashboard(name, args, opts)
        self.register_outputs(
            {
                "dashboardId": self.dashboard_id,
                "displayName": self.display_name,
                "consoleUrl": self.console_url,
                "preemptionMetric": f"{log_metrics.USER_METRIC_PREFIX}{self.preemption_metric_name}",
            }
        )

    def _preemptions(
        self, name: str, args: MonitoringDashboardArgs, names: pulumi.Output, child: pulumi.ResourceOptions
    ) -> None:
        ctx, zone, node_prefix = args.ctx, args.zone, args.node_prefix
        self.preemption_metric_name = ctx.name("gpu-preemptions")
        self.preemption_metric = gcp.logging.Metric(
            f"{name}-preemptions",
            name=self.preemption_metric_name,
            project=ctx.project,
            description=f"Spot preemptions of the GKE nodes of stack {ctx.stack} (Compute Engine system-event "
            "audit log).",
            filter=names.apply(lambda a: log_metrics.preemption_log_filter(ctx.project, zone, a[0], node_prefix)),
            metric_descriptor={
                "metric_kind": "DELTA",
                "value_type": "INT64",
                "unit": "1",
                "labels": [{"key": "instance", "value_type": "STRING", "description": "Preempted VM"}],
            },
            label_extractors={"instance": 'REGEXP_EXTRACT(protoPayload.resourceName, "instances/([^/]+)$")'},
            opts=child,
        )

    def _attempt_metrics(
        self, name: str, args: MonitoringDashboardArgs, names: pulumi.Output, child: pulumi.ResourceOptions
    ) -> None:
        """What each training attempt cost in steps and money, from the watcher's log (ATTEMPT_METRIC_SOURCE)."""
        ctx = args.ctx

        def attempt_filter(number: Optional[str] = None) -> pulumi.Output[str]:
            return names.apply(lambda a: log_metrics.attempt_log_filter(a[0], args.ray_namespace, number))

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

        def distribution(d: log_metrics.Distribution) -> gcp.logging.Metric:
            """A log-based DISTRIBUTION metric of one number of the attempt line (infra/log_metrics.py)."""
            return gcp.logging.Metric(
                f"{name}-{d.suffix}",
                name=ctx.name(f"training-{d.suffix}"),
                project=ctx.project,
                description=d.description,
                filter=attempt_filter(d.field),
                metric_descriptor={
                    "metric_kind": "DELTA",
                    "value_type": "DISTRIBUTION",
                    "unit": d.unit,
                    **({"labels": cause} if d.by_cause else {}),
                },
                value_extractor=f"EXTRACT(jsonPayload.{d.field})",
                label_extractors={"cause": "EXTRACT(jsonPayload.cause)"} if d.by_cause else None,
                bucket_options=d.buckets,
                opts=child,
            )

        self.distribution_metrics = {d.suffix: distribution(d) for d in log_metrics.attempt_distributions(ctx.stack)}

    def _dashboard(self, name: str, args: MonitoringDashboardArgs, opts: Optional[pulumi.ResourceOptions]) -> None:
        ctx = args.ctx
        metrics = [self.preemption_metric, self.attempts_metric, *self.distribution_metrics.values()]
        suffixes = list(self.distribution_metrics)
        self.dashboard_json = pulumi.Output.all(
            args.cluster_name, args.lustre_instance_id, *(m.name for m in metrics)
        ).apply(lambda names: _document_json(args, suffixes, names))
        self.dashboard = gcp.monitoring.Dashboard(
            f"{name}-dashboard",
            project=ctx.project,
            dashboard_json=self.dashboard_json,
            opts=child_options(self, opts, depends_on=metrics),
        )
        self.dashboard_id = self.dashboard.id
        self.display_name = display_name(ctx.stack)
        self.console_url = f"https://console.cloud.google.com/monitoring/dashboards?project={ctx.project}"


def build_dashboard(
    ctx: StackContext,
    *,
    cluster: ClusterComponent,
    lustre: LustreInstance,
    ray: RayNamespace,
    opts: Optional[pulumi.ResourceOptions] = None,
) -> MonitoringDashboard:
    """The stack's `MonitoringDashboard`, named from the components; the GPU VMs and Lustre are in the stack's
    zone, a regional cluster's location is its region."""
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
