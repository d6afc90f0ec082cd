"""The run's plan-time values for its owner (infra/run_plan.py): what the gang wait gets in the watcher's
run.json, from the committed ladder stack's plan and from one-rung stacks built from their config."""

from __future__ import annotations

import json

import pytest
from conftest import stack_plan

from infra.config import GpuPoolConfig
from infra.placement import gpu_nodes_autoscaled, gpu_pool_facts
from infra.run_plan import run_plan_for_stack
from infra.stack_context import StackContext
from jobctl.stack import load_stack
from workloads.gang_wait import KEEP_WHY
from workloads.run_owner import RunPlan


def run_json(plan) -> dict:
    (cm,) = [r for r in plan.by_type("kubernetes:core/v1:ConfigMap") if r.name == "preemption-watcher-code"]
    return json.loads(cm.inputs["data"]["run.json"])


def test_the_ladder_stacks_run_json_carries_the_gang_wait_with_its_pools_rungs_and_ray_cluster():
    plan = stack_plan("b200-ladder")
    run = run_json(plan)
    assert run["node_count"] == 8 and run["gang_max_wait_minutes"] == 90
    assert run["gang_on_timeout"] == "releaseWorkers", "the ladder's pools are autoscaled from 0"
    # The pools as the plan creates them, in ladder order (a JSON object would sort them by name).
    pools = {r.inputs["name"] for r in plan.by_type("gcp:container/nodePool:NodePool")}
    assert run["gang_rungs"] == [
        ["b200-ladder-gpu-spot", "spot"],
        ["b200-ladder-gpu-flex", "flexStart"],
        ["b200-ladder-gpu-ondemand", "onDemand"],
    ]
    assert {pool for pool, _ in run["gang_rungs"]} <= pools
    assert run["gang_default_rung"] is None
    # The RayCluster the gang wait reads and releases is the Ray release's, in its namespace.
    release = plan.one("kubernetes:helm.sh/v3:Release")
    assert (run["ray_cluster"], run["ray_namespace"]) == (release.inputs["name"], release.inputs["namespace"])
    assert run["ray_worker_group"] == plan.outputs["rayWorkerGroup"] == release.inputs["values"]["worker"]["groupName"]
    assert RunPlan.from_dict(run).gang_wait and RunPlan.from_dict(run).gang_rungs[0] == ("b200-ladder-gpu-spot", "spot")


@pytest.mark.parametrize("stack", ["dev", "b200", "h200", "autopilot"])
def test_a_stack_without_gpu_pool_capacity_has_no_gang_wait(stack):
    run = RunPlan.from_dict(run_json(stack_plan(stack)))
    assert run.gang_max_wait_minutes is None and not run.gang_wait and run.ray_cluster is None


def one_rung(stack: str, capacity: dict):
    cfg = load_stack(stack).config
    pool = GpuPoolConfig.model_validate({"nodeCount": cfg.gpu_pool.node_count, "capacity": capacity})
    cfg = cfg.model_copy(update={"gpu_pool": pool})
    ray = type("Ray", (), {"cluster_name": "nemo-rl", "namespace": "nemo-rl", "worker_group": "gpu"})()
    facts = gpu_pool_facts(StackContext.from_config(stack, cfg), cfg)
    return cfg, run_plan_for_stack(stack, cfg, facts, None, ray)


@pytest.mark.parametrize(
    ("stack", "capacity", "on_timeout", "why"),
    [
        # A flex-start pool is autoscaled from 0: releasing the workers gives its nodes back.
        ("b200", {"ladder": ["flexStart"], "maxWaitMinutes": 30}, "releaseWorkers", KEEP_WHY),
        # A one-rung spot pool autoscales from 0 too: releasing the workers gives its nodes back.
        ("b200", {"ladder": ["spot"], "maxWaitMinutes": 30}, "releaseWorkers", KEEP_WHY),
        ("b200", {"ladder": [{"reservation": "r"}], "maxWaitMinutes": 30}, "releaseWorkers", KEEP_WHY),
        ("b200", {"ladder": ["onDemand"], "maxWaitMinutes": 30, "onTimeout": "keep"}, "keep", KEEP_WHY),
        # Autopilot makes and removes nodes for the pods.
        ("autopilot", {"ladder": ["spot"], "maxWaitMinutes": 30}, "releaseWorkers", KEEP_WHY),
    ],
)
def test_a_one_rung_stack_waits_for_its_gang_within_max_wait_minutes_and_releases_unless_told_to_keep(
    stack, capacity, on_timeout, why
):
    cfg, run = one_rung(stack, capacity)
    assert (run.gang_max_wait_minutes, run.gang_on_timeout, run.gang_kept_why) == (30, on_timeout, why)
    # No pool -> rung map: every GPU node is of the one rung (Autopilot names its pools itself).
    assert run.gang_rungs == () and run.gang_default_rung == cfg.gpu_pool.ladder[0].label
    assert run.gang_wait and run.node_count == cfg.gpu_pool.node_count


