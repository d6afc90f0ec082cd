"""The cost estimate: the dated price table, the line items priced from the plan, and the totals."""

import json
import re

import pytest
from conftest import stack_plan

from infra.config import ConfigError, parse
from infra.prices import price_table
from tools import cost, estimates
from tools.offline_plan import render_tree

REQUIRED_REGIONS = ("us-east1", "us-central1", "europe-west1")
HOURS = 730


def cost_of(stack: str, overrides: dict[str, float] | None = None) -> cost.CostEstimate:
    plan = stack_plan(stack)
    if overrides is None:
        return estimates.compute(plan).cost
    return cost.estimate(plan, estimates.stack_config(plan), cost.PriceTable.load(overrides), bucket_gib=0)


def item(est: cost.CostEstimate, prefix: str) -> cost.LineItem:
    (found,) = [i for i in est.items if i.name.startswith(prefix)]
    return found


def test_every_price_section_names_its_source_and_the_date_its_numbers_are_valid_for():
    doc = cost.PriceTable.load().doc
    for name, section in doc["sections"].items():
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", str(section["as_of"])), name
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", str(section["retrieved"])), name
        assert "http" in section["source"], name
        assert section["unit"], name


def test_every_price_is_given_for_us_east1_us_central1_and_europe_west1():
    doc = cost.PriceTable.load().doc
    for section in doc["sections"].values():
        for key, by_region in section["prices"].items():
            assert set(REQUIRED_REGIONS) <= set(by_region), key


def test_the_table_prices_the_gpu_cpu_lustre_gke_and_bucket_keys_the_stacks_use():
    keys = set(cost.PriceTable.load().keys())
    for machine in ("a4-highgpu-8g", "a3-ultragpu-8g"):
        assert {f"gpu.{machine}.spot", f"gpu.{machine}.onDemand"} <= keys
    assert {f"lustre.{tier}.gibMonth" for tier in (125, 250, 500, 1000)} <= keys
    assert {"cpu.n2.vcpuHour", "cpu.n2.gibHour", "gke.clusterHour", "gcs.standard.gibMonth"} <= keys


def test_sourced_prices_are_read_as_is_and_estimates_say_how_they_were_derived():
    table = cost.PriceTable.load()
    h200 = table.get("gpu.a3-ultragpu-8g.onDemand", "europe-west1")
    assert (h200.value, h200.estimate) == (91.9472, None)
    b200 = table.get("gpu.a4-highgpu-8g.flexStart", "us-east1")
    assert b200.value == 67.662 and b200.estimate.startswith("0.75 x the on-demand price")


# skypilot-org/skypilot-catalog catalogs/v8/gcp/vms.csv at 8427bbff988abdd050a9f51addd314ef31cb4e85 (the commit
# data/zones.yaml cites), per node-hour: `B200,8` rows (the a4-highgpu-8g VM row is 0.0) in us-central1-b and
# us-east1-b 90.216 on-demand, 32.6064 spot, europe-west4-b 35.8672 spot; a3-ultragpu-8g VM rows plus `H200,8`
# rows: us-central1-b 12.266 + 74.49392 on-demand, 3.56978 + 37.2472 spot; europe-west1-b spot 2.80778 + 37.896.
CATALOGUE = {
    ("gpu.a4-highgpu-8g.onDemand", "us-central1"): 90.216,
    ("gpu.a4-highgpu-8g.onDemand", "us-east1"): 90.216,
    ("gpu.a4-highgpu-8g.spot", "us-central1"): 32.6064,
    ("gpu.a4-highgpu-8g.spot", "us-east1"): 32.6064,
    ("gpu.a3-ultragpu-8g.onDemand", "us-central1"): 12.266 + 74.49392,
    ("gpu.a3-ultragpu-8g.spot", "us-central1"): 3.56978 + 37.2472,
    ("gpu.a3-ultragpu-8g.spot", "europe-west1"): 2.80778 + 37.896,
}


@pytest.mark.parametrize(("key", "region"), sorted(CATALOGUE))
def test_a_gpu_node_hour_the_catalogue_prices_is_its_figure_and_not_an_estimate(key, region):
    price = cost.PriceTable.load().get(key, region)
    assert price.value == pytest.approx(CATALOGUE[key, region], abs=1e-6) and price.estimate is None, (key, region)


def test_a_region_without_the_machine_type_keeps_an_estimate_that_says_where_it_comes_from():
    table = cost.PriceTable.load()
    a4 = table.get("gpu.a4-highgpu-8g.spot", "europe-west1")
    assert a4.value == 35.8672 and "europe-west4" in a4.estimate and "not offered in europe-west1" in a4.estimate
    a3 = table.get("gpu.a3-ultragpu-8g.onDemand", "us-east1")
    assert a3.value == pytest.approx(86.75992) and "not offered in us-east1" in a3.estimate


