"""The acceptance gate's plan of a stack: floors from data/acceptance_gate.yaml with their sources, the
Lustre instance's throughput, the pool's shape, and the policy default."""

from __future__ import annotations

import pytest
from conftest import merged, stack_config

from infra.config import namespaced, parse
from infra.flavours import FLAVOURS
from infra.gate_plan import gate_plan_for_stack, gpu_name, load_thresholds, published_value
from infra.placement import gpu_pool_facts
from infra.stack_context import StackContext
from infra.stack_file import load_stack


def plan_of(stack: str, **overrides):
    config, _ = stack_config(stack, **overrides)
    cfg = parse(namespaced(config), stack)
    return cfg, gate_plan_for_stack(cfg, gpu_pool_facts(StackContext.from_config(stack, cfg), cfg))


def test_every_flavour_of_the_catalogue_has_a_floor_with_a_source():
    fabric = load_thresholds()["fabric"]
    assert set(fabric["flavours"]) == set(FLAVOURS)
    for name, entry in fabric["flavours"].items():
        value, estimate = published_value(entry["published_busbw_gbps"])
        assert value > 0 and entry["source"].strip(), name
        assert estimate is None or len(estimate) > 40, f"{name}: an estimate says how it was made"


def test_the_gpu_name_comes_from_the_flavours_accelerator_type():
    assert {f.name: gpu_name(f.accelerator_type) for f in FLAVOURS.values()} == {"b200": "B200", "h200": "H200"}


def test_a_flavour_without_a_published_figure_is_measured_not_enforced(monkeypatch):
    import dataclasses

    from infra import flavours

    b300 = dataclasses.replace(FLAVOURS["b200"], name="b300", accelerator_type="nvidia-b300")
    monkeypatch.setitem(flavours.FLAVOURS, "b300", b300)
    # A multi-node stack: a listed flavour would get a floor. A new flavour has no version-matrix row yet.
    _, plan = plan_of("b200", flavour="b300", allowUntestedVersions=True)
    assert plan.busbw_floor_gbps == 0.0 and plan.gpu_name == "B300" and "measured, not enforced" in plan.busbw_source


def test_a_multi_node_stack_gets_half_of_googles_published_bus_bandwidth_and_enforce():
    cfg, plan = plan_of("h200")
    assert cfg.gate_policy == "enforce" and plan.node_count == cfg.gpu_pool.node_count == 2
    # 0.5 x 324.13 GB/s, all_gather of 1 GiB on 2 x a3-ultragpu-8g over gIB (Cluster Toolkit, 8b70b1036).
    assert plan.busbw_floor_gbps == 162.06 and plan.gpu_name == "H200" and plan.expect_net == "gIB"
    assert (
        plan.busbw_source.startswith("0.5 x 324.13 GB/s: Google Cluster Toolkit") and "8b70b1036" in plan.busbw_source
    )
    assert (plan.collective, plan.message_bytes, plan.backend, plan.device) == ("all_gather", 1 << 30, "nccl", "cuda")


def test_the_b200_floor_says_it_is_an_estimate():
    _, plan = plan_of("b200")
    assert plan.gpu_name == "B200" and plan.busbw_floor_gbps == 162.06 and "ESTIMATE" in plan.busbw_source


def test_one_node_has_no_fabric_floor_and_only_warns_by_default():
    cfg, plan = plan_of("dev")
    assert plan.node_count == 1 and plan.busbw_floor_gbps == 0.0 and cfg.gate_policy == "warn"
    cfg, _ = plan_of("dev", job=merged("dev", "job", {"gate": "enforce"}))
    assert cfg.gate_policy == "enforce"


def test_the_storage_floor_is_half_of_capacity_times_tier_and_the_test_size_follows_it():
    cfg, plan = plan_of("h200")
    # 18000 GiB at 500 MB/s per TiB = 8789 MB/s.
    assert (cfg.lustre.capacity_gib, cfg.lustre.per_unit_storage_throughput) == (18000, 500)
    assert (plan.storage_expected_gbps, plan.storage_floor_gbps) == (8.789, 4.395)
    assert plan.mount_path == cfg.ray.mount_path and "18000 GiB x 500 MB/s/TiB" in plan.storage_source
    # 10 s at 8.789 GB/s over 2 nodes = 43.9 GB each, clamped to 16 GiB.
    assert plan.storage_bytes_per_node == 16 << 30
    _, small = plan_of("h200", lustre=merged("h200", "lustre", {"capacityGib": 72000, "perUnitStorageThroughput": 125}))
    # 72000 GiB at 125 MB/s per TiB = 8.789 GB/s as well: the tier and the capacity trade off.
    assert small.storage_expected_gbps == 8.789
    _, many = plan_of("h200", gpuPool=merged("h200", "gpuPool", {"nodeCount": 64}))
    assert many.storage_bytes_per_node == int(8.7890625e9 * 10 / 64) // (1 << 20) * (1 << 20)


