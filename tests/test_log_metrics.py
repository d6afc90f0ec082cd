"""The log-based metrics (infra/log_metrics.py) over the preemption watcher's real `attempt-ended` line:
each filter counts it, each extractor reads the number the ledger wrote."""

from __future__ import annotations

import json
import re

import pytest
from dashboard_support import CLUSTER, NAMESPACE, dashboard

from infra.naming import PREEMPTION_WATCHER_CONTAINER


@pytest.fixture(scope="module")
def built():
    """One recorded dashboard for the tests below that only read it."""
    return dashboard()


START_MS = 1_700_000_000_000
PRICE = 36.0  # USD per node-hour: one node spends $10 in 1000 s and $72 in 2 hours
STEP_S = 200.0  # the plan's step time: the 3 kept steps are 600 s of the attempt's job


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
    plan = RunPlan(checkpoint_dir=str(tmp_path / "ckpt"), node_count=1, node_hour_usd=price, step_seconds=STEP_S)
    watcher = Watcher(client, spec, RecoveryPolicy(), clock=lambda: start + 1100, run=plan, ledger=ledger)
    watcher.step()
    (line,) = [json.loads(note) for note in watcher.notes if note.startswith("{")]
    return line


def field_of(payload: dict, path: str):
    """The value at a dotted jsonPayload path (`badputUsd.gate`), None where a level is missing or null."""
    for key in path.split("."):
        payload = payload.get(key) if isinstance(payload, dict) else None
    return payload


def counts(log_filter: str, payload: dict) -> bool:
    """Whether an entry with this jsonPayload passes the filter's jsonPayload clauses (`=` a JSON literal,
    `>=` a number); the resource clauses are checked by the tests above."""
    for clause in log_filter.split(" AND "):
        m = re.fullmatch(r"jsonPayload\.([\w.]+)(>=|=)(.+)", clause)
        if not m:
            continue
        field, op, value = m.groups()
        got = field_of(payload, field)
        if op == "=" and got != json.loads(value):
            return False
        if op == ">=" and not (isinstance(got, (int, float)) and got >= float(value)):
            return False
    return True


EXTRACT = re.compile(r"EXTRACT\(jsonPayload\.([\w.]+)\)")


def test_the_attempt_metrics_extract_from_the_watchers_real_line_its_steps_lost_spend_goodput_and_badput(
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
        # Paid: 1800 s from attempt 1's end to this job's start, the 1000 s job, 100 s kept after it; kept
        # steps 3 x 200 s: 600 / 2900 of the paid time. Badput at $36 per node-hour: the wait $18, the job's
        # 400 s that are not steps $4 (`startup`), the 100 s after it $1.
        "monitoring-goodput": ("DISTRIBUTION", 0.2069),
        "monitoring-badput-gang-wait": ("DISTRIBUTION", 18.0),
        "monitoring-badput-image-pull": ("DISTRIBUTION", 0.0),
        "monitoring-badput-gate": ("DISTRIBUTION", 0.0),
        "monitoring-badput-startup": ("DISTRIBUTION", 4.0),
        "monitoring-badput-steps-lost": ("DISTRIBUTION", 0.0),
        "monitoring-badput-checkpoint-save": ("DISTRIBUTION", 0.0),
        "monitoring-badput-idle-after-run": ("DISTRIBUTION", 1.0),
        "monitoring-badput-scale-down": ("DISTRIBUTION", 0.0),  # not released: no scale-down delay yet
    }
    assert set(expected) == set(metrics) - {"monitoring-preemptions"}
    for name, (value_type, value) in expected.items():
        m = metrics[name]
        assert m["metricDescriptor"]["valueType"] == value_type and m["metricDescriptor"]["metricKind"] == "DELTA", name
        assert 'jsonPayload.nemoRlGke="attempt-ended"' in m["filter"], name
        assert f'resource.labels.container_name="{PREEMPTION_WATCHER_CONTAINER}"' in m["filter"], name
        assert f'resource.labels.cluster_name="{CLUSTER}"' in m["filter"], name
        assert f'resource.labels.namespace_name="{NAMESPACE}"' in m["filter"], name
        assert counts(m["filter"], line), f"{name}: its filter does not count the watcher's line {line}"
        for label, extractor in (m.get("labelExtractors") or {}).items():
            assert field_of(line, EXTRACT.fullmatch(extractor).group(1)) == "succeeded", (name, label)
        if value is None:
            assert "valueExtractor" not in m and "bucketOptions" not in m, name
            continue
        (field,) = EXTRACT.fullmatch(m["valueExtractor"]).groups()
        got = field_of(line, field)
        assert got == value, f"{name}: extracts jsonPayload.{field} = {got!r}, not {value}"
        assert f"jsonPayload.{field}>=0" in m["filter"], name  # only lines that hold the number
        (buckets,) = m["bucketOptions"].values()
        assert buckets["numFiniteBuckets"] > 0, name
    assert metrics["monitoring-run-spend"]["bucketOptions"] == {
        "exponentialBuckets": {"numFiniteBuckets": 24, "growthFactor": 2, "scale": 1}
    }
    assert metrics["monitoring-steps-lost"]["labelExtractors"] == {"cause": "EXTRACT(jsonPayload.cause)"}
    assert "labelExtractors" not in metrics["monitoring-run-spend"]
    assert metrics["monitoring-goodput"]["bucketOptions"] == {
        "linearBuckets": {"numFiniteBuckets": 20, "width": 0.05, "offset": 0}
    }
    assert metrics["monitoring-goodput"]["metricDescriptor"]["unit"] == "1"
    assert metrics["monitoring-badput-gate"]["metricDescriptor"]["unit"] == "USD"
    assert metrics["monitoring-badput-gate"]["valueExtractor"] == "EXTRACT(jsonPayload.badputUsd.gate)"


def test_without_a_price_the_line_holds_no_money_and_the_money_metrics_count_no_entry_but_goodput_does(built, tmp_path):
    rec, _, _ = built
    metrics = {r.name: r.inputs for r in rec.by_type("gcp:logging/metric:Metric")}
    line = attempt_line(tmp_path, price=None)
    assert (line["spendUsd"], line["runSpendUsd"], line["usdPerStep"], line["stepsDone"]) == (None, None, None, 3)
    assert counts(metrics["monitoring-attempts"]["filter"], line)
    assert counts(metrics["monitoring-steps-lost"]["filter"], line)
    assert not counts(metrics["monitoring-run-spend"]["filter"], line)
    assert not counts(metrics["monitoring-usd-per-step"]["filter"], line)
    # The goodput fraction is node-time over node-time: known without a price; the badput dollars are not.
    assert line["badputUsd"] is None and line["goodputFraction"] == 0.2069
    assert counts(metrics["monitoring-goodput"]["filter"], line)
    for name in [n for n in metrics if n.startswith("monitoring-badput-")]:
        assert not counts(metrics[name]["filter"], line), name