def test_a_region_the_table_lacks_uses_the_base_price_times_its_prefix_multiplier_and_is_an_estimate():
    table = cost.PriceTable.load()
    price = table.get("cpu.n2.vcpuHour", "asia-southeast1")
    assert price.value == pytest.approx(0.031611 * 1.15)
    assert "fallback" in price.estimate
    assert table.get("gke.clusterHour", "mars-north1").value == pytest.approx(0.10 * 1.20)


def test_the_b200_stack_costs_eight_a4_nodes_at_both_spot_and_on_demand_prices():
    est = cost_of("b200")
    gpu = item(est, "GPU nodes")
    assert (gpu.detail, gpu.applies) == ("8 x a4-highgpu-8g", "spot")
    assert gpu.spot_per_hour == pytest.approx(8 * 32.6064) == gpu.per_hour
    assert gpu.on_demand_per_hour == pytest.approx(8 * 90.216)
    assert not gpu.estimate, "us-east1's A4 prices are the catalogue's"
    # n2-highmem-16 (16 vCPU, 128 GiB): room for the codelab's 64 GiB head.
    assert item(est, "CPU pool").per_hour == pytest.approx(16 * 0.031611 + 128 * 0.004237)
    assert item(est, "Managed Lustre").per_hour == pytest.approx(36000 * 0.34 / HOURS)
    assert item(est, "GKE").per_hour == pytest.approx(0.10)
    bucket_gib = 72.7e9 * 2 / 1024**3
    assert item(est, "GCS").per_hour == pytest.approx(bucket_gib * 0.020 / HOURS)
    fixed = 16 * 0.031611 + 128 * 0.004237 + 36000 * 0.34 / HOURS + 0.10 + bucket_gib * 0.020 / HOURS
    assert est.spot_per_hour == pytest.approx(8 * 32.6064 + fixed)
    assert est.on_demand_per_hour == pytest.approx(8 * 90.216 + fixed)


def test_the_h200_stack_is_priced_in_europe_west1_with_sourced_a3_ultra_prices():
    est = cost_of("h200")
    assert est.region == "europe-west1"
    gpu = item(est, "GPU nodes")
    assert gpu.spot_per_hour == pytest.approx(2 * 40.70378)
    assert gpu.on_demand_per_hour == pytest.approx(2 * 91.9472)
    assert not gpu.estimate
    assert item(est, "CPU pool").per_hour == pytest.approx(16 * 0.034773 + 128 * 0.004661)
    assert item(est, "Managed Lustre").per_hour == pytest.approx(18000 * 0.374 / HOURS)


def test_the_job_total_is_the_hourly_cost_times_the_recipes_expected_hours():
    est = cost_of("b200")
    assert est.job_hours == 6.0
    assert est.job_total(est.spot_per_hour) == pytest.approx(6 * est.spot_per_hour)
    doc = est.to_json()
    assert doc["job"]["onDemand"] == pytest.approx(round(6 * est.on_demand_per_hour, 2))
    assert doc["perDay"]["spot"] == pytest.approx(round(24 * est.spot_per_hour, 2))


def test_overriding_max_num_steps_scales_the_expected_hours():
    plan = stack_plan("b200")
    cfg = estimates.stack_config(plan).model_copy(
        update={"job": estimates.stack_config(plan).job.model_copy(update={"max_num_steps": 40})}
    )
    hours, basis = cost.job_hours(cfg)
    assert hours == 12.0 and "scaled to 40 steps" in basis


def test_a_price_override_replaces_the_table_price_and_is_flagged():
    est = cost_of("b200", overrides={"gpu.a4-highgpu-8g.spot": 40.0})
    gpu = item(est, "GPU nodes")
    assert gpu.spot_per_hour == pytest.approx(8 * 40.0) and gpu.overridden
    assert gpu.on_demand_per_hour == pytest.approx(8 * 90.216)


def test_an_override_of_a_price_the_table_does_not_have_is_a_config_error():
    cfg = parse({"project": "my-gcp-project", "cost": {"priceOverrides": {"gpu.a4.spot": 40}}}, "dev")
    with pytest.raises(ConfigError) as err:
        price_table(cfg)
    assert str(err.value).startswith("nemo-rl-gke:cost.priceOverrides: unknown price key(s) gpu.a4.spot; allowed: ")