@pytest.mark.parametrize("rung", ["spot", "flexStart", "onDemand", {"reservation": "r"}])
def test_the_gpu_nodes_count_as_autoscaled_exactly_when_the_one_pool_is_built_with_an_autoscaled_range(rung):
    from infra.cluster import provisioning_settings

    cfg, _ = one_rung("b200", {"ladder": [rung]})
    # The one pool is built as its rung says (not as the default `provisioning`, spot).
    assert (cfg.gpu_pool.provisioning, cfg.gpu_pool.reservation_name) == (
        cfg.gpu_pool.ladder[0].provisioning,
        cfg.gpu_pool.ladder[0].reservation_name,
    )
    pool = provisioning_settings(cfg.gpu_pool)["pool"]
    assert pool["autoscaling"]["total_min_node_count"] == 0 and "node_count" not in pool
    assert gpu_nodes_autoscaled(cfg) is True
    assert all(gpu_nodes_autoscaled(load_stack(s).config) for s in ("b200-ladder", "autopilot"))


def test_the_day_2_cli_plan_has_the_bound_but_no_ray_cluster_so_its_watch_does_not_wait_for_the_gang():
    from jobctl.stack import run_plan

    run = run_plan(load_stack("b200-ladder"))
    assert run.gang_max_wait_minutes == 90 and run.ray_cluster is None and not run.gang_wait


def test_the_ladder_stacks_run_json_carries_each_rungs_node_hour_price_as_the_offline_plan_shows_it():
    from tools.estimates import ladder_plan, stack_config

    plan = stack_plan("b200-ladder")
    run = run_json(plan)
    ladder = ladder_plan(plan, stack_config(plan)).to_json()["rungs"]
    shown = {r["rung"]: r["nodeHour"] for r in ladder}
    assert list(shown) == ["spot", "flexStart", "onDemand"] and all(p > 0 for p in shown.values())
    assert run["rung_node_hour_usd"] == shown
    assert len(set(shown.values())) == 3, "three rungs, three prices: a mixed gang costs in between"
    # With no mix known an attempt is priced at the first rung's: spot.
    assert run["node_hour_usd"] == shown["spot"]


def test_a_ladder_that_starts_on_demand_prices_an_attempt_of_unknown_mix_at_the_on_demand_rate():
    cfg, run = one_rung("b200", {"ladder": ["onDemand", "spot"]})
    assert run.node_hour_usd == run.rung_node_hour_usd["onDemand"] > run.rung_node_hour_usd["spot"]


@pytest.mark.parametrize("stack", ["dev", "b200", "autopilot"])
def test_a_one_rung_stack_has_no_rung_prices_and_prices_every_node_at_its_pools_provisioning(stack):
    from infra.prices import node_hour_price, price_table

    run = RunPlan.from_dict(run_json(stack_plan(stack)))
    cfg = load_stack(stack).config
    assert run.rung_node_hour_usd == {}
    price = node_hour_price(
        price_table(cfg),
        cfg.flavour_spec.machine_type,
        cfg.region,
        cfg.gpu_pool.provisioning,
        autopilot=cfg.cluster.mode == "autopilot",
    )
    assert run.node_hour_usd == round(price.value, 4)


def test_a_one_rung_flex_start_pool_is_priced_at_the_flex_start_price_as_the_same_rung_in_a_ladder():
    _, alone = one_rung("b200", {"ladder": ["flexStart"]})
    _, ladder = one_rung("b200", {"ladder": ["flexStart", "spot"]})
    # data/prices.yaml gpu.a4-highgpu-8g.flexStart in us-east1 (an estimate), not the on-demand 90.216.
    assert alone.node_hour_usd == ladder.node_hour_usd == ladder.rung_node_hour_usd["flexStart"] == 67.662


def test_run_json_says_which_node_hour_prices_are_estimates_and_why():
    run = run_json(stack_plan("b200-ladder"))
    # spot and onDemand in us-east1 are the catalogue's; flexStart is an estimate.
    assert run["node_hour_estimate"].startswith("flexStart: 0.75 x the on-demand price")
    assert "spot:" not in run["node_hour_estimate"] and "onDemand:" not in run["node_hour_estimate"]
    assert run_json(stack_plan("b200"))["node_hour_estimate"] is None, "spot A4 in us-east1 is a sourced price"
    # Autopilot: the europe-west1 A3 Ultra spot price is sourced, its premium is not.
    assert run_json(stack_plan("autopilot"))["node_hour_estimate"] == (
        "spot: Autopilot premium: 0.10 x gpu.a3-ultragpu-8g.spot"
    )
