"""The recorded `MonitoringDashboard` the dashboard tests read (tests/test_observability.py,
test_dashboard_document.py, test_log_metrics.py): stand-in components, the dashboard JSON, its charts' filters."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pulumi
from k8s_support import CTX, gpu_pool, record

from infra.log_metrics import ATTEMPT_METRIC_SOURCE, PREEMPTION_METRIC_SOURCE, USER_METRIC_PREFIX
from infra.observability import build_dashboard

CLUSTER = "zz-stack-gke"
LUSTRE_ID = "zz-stack-lustre"
NAMESPACE = "zz-ray-ns"
POOL = gpu_pool("b200", nodes=3)
METRIC_TYPE = re.compile(r'metric\.type="([^"]+)"')


def dashboard():
    def build():
        # Stand-ins with the attributes build_dashboard reads from GkeCluster, Lustre and RayCluster, their
        # Outputs made on the recording thread's event loop (the test thread may have none: another test on
        # this worker may have ended its loop).
        cluster = SimpleNamespace(
            name=pulumi.Output.from_input(CLUSTER), location=CTX.zone, gpu_pool_facts=POOL, node_name_prefix="gke"
        )
        lustre = SimpleNamespace(instance_id=pulumi.Output.from_input(LUSTRE_ID))
        return build_dashboard(CTX, cluster=cluster, lustre=lustre, ray=SimpleNamespace(namespace=NAMESPACE))

    rec = record(build)
    reg = rec.one("gcp:monitoring/dashboard:Dashboard")
    return rec, reg, json.loads(reg.inputs["dashboardJson"])


def chart_filters(doc):
    for tile in doc["mosaicLayout"]["tiles"]:
        chart = tile["widget"].get("xyChart")
        if chart is None:
            continue
        for ds in chart["dataSets"]:
            yield tile["widget"]["title"], ds["timeSeriesQuery"]["timeSeriesFilter"]


def own_metrics(rec) -> dict[str, object]:
    """The log-based metrics the component creates, by metric type, with their source."""
    sources = {
        "monitoring-preemptions": PREEMPTION_METRIC_SOURCE,
        "monitoring-attempts": ATTEMPT_METRIC_SOURCE,
        "monitoring-steps-lost": ATTEMPT_METRIC_SOURCE,
        "monitoring-run-spend": ATTEMPT_METRIC_SOURCE,
        "monitoring-usd-per-step": ATTEMPT_METRIC_SOURCE,
        "monitoring-goodput": ATTEMPT_METRIC_SOURCE,
        **{
            f"monitoring-badput-{bucket}": ATTEMPT_METRIC_SOURCE
            for bucket in (
                "gang-wait",
                "image-pull",
                "gate",
                "startup",
                "steps-lost",
                "checkpoint-save",
                "idle-after-run",
                "scale-down",
            )
        },
    }
    return {
        f"{USER_METRIC_PREFIX}{r.inputs['name']}": sources[r.name] for r in rec.by_type("gcp:logging/metric:Metric")
    }
