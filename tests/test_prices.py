"""The one rung-to-price function (infra/prices.py `node_hour_price`): the plan's ladder, run.json (the
ledger), the cost estimate and the capacity finder price every rung kind of every committed stack alike."""

from __future__ import annotations

import json

import pytest
from conftest import run_plan, stack_plan
from doctor_fakes import FakeProject

from infra.config import Provisioning
from infra.placement import capacity_ladder, is_ladder, rung_node_hour
from infra.prices import PRICE_KIND, node_hour_price, price_table
from infra.stack_context import StackContext
from tools import capacity_finder, estimates
from tools.cost import gang_nodes, is_ladder_pool

STACKS = ("dev", "b200", "h200", "autopilot", "b200-ladder")
RUNGS = ("spot", "flexStart", "onDemand", {"reservation": "my-block"})
# Each rung kind alone and first in a ladder, on the dev stack (the committed stacks start on spot).
VARIANTS = [("one", [rung]) for rung in RUNGS] + [
    ("ladder", [rung, "spot" if rung != "spot" else "onDemand"]) for rung in RUNGS
]


def consumers(plan) -> dict[str, float]:
    """The first rung's node-hour price as each consumer has it."""
    cfg = estimates.stack_config(plan)
    first = cfg.gpu_pool.ladder[0]
    (cm,) = [r for r in plan.by_type("kubernetes:core/v1:ConfigMap") if r.name == "preemption-watcher-code"]
    run = json.loads(cm.inputs["data"]["run.json"])
    est = estimates.compute(plan).cost
    (gpu,) = [i for i in est.items if i.name.startswith("GPU nodes")]
    pools = [
        p for p in plan.by_type("gcp:container/nodePool:NodePool") if p.inputs["nodeConfig"].get("guestAccelerators")
    ]
    nodes = gang_nodes(pools) if any(is_ladder_pool(p) for p in pools) else cfg.gpu_pool.node_count
    project = FakeProject()
    zones = {a.zone: a for a in capacity_finder.find(plan.stack, cfg, project.clients(), timeout=5)}
    found = {
        "run.json": run["node_hour_usd"],
        "rung_node_hour": rung_node_hour(price_table(cfg), cfg, first)[1],
        "cost estimate": round(gpu.per_hour / nodes, 4),
        "capacity finder": zones[cfg.zone].rungs[0].gang_hour / cfg.gpu_pool.node_count,
    }
    if is_ladder(cfg):
        found["plan's ladder"] = capacity_ladder(StackContext.from_config(plan.stack, cfg), cfg)[0].node_hour
    return found


def expected(plan) -> float:
    cfg = estimates.stack_config(plan)
    price = node_hour_price(
        price_table(cfg),
        cfg.flavour_spec.machine_type,
        cfg.region,
        cfg.gpu_pool.ladder[0].provisioning,
        autopilot=cfg.cluster.mode == "autopilot",
    )
    return round(price.value, 4)


def agree(plan) -> None:
    want = expected(plan)
    for consumer, value in consumers(plan).items():
        # The finder shows the gang's hourly price to the cent.
        assert value == pytest.approx(want, abs=0.01 if consumer == "capacity finder" else 1e-9), (
            f"{plan.stack}: {consumer} prices the first rung at {value}, not {want}"
        )


@pytest.mark.parametrize("stack", STACKS)
def test_every_committed_stack_is_priced_alike_by_the_plan_run_json_the_cost_estimate_and_the_finder(stack):
    agree(stack_plan(stack))


@pytest.mark.parametrize(("shape", "ladder"), VARIANTS, ids=[f"{s}-{json.dumps(r[0])}" for s, r in VARIANTS])
def test_every_rung_kind_alone_or_first_in_a_ladder_is_priced_alike_by_every_consumer(shape, ladder):
    plan = run_plan("dev", gpuPool={"nodeCount": 2, "capacity": {"ladder": ladder}})
    agree(plan)
    cfg = estimates.stack_config(plan)
    kind = PRICE_KIND[cfg.gpu_pool.ladder[0].provisioning]
    assert expected(plan) == round(price_table(cfg).get(f"gpu.a4-highgpu-8g.{kind}", "us-east1").value, 4)


def test_a_reservation_is_priced_at_the_on_demand_rate_and_flex_start_at_its_own():
    table = price_table(estimates.stack_config(stack_plan("dev")))
    on_demand = table.get("gpu.a4-highgpu-8g.onDemand", "us-east1").value
    assert node_hour_price(table, "a4-highgpu-8g", "us-east1", Provisioning.RESERVATION).value == on_demand
    flex = node_hour_price(table, "a4-highgpu-8g", "us-east1", Provisioning.FLEX_START)
    assert flex.value == 67.662 != on_demand and flex.estimate


def test_on_autopilot_the_premium_is_added_and_its_estimate_said():
    table = price_table(estimates.stack_config(stack_plan("autopilot")))
    price = node_hour_price(table, "a3-ultragpu-8g", "europe-west1", Provisioning.SPOT, autopilot=True)
    node = table.get("gpu.a3-ultragpu-8g.spot", "europe-west1").value
    premium = table.get("autopilot.a3-ultragpu-8g.premium.spot", "europe-west1").value
    assert price.value == pytest.approx(node + premium) and premium > 0
    assert price.estimate == "Autopilot premium: 0.10 x gpu.a3-ultragpu-8g.spot"
