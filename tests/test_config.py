"""Stack configuration: defaults, the committed stacks, and one rejection test per class of bad input.

Each rejection must name the key (`nemo-rl-gke:<path>`) and what is allowed, on one line per
problem, before any resource is registered.
"""

import subprocess
import sys

import pytest
from conftest import ROOT, run_plan

from infra.config import ConfigError, StackConfig, parse

# A stack must open the control plane on purpose or name the CIDRs that may reach it.
BASE = {"project": "my-gcp-project"}


def rejection(**raw) -> str:
    with pytest.raises(ConfigError) as info:
        parse({**BASE, **raw}, "dev")
    return str(info.value)


def test_defaults_give_a_valid_stack_with_the_stack_name_as_prefix():
    cfg = parse(dict(BASE), "dev")
    assert cfg.name_prefix == "dev"
    assert cfg.flavour == "b200" and cfg.gpu_pool.node_count == 1
    assert cfg.lustre_instance_id == "dev-lustre"


def test_every_field_of_every_model_has_a_description():
    missing = []

    def walk(model, path):
        for name, field in model.model_fields.items():
            if not field.description:
                missing.append(f"{path}{field.alias or name}")
            ann = field.annotation
            if isinstance(ann, type) and issubclass(ann, StackConfig.__mro__[1]):
                walk(ann, f"{path}{field.alias or name}.")

    walk(StackConfig, "")
    assert not missing, f"fields without description: {missing}"


@pytest.mark.parametrize(
    "stack,flavour,nodes,recipe",
    [
        ("dev", "b200", 1, "qwen2.5-1.5b-gsm8k"),
        ("b200", "b200", 8, "qwen2.5-72b-deepscaler"),
        ("h200", "h200", 2, "gemma3-27b-gsm8k"),
    ],
)
def test_committed_stacks_mirror_their_reference_workflows(stack, flavour, nodes, recipe):
    from infra.config import namespaced
    from infra.stack_file import read_stack_file

    config, secret_keys = read_stack_file(ROOT / f"Pulumi.{stack}.yaml")
    cfg = parse(namespaced(config), stack)
    assert (cfg.flavour, cfg.gpu_pool.node_count, cfg.job.recipe) == (flavour, nodes, recipe)
    assert cfg.gpu_pool.provisioning.value == "spot"
    assert secret_keys == [], f"Pulumi.{stack}.yaml must not carry secrets"


def test_unknown_flavour_is_rejected_with_the_allowed_flavours():
    assert rejection(flavour="a100") == "nemo-rl-gke:flavour: unknown flavour 'a100'; allowed: b200, h200"


def test_zone_outside_the_region_is_rejected():
    assert rejection(zone="us-west1-a") == (
        "nemo-rl-gke:zone: 'us-west1-a' is not in region 'us-east1'; allowed: a zone named us-east1-<letter>"
    )


def test_lustre_capacity_below_the_tier_minimum_is_rejected():
    msg = rejection(lustre={"capacityGib": 9000, "perUnitStorageThroughput": 500})
    assert msg == (
        "nemo-rl-gke:lustre.capacityGib: 9000 is not valid for perUnitStorageThroughput 500; "
        "allowed: 18000 to 3060000 GiB in steps of 18000, or up to 20016000 GiB in multiples of 144000"
    )


# https://cloud.google.com/managed-lustre/docs/performance-tiers and .../increase-capacity:
# tier -> (min, small step, up to, large step, max).
LUSTRE_TABLE = {
    1000: (9000, 9000, 1_530_000, 72_000, 10_008_000),
    500: (18000, 18000, 3_060_000, 144_000, 20_016_000),
    250: (36000, 36000, 6_120_000, 288_000, 40_032_000),
    125: (72000, 72000, 12_240_000, 72_000, 12_240_000),
}


