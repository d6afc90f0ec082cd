"""The run's plan-time values for its owner (infra/run_plan.py): what the gang wait gets in the watcher's
run.json, from the committed ladder stack's plan and from one-rung stacks built from their config; and the one
save period the job's entrypoint, run.json and the plan's estimate all carry."""

from __future__ import annotations

import json
import re

import pytest
from conftest import ALL_STACKS, merged, stack_plan
from conftest import run_plan as conftest_run_plan

from infra.config import GpuPoolConfig
from infra.placement import gpu_pool_facts
from infra.run_plan import derived_save_period, run_plan_for_stack
from infra.stack_context import StackContext
from jobctl.stack import load_stack
from tools.offline_plan import plan_document
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
def test_a_stack_without_gpu_pool_capacity_has_no_gang_wait_but_releases_its_workers_at_the_runs_end(stack):
    plan = stack_plan(stack)
    run = RunPlan.from_dict(run_json(plan))
    assert run.gang_max_wait_minutes is None and not run.gang_wait
    # The release at the run's end patches the same RayCluster the Helm release made, on every stack.
    release = plan.one("kubernetes:helm.sh/v3:Release")
    assert (run.ray_cluster, run.ray_namespace) == (release.inputs["name"], release.inputs["namespace"]), stack
    assert run.ray_worker_group == release.inputs["values"]["worker"]["groupName"], stack
    assert run.release_workers_after_run and run.releases_workers, stack


def test_keeping_the_workers_after_the_run_is_a_stack_setting():
    cfg = load_stack("dev").config
    cfg = cfg.model_copy(update={"recovery": cfg.recovery.model_copy(update={"release_workers_after_run": False})})
    ray = type("Ray", (), {"cluster_name": "nemo-rl", "namespace": "nemo-rl", "worker_group": "gpu"})()
    run = run_plan_for_stack("dev", cfg, gpu_pool_facts(StackContext.from_config("dev", cfg), cfg), None, ray)
    assert run.ray_cluster == "nemo-rl" and not run.releases_workers
    # Without the Ray component (the day-2 CLI on a laptop) there is nothing to patch, whatever the setting.
    assert not run_plan_for_stack(
        "dev", load_stack("dev").config, gpu_pool_facts(StackContext.from_config("dev", cfg), cfg), None
    ).releases_workers


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
def test_every_one_rung_pool_is_built_as_its_rung_says_and_autoscales_from_zero(rung):
    from infra.cluster import provisioning_settings

    cfg, _ = one_rung("b200", {"ladder": [rung]})
    # The one pool is built as its rung says (not as the default `provisioning`, spot).
    assert (cfg.gpu_pool.provisioning, cfg.gpu_pool.reservation_name) == (
        cfg.gpu_pool.ladder[0].provisioning,
        cfg.gpu_pool.ladder[0].reservation_name,
    )
    pool = provisioning_settings(cfg.gpu_pool)["pool"]
    assert pool["autoscaling"]["total_min_node_count"] == 0 and "node_count" not in pool


def test_the_day_2_cli_plan_has_the_bound_but_no_ray_cluster_so_its_watch_does_not_wait_for_the_gang():
    from jobctl.stack import run_plan

    run = run_plan(load_stack("b200-ladder"))
    assert run.gang_max_wait_minutes == 90 and run.ray_cluster is None and not run.gang_wait


def test_the_ladder_stacks_run_json_carries_each_rungs_node_hour_price_as_the_offline_plan_shows_it():
    from tools.estimates import ladder_plan, stack_config

    plan = stack_plan("b200-ladder")
    run = run_json(plan)
    ladder = ladder_plan(plan, stack_config(plan))["rungs"]
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


@pytest.mark.parametrize("stack", ["dev", "b200", "h200", "autopilot", "b200-ladder"])
def test_the_recovery_policy_travels_once_in_run_json_and_the_day_2_watch_gets_the_same(stack):
    from jobctl.stack import run_plan

    loaded = load_stack(stack)
    cfg = loaded.config
    recovery = run_json(stack_plan(stack))["recovery"]
    assert recovery == run_plan(loaded).recovery, "python -m jobctl watch would watch under another policy"
    assert recovery == {
        "check_interval_seconds": cfg.recovery.check_interval_seconds,
        "max_restarts": cfg.recovery.max_restarts,
        "backoff_seconds": cfg.recovery.backoff_seconds,
        "max_backoff_seconds": cfg.recovery.max_backoff_seconds,
        "pool_gpus": cfg.gpu_pool.node_count * cfg.flavour_spec.gpus_per_node,
        "resubmit_missing": cfg.job.submit,
    }


# ----------------------------------------------------------------------------- one save period


def _save_periods(plan) -> tuple[int, int, int]:
    """The save period as the job's entrypoint, the watcher's run.json and the plan's estimate carry it."""
    (cm,) = [r for r in plan.by_type("kubernetes:core/v1:ConfigMap") if r.name == "preemption-watcher-code"]
    entrypoint = json.loads(cm.inputs["data"]["spec.json"])["entrypoint"]
    (in_entrypoint,) = re.findall(r"checkpointing\.save_period=(\d+)", entrypoint)
    return (
        int(in_entrypoint),
        run_json(plan)["save_period"],
        plan_document(plan)["estimates"]["preemption"]["savePeriod"],
    )


