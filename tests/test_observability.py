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

from infra.naming import PREEMPTION_WATCHER_CONTAINER
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
        "monitoring-run-spend": ATTEMPT_METRIC_SOURCE,
        "monitoring-usd-per-step": ATTEMPT_METRIC_SOURCE,
    }
    return {
        f"{USER_METRIC_PREFIX}{r.inputs['name']}": sources[r.name] for r in rec.by_type("gcp:logging/metric:Metric")
    }


def test_every_metric_type_is_in_the_documented_allow_list():
    rec, _, doc = dashboard()
    own = own_metrics(rec)
    used = {METRIC_TYPE.search(f["filter"]).group(1) for _, f in chart_filters(doc)}
    assert used - set(DOCUMENTED_METRICS) == set(own) and len(own) == 5
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


# What each aligner and reducer takes and gives (googleapis/googleapis google/monitoring/v3/common.proto,
# `Aggregation.Aligner`, `Aggregation.Reducer`; the dashboard's Aggregation uses the same enums): value
# types in, value type out (None: the input's). Written from the proto, not from infra/observability.py.
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


START_MS = 1_700_000_000_000
PRICE = 36.0  # USD per node-hour: one node spends $10 in 1000 s and $72 in 2 hours


def attempt_line(tmp_path, price=PRICE) -> dict:
    """The JSON line the real watcher writes when attempt 2 of a run ends: attempt 1 (in the ledger) ran
    2 node-hours; attempt 2 ran 1000 s on one node, from step_2 to step 5 of its log, and succeeded."""
    from gate_support import FakeClient, python_job
    from ray.job_submission import JobDetails

    from workloads.job_spec import META_ATTEMPT
    from workloads.ledger import Attempt, Ledger, LedgerFile
    from workloads.recovery import RecoveryPolicy, Watcher
    from workloads.run_owner import RunPlan

    spec, start = python_job("t-dash", "pass"), START_MS / 1000
    for part in ("weights", "optimizer"):  # a whole save (workloads/checkpoints.py `is_whole`)
        (tmp_path / "ckpt" / "step_2" / "policy" / part).mkdir(parents=True)
        (tmp_path / "ckpt" / "step_2" / "policy" / part / ".metadata").write_bytes(b"m")
    ledger = LedgerFile(tmp_path / "t-dash.ledger.json")
    earlier = Attempt(1, spec.submission_id, start - 9000, 1, end=start - 1800, cause="preemption-like")
    ledger.save(Ledger("t-dash", spec.submission_id, attempts=[earlier]))
    job = JobDetails(
        type="SUBMISSION",
        entrypoint=spec.entrypoint,
        status="SUCCEEDED",
        submission_id=f"{spec.submission_id}-r2",
        start_time=START_MS,
        end_time=START_MS + 1_000_000,
        metadata={**spec.metadata, META_ATTEMPT: "2"},
    )
    client = FakeClient([job], log="\n========================= Step 5/20 =========================\n")
    plan = RunPlan(checkpoint_dir=str(tmp_path / "ckpt"), node_count=1, node_hour_usd=price)
    watcher = Watcher(client, spec, RecoveryPolicy(), clock=lambda: start + 1100, run=plan, ledger=ledger)
    watcher.step()
    (line,) = [json.loads(note) for note in watcher.notes if note.startswith("{")]
    return line


def counts(log_filter: str, payload: dict) -> bool:
    """Whether an entry with this jsonPayload passes the filter's jsonPayload clauses (`=` a JSON literal,
    `>=` a number); the resource clauses are checked by the tests above."""
    for clause in log_filter.split(" AND "):
        m = re.fullmatch(r"jsonPayload\.(\w+)(>=|=)(.+)", clause)
        if not m:
            continue
        field, op, value = m.groups()
        got = payload.get(field)
        if op == "=" and got != json.loads(value):
            return False
        if op == ">=" and not (isinstance(got, (int, float)) and got >= float(value)):
            return False
    return True


EXTRACT = re.compile(r"EXTRACT\(jsonPayload\.(\w+)\)")


def test_the_attempt_metrics_extract_from_the_watchers_real_line_its_steps_lost_run_spend_and_usd_per_step(
    built, tmp_path
):
    rec, _, _ = built
    metrics = {r.name: r.inputs for r in rec.by_type("gcp:logging/metric:Metric")}
    line = attempt_line(tmp_path)
    assert (line["attempt"], line["cause"], line["spendUsd"], line["stepsDone"]) == (2, "succeeded", 10.0, 3)
    # Metric resource -> (value type, the number it extracts from that line).
    expected = {
        "monitoring-attempts": ("INT64", None),
        "monitoring-steps-lost": ("DISTRIBUTION", 0),
        "monitoring-run-spend": ("DISTRIBUTION", 82.0),  # the ledger's sum: $72 + $10, not the attempt's $10
        "monitoring-usd-per-step": ("DISTRIBUTION", 3.3333),  # $10 over the 3 steps it ran (2 -> 5)
    }
    for name, (value_type, value) in expected.items():
        m = metrics[name]
        assert m["metricDescriptor"]["valueType"] == value_type and m["metricDescriptor"]["metricKind"] == "DELTA", name
        assert 'jsonPayload.nemoRlGke="attempt-ended"' in m["filter"], name
        assert f'resource.labels.container_name="{PREEMPTION_WATCHER_CONTAINER}"' in m["filter"], name
        assert f'resource.labels.cluster_name="{CLUSTER}"' in m["filter"], name
        assert f'resource.labels.namespace_name="{NAMESPACE}"' in m["filter"], name
        assert counts(m["filter"], line), f"{name}: its filter does not count the watcher's line {line}"
        for label, extractor in (m.get("labelExtractors") or {}).items():
            assert line[EXTRACT.fullmatch(extractor).group(1)] == "succeeded", (name, label)
        if value is None:
            assert "valueExtractor" not in m and "bucketOptions" not in m, name
            continue
        (field,) = EXTRACT.fullmatch(m["valueExtractor"]).groups()
        assert line[field] == value, f"{name}: extracts jsonPayload.{field} = {line.get(field)!r}, not {value}"
        assert f"jsonPayload.{field}>=0" in m["filter"], name  # only lines that hold the number
        (buckets,) = m["bucketOptions"].values()
        assert buckets["numFiniteBuckets"] > 0, name
    assert metrics["monitoring-run-spend"]["bucketOptions"] == {
        "exponentialBuckets": {"numFiniteBuckets": 24, "growthFactor": 2, "scale": 1}
    }
    assert metrics["monitoring-steps-lost"]["labelExtractors"] == {"cause": "EXTRACT(jsonPayload.cause)"}
    assert "labelExtractors" not in metrics["monitoring-run-spend"]


def test_without_a_price_the_line_holds_no_money_and_the_money_metrics_count_no_entry(built, tmp_path):
    rec, _, _ = built
    metrics = {r.name: r.inputs for r in rec.by_type("gcp:logging/metric:Metric")}
    line = attempt_line(tmp_path, price=None)
    assert (line["spendUsd"], line["runSpendUsd"], line["usdPerStep"], line["stepsDone"]) == (None, None, None, 3)
    assert counts(metrics["monitoring-attempts"]["filter"], line)
    assert counts(metrics["monitoring-steps-lost"]["filter"], line)
    assert not counts(metrics["monitoring-run-spend"]["filter"], line)
    assert not counts(metrics["monitoring-usd-per-step"]["filter"], line)


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
