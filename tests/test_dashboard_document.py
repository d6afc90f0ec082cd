"""The dashboard document (infra/dashboard_document.py): a valid dashboard JSON, only documented metric
types, every chart filtered to this stack's cluster, pool, Lustre instance and namespace, and every
aggregation one the proto allows."""

from __future__ import annotations

import re

import pytest
from dashboard_support import CLUSTER, LUSTRE_ID, METRIC_TYPE, NAMESPACE, POOL, chart_filters, dashboard, own_metrics
from k8s_support import CTX

from infra.dashboard_document import METRICS, display_name
from infra.log_metrics import USER_METRIC_PREFIX, kebab
from infra.observability import COMPONENT_TYPE


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


# Written down from the reference pages, independently of infra/dashboard_document.py, so a typo in the
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


def test_every_metric_type_is_in_the_documented_allow_list():
    rec, _, doc = dashboard()
    own = own_metrics(rec)
    used = {METRIC_TYPE.search(f["filter"]).group(1) for _, f in chart_filters(doc)}
    assert used - set(DOCUMENTED_METRICS) == set(own) and len(own) == 14
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


# What each aligner and reducer takes and gives (googleapis/googleapis google/monitoring/v3/common.proto,
# `Aggregation.Aligner`, `Aggregation.Reducer`; the dashboard's Aggregation uses the same enums): value
# types in, value type out (None: the input's). Written from the proto, not from infra/dashboard_document.py.
NUMERIC, ANY = {"INT64", "DOUBLE"}, {"INT64", "DOUBLE", "DISTRIBUTION", "BOOL"}
PERCENTILES = ("99", "95", "50", "05")
ALIGNERS = {
    "ALIGN_DELTA": ({"CUMULATIVE", "DELTA"}, NUMERIC | {"DISTRIBUTION"}, None),
    "ALIGN_RATE": ({"CUMULATIVE", "DELTA"}, NUMERIC, "DOUBLE"),
    "ALIGN_MEAN": ({"GAUGE", "DELTA"}, NUMERIC, "DOUBLE"),
    "ALIGN_SUM": ({"GAUGE", "DELTA"}, NUMERIC | {"DISTRIBUTION"}, None),
    "ALIGN_MAX": ({"GAUGE", "DELTA"}, NUMERIC, None),
    **{f"ALIGN_PERCENTILE_{p}": ({"GAUGE", "DELTA"}, {"DISTRIBUTION"}, "DOUBLE") for p in PERCENTILES},
}
REDUCERS = {
    "REDUCE_MEAN": (NUMERIC | {"DISTRIBUTION"}, "DOUBLE"),
    "REDUCE_SUM": (NUMERIC | {"DISTRIBUTION"}, None),
    "REDUCE_MAX": (NUMERIC, None),
    "REDUCE_COUNT": (ANY, "INT64"),
    **{f"REDUCE_PERCENTILE_{p}": (NUMERIC | {"DISTRIBUTION"}, "DOUBLE") for p in PERCENTILES},
}


def aggregated(kind: str, value_type: str, aggregation: dict) -> str:
    """The value type an aggregation gives, or AssertionError naming what the proto does not allow."""
    aligner, reducer = aggregation["perSeriesAligner"], aggregation.get("crossSeriesReducer", "REDUCE_NONE")
    kinds, takes, gives = ALIGNERS[aligner]
    assert kind in kinds and value_type in takes, f"{aligner} does not take a {kind} {value_type} metric"
    value_type = gives or value_type
    if reducer != "REDUCE_NONE":
        takes, gives = REDUCERS[reducer]
        assert value_type in takes, f"{reducer} does not take {value_type}"
        value_type = gives or value_type
    return value_type


@pytest.fixture(scope="module")
def built():
    """One recorded dashboard for the tests below that only read it."""
    return dashboard()