@pytest.mark.parametrize("value", ["strict", "ENFORCE", True])
def test_job_gate_accepts_only_its_three_values(value):
    from infra.config import ConfigError

    config, _ = stack_config("dev", job=merged("dev", "job", {"gate": value}))
    with pytest.raises(ConfigError, match=r"nemo-rl-gke:job\.gate: .*'enforce', 'warn' or 'off'"):
        parse(namespaced(config), "dev")


def test_the_cli_and_the_program_build_the_same_plan():
    from jobctl import stack as cli

    loaded = load_stack("b200")
    pool = gpu_pool_facts(StackContext.from_config("b200", loaded.config), loaded.config)
    assert cli.gate_plan(cli.load_stack("b200")) == gate_plan_for_stack(loaded.config, pool)


def test_the_gate_expects_the_nccl_of_the_stacks_version_matrix_row():
    # b200 runs qwen2.5-72b-deepscaler on NeMo-RL v0.4.0, whose uv.lock pins nvidia-nccl-cu12 2.26.2.
    cfg, plan = plan_of("b200")
    assert cfg.recipe.image.tag == "v0.4.0"
    assert (plan.expect_nccl, plan.expect_gib) == ("2.26.2", "v1.1.1")


def test_a_stack_outside_the_version_matrix_has_its_nccl_reported_not_checked():
    _, plan = plan_of(
        "b200",
        ray={"ncclInstallerImage": "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib:v1.0.5"},
        allowUntestedVersions=True,
    )
    assert plan.expect_nccl is None and plan.expect_gib == "v1.0.5"


def test_on_autopilot_the_gate_checks_no_nccl_release_the_matrix_does_not_record():
    # The Autopilot installer copies gIB's own NCCL build, whose release the row marks unverified.
    _, plan = plan_of("autopilot")
    assert plan.expect_nccl is None and plan.expect_gib == "v1.1.1"


def test_the_b200_floor_source_names_the_a3_ultra_figure_and_then_the_estimate():
    _, plan = plan_of("b200")
    assert plan.busbw_source.startswith("0.5 x 324.13 GB/s: the A3 Ultra figure of Google Cluster Toolkit"), (
        plan.busbw_source
    )
    assert plan.busbw_source.endswith(
        "(ESTIMATE: no published A4 number was found (Cluster Toolkit, container-engine-accelerators and gpu-recipes "
        "show only placeholders); A4 has the same 8 RDMA NICs per node as A3 Ultra "
        "(https://cloud.google.com/compute/docs/accelerator-optimized-machines), so the A3 Ultra figure is used)"
    ), plan.busbw_source


def test_a_published_estimate_is_read_as_a_number_and_one_line_of_text():
    assert published_value({"value": "1.5", "estimate": "two\n  words"}) == (1.5, "two words")
    assert published_value("324.13") == (324.13, None)


def test_the_committed_stacks_run_the_gate_with_the_numbers_of_the_thresholds_file():
    _, plan = plan_of("h200")
    # data/acceptance_gate.yaml: 900 s in all, 4 streams per node, 5 + 20 iterations of 1 GiB.
    assert (plan.timeout_s, plan.storage_streams, plan.warmup_iters, plan.iters) == (900.0, 4, 5, 20)


def test_every_number_of_the_gate_comes_from_the_thresholds_it_is_given():
    import copy

    data = copy.deepcopy(dict(load_thresholds()))
    data["timeout_seconds"] = 1234
    data["fabric"] = {
        **data["fabric"],
        "collective": "all_reduce",
        "message_bytes": 1 << 28,
        "warmup_iters": 2,
        "iters": 7,
    }
    data["storage"] = {
        **data["storage"],
        "streams_per_node": 3,
        "target_seconds": 1000,
        "max_bytes_per_node": 1 << 50,
        "source": "tier table\n   of   Lustre",
    }
    cfg, _ = plan_of("h200")
    plan = gate_plan_for_stack(cfg, gpu_pool_facts(StackContext.from_config("h200", cfg), cfg), data)
    assert (
        plan.timeout_s,
        plan.collective,
        plan.message_bytes,
        plan.warmup_iters,
        plan.iters,
        plan.storage_streams,
    ) == (1234.0, "all_reduce", 1 << 28, 2, 7, 3)
    assert plan.storage_source == "0.5 x 18000 GiB x 500 MB/s/TiB: tier table of Lustre"
    # 1000 s at 8789.0625 MB/s (18000 GiB x 500 MB/s/TiB, MB = 10^6 bytes) over 2 nodes, in whole MiB.
    assert plan.storage_bytes_per_node == 4394531250000 // (1 << 20) * (1 << 20)