@pytest.mark.parametrize("tier", sorted(LUSTRE_TABLE))
def test_lustre_capacities_follow_the_managed_lustre_tier_table(tier):
    low, step, threshold, large, high = LUSTRE_TABLE[tier]

    def ok(gib):
        lustre = {"capacityGib": gib, "perUnitStorageThroughput": tier, "exportOnDestroy": False}
        return parse({**BASE, "lustre": lustre}, "dev")

    for good in (low, low + step, threshold, high, high - large):
        assert ok(good).lustre.capacity_gib == good
    bad = [low - step, high + large, low + step // 2]
    if large != step:
        bad.append(threshold + step)  # the small step no longer applies above the threshold
    for gib in bad:
        with pytest.raises(ConfigError, match=f"capacityGib: {gib} is not valid"):
            ok(gib)


def test_lustre_capacity_off_the_tier_step_is_rejected():
    assert rejection(lustre={"capacityGib": 45000, "perUnitStorageThroughput": 250}).startswith(
        "nemo-rl-gke:lustre.capacityGib: 45000 is not valid for perUnitStorageThroughput 250; allowed: 36000"
    )


def test_lustre_tier_outside_the_four_tiers_is_rejected():
    assert rejection(lustre={"perUnitStorageThroughput": 300}) == (
        "nemo-rl-gke:lustre.perUnitStorageThroughput: 300 is not allowed; allowed: 125, 250, 500, 1000"
    )


@pytest.mark.parametrize("name", ["lustrefs1", "lustre-1", "fs_1", ""])
def test_lustre_filesystem_over_eight_chars_or_not_alphanumeric_is_rejected(name):
    assert (
        rejection(lustre={"filesystem": name})
        == f"nemo-rl-gke:lustre.filesystem: {name!r} is not allowed; allowed: 1-8 letters or digits"
    )


@pytest.mark.parametrize("instance_id", ["1lustre", "Lustre", "lustre-", "a" * 64, "lus_tre"])
def test_bad_lustre_instance_id_is_rejected(instance_id):
    assert rejection(lustre={"instanceId": instance_id}).startswith(
        "nemo-rl-gke:lustre.instanceId: "
    ) and "allowed: 1-63 lowercase" in rejection(lustre={"instanceId": instance_id})


@pytest.mark.parametrize(
    "network,key,other",
    [
        ({"gvnicCidr": "192.168.1.0/24"}, "rdmaCidrs[0]", "gvnicCidr"),
        ({"rdmaCidrs": [f"192.168.{n}.0/24" for n in (1, 2, 3, 4, 5, 6, 7, 7)]}, "rdmaCidrs[7]", "rdmaCidrs[6]"),
        ({"psaCidr": "10.4.0.0/22"}, "podsCidr", "psaCidr"),
        ({"servicesCidr": "10.0.8.0/24"}, "primaryCidr", "servicesCidr"),
        ({"psaCidr": "192.168.0.0/22"}, "podsCidr", "gvnicCidr"),
    ],
)
def test_overlapping_ranges_are_rejected_naming_both_keys(network, key, other):
    msg = rejection(network=network)
    assert msg.startswith("nemo-rl-gke:network.") and "overlaps" in msg, msg
    assert len(msg.splitlines()) == 1
    assert f"network.{other}" in msg or f"network.{key}" in msg, msg


def test_psa_range_smaller_than_a_23_is_rejected():
    assert rejection(network={"psaCidr": "10.16.0.0/24"}) == (
        "nemo-rl-gke:network.psaCidr: 10.16.0.0/24 is smaller than Managed Lustre needs; allowed: a /23 or larger range"
    )


def test_rdma_subnet_count_must_match_the_flavour_nics():
    assert rejection(network={"rdmaCidrs": ["192.168.1.0/24"]}).startswith(
        "nemo-rl-gke:network.rdmaCidrs: has 1 entries; flavour b200 has 8 RDMA NICs"
    )


@pytest.mark.parametrize("count", [0, -1])
def test_node_count_below_one_is_rejected(count):
    assert (
        rejection(gpuPool={"nodeCount": count})
        == f"nemo-rl-gke:gpuPool.nodeCount: {count} is not allowed; allowed: at least 1"
    )


def test_tensor_parallel_larger_than_the_gpus_per_node_is_rejected():
    msg = rejection(job={"overrides": ["policy.dtensor_cfg.tensor_parallel_size=16"]})
    assert msg == (
        "nemo-rl-gke:job.overrides: recipe 'qwen2.5-1.5b-gsm8k' with these overrides uses tensor parallel 16, "
        "more than the 8 GPUs per node of flavour b200; allowed: 1 to 8"
    )


def test_non_colocated_recipe_with_no_node_left_for_training_is_rejected():
    msg = rejection(
        flavour="h200",
        region="europe-west1",
        zone="europe-west1-b",
        job={"recipe": "gemma3-27b-gsm8k"},
        gpuPool={"nodeCount": 1},
    )
    assert msg.startswith("nemo-rl-gke:gpuPool.nodeCount: 1 leaves no node for training"), msg
    assert msg.endswith("allowed: at least 2")


def test_colocation_turned_off_by_an_override_is_checked_too():
    msg = rejection(
        job={
            "overrides": [
                "policy.generation.colocated.enabled=false",
                "policy.generation.colocated.resources.num_nodes=1",
            ]
        }
    )
    assert msg.startswith("nemo-rl-gke:gpuPool.nodeCount: 1 leaves no node for training")


def test_unknown_keys_are_rejected_instead_of_ignored():
    assert (
        rejection(flavor="b200")
        == "nemo-rl-gke:flavor: unknown key; did you mean flavour? allowed: the keys of the config reference in "
        "docs/configuration.md"
    )
    assert rejection(lustre={"capacity": 9000}) == (
        "nemo-rl-gke:lustre.capacity: unknown key; did you mean capacityGib? allowed: the keys of the config "
        "reference in docs/configuration.md"
    )


def test_unknown_recipe_is_rejected_with_the_recipe_names():
    assert rejection(job={"recipe": "llama"}).startswith("nemo-rl-gke:job.recipe: unknown recipe 'llama'; allowed: ")


def test_several_problems_are_reported_one_per_line():
    msg = rejection(flavour="a100", lustre={"filesystem": "bad_name!"})
    assert msg.splitlines() == [
        "nemo-rl-gke:flavour: unknown flavour 'a100'; allowed: b200, h200",
        "nemo-rl-gke:lustre.filesystem: 'bad_name!' is not allowed; allowed: 1-8 letters or digits",
    ]


@pytest.mark.parametrize("key", ["hfToken", "wandbApiKey"])
def test_a_plaintext_secret_in_the_stack_file_is_rejected_before_any_resource(key):
    with pytest.raises(ConfigError) as info:
        run_plan("dev", **{key: "hf_plaintext_value"})
    assert str(info.value) == (
        f"nemo-rl-gke:{key}: stored in plaintext; allowed: a secret (remove it from Pulumi.dev.yaml and run "
        f"`pulumi config set --secret {key}`)"
    )
    assert "hf_plaintext_value" not in str(info.value)


def test_a_secret_set_with_pulumi_config_set_secret_is_accepted():
    plan = run_plan("dev", secret_keys=["nemo-rl-gke:hfToken"], hfToken="hf_value_set_as_secret")
    assert plan.resources


def test_bad_config_makes_the_plan_exit_2_with_the_key_and_no_traceback(tmp_path):
    # In tmp_path, not the checkout: a stack file there, even for the seconds the plan runs, is listed by
    # every test that lists the stacks (in the other xdist worker too); it failed
    # test_job_spec.py::test_cli_configuration_errors_are_one_line_with_exit_code_2 under load.
    stack_file = tmp_path / "Pulumi.badtest.yaml"
    stack_file.write_text("config:\n  nemo-rl-gke:project: my-gcp-project\n  nemo-rl-gke:flavour: a100\n")
    proc = subprocess.run(
        [sys.executable, "-m", "tools.offline_plan", "--stack", "badtest", "--config-file", str(stack_file)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr == "error: nemo-rl-gke:flavour: unknown flavour 'a100'; allowed: b200, h200\n"
    assert proc.stdout == ""


def test_a_pinned_version_below_the_flavour_minimum_is_rejected():
    assert rejection(cluster={"minMasterVersion": "1.31"}) == (
        "nemo-rl-gke:cluster.minMasterVersion: 1.31 is below 1.32.2-gke.1475000, the minimum GKE version for "
        "flavour b200; allowed: 1.32.2-gke.1475000 or later"
    )


def test_a_pinned_version_before_lustre_port_988_needs_the_legacy_port():
    msg = rejection(cluster={"minMasterVersion": "1.33.2-gke.2000000"})
    assert msg.startswith("nemo-rl-gke:cluster.minMasterVersion: 1.33.2-gke.2000000 predates 1.33.2-gke.4655000"), msg
    assert msg.endswith("or lustre.legacyPort: true")
    assert parse({**BASE, "cluster": {"minMasterVersion": "1.33.2-gke.2000000"}, "lustre": {"legacyPort": True}}, "dev")


def test_a_pinned_version_older_than_the_managed_lustre_driver_is_refused_even_with_the_legacy_port():
    # Before 1.33.2-gke.1111000 Lustre mounted only on GPU machine types with Secure Boot on; the Ray head's
    # system pool is a CPU pool with Secure Boot.
    msg = rejection(cluster={"minMasterVersion": "1.33.1"}, lustre={"legacyPort": True})
    assert msg == (
        "nemo-rl-gke:cluster.minMasterVersion: 1.33.1 predates 1.33.2-gke.1111000, the oldest node version of the "
        "Managed Lustre CSI add-on (before it, Lustre did not mount on non-GPU nodes with Secure Boot, such as the "
        "Ray head's system pool); allowed: 1.33.2-gke.1111000 or later"
    )


def test_workers_default_to_the_reference_size_of_googles_sample():
    fit = parse(BASE, "dev").worker_fit
    assert (fit.cpu, fit.memory_gib, fit.shm_gib) == (206, 2400, 240)
    # a4-highgpu-8g: 224 vCPU - 0.63 reserved; 3968 x 0.98 - 86.12 - 0.10 GiB.
    assert fit.headroom_cpu == pytest.approx(224 - 0.63 - 206)
    assert fit.headroom_memory_gib == pytest.approx(3968 * 0.98 - 86.12 - 100 / 1024 - 2400, abs=0.01)


@pytest.mark.parametrize(
    ("ray", "key", "allowed"),
    [
        ({"workerCpu": 222}, "ray.workerCpu", "allowed: 1 to 221"),
        ({"workerMemoryGib": 3787}, "ray.workerMemoryGib", "allowed: 1 to 3786"),
        ({"workerMemoryGib": 200}, "ray.workerShmGib", "allowed: 1 to 199"),
    ],
)
def test_a_worker_larger_than_a_gpu_node_or_its_shared_memory_is_refused(ray, key, allowed):
    message = rejection(ray=ray)
    assert message.startswith(f"nemo-rl-gke:{key}: ") and message.endswith(allowed), message


def test_a_worker_size_within_the_node_is_accepted():
    fit = parse({**BASE, "ray": {"workerCpu": 221, "workerMemoryGib": 3786, "workerShmGib": 100}}, "dev").worker_fit
    assert (fit.cpu, fit.memory_gib, fit.shm_gib) == (221, 3786, 100)


def test_the_system_pool_disk_and_the_head_default_to_the_references():
    cfg = parse(BASE, "dev")
    # Cluster Toolkit gke-a4 / gke-a3-ultragpu: system_node_pool_disk_size_gb 200; codelab head: 8 CPU / 64Gi.
    assert cfg.cluster.system_pool.disk_size_gb == 200
    assert (cfg.ray.head_cpu, cfg.ray.head_memory_gib) == (8, 64)


@pytest.mark.parametrize(
    ("ray", "key", "room"),
    [
        ({"headCpu": 8}, "ray.headCpu", "room for 6 after"),
        ({"headCpu": 4, "headMemoryGib": 32}, "ray.headMemoryGib", "room for 25 GiB after"),
    ],
)
def test_a_ray_head_larger_than_a_system_node_is_refused_naming_the_room_there(ray, key, room):
    # n2-standard-8: 8 vCPUs, 32 GiB (31.4 after the kernel); GKE keeps 0.09 CPU and 3.66 GiB (with eviction),
    # system pods ~1 CPU and 2 GiB.
    message = rejection(cluster={"systemPool": {"machineType": "n2-standard-8"}}, ray=ray)
    assert message.startswith(f"nemo-rl-gke:{key}: ") and room in message, message
    assert "allowed: at most" in message and "cluster.systemPool.machineType" in message, message


def test_the_head_check_accepts_the_largest_head_that_fits_and_skips_machines_it_does_not_know():
    assert parse(
        {
            **BASE,
            "cluster": {"systemPool": {"machineType": "n2-standard-8"}},
            "ray": {"headCpu": 6, "headMemoryGib": 25},
        },
        "dev",
    )
    uncatalogued = {"machineType": "c4-standard-8", "allowUncataloguedMachineType": True}
    assert parse({**BASE, "cluster": {"systemPool": uncatalogued}, "ray": {"headCpu": 8, "headMemoryGib": 64}}, "dev")


def test_flex_start_runs_with_the_job_because_its_pool_needs_no_provisioning_request():
    cfg = parse({**BASE, "gpuPool": {"provisioning": "flexStart"}}, "dev")
    assert cfg.job.submit is True and cfg.gpu_pool.ladder[0].provisioning.value == "flexStart"


# ---------------------------------------------------------------- gpuPool.capacity


def test_a_capacity_ladder_keeps_its_order_and_names_its_reservation():
    cfg = parse(
        {
            **BASE,
            "gpuPool": {
                "nodeCount": 2,
                "capacity": {
                    "ladder": [{"reservation": "my-a4-block"}, "flexStart", "spot", "onDemand"],
                    "maxWaitMinutes": 45,
                },
            },
        },
        "dev",
    )
    assert [r.label for r in cfg.gpu_pool.ladder] == ["reservation my-a4-block", "flexStart", "spot", "onDemand"]
    assert cfg.gpu_pool.capacity.max_wait_minutes == 45 and cfg.gpu_pool.capacity.on_timeout == "releaseWorkers"


def test_without_a_ladder_provisioning_is_the_one_rung():
    cfg = parse({**BASE, "gpuPool": {"provisioning": "reservation", "reservationName": "my-a4-block"}}, "dev")
    assert [r.label for r in cfg.gpu_pool.ladder] == ["reservation my-a4-block"]


@pytest.mark.parametrize(
    "capacity, key, says",
    [
        ({"ladder": ["spot", "spot"]}, "gpuPool.capacity.ladder[1]", "spot appears twice"),
        (
            {"ladder": ["sopt"]},
            "gpuPool.capacity.ladder[0]",
            "'sopt' is not allowed; allowed: spot, flexStart, onDemand or {reservation: NAME}",
        ),
        ({"ladder": ["reservation"]}, "gpuPool.capacity.ladder[0]", "allowed: spot, flexStart"),
        ({"ladder": []}, "gpuPool.capacity.ladder", "an empty ladder is not allowed"),
        ({"ladder": [7]}, "gpuPool.capacity.ladder[0]", "7 is not allowed"),
        ({"ladder": ["spot"], "maxWaitMinutes": 2}, "gpuPool.capacity.maxWaitMinutes", "at least 5"),
        ({"ladder": ["spot"], "onTimeout": "kill"}, "gpuPool.capacity.onTimeout", "'releaseWorkers' or 'keep'"),
    ],
)
def test_a_bad_ladder_is_one_line_naming_the_key(capacity, key, says):
    message = rejection(gpuPool={"capacity": capacity})
    assert message.startswith(f"nemo-rl-gke:{key}: ") and says in message and "\n" not in message, message


def test_a_ladder_next_to_provisioning_is_refused():
    message = rejection(gpuPool={"provisioning": "spot", "capacity": {"ladder": ["spot", "onDemand"]}})
    assert message.startswith("nemo-rl-gke:gpuPool.provisioning: is set next to gpuPool.capacity"), message


def test_compact_placement_is_refused_with_a_flex_start_rung():
    message = rejection(gpuPool={"compactPlacement": True, "capacity": {"ladder": ["spot", "flexStart"]}})
    assert message.startswith("nemo-rl-gke:gpuPool.compactPlacement: ") and "flexStart" in message, message


# ---------------------------------------------------------------- cluster.mode: autopilot

AUTOPILOT = {"cluster": {"mode": "autopilot"}}


def test_the_autopilot_stack_mirrors_the_tutorials_recommended_mode_on_h200():
    from infra.config import namespaced
    from infra.stack_file import read_stack_file

    config, secret_keys = read_stack_file(ROOT / "Pulumi.autopilot.yaml")
    cfg = parse(namespaced(config), "autopilot")
    assert cfg.cluster.mode == "autopilot" and parse(dict(BASE), "dev").cluster.mode == "standard"
    assert (cfg.flavour, cfg.gpu_pool.node_count, cfg.job.recipe, cfg.gpu_pool.provisioning.value) == (
        "h200",
        2,
        "gemma3-27b-gsm8k",
        "spot",
    )
    assert secret_keys == []


def test_an_unknown_cluster_mode_is_rejected_with_the_allowed_modes():
    message = rejection(cluster={"mode": "serverless"})
    assert message.startswith("nemo-rl-gke:cluster.mode: ") and "'standard'" in message and "'autopilot'" in message, (
        message
    )
    assert len(message.splitlines()) == 1


@pytest.mark.parametrize(
    "raw,key,says",
    [
        (
            {"cluster": {"mode": "autopilot", "systemPool": {"machineType": "n2-standard-32"}}},
            "cluster.systemPool",
            "no node pools",
        ),
        ({"cluster": {"mode": "autopilot", "systemPool": {}}}, "cluster.systemPool", "no node pools"),
        ({**AUTOPILOT, "gpuPool": {"compactPlacement": True}}, "gpuPool.compactPlacement", "placement policy"),
        (
            {**AUTOPILOT, "gpuPool": {"gpuDriverVersion": "LATEST"}},
            "gpuPool.gpuDriverVersion",
            "installs the GPU driver",
        ),
        (
            {**AUTOPILOT, "gpuPool": {"provisioning": "flexStart"}, "job": {"submit": False}},
            "gpuPool.provisioning",
            "allowed: spot, reservation, onDemand",
        ),
        (
            {**AUTOPILOT, "gpuPool": {"capacity": {"ladder": ["spot", "onDemand"]}}},
            "gpuPool.capacity",
            "allowed: one rung",
        ),
        ({**AUTOPILOT, "ray": {"headCpu": 31, "headMemoryGib": 64}}, "ray.headCpu", "at most 30"),
        ({**AUTOPILOT, "ray": {"headCpu": 30, "headMemoryGib": 128}}, "ray.headMemoryGib", "at most 110"),
    ],
)
def test_what_autopilot_cannot_do_is_refused_naming_the_key(raw, key, says):
    message = rejection(**raw)
    assert message.startswith(f"nemo-rl-gke:{key}: ") and says in message, message
    assert len(message.splitlines()) == 1, message


def test_the_same_settings_stay_valid_on_standard_and_the_autopilot_defaults_pass():
    parse(
        {**BASE, "gpuPool": {"compactPlacement": True, "gpuDriverVersion": "LATEST"}, "cluster": {"systemPool": {}}},
        "dev",
    )
    cfg = parse({**BASE, **AUTOPILOT, "ray": {"headCpu": 30, "headMemoryGib": 110}}, "dev")
    assert cfg.ray.head_cpu == 30
    # On Autopilot the head is not held to a system node's room (there is none): 30 CPUs exceed an
    # n2-standard-16 node and still pass.
    assert "ray.headCpu" in rejection(ray={"headCpu": 30, "headMemoryGib": 110})


def test_a_bad_autopilot_setting_stops_the_plan_before_any_resource():
    with pytest.raises(ConfigError, match="nemo-rl-gke:gpuPool.compactPlacement"):
        run_plan("autopilot", gpuPool={"nodeCount": 2, "provisioning": "spot", "compactPlacement": True})


# ---------------------------------------------------------------- issue 22: values that cannot work


def test_the_cpu_pool_catalogue_lists_the_machines_a_head_fits_smallest_first():
    from infra.config.cluster import head_machines
    from infra.config.ray import RayConfig

    fits = head_machines(RayConfig(head_cpu=8, head_memory_gib=64))
    # n2-highmem-16 (16 vCPU / 128 GiB) is the smallest that holds the default head; n2-standard-16's
    # 64 GiB lose ~7 GiB to GKE and the system pods.
    assert fits[0] == "n2-highmem-16" and "n2-standard-16" not in fits and "n2-highmem-8" not in fits
    assert "n2-standard-8" in head_machines(RayConfig(head_cpu=4, head_memory_gib=16))


def test_an_uncatalogued_cpu_machine_is_accepted_only_with_the_opt_in_and_a_gpu_machine_never():
    message = rejection(cluster={"systemPool": {"machineType": "e2-standard-32"}})
    assert message.startswith(
        "nemo-rl-gke:cluster.systemPool.machineType: 'e2-standard-32' is not in the CPU machine catalogue"
    )
    assert "allowUncataloguedMachineType" in message and "n2-highmem-16" in message
    assert parse(
        {**BASE, "cluster": {"systemPool": {"machineType": "e2-standard-32", "allowUncataloguedMachineType": True}}},
        "dev",
    )
    gpu = rejection(cluster={"systemPool": {"machineType": "a3-ultragpu-8g", "allowUncataloguedMachineType": True}})
    assert "is a GPU machine type" in gpu, gpu
    # the head is still held to the room of an uncatalogued type whose shape is known
    small = rejection(cluster={"systemPool": {"machineType": "e2-standard-4", "allowUncataloguedMachineType": True}})
    assert small.startswith("nemo-rl-gke:ray.headCpu: 8 does not fit a e2-standard-4"), small


def test_an_allow_list_that_covers_every_address_is_refused_but_a_wide_one_is_not():
    every = rejection(cluster={"controlPlaneAccess": "ip", "masterAuthorizedNetworks": [{"cidrBlock": "0.0.0.0/0"}]})
    assert every.startswith("nemo-rl-gke:cluster.masterAuthorizedNetworks: 0.0.0.0/0 covers every IPv4 address"), every
    assert "allowPublicControlPlane: true" in every
    wide = [{"cidrBlock": "0.0.0.0/1"}, {"cidrBlock": "128.0.0.0/2"}]
    assert parse({**BASE, "cluster": {"controlPlaneAccess": "ip", "masterAuthorizedNetworks": wide}}, "dev")


def test_max_num_steps_is_bounded_at_the_documented_limit():
    from infra.config.job import MAX_NUM_STEPS

    assert parse({**BASE, "job": {"maxNumSteps": MAX_NUM_STEPS}}, "dev").job.max_num_steps == MAX_NUM_STEPS
    assert (
        rejection(job={"maxNumSteps": MAX_NUM_STEPS + 1})
        == f"nemo-rl-gke:job.maxNumSteps: {MAX_NUM_STEPS + 1} is not allowed; allowed: at most {MAX_NUM_STEPS}"
    )


def test_the_number_of_overrides_is_bounded_and_the_bound_itself_is_accepted():
    from infra.config.job import MAX_OVERRIDES

    ok = [f"++extra.k{i}=1" for i in range(MAX_OVERRIDES)]
    assert len(parse({**BASE, "job": {"overrides": ok}}, "dev").job.overrides) == MAX_OVERRIDES
    assert rejection(job={"overrides": ok + ["++extra.one_more=1"]}).startswith(
        f"nemo-rl-gke:job.overrides: {MAX_OVERRIDES + 1} overrides"
    )


@pytest.mark.parametrize(
    ("key", "part"),
    [
        ("env_vars.HF_TOKEN", "HF_TOKEN"),
        ("logger.wandb.api_key", "api_key"),
        ("x.apiKey", "apiKey"),
        ("db.password", "password"),
        ("aws.secret-access-key", "secret-access-key"),
        ("gcs.credentials", "credentials"),
        ("x.token", "token"),
    ],
)
def test_override_keys_named_for_credentials_are_found(key, part):
    from infra.config.job import secret_key_part

    assert secret_key_part(key) == part


@pytest.mark.parametrize(
    "key",
    [
        "policy.generation.max_new_tokens",
        "loss_fn.token_level_loss",
        "policy.tokenizer.name",
        "policy.generation.stop_token_ids",
        "policy.dynamic_batching.train_mb_tokens",
        "policy.megatron_cfg.moe_token_dispatcher_type",
        "data.train.prompt_key",
    ],
)
def test_nemo_rl_keys_that_merely_mention_tokens_are_not_credentials(key):
    from infra.config.job import secret_key_part

    assert secret_key_part(key) is None


def test_every_key_of_the_pinned_nemo_rl_configs_passes_the_credential_rule():
    # The rule must not refuse a real NeMo-RL setting: checked against every key of the pinned configs.
    import json

    from infra.config.job import secret_key_part

    keys = set()

    def walk(node):
        if isinstance(node, dict):
            for k, v in node.items():
                if isinstance(k, str) and "." in k:
                    keys.add(k)
                walk(v)

    for path in (ROOT / "workloads" / "data" / "nemo_rl").glob("*.json"):
        walk(json.loads(path.read_text()))
    assert len(keys) > 200
    assert not [k for k in keys if secret_key_part(k)]


def test_an_override_of_the_model_names_the_recipe_that_trains_it():
    message = rejection(job={"overrides": ["policy.model_name=google/gemma-3-27b-it"]})
    assert message.startswith(
        "nemo-rl-gke:job.overrides[0]: 'policy.model_name=google/gemma-3-27b-it' changes the model"
    ), message
    assert "allowed: job.recipe 'gemma3-27b-gsm8k', which trains it" in message
    # the recipe's own model, restated, changes nothing
    assert parse({**BASE, "job": {"overrides": ["policy.model_name=Qwen/Qwen2.5-1.5B-Instruct"]}}, "dev")


def test_the_program_refuses_a_plain_key_stored_as_a_secret_without_its_placeholder(capsys):
    with pytest.raises(ConfigError) as info:
        run_plan("dev", secret_keys=["nemo-rl-gke:region"])
    assert str(info.value).startswith("nemo-rl-gke:region: stored as a secret, but it is a plain setting"), info.value
    assert "placeholder" not in str(info.value)


def test_the_default_cluster_mode_is_described_with_its_regional_control_plane():
    from infra.config import ClusterConfig

    fields = ClusterConfig.model_fields
    assert fields["control_plane_location"].default == "regional"
    standard = fields["mode"].description.split("`autopilot`")[0]
    assert "zonal GKE Standard" not in standard and "regional" in standard, standard
    row = next(
        line for line in (ROOT / "docs" / "autopilot.md").read_text().splitlines() if line.startswith("| Cluster |")
    )
    assert "regional" in row.split("|")[2], row