def test_every_chart_aggregates_its_metric_as_the_proto_allows_into_a_number_to_plot(built):
    rec, _, doc = built
    own = {
        f"{USER_METRIC_PREFIX}{r.inputs['name']}": r.inputs["metricDescriptor"]
        for r in rec.by_type("gcp:logging/metric:Metric")
    }
    for title, f in chart_filters(doc):
        metric = METRIC_TYPE.search(f["filter"]).group(1)
        # The built-in metrics charted are all numeric (INT64 or DOUBLE on their reference pages).
        kind, value_type = (
            (own[metric]["metricKind"], own[metric]["valueType"]) if metric in own else (METRICS[metric].kind, "DOUBLE")
        )
        value_type = aggregated(kind, value_type, f["aggregation"])
        if "secondaryAggregation" in f:
            value_type = aggregated("GAUGE", value_type, f["secondaryAggregation"])
        assert value_type in NUMERIC, f"{title}: plots a {value_type}, not a number"
    # A distribution's mean takes ALIGN_DELTA then REDUCE_MEAN: ALIGN_MEAN is for numeric values only.
    with pytest.raises(AssertionError, match="ALIGN_MEAN does not take a DELTA DISTRIBUTION"):
        aggregated("DELTA", "DISTRIBUTION", {"perSeriesAligner": "ALIGN_MEAN", "crossSeriesReducer": "REDUCE_MEAN"})
    assert aggregated("DELTA", "DISTRIBUTION", {"perSeriesAligner": "ALIGN_DELTA"}) == "DISTRIBUTION"


def test_the_spend_and_usd_per_step_charts_show_the_mean_of_their_distribution_per_hour(built):
    rec, _, doc = built
    names = {r.name: f"{USER_METRIC_PREFIX}{r.inputs['name']}" for r in rec.by_type("gcp:logging/metric:Metric")}
    by_metric = {METRIC_TYPE.search(f["filter"]).group(1): (title, f) for title, f in chart_filters(doc)}
    mean = {"alignmentPeriod": "3600s", "perSeriesAligner": "ALIGN_DELTA", "crossSeriesReducer": "REDUCE_MEAN"}
    spend_title, spend = by_metric[names["monitoring-run-spend"]]
    per_step_title, per_step = by_metric[names["monitoring-usd-per-step"]]
    lost_title, lost = by_metric[names["monitoring-steps-lost"]]
    assert spend_title.startswith("Spend of the run so far, USD") and spend["aggregation"] == mean
    assert per_step_title.startswith("$ per training step") and per_step["aggregation"] == mean
    assert lost_title.startswith("Steps lost") and lost["aggregation"] == {
        **mean,
        "groupByFields": ['metric.label."cause"'],
    }


def test_the_goodput_chart_and_the_badput_chart_stack_the_mean_dollars_of_each_bucket_per_hour(built):
    rec, _, doc = built
    names = {r.name: f"{USER_METRIC_PREFIX}{r.inputs['name']}" for r in rec.by_type("gcp:logging/metric:Metric")}
    mean = {"alignmentPeriod": "3600s", "perSeriesAligner": "ALIGN_DELTA", "crossSeriesReducer": "REDUCE_MEAN"}
    charts = {
        t["widget"]["title"]: t["widget"]["xyChart"] for t in doc["mosaicLayout"]["tiles"] if "xyChart" in t["widget"]
    }
    (goodput,) = [c for title, c in charts.items() if title.startswith("Goodput per ended attempt")]
    (badput,) = [c for title, c in charts.items() if title.startswith("Badput per ended attempt by bucket, USD")]
    (only,) = goodput["dataSets"]
    assert only["timeSeriesQuery"]["timeSeriesFilter"]["aggregation"] == mean
    assert (
        METRIC_TYPE.search(only["timeSeriesQuery"]["timeSeriesFilter"]["filter"]).group(1)
        == names["monitoring-goodput"]
    )
    # One stacked series per badput bucket of workloads/goodput.py (all but the kept steps), named by it.
    buckets = ["gangWait", "imagePull", "gate", "startup", "stepsLost", "checkpointSave", "idleAfterRun", "scaleDown"]
    assert [ds["legendTemplate"] for ds in badput["dataSets"]] == buckets
    for bucket, ds in zip(buckets, badput["dataSets"], strict=True):
        f = ds["timeSeriesQuery"]["timeSeriesFilter"]
        assert ds["plotType"] == "STACKED_BAR" and f["aggregation"] == mean, bucket
        assert METRIC_TYPE.search(f["filter"]).group(1) == names[f"monitoring-badput-{kebab(bucket)}"], bucket