@pytest.mark.parametrize(
    "stack, max_lost_minutes",
    [*((s, None) for s in ALL_STACKS), ("dev", 24.0), ("h200", 60.0)],
)
def test_the_entrypoint_the_run_plan_and_the_estimate_save_as_often_and_count_the_checkpoint_write_time(
    stack, max_lost_minutes
):
    from tools import estimates

    if max_lost_minutes is None:
        plan = stack_plan(stack)
    else:
        plan = conftest_run_plan(stack, job=merged(stack, "job", {"maxLostMinutes": max_lost_minutes}))
    cfg = estimates.stack_config(plan)
    assert cfg.job.max_lost_minutes == max_lost_minutes
    # The estimate's own write time (tools/sizing.py, from the planned Lustre instance's size and tier).
    checkpoints = estimates.checkpoint_estimate(plan, cfg, estimates.price_table(cfg))
    write, step = checkpoints.write_seconds, cfg.recipe.step_seconds
    want = derived_save_period(step, write, max_lost_minutes)
    assert _save_periods(plan) == (want, want, want), stack
    if max_lost_minutes is not None:  # chosen where a period that ignored the write time would be longer
        assert derived_save_period(step, 0.0, max_lost_minutes) > want, (stack, max_lost_minutes)


# ----------------------------------------------------------------------------- one run plan, built once

DAY_2_ONLY = ("checkpoint_dir", "ray_namespace", "ray_cluster", "ray_worker_group")
"""What `python -m jobctl` cannot know on a laptop (the checkpoints on Lustre, the in-cluster Kubernetes API)."""


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_the_job_the_watcher_and_the_day_2_cli_carry_the_one_run_plan_the_program_built(stack):
    from jobctl.stack import build_spec, run_plan

    plan = stack_plan(stack)
    run = RunPlan.from_dict(run_json(plan))
    loaded = load_stack(stack)
    day2 = run_plan(loaded)
    assert {k: v for k, v in run.to_dict().items() if k not in DAY_2_ONLY} == {
        k: v for k, v in day2.to_dict().items() if k not in DAY_2_ONLY
    }, f"{stack}: the preemption-watcher-code run.json and `python -m jobctl` disagree on the run plan"
    # The job's entrypoint saves at the run plan's period, and the CLI's job is the deploy's.
    (cm,) = [r for r in plan.by_type("kubernetes:core/v1:ConfigMap") if r.name == "preemption-watcher-code"]
    shipped = json.loads(cm.inputs["data"]["spec.json"])
    assert f"checkpointing.save_period={run.save_period} " in shipped["entrypoint"] + " ", stack
    assert build_spec(loaded).entrypoint == shipped["entrypoint"], stack
    # The submission gates and waits for the gang exactly as the run plan says.
    submission = plan.one("pulumi-python:dynamic/nemo-rl-gke:JobSubmission", "training-job-submission")
    assert (submission.inputs["gate_policy"], submission.inputs["gate_plan"]) == (run.gate_policy, run.gate_plan)
    timeout = run.gang_max_wait_minutes * 60 if run.gang_max_wait_minutes is not None else None
    assert submission.inputs.get("ray_cluster_timeout") == timeout, f"{stack}: training-job-submission"
    # The RayCluster the run plan names is the one the Ray component installs (`ray_target_for`, built once).
    if run.ray_cluster is not None:
        assert (run.ray_cluster, run.ray_namespace, run.ray_worker_group) == (
            plan.outputs["rayClusterName"],
            plan.outputs["rayNamespace"],
            plan.outputs["rayWorkerGroup"],
        )


RUN_PLAN_BUILDERS = {
    "run_plan_for_stack": {"__main__.py", "jobctl/stack.py"},
    # Each fact of the run plan, computed only where the plan is built. The offline plan's estimate
    # (tools/estimates.py) works from a plan, not the program, and is held equal above and in
    # test_the_entrypoint_the_run_plan_and_the_estimate_save_as_often_and_count_the_checkpoint_write_time.
    "save_period_for": {"infra/run_plan.py", "tools/estimates.py"},
    "gang_wait_minutes": {"infra/run_plan.py"},
    "gang_values": {"infra/run_plan.py"},
    "recovery_values": {"infra/run_plan.py"},
    "node_hour_usd": {"infra/run_plan.py"},
    "rung_node_hour_usd": {"infra/run_plan.py"},
    "node_hour_estimate": {"infra/run_plan.py"},
    "checkpoint_write_seconds_for": {"infra/run_plan.py"},
    "ray_target_for": {"__main__.py"},
}
"""Function -> the only modules that may call it (infra/, jobctl/, tools/ and `__main__.py`)."""


def test_no_consumer_computes_a_fact_of_the_run_plan_on_its_own():
    import ast

    from conftest import ROOT

    files = [ROOT / "__main__.py", *(p for d in ("infra", "jobctl", "tools") for p in (ROOT / d).rglob("*.py"))]
    calls: dict[str, set[str]] = {name: set() for name in RUN_PLAN_BUILDERS}
    config_gate_reads = set()
    for path in files:
        rel = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "id", None) or getattr(node.func, "attr", None)
                if name in calls:
                    calls[name].add(rel)
            # `job.gate` is read once, into the run plan (the config's property is defined, not read, there).
            if isinstance(node, ast.Attribute) and node.attr == "gate_policy" and rel != "infra/run_plan.py":
                if (
                    isinstance(node.value, ast.Attribute)
                    and node.value.attr in ("config", "cfg")
                    or (isinstance(node.value, ast.Name) and node.value.id == "cfg")
                ):
                    config_gate_reads.add(rel)
    strays = {name: sorted(where - RUN_PLAN_BUILDERS[name]) for name, where in calls.items()}
    assert {k: v for k, v in strays.items() if v} == {}, "a consumer computes a run plan fact instead of taking it"
    assert calls["run_plan_for_stack"] == RUN_PLAN_BUILDERS["run_plan_for_stack"], "the program builds one run plan"
    assert config_gate_reads == set(), "job.gate read outside the run plan"
