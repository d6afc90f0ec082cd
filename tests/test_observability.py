"""MonitoringDashboard: a valid dashboard JSON, only documented metric types, and every chart filtered
to this stack's cluster, pool, Lustre instance and namespace (taken from the components)."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pulumi
import pytest
from k8s_support import CTX, gpu_pool, record
from provider_schema import check_inputs

from infra.observability import (
    ATTEMPT_METRIC_SOURCE,
    COMPONENT_TYPE,
    METRICS,
    PREEMPTION_METRIC_SOURCE,
    USER_METRIC_PREFIX,
    build_dashboard,
    display_name,
)

CLUSTER = "zz-stack-gke"
LUSTRE_ID = "zz-stack-lustre"
NAMESPACE = "zz-ray-ns"
POOL = gpu_pool("b200", nodes=3)
METRIC_TYPE = re.compile(r'metric\.type="([^"]+)"')


def dashboard():
    # Stand-ins with the attributes build_dashboard reads from GkeCluster, Lustre and RayCluster.
    cluster = SimpleNamespace(
        name=pulumi.Output.from_input(CLUSTER), location=CTX.zone, gpu_pool_facts=POOL, node_name_prefix="gke"
    )
    lustre = SimpleNamespace(instance_id=pulumi.Output.from_input(LUSTRE_ID))
    ray = SimpleNamespace(namespace=NAMESPACE)
    rec = record(lambda: build_dashboard(CTX, cluster=cluster, lustre=lustre, ray=ray))
    reg = rec.one("gcp:monitoring/dashboard:Dashboard")
    return rec, reg, json.loads(reg.inputs["dashboardJson"])


def chart_filters(doc):
    for tile in doc["mosaicLayout"]["tiles"]:
        chart = tile["widget"].get("xyChart")
        if chart is None:
            continue
        for ds in chart["dataSets"]:
            yield tile["widget"]["title"], ds["timeSeriesQuery"]["timeSeriesFilter"]


def test_the_dashboard_json_has_the_monitoring_api_structure():
    rec, reg, doc = dashboard()
    assert reg.parent == rec.by_type(COMPONENT_TYPE)[0].urn and reg.inputs["project"] == CTX.project
    assert doc["displayName"] == display_name(CTX.stack)
    layout = doc["mosaicLayout"]
    assert layout["columns"] == 48 and len(layout["tiles"]) >= 7
    for tile in layout["tiles"]:
        assert {"xPos", "yPos", "width", "height", "widget"} <= set(tile)
        assert 0 <= tile["xPos"] and tile["xPos"] + tile["width"] <= 48
        widget = tile["widget"]
        assert widget["title"] and (set(widget) - {"title"}) in ({"xyChart"}, {"text"}), widget.keys()
        if "xyChart" in widget:
            assert widget["xyChart"]["dataSets"]
            for ds in widget["xyChart"]["dataSets"]:
                f = ds["timeSeriesQuery"]["timeSeriesFilter"]
                assert len(METRIC_TYPE.findall(f["filter"])) == 1, f["filter"]
                assert re.fullmatch(r"\d+s", f["aggregation"]["alignmentPeriod"])
                assert f["aggregation"]["perSeriesAligner"].startswith("ALIGN_")
    # No two tiles overlap.
    cells = set()
    for t in layout["tiles"]:
        area = {
            (x, y) for x in range(t["xPos"], t["xPos"] + t["width"]) for y in range(t["yPos"], t["yPos"] + t["height"])
        }
        assert not cells & area
        cells |= area


# Field names of the google.monitoring.dashboard.v1 messages the dashboard uses (REST reference
# https://cloud.google.com/monitoring/api/ref_v3/rest/v1/projects.dashboards and the client libraries'
# XyChart / DataSet / Threshold types); nested message fields map to their message name.
DASHBOARD_FIELDS: dict[str, dict[str, str | None]] = {
    "Dashboard": {"name": None, "displayName": None, "etag": None, "labels": None, "mosaicLayout": "MosaicLayout"},
    "MosaicLayout": {"columns": None, "tiles": "Tile"},
    "Tile": {"xPos": None, "yPos": None, "width": None, "height": None, "widget": "Widget"},
    "Widget": {"title": None, "xyChart": "XyChart", "text": "Text"},
    "XyChart": {
        "dataSets": "DataSet",
        "timeshiftDuration": None,
        "thresholds": "Threshold",
        "xAxis": "Axis",
        "yAxis": "Axis",
        "chartOptions": None,
    },
    "DataSet": {
        "timeSeriesQuery": "TimeSeriesQuery",
        "plotType": None,
        "legendTemplate": None,
        "minAlignmentPeriod": None,
        "targetAxis": None,
    },
    "TimeSeriesQuery": {
        "timeSeriesFilter": "TimeSeriesFilter",
        "timeSeriesFilterRatio": None,
        "timeSeriesQueryLanguage": None,
        "prometheusQuery": None,
        "unitOverride": None,
        "outputFullDuration": None,
    },
    "TimeSeriesFilter": {
        "filter": None,
        "aggregation": "Aggregation",
        "secondaryAggregation": "Aggregation",
        "pickTimeSeriesFilter": None,
        "statisticalTimeSeriesFilter": None,
    },
    "Aggregation": {
        "alignmentPeriod": None,
        "perSeriesAligner": None,
        "crossSeriesReducer": None,
        "groupByFields": None,
    },
    "Threshold": {"label": None, "value": None, "color": None, "direction": None, "targetAxis": None},
    "Axis": {"label": None, "scale": None},
    "Text": {"content": None, "format": None, "style": None},
}


def unknown_fields(value, message: str, path: str = "") -> list[str]:
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in unknown_fields(v, message, f"{path}[{i}]")]
    fields = DASHBOARD_FIELDS[message]
    problems = [f"{path}.{k}: not a field of {message}" for k in value if k not in fields]
    for k, v in value.items():
        if fields.get(k):
            problems += unknown_fields(v, fields[k], f"{path}.{k}")
    return problems


def test_every_key_of_the_dashboard_json_is_a_field_of_the_dashboards_api():
    _, _, doc = dashboard()
    assert unknown_fields(doc, "Dashboard") == []
    doc["mosaicLayout"]["tiles"][1]["widget"]["xyChart"]["dataSets"][0]["legendTemplat"] = "x"
    assert unknown_fields(doc, "Dashboard") == [
        ".mosaicLayout.tiles[1].widget.xyChart.dataSets[0].legendTemplat: not a field of DataSet"
    ]


# Written down from the reference pages, independently of infra/observability.py, so a typo in the
# code's allow-list fails here: metric type -> (monitored resource, metric kind).
# https://cloud.google.com/monitoring/api/metrics_gcp_i_o (lustre), .../metrics_kubernetes (kubernetes.io).
DOCUMENTED_METRICS = {
    "lustre.googleapis.com/instance/read_bytes_total": ("lustre.googleapis.com/Instance", "DELTA"),
    "lustre.googleapis.com/instance/write_bytes_total": ("lustre.googleapis.com/Instance", "DELTA"),
    "lustre.googleapis.com/instance/capacity_bytes": ("lustre.googleapis.com/Instance", "GAUGE"),
    "lustre.googleapis.com/instance/free_bytes": ("lustre.googleapis.com/Instance", "GAUGE"),
    "kubernetes.io/node/accelerator/duty_cycle": ("k8s_node", "GAUGE"),
    "kubernetes.io/container/accelerator/duty_cycle": ("k8s_container", "GAUGE"),
    # GKE "Collect and view DCGM metrics" (kubernetes-engine/docs/how-to/dcgm-metrics): DCGM fields in
    # Managed Prometheus, `prometheus.googleapis.com/<field>/gauge` on prometheus_target.
    "prometheus.googleapis.com/DCGM_FI_DEV_GPU_UTIL/gauge": ("prometheus_target", "GAUGE"),
    "prometheus.googleapis.com/DCGM_FI_PROF_PIPE_TENSOR_ACTIVE/gauge": ("prometheus_target", "GAUGE"),
    "prometheus.googleapis.com/DCGM_FI_DEV_FB_USED/gauge": ("prometheus_target", "GAUGE"),
}


def test_the_allow_list_matches_the_metric_reference_pages():
    assert {m: (src.resource_type, src.kind) for m, src in METRICS.items()} == DOCUMENTED_METRICS


def own_metrics(rec) -> dict[str, object]:
    """The log-based metrics the component creates, by metric type, with their source."""
    sources = {
        "monitoring-preemptions": PREEMPTION_METRIC_SOURCE,
        "monitoring-attempts": ATTEMPT_METRIC_SOURCE,
        "monitoring-steps-lost": ATTEMPT_METRIC_SOURCE,
    }
    return {
        f"{USER_METRIC_PREFIX}{r.inputs['name']}": sources[r.name] for r in rec.by_type("gcp:logging/metric:Metric")
    }


def test_every_metric_type_is_in_the_documented_allow_list():
    rec, _, doc = dashboard()
    own = own_metrics(rec)
    used = {METRIC_TYPE.search(f["filter"]).group(1) for _, f in chart_filters(doc)}
    assert used - set(DOCUMENTED_METRICS) == set(own) and len(own) == 3
    for metric, source in {**METRICS, **own}.items():
        assert source.url.startswith("https://cloud.google.com/"), metric
    # Each filter names the monitored resource its metric is written against.
    for _, f in chart_filters(doc):
        metric = METRIC_TYPE.search(f["filter"]).group(1)
        resource = (METRICS.get(metric) or own[metric]).resource_type
        assert f'resource.type="{resource}"' in f["filter"]
    # The tiles the issue asks for are all there.
    for wanted in (
        "read_bytes_total",
        "write_bytes_total",
        "capacity_bytes",
        "accelerator/duty_cycle",
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "DCGM_FI_DEV_FB_USED",
        *own,
    ):
        assert any(wanted in m for m in used), wanted


def test_every_chart_is_filtered_to_this_stacks_names():
    rec, _, doc = dashboard()
    for title, f in chart_filters(doc):
        text = f["filter"]
        if "lustre.googleapis.com" in text:
            assert f'resource.label."instance_id"="{LUSTRE_ID}"' in text and CTX.zone in text, title
        elif "kubernetes.io/container" in text or "training-" in text:
            assert f'"cluster_name"="{CLUSTER}"' in text and f'"namespace_name"="{NAMESPACE}"' in text, title
        elif "prometheus_target" in text:
            assert f'resource.label."cluster"="{CLUSTER}"' in text and "/DCGM_FI_" in text, title
        elif "kubernetes.io/node" in text:
            assert f'"cluster_name"="{CLUSTER}"' in text and f'"location"="{CTX.zone}"' in text, title
        else:
            assert f'resource.label."zone"="{CTX.zone}"' in text, title
    titles = " ".join(t["widget"]["title"] for t in doc["mosaicLayout"]["tiles"])
    assert POOL.pool_name in titles and f"configured: {POOL.node_count}" in titles
    (nodes,) = [
        t["widget"]["xyChart"] for t in doc["mosaicLayout"]["tiles"] if t["widget"]["title"].startswith("Nodes of")
    ]
    assert nodes["thresholds"][0]["value"] == POOL.node_count
    assert (
        nodes["dataSets"][0]["timeSeriesQuery"]["timeSeriesFilter"]["secondaryAggregation"]["crossSeriesReducer"]
        == "REDUCE_COUNT"
    )

    log_filter = next(r for r in rec.by_type("gcp:logging/metric:Metric") if r.name == "monitoring-preemptions").inputs[
        "filter"
    ]
    assert 'protoPayload.methodName="compute.instances.preempted"' in log_filter
    assert f'resource.labels.zone="{CTX.zone}"' in log_filter and f"/instances/gke-{CLUSTER}" in log_filter
    assert f"projects/{CTX.project}/logs/cloudaudit.googleapis.com%2Fsystem_event" in log_filter


def test_the_dashboard_and_the_log_metric_match_the_provider_schema():
    rec, reg, _ = dashboard()
    metrics = {r.name: r for r in rec.by_type("gcp:logging/metric:Metric")}
    metric = metrics["monitoring-preemptions"]
    assert check_inputs(reg.type, reg.inputs) == []
    for each in metrics.values():
        assert check_inputs(each.type, each.inputs) == [], each.name
        assert each.urn in reg.dependencies, each.name
    assert metric.inputs["metricDescriptor"] == {
        "metricKind": "DELTA",
        "valueType": "INT64",
        "unit": "1",
        "labels": [{"key": "instance", "valueType": "STRING", "description": "Preempted VM"}],
    }
    assert metric.urn in reg.dependencies


@pytest.mark.parametrize("stack", ["dev"])
def test_a_wired_dashboard_uses_the_plans_own_names(stack):
    from conftest import stack_plan

    plan = stack_plan(stack)
    dashboards = [r for r in plan.resources if r.type == "gcp:monitoring/dashboard:Dashboard"]
    if not dashboards:
        pytest.skip("the dashboard is not wired into __main__.py yet")
    (cluster,) = [r for r in plan.resources if r.type == "gcp:container/cluster:Cluster"]
    (lustre,) = [r for r in plan.resources if r.type == "gcp:lustre/instance:Instance"]
    text = dashboards[0].inputs["dashboardJson"]
    assert cluster.inputs["name"] in text and lustre.inputs["instanceId"] in text


def test_the_attempt_metrics_count_the_watchers_attempt_lines_and_extract_the_steps_lost():
    # The watcher writes these fields (tests/test_run_owner.py reads its lines back after a preemption).
    rec, _, _ = dashboard()
    metrics = {r.name: r for r in rec.by_type("gcp:logging/metric:Metric")}
    attempts, lost = metrics["monitoring-attempts"].inputs, metrics["monitoring-steps-lost"].inputs
    for m in (attempts, lost):
        assert (
            'jsonPayload.nemoRlGke="attempt-ended"' in m["filter"]
            and 'resource.labels.container_name="watcher"' in m["filter"]
        )
        assert (
            f'resource.labels.cluster_name="{CLUSTER}"' in m["filter"]
            and f'resource.labels.namespace_name="{NAMESPACE}"' in m["filter"]
        )
        assert m["labelExtractors"] == {"cause": "EXTRACT(jsonPayload.cause)"}
    assert attempts["metricDescriptor"]["valueType"] == "INT64"
    assert (
        lost["metricDescriptor"]["valueType"] == "DISTRIBUTION"
        and lost["valueExtractor"] == "EXTRACT(jsonPayload.stepsLost)"
    )
