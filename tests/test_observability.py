"""MonitoringDashboard: the dashboard and its log-based metrics as resources, matching the provider
schema, and the wired dashboard naming the plan's own cluster and Lustre instance."""

from __future__ import annotations

import pytest
from dashboard_support import dashboard
from provider_schema import check_inputs


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