def test_the_plan_refuses_an_unknown_price_key_in_one_line_before_printing(tmp_path, capsys, monkeypatch):
    import shutil

    from tools import offline_plan

    shutil.copy(offline_plan.ROOT / "Pulumi.dev.yaml", tmp_path / "Pulumi.dev.yaml")
    with open(tmp_path / "Pulumi.dev.yaml", "a") as f:
        f.write("  nemo-rl-gke:cost:\n    priceOverrides:\n      gpu.a4.spot: 40\n")
    monkeypatch.setattr(offline_plan, "stack_path", lambda stack, root: tmp_path / f"Pulumi.{stack}.yaml")
    assert offline_plan.main(["--stack", "dev", "--json"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1
    assert err.startswith("error: nemo-rl-gke:cost.priceOverrides: unknown price key(s) gpu.a4.spot")


def test_cost_config_defaults_leave_the_estimates_to_the_table():
    cfg = parse({"project": "my-gcp-project"}, "dev")
    assert cfg.cost.price_overrides == {} and cfg.cost.bucket_gib is None
    assert cfg.cost.checkpoint_write_target_seconds == 300


@pytest.mark.parametrize("stack", ["b200", "h200"])
def test_the_plan_text_prints_the_cost_block_after_the_summary(stack):
    text = render_tree(stack_plan(stack))
    summary_at, cost_at, outputs_at = text.index("GPU nodes:"), text.index("\nCost ("), text.index("\nOutputs:")
    assert summary_at < cost_at < outputs_at
    block = text[cost_at:outputs_at]
    assert "spot (applies)" in block and "on-demand" in block and "per day" in block and "job, " in block
    assert "prices as of:" in block


def test_plan_json_adds_the_estimates_under_their_own_key_and_keeps_the_others(capsys):
    from tools import offline_plan

    code = offline_plan.main(["--stack", "dev", "--json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc = json.loads(out)
    assert list(doc) == [
        "project",
        "stack",
        "resources",
        "outputs",
        "estimates",
        "goodput",
        "versionMatrix",
        "sizeLadder",
    ]
    assert set(doc["estimates"]) == {
        "cost",
        "checkpoints",
        "deployTime",
        "workerFit",
        "acceptanceGate",
        "firstRun",
        "preemption",
    }
    loss = doc["estimates"]["preemption"]
    assert (loss["savePeriod"], loss["stepMinutes"], loss["budgetUsd"]) == (1, 3.0, None)
    assert (loss["expectedLossMinutes"], loss["worstLossMinutes"]) == (1.5, 3.0)  # + a 2.7 s write, rounded
    assert doc["estimates"]["cost"]["perHour"]["spot"] < doc["estimates"]["cost"]["perHour"]["onDemand"]


# ---------------------------------------------------------------- Autopilot


def test_autopilot_gpu_pods_are_priced_as_whole_nodes_plus_the_autopilot_premium_at_spot_prices():
    est = cost_of("autopilot")
    table = cost.PriceTable.load()
    gpu = item(est, "GPU nodes")
    price = {
        key: table.get(key, "europe-west1").value
        for key in (
            "gpu.a3-ultragpu-8g.spot",
            "autopilot.a3-ultragpu-8g.premium.spot",
            "gpu.a3-ultragpu-8g.onDemand",
            "autopilot.a3-ultragpu-8g.premium.onDemand",
        )
    }
    assert gpu.detail == "2 x a3-ultragpu-8g + Autopilot premium" and gpu.applies == "spot"
    assert gpu.spot_per_hour == pytest.approx(
        2 * (price["gpu.a3-ultragpu-8g.spot"] + price["autopilot.a3-ultragpu-8g.premium.spot"])
    )
    assert gpu.on_demand_per_hour == pytest.approx(
        2 * (price["gpu.a3-ultragpu-8g.onDemand"] + price["autopilot.a3-ultragpu-8g.premium.onDemand"])
    )
    assert gpu.spot_per_hour > 2 * price["gpu.a3-ultragpu-8g.spot"], "the premium must be on top of the node price"
    assert est.sources["autopilot_gpu_premium"]["asOf"] == "2026-12-02"
    assert not [i for i in est.items if i.name.startswith("CPU pool")], "Autopilot has no CPU pool to price"


def test_the_autopilot_head_is_priced_per_requested_vcpu_and_gib_of_the_general_purpose_class():
    est = cost_of("autopilot")
    table = cost.PriceTable.load()
    head = item(est, "CPU pods: Ray head")
    vcpu, gib = (
        table.get(k, "europe-west1").value
        for k in ("autopilot.generalPurpose.vcpuHour", "autopilot.generalPurpose.gibHour")
    )
    # The default head asks 8 CPU / 64 GiB (the codelab's); Autopilot raises the CPU to the class's 1:6.5 ratio: 10.
    assert head.per_hour == pytest.approx(10 * vcpu + 64 * gib)


def test_the_autopilot_premium_can_be_overridden_like_any_price():
    base = item(cost_of("autopilot"), "GPU nodes").spot_per_hour
    table_price = cost.PriceTable.load().get("autopilot.a3-ultragpu-8g.premium.spot", "europe-west1").value
    overridden = item(cost_of("autopilot", {"autopilot.a3-ultragpu-8g.premium.spot": 0.0}), "GPU nodes")
    assert overridden.spot_per_hour == pytest.approx(base - 2 * table_price) and overridden.overridden


def test_standard_stacks_use_no_autopilot_price():
    for stack in ("dev", "b200", "h200"):
        assert not [s for s in cost_of(stack).sources if s.startswith("autopilot")], stack
