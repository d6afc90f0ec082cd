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
    "network,key,overlaps",
    [
        ({"gvnicCidr": "192.168.1.0/24"}, "rdmaCidrs[0]", "192.168.1.0/24 overlaps network.gvnicCidr (192.168.1.0/24)"),
        (
            {"rdmaCidrs": [f"192.168.{n}.0/24" for n in (1, 2, 3, 4, 5, 6, 7, 7)]},
            "rdmaCidrs[7]",
            "192.168.7.0/24 overlaps network.rdmaCidrs[6] (192.168.7.0/24)",
        ),
        ({"psaCidr": "10.4.0.0/22"}, "podsCidr", "10.4.0.0/14 overlaps network.psaCidr (10.4.0.0/22)"),
        ({"servicesCidr": "10.0.8.0/24"}, "primaryCidr", "10.0.0.0/20 overlaps network.servicesCidr (10.0.8.0/24)"),
        ({"psaCidr": "192.168.0.0/22"}, "psaCidr", "192.168.0.0/22 overlaps network.gvnicCidr (192.168.0.0/24)"),
        ({"servicesCidr": "10.16.0.0/24"}, "servicesCidr", "10.16.0.0/24 overlaps network.psaCidr (10.16.0.0/22)"),
    ],
)
def test_overlapping_ranges_are_rejected_naming_both_keys(network, key, overlaps):
    assert rejection(network=network) == (
        f"nemo-rl-gke:network.{key}: {overlaps}; allowed: ranges disjoint from every other range"
    )


def test_a_range_in_the_default_vpcs_subnets_is_refused_with_use_default_network_but_not_the_unused_primary():
    assert rejection(network={"useDefaultNetwork": True, "servicesCidr": "10.128.0.0/20"}) == (
        "nemo-rl-gke:network.servicesCidr: 10.128.0.0/20 overlaps 10.128.0.0/9, the subnets of the `default` VPC the "
        "cluster joins with network.useDefaultNetwork; allowed: a range outside 10.128.0.0/9"
    )
    # The primary subnet is not created on the `default` VPC, so its range is not checked there.
    assert parse({**BASE, "network": {"useDefaultNetwork": True, "primaryCidr": "10.128.0.0/20"}}, "dev")


def test_a_range_with_host_bits_set_is_refused_rather_than_rounded_down():
    assert rejection(network={"primaryCidr": "10.0.0.1/20"}) == (
        "nemo-rl-gke:network.primaryCidr: '10.0.0.1/20' is not allowed (10.0.0.1/20 has host bits set); allowed: an "
        "IPv4 range such as 10.0.0.0/20"
    )


# Every node takes a /24 of the pod range and one address of the primary subnet; the system pool
# surges one node on upgrade: nodes = gpuPool.nodeCount + cluster.systemPool.nodeCount + 1.
@pytest.mark.parametrize(
    "gpu_nodes,system_nodes,pods,message",
    [
        (64, 10, "10.4.0.0/18", "10.4.0.0/18 holds pod addresses for 64 node(s), the stack runs up to 75"),
        (3, 1, "10.4.0.0/22", "10.4.0.0/22 holds pod addresses for 4 node(s), the stack runs up to 5"),
        (2, 1, "10.4.0.0/23", "10.4.0.0/23 holds pod addresses for 2 node(s), the stack runs up to 4"),
        (1, 1, "10.4.0.0/25", "10.4.0.0/25 holds pod addresses for 1 node(s), the stack runs up to 3"),
    ],
)
def test_a_pod_range_too_small_for_every_node_is_refused_naming_the_size_that_fits(
    gpu_nodes, system_nodes, pods, message
):
    need = {75: 17, 5: 21, 4: 22, 3: 22}[gpu_nodes + system_nodes + 1]
    raw = {"gpuPool": {"nodeCount": gpu_nodes}, "cluster": {"systemPool": {"nodeCount": system_nodes}}}
    assert rejection(**raw, network={"podsCidr": pods}) == (
        f"nemo-rl-gke:network.podsCidr: {message} (a /24 each); allowed: a /{need} or larger"
    )
    # the size it names fits
    fitting = f"{pods.split('/')[0]}/{need}"
    assert parse({**BASE, **raw, "network": {"podsCidr": fitting}}, "dev").network.pods_cidr == fitting


def test_a_pod_range_with_exactly_a_24_per_node_is_accepted():
    cfg = parse({**BASE, "gpuPool": {"nodeCount": 2}, "network": {"podsCidr": "10.4.0.0/22"}}, "dev")
    assert cfg.network.pods_cidr == "10.4.0.0/22"


def test_a_primary_subnet_without_an_address_per_node_is_refused_unless_on_the_default_vpc():
    # A /29 has 8 addresses, 4 of which Google Cloud reserves: room for 2 GPU nodes, 1 system node and its surge.
    assert parse({**BASE, "gpuPool": {"nodeCount": 2}, "network": {"primaryCidr": "10.0.0.0/29"}}, "dev")
    assert rejection(gpuPool={"nodeCount": 3}, network={"primaryCidr": "10.0.0.0/29"}) == (
        "nemo-rl-gke:network.primaryCidr: 10.0.0.0/29 has 4 usable addresses, the stack runs up to 5 nodes; allowed: "
        "a larger range"
    )
    assert parse(
        {**BASE, "gpuPool": {"nodeCount": 3}, "network": {"useDefaultNetwork": True, "primaryCidr": "10.0.0.0/29"}},
        "dev",
    )


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


def test_a_recipe_layout_that_the_overrides_break_is_refused_naming_the_overrides():
    assert rejection(job={"overrides": ["policy.generation.colocated.enabled=false"]}) == (
        "nemo-rl-gke:job.overrides: generation not colocated needs at least one generation node "
        "(policy.generation.colocated.resources.num_nodes >= 1)"
    )


def test_vllm_tensor_parallel_larger_than_the_gpus_per_node_is_rejected():
    assert rejection(job={"overrides": ["policy.generation.vllm_cfg.tensor_parallel_size=16"]}) == (
        "nemo-rl-gke:job.overrides: recipe 'qwen2.5-1.5b-gsm8k' with these overrides uses vLLM tensor parallel 16, "
        "more than the 8 GPUs per node of flavour b200; allowed: 1 to 8"
    )


def test_a_pool_smaller_than_the_recipes_minimum_is_refused():
    assert rejection(job={"recipe": "qwen2.5-72b-deepscaler"}) == (
        "nemo-rl-gke:gpuPool.nodeCount: 1 is too small for job.recipe 'qwen2.5-72b-deepscaler'; allowed: at least 2"
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
    assert msg == (
        "nemo-rl-gke:gpuPool.nodeCount: 1 leaves no node for training: job.recipe 'gemma3-27b-gsm8k' is not colocated "
        "and reserves 1 node(s) for generation; allowed: at least 2"
    )


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
        f"nemo-rl-gke:{key}: stored in plaintext; allowed: a secret (remove it from Pulumi.dev.yaml, "
        "the --config-file, Pulumi.yaml or PULUMI_CONFIG, wherever it is set, and run "
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


def test_a_pinned_version_at_each_minimum_passes_that_minimum():
    # At the flavour's minimum (legacy port, so the port-988 cut-off does not apply): past the flavour check,
    # refused by the Lustre CSI cut-off.
    assert rejection(cluster={"minMasterVersion": "1.32.2-gke.1475000"}, lustre={"legacyPort": True}) == (
        "nemo-rl-gke:cluster.minMasterVersion: 1.32.2-gke.1475000 predates 1.33.2-gke.1111000, the oldest node version "
        "of the Managed Lustre CSI add-on (before it, Lustre did not mount on non-GPU nodes with Secure Boot, such as "
        "the Ray head's system pool); allowed: 1.33.2-gke.1111000 or later"
    )
    # At the CSI cut-off: past it, to the version matrix, which knows this GKE version as bad with the driver.
    assert rejection(cluster={"minMasterVersion": "1.33.2-gke.1111000"}, lustre={"legacyPort": True}) == (
        "nemo-rl-gke:cluster.minMasterVersion: gke 1.33.2-gke.1111000 is a known-bad combination "
        "(gke-1.33.2-gke.1111000-driver-575-vllm: https://github.com/vllm-project/vllm/issues/21979); allowed: "
        "another pin (allowUntestedVersions does not admit a known-bad pair)"
    )
    # At the port-988 cut-off: accepted without the legacy port.
    cfg = parse({**BASE, "cluster": {"minMasterVersion": "1.33.2-gke.4655000"}}, "dev")
    assert cfg.cluster.min_master_version == "1.33.2-gke.4655000"


def test_workers_default_to_the_reference_size_of_googles_sample():
    fit = parse(BASE, "dev").worker_fit
    assert (fit.machine_type, fit.cpu, fit.memory_gib, fit.shm_gib) == ("a4-highgpu-8g", 206, 2400, 240)
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


def test_a_worker_whose_shared_memory_is_all_its_memory_is_refused():
    assert rejection(ray={"workerMemoryGib": 240}) == (
        "nemo-rl-gke:ray.workerShmGib: 240 leaves nothing of the worker's 240 GiB (/dev/shm counts against it); "
        "allowed: 1 to 239"
    )


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


NO_POOLS = "cluster.mode: autopilot has no node pools"


@pytest.mark.parametrize(
    "raw,key,says",
    [
        (
            {"cluster": {"mode": "autopilot", "systemPool": {"machineType": "n2-standard-32"}}},
            "cluster.systemPool",
            f"is set, but {NO_POOLS}: the Ray head runs on Autopilot's general-purpose compute class, sized by "
            "ray.headCpu/ray.headMemoryGib; allowed: no cluster.systemPool, or cluster.mode: standard",
        ),
        (
            {"cluster": {"mode": "autopilot", "systemPool": {}}},
            "cluster.systemPool",
            f"is set, but {NO_POOLS}: the Ray head runs on Autopilot's general-purpose compute class, sized by "
            "ray.headCpu/ray.headMemoryGib; allowed: no cluster.systemPool, or cluster.mode: standard",
        ),
        (
            {**AUTOPILOT, "gpuPool": {"compactPlacement": True}},
            "gpuPool.compactPlacement",
            f"true, but {NO_POOLS} to give a placement policy; allowed: false, or cluster.mode: standard",
        ),
        (
            {**AUTOPILOT, "gpuPool": {"gpuDriverVersion": "LATEST"}},
            "gpuPool.gpuDriverVersion",
            f"is set, but {NO_POOLS}: Autopilot installs the GPU driver of the node's GKE version; allowed: no "
            "gpuPool.gpuDriverVersion, or cluster.mode: standard",
        ),
        (
            {**AUTOPILOT, "gpuPool": {"provisioning": "flexStart"}, "job": {"submit": False}},
            "gpuPool.provisioning",
            "'flexStart' is not built for cluster.mode: autopilot; allowed: spot, reservation, onDemand, or "
            "cluster.mode: standard",
        ),
        (
            {**AUTOPILOT, "gpuPool": {"capacity": {"ladder": ["spot", "onDemand"]}}},
            "gpuPool.capacity",
            f"has 2 rungs, but {NO_POOLS} to name node pools in a ComputeClass; allowed: one rung, or cluster.mode: "
            "standard",
        ),
        (
            {**AUTOPILOT, "ray": {"headCpu": 31, "headMemoryGib": 64}},
            "ray.headCpu",
            "31 is more than an Autopilot general-purpose pod may request; allowed: at most 30",
        ),
        (
            {**AUTOPILOT, "ray": {"headCpu": 30, "headMemoryGib": 128}},
            "ray.headMemoryGib",
            "128 is more than an Autopilot general-purpose pod may request; allowed: at most 110",
        ),
    ],
)
def test_what_autopilot_cannot_do_is_refused_naming_the_key(raw, key, says):
    assert rejection(**raw) == f"nemo-rl-gke:{key}: {says}"


def test_autopilot_takes_a_one_rung_ladder():
    cfg = parse({**BASE, **AUTOPILOT, "gpuPool": {"capacity": {"ladder": ["onDemand"]}}}, "dev")
    assert [r.label for r in cfg.gpu_pool.ladder] == ["onDemand"]


def test_autopilot_refuses_a_flavour_without_an_autopilot_pod_size_naming_the_flavours_with_one():
    # Every catalogued flavour has one today; the check stands for the next flavour added without it.
    import dataclasses

    from infra.config import KeyedValueError
    from infra.config.cluster_config import check_autopilot
    from infra.flavours import FLAVOURS

    cfg = parse({**BASE, **AUTOPILOT}, "dev")
    flavour = dataclasses.replace(FLAVOURS["b200"], autopilot_pod=None)
    with pytest.raises(KeyedValueError) as info:
        check_autopilot(cfg.cluster, cfg.gpu_pool, cfg.ray, flavour)
    assert (info.value.key, str(info.value)) == (
        "flavour",
        "b200 has no Autopilot pod size in the flavour catalogue; allowed: b200, h200, or cluster.mode: standard",
    )


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
    from infra.config.cluster_config import head_machines
    from infra.config.ray import RayConfig

    fits = head_machines(RayConfig(head_cpu=8, head_memory_gib=64))
    # n2-highmem-16 (16 vCPU / 128 GiB) is the smallest that holds the default head; n2-standard-16's
    # 64 GiB lose ~7 GiB to GKE and the system pods.
    assert fits[0] == "n2-highmem-16" and "n2-standard-16" not in fits and "n2-highmem-8" not in fits
    assert "n2-standard-8" in head_machines(RayConfig(head_cpu=4, head_memory_gib=16))
    # A head of exactly a node's room fits it (n2-standard-8: 6 CPU / 25 GiB; n2-highcpu-16: 14 CPU / 10 GiB),
    # ordered by (vCPUs, GiB); each of CPU and memory counts.
    larger = ["n2-standard-32", "n2-highmem-32", "n2-highcpu-48", "n2-standard-48", "n2-highmem-48", "n2-highcpu-64"]
    larger += ["n2-standard-64", "n2-highmem-64", "n2-highcpu-80", "n2-standard-80", "n2-highmem-80", "n2-highcpu-96"]
    larger += ["n2-standard-96", "n2-highmem-96", "n2-standard-128", "n2-highmem-128"]
    assert head_machines(RayConfig(head_cpu=6, head_memory_gib=25)) == [
        "n2-standard-8",
        "n2-highmem-8",
        "n2-standard-16",
        "n2-highmem-16",
        "n2-highcpu-32",
        *larger,
    ]
    assert head_machines(RayConfig(head_cpu=14, head_memory_gib=10)) == [
        "n2-highcpu-16",
        "n2-standard-16",
        "n2-highmem-16",
        "n2-highcpu-32",
        *larger,
    ]


DEFAULT_HEAD_MACHINES = (
    "allowed (fit ray.headCpu 8 / ray.headMemoryGib 64): n2-highmem-16, n2-standard-32, n2-highmem-32, n2-standard-48, "
    "n2-highmem-48, n2-standard-64, n2-highmem-64, n2-highcpu-80, n2-standard-80, n2-highmem-80, n2-highcpu-96, "
    "n2-standard-96, n2-highmem-96, n2-standard-128, n2-highmem-128"
)


def test_a_gpu_or_uncatalogued_system_pool_machine_is_refused_naming_the_machines_the_head_fits():
    assert rejection(cluster={"systemPool": {"machineType": "a3-ultragpu-8g"}}) == (
        "nemo-rl-gke:cluster.systemPool.machineType: 'a3-ultragpu-8g' is a GPU machine type: the CPU pool holds the "
        f"Ray head and add-ons, its GPUs would be paid for and idle; {DEFAULT_HEAD_MACHINES}"
    )
    assert rejection(cluster={"systemPool": {"machineType": "e2-standard-32"}}) == (
        "nemo-rl-gke:cluster.systemPool.machineType: 'e2-standard-32' is not in the CPU machine catalogue (the types "
        f"the cost estimate can price); {DEFAULT_HEAD_MACHINES}; or cluster.systemPool.allowUncataloguedMachineType: "
        "true for another type (then not priced)"
    )


@pytest.mark.parametrize(
    "machine,room",
    [
        ("n2-highmem-2", "0.9 CPU / 11.0 GiB"),  # less than one CPU
        ("n2-highcpu-8", "6.9 CPU / 3.9 GiB"),  # less than 4 GiB
    ],
)
def test_a_system_pool_machine_with_no_room_for_the_least_head_is_refused_before_the_heads_own_check(machine, room):
    fits = ["n2-standard-4", "n2-highmem-4", "n2-standard-8", "n2-highmem-8", "n2-highcpu-16", "n2-standard-16"]
    fits += ["n2-highmem-16", "n2-highcpu-32", "n2-standard-32", "n2-highmem-32", "n2-highcpu-48", "n2-standard-48"]
    fits += ["n2-highmem-48", "n2-highcpu-64", "n2-standard-64", "n2-highmem-64", "n2-highcpu-80", "n2-standard-80"]
    fits += ["n2-highmem-80", "n2-highcpu-96", "n2-standard-96", "n2-highmem-96", "n2-standard-128", "n2-highmem-128"]
    assert rejection(cluster={"systemPool": {"machineType": machine}}, ray={"headCpu": 1, "headMemoryGib": 4}) == (
        f"nemo-rl-gke:cluster.systemPool.machineType: {machine!r} leaves no room for a Ray head ({room} after GKE's "
        f"reservations and system pods); allowed (fit ray.headCpu 1 / ray.headMemoryGib 4): {', '.join(fits)}"
    )
    # n2-standard-4 leaves 2.9 CPU / 11.0 GiB: a head of its whole room fits.
    assert parse(
        {
            **BASE,
            "cluster": {"systemPool": {"machineType": "n2-standard-4"}},
            "ray": {"headCpu": 2, "headMemoryGib": 10},
        },
        "dev",
    )


@pytest.mark.parametrize(
    "room,refused",
    [((1.0, 4.0), False), ((1.99, 4.99), False), ((0.99, 4.0), True), ((1.0, 3.99), True)],
)
def test_the_system_pool_room_check_holds_a_machine_to_the_least_head_ray_allows(monkeypatch, room, refused):
    # No machine shape infra/machines.py knows leaves exactly 1 CPU or 4 GiB, so the edges are set here: the least
    # head is ray.headCpu 1 / ray.headMemoryGib 4 (RayConfig's bounds).
    from infra.config import KeyedValueError, RayConfig
    from infra.config import cluster_config as cluster_config

    assert [m.ge for m in RayConfig.model_fields["head_cpu"].metadata[:1]] == [1]
    assert [m.ge for m in RayConfig.model_fields["head_memory_gib"].metadata[:1]] == [4]
    cfg = parse(BASE, "dev")
    monkeypatch.setattr(cluster_config, "system_node_room", lambda machine: room)
    if not refused:
        cluster_config.check_system_pool_machine(cfg.cluster, cfg.ray)
        return
    with pytest.raises(KeyedValueError) as info:
        cluster_config.check_system_pool_machine(cfg.cluster, cfg.ray)
    # every machine has that room now: none fits the default head
    assert str(info.value) == (
        f"'n2-highmem-16' leaves no room for a Ray head ({room[0]:.1f} CPU / {room[1]:.1f} GiB after GKE's "
        "reservations and system pods); allowed (fit ray.headCpu 8 / ray.headMemoryGib 64): "
    )


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


def test_the_ip_endpoint_without_an_allow_list_is_refused_unless_opened_on_purpose():
    assert rejection(cluster={"controlPlaneAccess": "ip"}) == (
        "nemo-rl-gke:cluster.masterAuthorizedNetworks: is empty, which would open the control plane to every address; "
        "allowed: the CIDRs `pulumi up` and kubectl connect from, e.g. `masterAuthorizedNetworks: [{cidrBlock: <your "
        "egress IP>/32}]`, or cluster.allowPublicControlPlane: true to open it on purpose"
    )
    cfg = parse({**BASE, "cluster": {"controlPlaneAccess": "ip", "allowPublicControlPlane": True}}, "dev")
    assert cfg.cluster.allow_public_control_plane is True


def test_a_bucket_that_the_same_destroy_would_export_into_and_delete_is_refused():
    assert rejection(storage={"deleteBucketOnDestroy": True}) == (
        "nemo-rl-gke:storage.deleteBucketOnDestroy: true would delete the bucket right after lustre.exportOnDestroy "
        "exported the checkpoints into it; allowed: false, or set lustre.exportOnDestroy: false as well"
    )
    cfg = parse({**BASE, "storage": {"deleteBucketOnDestroy": True}, "lustre": {"exportOnDestroy": False}}, "dev")
    assert (cfg.storage.delete_bucket_on_destroy, cfg.lustre.export_on_destroy) == (True, False)


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


# ---------------------------------------------------------------- strict input, names and labels


@pytest.mark.parametrize(
    "raw,message",
    [
        ({"gpuPool": {"nodeCount": True}}, "gpuPool.nodeCount: true is not allowed; allowed: a whole number"),
        ({"ray": {"workerCpu": True}}, "ray.workerCpu: true is not allowed; allowed: a whole number"),
        ({"job": {"budgetUsd": True}}, "job.budgetUsd: true is not allowed; allowed: a number"),
        ({"cost": {"priceOverrides": {"k": True}}}, "cost.priceOverrides: 'k': true is not allowed; allowed: a number"),
        ({"manageApis": "yes"}, "manageApis: 'yes' is not allowed; allowed: true or false"),
    ],
)
def test_a_boolean_is_not_taken_for_a_number_nor_a_word_for_a_boolean(raw, message):
    assert rejection(**raw) == f"nemo-rl-gke:{message}"


@pytest.mark.parametrize(
    "stack,prefix",
    [
        ("dev", "dev"),
        ("Dev", "dev-9c24"),  # told apart from `dev` by sha256("Dev")[:4]
        ("My_Stack..Prod", "my-stack-prod-87c7"),  # `_` and `.` as `-`, runs of `-` as one
        ("abcdefghijklmn_opq", "abcdefghijklmn-ab74"),  # cut to 15, the cut's trailing `-` dropped
        ("A1", "a1-16a3"),
        ("_dev_", "dev-4972"),  # no `-` left at either end
    ],
)
def test_the_default_name_prefix_is_the_stack_name_made_a_cloud_name(stack, prefix):
    from infra.config import prefix_for_stack

    assert prefix_for_stack(stack) == prefix
    assert parse(dict(BASE), stack).name_prefix == prefix


@pytest.mark.parametrize(
    "stack,why",
    [
        ("1dev", "does not start with a letter"),
        ("_-", "does not start with a letter"),
        ("Google-test", "would put 'google' into the bucket name"),
        ("G0ogle", "would put 'google' into the bucket name"),  # a 0 for an o is refused too
        # Was told "would put 'google' into the bucket name" (the only other reason the message knew).
        ("dév", "has letters outside a-z, which cloud names do not take"),
    ],
)
def test_a_stack_name_that_makes_no_name_prefix_is_refused_saying_why(stack, why):
    with pytest.raises(ConfigError) as info:
        parse(dict(BASE), stack)
    assert str(info.value) == (
        f"nemo-rl-gke:namePrefix: not set, and the stack name {stack!r} {why}; allowed: set nemo-rl-gke:namePrefix to "
        "1-20 lowercase letters, digits or hyphens, starting with a letter"
    )


@pytest.mark.parametrize(
    "raw,key,value",
    [({"project": "my-g00gle-proj"}, "project", "my-g00gle-proj"), ({"namePrefix": "g0ogle"}, "namePrefix", "g0ogle")],
)
def test_google_in_the_bucket_name_is_refused_in_the_project_and_the_prefix(raw, key, value):
    assert rejection(**raw) == (
        f"nemo-rl-gke:{key}: {value!r} would put 'google' into the bucket name, which Cloud Storage refuses; "
        "allowed: a name without it"
    )


_CJK = "\U00020000"  # a Lo letter of four UTF-8 bytes
_LABEL_VALUE_RULE = "allowed: at most 63 lowercase letters, digits, '_' or '-' (under 128 bytes)"


def test_labels_of_lowercase_letters_of_any_script_and_every_kind_of_digit_are_accepted_up_to_the_limits():
    labels = {"a" * 63: "a" * 63, "team": "a_漢-1ⅻ²", "cjk": _CJK * 31 + "abc"}  # Ll Lo Nd Nl No; 127 bytes
    assert parse({**BASE, "labels": labels}, "dev").labels == labels


@pytest.mark.parametrize(
    "labels,message",
    [
        ({"team": "ab-X"}, f"label value 'ab-X' of 'team' is not allowed; {_LABEL_VALUE_RULE}"),
        ({"team": "a" * 64}, f"label value '{'a' * 56}... of 'team' is not allowed; {_LABEL_VALUE_RULE}"),
        ({"team": _CJK * 32}, f"label value {_CJK * 32!r} of 'team' is not allowed; {_LABEL_VALUE_RULE}"),  # 128 bytes
        (
            {"Team": "x"},
            "label key 'Team' is not allowed; allowed: 1-63 lowercase letters, digits, '_' or '-', starting with a "
            "lowercase letter (under 128 bytes)",
        ),
        (
            {"a" * 64: "x"},
            f"label key '{'a' * 56}... is not allowed; allowed: 1-63 lowercase letters, digits, '_' or '-', starting "
            "with a lowercase letter (under 128 bytes)",
        ),
    ],
)
def test_a_label_outside_googles_rules_is_refused(labels, message):
    assert rejection(labels=labels) == f"nemo-rl-gke:labels: {message}"


# ---------------------------------------------------------------- zones and versions


def test_a_region_or_zone_without_the_flavours_machines_and_lustre_is_refused_naming_the_nearest():
    hint = "or set nemo-rl-gke:allowUncataloguedZone: true for a zone Google added since 2026-12-02 (data/zones.yaml)"
    assert rejection(region="us-west2", zone="us-west2-a") == (
        "nemo-rl-gke:region: 'us-west2' has no zone with a4-highgpu-8g (flavour b200) and Managed Lustre in the zone "
        f"catalogue; allowed (nearest first): us-east1-b, us-central1-b, europe-west4-b; {hint}"
    )
    # same geography first, then by spelling against the region with a zone letter
    assert rejection(region="europe-north1", zone="europe-north1-a") == (
        "nemo-rl-gke:region: 'europe-north1' has no zone with a4-highgpu-8g (flavour b200) and Managed Lustre in the "
        f"zone catalogue; allowed (nearest first): europe-west4-b, asia-northeast1-b, us-east1-b; {hint}"
    )
    assert rejection(zone="us-east1-c") == (
        "nemo-rl-gke:zone: 'us-east1-c' does not offer a4-highgpu-8g (flavour b200) and Managed Lustre in the zone "
        f"catalogue; allowed (nearest first): us-east1-b, us-central1-b, asia-northeast1-b; {hint}"
    )
    assert parse({**BASE, "zone": "us-east1-c", "allowUncataloguedZone": True}, "dev").zone == "us-east1-c"


def test_a_pin_outside_the_version_matrix_is_refused_unless_untested_versions_are_allowed():
    assert rejection(ray={"chartVersion": "1.6.0"}) == (
        "nemo-rl-gke:ray.chartVersion: 1.6.0 is outside the version matrix; the nearest tested row standard-gib-v1.1.1 "
        "has 1.7.0 (data/version_matrix.yaml); allowed: that, or allowUntestedVersions: true"
    )
    cfg = parse({**BASE, "ray": {"chartVersion": "1.6.0"}, "allowUntestedVersions": True}, "dev")
    assert cfg.ray.chart_version == "1.6.0"


# ---------------------------------------------------------------- the engine's config


@pytest.mark.parametrize(
    "variable,value,says",
    [
        ("PULUMI_CONFIG", "{bad", "not valid JSON (Expecting property name enclosed in double quotes at character 1)"),
        ("PULUMI_CONFIG", "[1]", "a JSON list"),
        (
            "PULUMI_CONFIG_SECRET_KEYS",
            "{bad",
            "not valid JSON (Expecting property name enclosed in double quotes at character 1)",
        ),
        ("PULUMI_CONFIG_SECRET_KEYS", '{"a": 1}', "a JSON object"),
        ("PULUMI_CONFIG_SECRET_KEYS", "[1]", "a JSON list"),  # of a number, not of `namespace:key` names
    ],
)
def test_a_malformed_engine_environment_is_refused_naming_the_variable(monkeypatch, variable, value, says):
    from infra.config.engine import engine_config, engine_secret_keys

    allowed = {
        "PULUMI_CONFIG": "a JSON map of `namespace:key` to value, as the Pulumi CLI sets it",
        "PULUMI_CONFIG_SECRET_KEYS": "a JSON list of `namespace:key` names, as the Pulumi CLI sets it",
    }[variable]
    monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigError) as info:
        engine_config() if variable == "PULUMI_CONFIG" else engine_secret_keys({"hfToken"})
    assert str(info.value) == f"{variable}: {says}; allowed: {allowed}, or unset"


def test_the_projects_keys_are_taken_without_namespace_and_their_json_decoded_other_namespaces_left_out():
    from infra.config import namespaced

    flat = {
        "random:foo": 1,  # another package's namespace (`nemo-rl:foo` is refused as a look-alike of this project's)
        "gcp:project": "p",
        "nemo-rl-gke:flavour": "b200",
        "nemo-rl-gke:gpuPool": '{"nodeCount": 2}',
        "nemo-rl-gke:ray": "[not json",
        "nemo-rl-gke:zone": "",
        "nemo-rl-gke:x": 3,
    }
    assert namespaced(flat) == {"flavour": "b200", "gpuPool": {"nodeCount": 2}, "ray": "[not json", "zone": "", "x": 3}


@pytest.mark.parametrize(
    "key,namespace,name",
    [
        ("nemo-rl-gk:flavour", "nemo-rl-gk", "flavour"),
        ("NEMO-RL-GKE:flavour", "NEMO-RL-GKE", "flavour"),
        ("Nemo-rl-gk:flavour", "Nemo-rl-gk", "flavour"),
        ("nemo-rl-gk:a:b", "nemo-rl-gk", "a:b"),
    ],
)
def test_a_near_miss_of_the_projects_namespace_is_refused(key, namespace, name):
    from infra.config import namespaced

    with pytest.raises(ConfigError) as info:
        namespaced({"gcp:project": "p", key: "b200"})
    assert str(info.value) == (
        f"{key}: unknown namespace {namespace!r}; allowed: nemo-rl-gke:<key> (did you mean nemo-rl-gke:{name}?)"
    )


# ---------------------------------------------------------------- secrets


GATED_WITH_WANDB = {
    **BASE,
    "flavour": "h200",
    "region": "europe-west1",
    "zone": "europe-west1-b",
    "gpuPool": {"nodeCount": 2},
    "job": {"recipe": "gemma3-27b-gsm8k", "wandbProject": "grpo"},
}
HF_NEEDED = (
    "nemo-rl-gke:hfToken: not set, and job.recipe 'gemma3-27b-gsm8k' downloads google/gemma-3-27b-it, which Hugging "
    "Face serves only to accounts that accepted its licence; allowed: `pulumi config set --secret hfToken <token>` "
    "with a token of such an account"
)
WANDB_NEEDED = (
    "nemo-rl-gke:wandbApiKey: not set, and job.wandbProject 'grpo' asks for W&B logging; allowed: `pulumi config set "
    "--secret wandbApiKey <key>`, or remove job.wandbProject"
)


@pytest.mark.parametrize(
    "present,lines",
    [(set(), [HF_NEEDED, WANDB_NEEDED]), ({"hfToken"}, [WANDB_NEEDED]), ({"wandbApiKey"}, [HF_NEEDED])],
)
def test_each_secret_the_job_needs_and_lacks_is_refused_on_its_own_line(present, lines):
    from infra.config import MissingSecretError, refuse_missing_secrets

    with pytest.raises(MissingSecretError) as info:
        refuse_missing_secrets(parse(GATED_WITH_WANDB, "h200"), present)
    assert str(info.value) == "\n".join(lines)
    refuse_missing_secrets(parse(GATED_WITH_WANDB, "h200"), {"hfToken", "wandbApiKey"})


def test_a_plaintext_secret_and_a_plain_key_stored_as_secret_are_each_refused_on_their_own_line():
    from infra.config import refuse_plaintext_secrets

    with pytest.raises(ConfigError) as info:
        refuse_plaintext_secrets(
            {"hfToken": "x", "region": "r", "wandbApiKey": "y"},
            {"nemo-rl-gke:region", "nemo-rl-gke:wandbApiKey"},
            "dev",
        )
    assert str(info.value).splitlines() == [
        "nemo-rl-gke:hfToken: stored in plaintext; allowed: a secret (remove it from Pulumi.dev.yaml, "
        "the --config-file, Pulumi.yaml or PULUMI_CONFIG, wherever it is set, and run "
        "`pulumi config set --secret hfToken`)",
        "nemo-rl-gke:region: stored as a secret, but it is a plain setting; allowed: a plain value (set it again "
        "without --secret); only hfToken and wandbApiKey are secrets",
    ]


def test_the_wandb_key_counts_as_set_from_its_secret_key_name():
    from infra.config import wandb_key_set

    assert wandb_key_set({"nemo-rl-gke:wandbApiKey"}) is True
    assert wandb_key_set({"nemo-rl-gke:hfToken", "wandbApiKey"}) is False


# ---------------------------------------------------------------- the credential rule of job.overrides


@pytest.mark.parametrize(
    "value",
    [
        "hf_" + "a" * 25,  # a Hugging Face token's prefix, without digits or upper case
        "0123456789abcdef" * 2 + "01234567",  # 40 hex digits: a W&B API key
        "0123456789ABCDEF" * 2 + "01234567",  # upper-case hex
        "Zq7" * 11,  # 33 letters and digits mixing upper case, lower case and digits
    ],
)
def test_values_shaped_like_tokens_are_credentials(value):
    from infra.config.job import looks_like_credential

    assert looks_like_credential(value) is True


@pytest.mark.parametrize(
    "value",
    [
        "1" * 32,  # digits only: a number
        "deadbeef" * 4,  # hex letters only
        "abcdefghijklmnopqrstuvwxyzabcdef",  # lower case only
        "ABCDEFGHIJKLMNOPQRSTUVWXYZ123456",  # no lower case
        "abcdefghijklmnopqrstuvwxyz123456",  # no upper case
        "AbcdefghijklmnopqrstuvwxyzAbcdef",  # no digit
    ],
)
def test_long_runs_that_lack_a_tokens_mix_are_not_credentials(value):
    from infra.config.job import looks_like_credential

    assert looks_like_credential(value) is False


@pytest.mark.parametrize(
    ("key", "part"), [("x.accessKey", "accessKey"), ("x.sshkey", "sshkey"), ("x._.token", "token")]
)
def test_a_qualified_key_word_and_a_part_after_an_empty_one_are_found(key, part):
    from infra.config.job import secret_key_part

    assert secret_key_part(key) == part


# ---------------------------------------------------------------- pydantic's errors in stack-file words

_KEYS_DOC = "allowed: the keys of the config reference in docs/configuration.md"
_NETWORK = {"controlPlaneAccess": "ip", "masterAuthorizedNetworks": [{"cidrBlock": "203.0.113.0/24"}]}


@pytest.mark.parametrize(
    "raw,line",
    [
        ({}, "project: required key is not set; allowed: Google Cloud project id"),  # the description, its `.` cut
        # A key of an optional section: no field found to describe it.
        (
            {**BASE, "gpuPool": {"capacity": {}}},
            "gpuPool.capacity.ladder: required key is not set; allowed: Ordered rungs, most preferred first: each "
            "of spot, flexStart, onDemand or {reservation: NAME}. One GPU pool per rung (same machine, NICs and RDMA "
            "networks, autoscaled 0..nodeCount) and a ComputeClass whose priorities name them in this order; a gang "
            "may mix nodes of several rungs",
        ),
        (
            {
                **BASE,
                "cluster": {
                    **_NETWORK,
                    "masterAuthorizedNetworks": [{"cidrBlock": "203.0.113.0/24", "displayName": "x" * 65}],
                },
            },
            "cluster.masterAuthorizedNetworks[0].displayName: 65 characters; allowed: at most 64",
        ),
        ({**BASE, "region": "US-EAST1"}, "region: 'US-EAST1' is not allowed; allowed: a region name such as us-east1"),
        (
            {**BASE, "ray": {"chartVersion": "1.7"}},
            "ray.chartVersion: '1.7' is not allowed; allowed: a version such as 1.7.0 (ASCII digits)",
        ),
        ({**BASE, "gpuPool": "x"}, "gpuPool: 'x' is not allowed; allowed: a map of keys (key: value lines)"),
        (
            {**BASE, "gpuPool": {"provisioning": "preemptible"}},
            "gpuPool.provisioning: 'preemptible' is not allowed; allowed: 'spot', 'reservation', 'flexStart' or "
            "'onDemand'",
        ),
        (
            {**BASE, "cluster": {"mode": "serverless"}},
            "cluster.mode: 'serverless' is not allowed; allowed: 'standard' or 'autopilot'",
        ),
        ({**BASE, "job": {"budgetUsd": 0}}, "job.budgetUsd: 0 is not allowed; allowed: more than 0"),
        (
            {**BASE, "recovery": {"maxRestarts": 1001}},
            "recovery.maxRestarts: 1001 is not allowed; allowed: at most 1000",
        ),
        (
            {**BASE, "gpuPool.nodeCount": 2},
            "gpuPool.nodeCount: unknown key (`pulumi config set gpuPool.nodeCount` writes a flat key with a dot); "
            "allowed: the nested key, set with `pulumi config rm gpuPool.nodeCount` and `pulumi config set --path "
            "gpuPool.nodeCount <value>`",
        ),
        ({**BASE, "zzz": 1}, f"zzz: unknown key; {_KEYS_DOC}"),
        ({**BASE, "gpuPool": {"nodeCout": 2}}, f"gpuPool.nodeCout: unknown key; did you mean nodeCount? {_KEYS_DOC}"),
        # Under a section that may be left out (Optional): the hint and the description still reach it.
        (
            {**BASE, "gpuPool": {"nodeCount": 2, "capacity": {"ladder": ["spot"], "maxWaitMinute": 5}}},
            f"gpuPool.capacity.maxWaitMinute: unknown key; did you mean maxWaitMinutes? {_KEYS_DOC}",
        ),
        (
            {
                **BASE,
                "cluster": {**_NETWORK, "masterAuthorizedNetworks": [{"cidrBlock": "203.0.113.0/24", "nmae": "x"}]},
            },
            f"cluster.masterAuthorizedNetworks[0].nmae: unknown key; {_KEYS_DOC}",
        ),
        (  # an entry of a list of sections: its keys are known too
            {
                **BASE,
                "cluster": {
                    **_NETWORK,
                    "masterAuthorizedNetworks": [{"cidrBlock": "203.0.113.0/24", "displayNme": "x"}],
                },
            },
            f"cluster.masterAuthorizedNetworks[0].displayNme: unknown key; did you mean displayName? {_KEYS_DOC}",
        ),
    ],
)
def test_each_kind_of_pydantic_error_is_one_line_naming_the_key_in_stack_file_words(raw, line):
    with pytest.raises(ConfigError) as info:
        parse(raw, "dev")
    assert str(info.value) == f"nemo-rl-gke:{line}"


def test_an_error_of_the_whole_config_is_named_by_the_namespace_alone():
    from pydantic import ValidationError

    from infra.config import format_validation_error

    with pytest.raises(ValidationError) as info:
        StackConfig.model_validate("x")
    assert format_validation_error(info.value, StackConfig) == (
        "nemo-rl-gke: 'x' is not allowed; allowed: a map of keys (key: value lines)"
    )


def test_a_message_with_a_newline_stays_on_its_one_line():
    from pydantic import ValidationError, field_validator

    from infra.config import Model, format_validation_error

    class Section(Model):
        name: str = "x"

        @field_validator("name")
        @classmethod
        def _refuse(cls, v: str) -> str:
            raise ValueError("first\nsecond")

    with pytest.raises(ValidationError) as info:
        Section.model_validate({"name": "y"})
    assert format_validation_error(info.value, Section) == "nemo-rl-gke:name: first second"


def test_a_value_is_shown_whole_up_to_sixty_characters_and_cut_beyond():
    from infra.config.errors import shown

    assert shown("a" * 58) == "'" + "a" * 58 + "'"  # 60 characters with the quotes
    assert shown("a" * 59) == "'" + "a" * 56 + "..."
    assert shown("a\nb") == "'a\\nb'"


# ---------------------------------------------------------------- the sections' validator rules, messages whole
# The rules of gpuPool's, lustre's and network's validators are plain functions so that mutmut mutates them
# (docs/testing.md, "Mutation testing"); these tests compare their messages whole and take each limit from both
# sides. pydantic does not validate a field's default, so each accepted value here is given explicitly.

RUNG_HELP = "spot, flexStart, onDemand or {reservation: NAME}"


@pytest.mark.parametrize(
    "pool, message",
    [
        (
            {"provisioning": "reservation"},
            "gpuPool.reservationName: required when gpuPool.provisioning is 'reservation'",
        ),
        (
            {"provisioning": "spot", "reservationName": "my-a4-block"},
            "gpuPool.reservationName: only allowed when gpuPool.provisioning is 'reservation'",
        ),
        (
            {"provisioning": "flexStart", "compactPlacement": True},
            "gpuPool.compactPlacement: not allowed with gpuPool.provisioning 'flexStart'; allowed: false",
        ),
        (
            {"reservationName": "my-a4-block", "capacity": {"ladder": ["spot", "onDemand"]}},
            "gpuPool.reservationName: is set next to gpuPool.capacity; allowed: one of them (a one-rung ladder is "
            "`provisioning`)",
        ),
        (
            {"compactPlacement": True, "capacity": {"ladder": ["spot", "flexStart"]}},
            "gpuPool.compactPlacement: not allowed with a flexStart rung in gpuPool.capacity; allowed: false",
        ),
        (
            {"capacity": {"ladder": [{"provisioning": "reservation"}]}},
            f"gpuPool.capacity.ladder[0]: a reservation rung needs its name and no other rung has one; allowed: "
            f"{RUNG_HELP}",
        ),
        (
            {"capacity": {"ladder": ["spot", {"provisioning": "onDemand", "reservationName": "my-a4-block"}]}},
            f"gpuPool.capacity.ladder[1]: a reservation rung needs its name and no other rung has one; allowed: "
            f"{RUNG_HELP}",
        ),
        (
            {"capacity": {"ladder": [{"reservation": "a"}, {"reservation": "a"}]}},
            "gpuPool.capacity.ladder[1]: reservation a appears twice; allowed: each rung once",
        ),
        ({"capacity": {"ladder": ["spot", 7]}}, f"gpuPool.capacity.ladder[1]: 7 is not allowed; allowed: {RUNG_HELP}"),
    ],
)
def test_a_gpu_pool_refusal_is_its_whole_message(pool, message):
    assert rejection(gpuPool=pool) == f"nemo-rl-gke:{message}"


def test_compact_placement_is_accepted_with_a_ladder_without_a_flex_start_rung():
    cfg = parse({**BASE, "gpuPool": {"compactPlacement": True, "capacity": {"ladder": ["spot", "onDemand"]}}}, "dev")
    assert cfg.gpu_pool.compact_placement is True


def test_a_ladder_of_written_out_rungs_is_accepted_like_their_shorthand():
    ladder = [{"provisioning": "reservation", "reservationName": "my-a4-block"}, {"provisioning": "spot"}]
    cfg = parse({**BASE, "gpuPool": {"capacity": {"ladder": ladder}}}, "dev")
    assert [r.label for r in cfg.gpu_pool.ladder] == ["reservation my-a4-block", "spot"]


def test_a_one_rung_ladder_sets_provisioning_and_reservation_name():
    cfg = parse({**BASE, "gpuPool": {"capacity": {"ladder": [{"reservation": "my-a4-block"}]}}}, "dev")
    assert (cfg.gpu_pool.provisioning.value, cfg.gpu_pool.reservation_name) == ("reservation", "my-a4-block")
    cfg = parse({**BASE, "gpuPool": {"capacity": {"ladder": ["onDemand"]}}}, "dev")
    assert (cfg.gpu_pool.provisioning.value, cfg.gpu_pool.reservation_name) == ("onDemand", None)


@pytest.mark.parametrize("name", ["a", "LustreFs", "FS01abcd"])
def test_a_lustre_filesystem_of_one_to_eight_letters_or_digits_in_either_case_is_accepted(name):
    assert parse({**BASE, "lustre": {"filesystem": name}}, "dev").lustre.filesystem == name


@pytest.mark.parametrize("instance_id", ["l", "my-lustre", "a" * 63])
def test_a_lustre_instance_id_of_up_to_63_lowercase_characters_is_accepted(instance_id):
    assert parse({**BASE, "lustre": {"instanceId": instance_id}}, "dev").lustre.instance_id == instance_id


def test_a_bad_lustre_instance_id_is_its_whole_message():
    assert rejection(lustre={"instanceId": "Lustre"}) == (
        "nemo-rl-gke:lustre.instanceId: 'Lustre' is not allowed; allowed: 1-63 lowercase letters, digits or "
        "hyphens, starting with a letter and ending with a letter or digit"
    )


def test_a_psa_range_of_exactly_a_23_is_accepted():
    assert parse({**BASE, "network": {"psaCidr": "10.16.0.0/23"}}, "dev").network.psa_cidr == "10.16.0.0/23"


@pytest.mark.parametrize(
    "network, message",
    [
        (
            {"servicesCidr": "169.254.0.0/20"},
            "servicesCidr: 169.254.0.0/20 overlaps 169.254.0.0/16 (link-local, where the metadata server lives)",
        ),
        (
            {"rdmaCidrs": ["192.168.1.0/24", "127.0.0.0/24"]},
            "rdmaCidrs[1]: 127.0.0.0/24 overlaps 127.0.0.0/8 (loopback)",
        ),
    ],
)
def test_a_range_a_vpc_cannot_use_is_its_whole_message(network, message):
    assert rejection(network=network) == (
        f"nemo-rl-gke:network.{message}, which a VPC cannot use; allowed: private ranges such as 10.0.0.0/8, "
        "172.16.0.0/12 or 192.168.0.0/16"
    )


@pytest.mark.parametrize("key, cidr", [("primaryCidr", "10.0.0.0/30"), ("gvnicCidr", "192.168.0.0/30")])
def test_a_subnet_smaller_than_a_29_is_its_whole_message(key, cidr):
    assert rejection(network={key: cidr}) == (
        f"nemo-rl-gke:network.{key}: {cidr} is smaller than a /29, the smallest subnet Google Cloud creates; "
        "allowed: /29 or larger"
    )


def test_the_smallest_subnet_rule_is_only_for_subnets_not_secondary_ranges():
    # A /29 gVNIC subnet is the smallest accepted; a services range is a secondary range, not a subnet.
    cfg = parse({**BASE, "network": {"gvnicCidr": "192.168.0.0/29", "servicesCidr": "10.8.0.0/30"}}, "dev")
    assert (cfg.network.gvnic_cidr, cfg.network.services_cidr) == ("192.168.0.0/29", "10.8.0.0/30")


# ---------------------------------------------------------------- ray's, job's, cluster's, recovery's and cost's rules
# Their validators' rules are plain functions too (check_namespace, check_mount_path, check_no_credentials,
# check_control_plane_access, ...); the same approach: whole messages, both sides of each limit, accepted values
# given explicitly.

_SECRET_ALLOWED = (
    "allowed: no credential in job.overrides (they reach the job's entrypoint, the plan and the watcher's "
    "ConfigMap in plain text); the secrets are the hfToken and wandbApiKey keys (`pulumi config set --secret`), "
    "which reach the pods as files"
)


@pytest.mark.parametrize("namespace", ["default", "kube-system", "gke-managed-x", "gmp-public"])
def test_a_system_namespace_is_refused_naming_the_allowed_kind(namespace):
    assert rejection(ray={"namespace": namespace}) == (
        f"nemo-rl-gke:ray.namespace: {namespace!r} is a system namespace; allowed: a namespace of its own, not "
        "default or kube-*, gke-*, gmp-*"
    )


@pytest.mark.parametrize("namespace", ["defaults", "kube", "my-kube-ns", "team-gke", "gmp"])
def test_a_namespace_that_only_resembles_a_system_one_is_accepted(namespace):
    assert parse({**BASE, "ray": {"namespace": namespace}}, "dev").ray.namespace == namespace


def test_the_default_service_account_is_refused_and_a_dedicated_one_accepted():
    assert rejection(ray={"serviceAccount": "default"}) == (
        "nemo-rl-gke:ray.serviceAccount: 'default' is the account of every pod in the namespace; allowed: a "
        "dedicated name such as ray"
    )
    assert parse({**BASE, "ray": {"serviceAccount": "ray-pods"}}, "dev").ray.service_account == "ray-pods"


_NOT_NORMAL = "is not allowed; allowed: a normalized absolute path (no '.', '..', '//' or trailing '/')"


@pytest.mark.parametrize(
    "path, message",
    [
        ("/lustre/", f"'/lustre/' {_NOT_NORMAL}"),
        ("/data//lustre", f"'/data//lustre' {_NOT_NORMAL}"),
        ("/data/../lustre", f"'/data/../lustre' {_NOT_NORMAL}"),
        ("/lustre/.cache", f"'/lustre/.cache' {_NOT_NORMAL}"),  # normalized, but a hidden component
        ("/bin", "'/bin' would mount Lustre over the system directory /bin; allowed: a path such as /lustre"),
        ("/var", "'/var' would mount Lustre over the system directory /var; allowed: a path such as /lustre"),
        (
            "/usr/local/lustre",
            "'/usr/local/lustre' would mount Lustre over the system directory /usr; allowed: a path such as /lustre",
        ),
        ("/", "'/' would hide /opt/nemo-rl in the Ray containers; allowed: a path such as /lustre"),
        ("/opt", "'/opt' would hide /opt/nemo-rl in the Ray containers; allowed: a path such as /lustre"),
        (
            "/opt/nemo-rl",
            "'/opt/nemo-rl' would hide /opt/nemo-rl in the Ray containers; allowed: a path such as /lustre",
        ),
        ("/tmp", "'/tmp' would hide /tmp/ray in the Ray containers; allowed: a path such as /lustre"),
        ("/tmp/ray", "'/tmp/ray' would hide /tmp/ray in the Ray containers; allowed: a path such as /lustre"),
    ],
)
def test_an_unsafe_mount_path_is_refused_naming_what_it_would_hide(path, message):
    assert rejection(ray={"mountPath": path}) == f"nemo-rl-gke:ray.mountPath: {message}"


# /optX: the X that ends it is no separator to strip (the rule strips only a trailing '/')
@pytest.mark.parametrize(
    "path", ["/lustre", "/usrdata", "/varlib/x", "/opt/nemo-rl-data", "/tmp/rays", "/mnt/a.b", "/optX"]
)
def test_a_mount_path_beside_the_system_and_container_directories_is_accepted(path):
    assert parse({**BASE, "ray": {"mountPath": path}}, "dev").ray.mount_path == path


def test_an_unknown_recipe_is_refused_with_every_recipe_listed():
    from workloads.recipes import RECIPES

    assert rejection(job={"recipe": "llama"}) == (
        f"nemo-rl-gke:job.recipe: unknown recipe 'llama'; allowed: {', '.join(RECIPES)}"
    )
    cfg = parse({**BASE, "gpuPool": {"nodeCount": 2}, "job": {"recipe": "gemma3-27b-gsm8k"}}, "dev")
    assert cfg.job.recipe == "gemma3-27b-gsm8k"


def test_one_override_past_the_bound_is_refused_whole():
    from infra.config.job import MAX_OVERRIDES

    many = [f"++extra.k{i}=1" for i in range(MAX_OVERRIDES + 1)]
    assert rejection(job={"overrides": many}) == (
        f"nemo-rl-gke:job.overrides: {MAX_OVERRIDES + 1} overrides; allowed: at most {MAX_OVERRIDES} (a larger "
        "change is a recipe of its own)"
    )


def test_a_credential_after_an_override_that_is_not_a_string_is_still_refused():
    # The credential rule runs before pydantic's type check: it skips the number and goes on to the token.
    assert rejection(job={"overrides": [7, "++logger.wandb.api_key=x"]}) == (
        f"nemo-rl-gke:job.overrides[1]: sets 'api_key', a name for a credential; {_SECRET_ALLOWED}"
    )


def test_a_credential_key_is_refused_when_set_and_a_token_value_under_any_key():
    assert rejection(job={"overrides": ["grpo.max_num_steps=5", "++env.HF_TOKEN=abc"]}) == (
        f"nemo-rl-gke:job.overrides[1]: sets 'HF_TOKEN', a name for a credential; {_SECRET_ALLOWED}"
    )
    assert rejection(job={"overrides": ["grpo.max_num_steps=5", "++env.note=" + "Zq7" * 11]}) == (
        f"nemo-rl-gke:job.overrides[1]: holds a value that looks like a token or key (not shown); {_SECRET_ALLOWED}"
    )


def test_deleting_a_credential_key_is_accepted():
    assert parse({**BASE, "job": {"overrides": ["~logger.wandb.api_key"]}}, "dev").job.overrides == (
        "~logger.wandb.api_key",
    )


@pytest.mark.parametrize(
    "override, problem",
    [
        ("=5", "'=5' has no key"),
        ("grpo.max_num_steps", "'grpo.max_num_steps' has no '='"),
    ],
)
def test_an_override_without_a_key_or_an_equals_sign_is_refused_whole(override, problem):
    assert rejection(job={"overrides": ["grpo.max_num_steps=5", override]}) == (
        f"nemo-rl-gke:job.overrides[1]: {problem}; allowed: key=value, +key=value, ++key=value or ~key"
    )


def test_an_override_that_changes_or_deletes_the_model_is_refused_with_the_recipe_that_trains_it():
    assert rejection(job={"overrides": ["grpo.max_num_steps=5", "policy.model_name=google/gemma-3-27b-it"]}) == (
        "nemo-rl-gke:job.overrides[1]: 'policy.model_name=google/gemma-3-27b-it' changes the model of job.recipe "
        "'qwen2.5-1.5b-gsm8k' (Qwen/Qwen2.5-1.5B-Instruct), whose sizing, estimates and gated-model check (hfToken) "
        "are the recipe's; allowed: job.recipe 'gemma3-27b-gsm8k', which trains it"
    )
    assert rejection(job={"overrides": ["~policy.model_name"]}) == (
        "nemo-rl-gke:job.overrides[0]: '~policy.model_name' changes the model of job.recipe 'qwen2.5-1.5b-gsm8k' "
        "(Qwen/Qwen2.5-1.5B-Instruct), whose sizing, estimates and gated-model check (hfToken) are the recipe's; "
        "allowed: a job.recipe of that model (recipes: qwen2.5-72b-deepscaler, gemma3-27b-gsm8k, qwen2.5-1.5b-gsm8k)"
    )


def test_backoff_bounds_equal_are_accepted_and_a_bound_below_the_first_wait_refused():
    cfg = parse({**BASE, "recovery": {"backoffSeconds": 600, "maxBackoffSeconds": 600}}, "dev")
    assert (cfg.recovery.backoff_seconds, cfg.recovery.max_backoff_seconds) == (600, 600)
    assert rejection(recovery={"backoffSeconds": 600, "maxBackoffSeconds": 599}) == (
        "nemo-rl-gke:recovery.maxBackoffSeconds: 599 is below recovery.backoffSeconds (600); allowed: 600 to 86400"
    )


def test_a_negative_price_is_refused_and_zero_accepted():
    assert rejection(cost={"priceOverrides": {"a": 1.5, "b": -0.01}}) == (
        "nemo-rl-gke:cost.priceOverrides: price 'b': -0.01 is not allowed; allowed: a number, 0 or more, at most "
        "1000000"
    )
    assert parse({**BASE, "cost": {"priceOverrides": {"a": 0.0}}}, "dev").cost.price_overrides == {"a": 0.0}


def test_data_keys_the_images_loader_does_not_read_are_refused_together_and_its_keys_accepted():
    nested = (
        "allowed: data.train.*, data.validation.*, data.default.* and the other keys it reads (the flat ones went "
        "with v0.6)"
    )
    overrides = ["data.dataset_name=x", "grpo.max_num_steps=5", "data.nope=1", "~data.gone", "data.add_bos=true"]
    assert rejection(job={"overrides": overrides}) == (
        "nemo-rl-gke:job.overrides: recipe 'qwen2.5-1.5b-gsm8k' runs nvcr.io/nvidia/nemo-rl:v0.6.0: "
        f"'data.dataset_name=x': NeMo-RL v0.6.0's data loader does not read data.dataset_name; {nested}; "
        f"'data.nope=1': NeMo-RL v0.6.0's data loader does not read data.nope; {nested}"
    )
    accepted = ["data.default.dataset_name=x", "data.add_bos=true"]
    assert parse({**BASE, "job": {"overrides": accepted}}, "dev").job.overrides == tuple(accepted)


_IP = {"controlPlaneAccess": "ip"}
_ALLOW_LIST = [{"cidrBlock": "203.0.113.0/24"}]


@pytest.mark.parametrize(
    "cluster, message",
    [
        (
            {"controlPlaneAccess": "dns", "masterAuthorizedNetworks": _ALLOW_LIST},
            "cluster.masterAuthorizedNetworks: limits the IP endpoint, which cluster.controlPlaneAccess: dns turns off "
            "(IAM guards the DNS endpoint); allowed: [] with dns, or cluster.controlPlaneAccess: ip",
        ),
        (
            {"controlPlaneAccess": "dns", "allowPublicControlPlane": True},
            "cluster.allowPublicControlPlane: true opens the IP endpoint, which cluster.controlPlaneAccess: dns turns "
            "off; allowed: false with dns, or cluster.controlPlaneAccess: ip",
        ),
        (
            {**_IP, "masterAuthorizedNetworks": [{"cidrBlock": "0.0.0.0/1"}, {"cidrBlock": "128.0.0.0/1"}]},
            "cluster.masterAuthorizedNetworks: 0.0.0.0/1, 128.0.0.0/1 covers every IPv4 address, which opens the "
            "control plane to all of them; allowed: the CIDRs `pulumi up` and kubectl connect from (e.g. <your egress "
            "IP>/32), or no masterAuthorizedNetworks and cluster.allowPublicControlPlane: true to open it on purpose",
        ),
        (
            {**_IP, "masterAuthorizedNetworks": _ALLOW_LIST, "allowPublicControlPlane": True},
            "cluster.allowPublicControlPlane: true contradicts the configured cluster.masterAuthorizedNetworks; "
            "allowed: false (or remove masterAuthorizedNetworks to open the control plane)",
        ),
    ],
)
def test_a_control_plane_access_contradiction_is_refused_whole(cluster, message):
    assert rejection(cluster=cluster) == f"nemo-rl-gke:{message}"


@pytest.mark.parametrize(
    "cluster",
    [
        {"controlPlaneAccess": "dns", "masterAuthorizedNetworks": [], "allowPublicControlPlane": False},
        {**_IP, "masterAuthorizedNetworks": [], "allowPublicControlPlane": True},
        {**_IP, "masterAuthorizedNetworks": [{"cidrBlock": "0.0.0.0/1"}, {"cidrBlock": "128.0.0.0/2"}]},
        {**_IP, "masterAuthorizedNetworks": _ALLOW_LIST, "allowPublicControlPlane": False},
    ],
)
def test_a_consistent_control_plane_access_is_accepted(cluster):
    cfg = parse({**BASE, "cluster": cluster}, "dev").cluster
    assert (cfg.control_plane_access, len(cfg.master_authorized_networks), cfg.allow_public_control_plane) == (
        cluster["controlPlaneAccess"],
        len(cluster["masterAuthorizedNetworks"]),
        cluster.get("allowPublicControlPlane", False),
    )


def test_an_authorized_network_is_kept_in_its_canonical_spelling_and_host_bits_are_refused():
    cluster = {**_IP, "masterAuthorizedNetworks": [{"cidrBlock": "203.0.113.0/255.255.255.0"}]}
    assert parse({**BASE, "cluster": cluster}, "dev").cluster.master_authorized_networks[0].cidr_block == (
        "203.0.113.0/24"
    )
    assert rejection(cluster={**_IP, "masterAuthorizedNetworks": [{"cidrBlock": "203.0.113.5/24"}]}) == (
        "nemo-rl-gke:cluster.masterAuthorizedNetworks[0].cidrBlock: '203.0.113.5/24' has host bits set; allowed: an "
        "IPv4 CIDR such as 203.0.113.7/32: 203.0.113.0/24"
    )


def test_a_colocation_override_after_another_override_is_read_whatever_its_case():
    overrides = ["grpo.max_num_steps=5", "policy.generation.colocated.enabled=True"]
    cfg = parse(
        {**BASE, "gpuPool": {"nodeCount": 2}, "job": {"recipe": "gemma3-27b-gsm8k", "overrides": overrides}}, "dev"
    )
    assert cfg.job.recipe_spec.parallelism.colocated is False  # the recipe's own layout, which the override changes
    assert cfg.job.parallelism.colocated is True


# ---------------------------------------------------------------- issue 36: what a careless user or an attacker types


@pytest.mark.parametrize(
    "override",
    [
        "policy.dtensor_cfg.tensor_parallel_size=0",
        "policy.generation.vllm_cfg.tensor_parallel_size=0",
        "policy.generation.vllm_cfg.tensor_parallel_size=00",
    ],
)
def test_a_parallel_size_of_zero_is_refused_naming_the_overrides_and_the_key(override):
    assert rejection(job={"overrides": [override]}) == (
        f"nemo-rl-gke:job.overrides: {override} is not allowed; allowed: a size of 1 or more"
    )


def test_the_megatron_tensor_size_of_zero_is_refused_on_the_72b_recipe():
    msg = rejection(
        gpuPool={"nodeCount": 4},
        job={"recipe": "qwen2.5-72b-deepscaler", "overrides": ["policy.megatron_cfg.tensor_model_parallel_size=0"]},
    )
    assert msg.startswith("nemo-rl-gke:job.overrides: policy.megatron_cfg.tensor_model_parallel_size=0 is not allowed")


def test_a_parallel_size_in_non_ascii_digits_is_refused():
    msg = rejection(job={"overrides": ["policy.dtensor_cfg.tensor_parallel_size=２"]})
    assert msg.startswith("nemo-rl-gke:job.overrides[0]: ") and "allowed: letters, digits" in msg


def test_a_price_override_that_would_overflow_an_estimate_is_refused():
    assert rejection(cost={"priceOverrides": {"gpu.a4-highgpu-8g.spot": 1.7e308}}) == (
        "nemo-rl-gke:cost.priceOverrides: price 'gpu.a4-highgpu-8g.spot': 1.7e+308 is not allowed; allowed: a "
        "number, 0 or more, at most 1000000"
    )
    assert parse({**BASE, "cost": {"priceOverrides": {"a": 1_000_000}}}, "dev").cost.price_overrides == {"a": 1e6}


WANDB_SHAPED = "0123456789abcdef0123456789abcdef01234567"  # 40 hex digits, as a W&B API key
HF_SHAPED = "hf_abcdefghijklmnopqrstuvwxyzABCD"


@pytest.mark.parametrize(
    "raw, key",
    [
        ({"job": {"wandbProject": WANDB_SHAPED}}, "job.wandbProject"),
        ({"ray": {"namespace": "abcdef0123456789abcdef0123456789abcdef01"}}, "ray.namespace"),
        ({"ray": {"mountPath": f"/{WANDB_SHAPED}"}}, "ray.mountPath"),
    ],
)
def test_a_credential_shaped_value_in_a_plain_key_that_reaches_the_job_is_refused_and_not_shown(raw, key):
    msg = rejection(**raw)
    assert msg.startswith(f"nemo-rl-gke:{key}: a value that looks like a credential (not shown); allowed: ")
    assert WANDB_SHAPED not in msg and "abcdef0123456789" not in msg


@pytest.mark.parametrize(
    "raw, key",
    [
        ({"project": HF_SHAPED}, "project"),
        ({"namePrefix": HF_SHAPED}, "namePrefix"),
        ({"labels": {"team": HF_SHAPED}}, "labels"),
        ({"labels": {HF_SHAPED: "x"}}, "labels"),
        ({"job": {"recipe": HF_SHAPED}}, "job"),
        ({"job": {"overrides": [{"a": HF_SHAPED}]}}, "job.overrides[0]"),
        ({"cost": {"priceOverrides": {HF_SHAPED: -1}}}, "cost.priceOverrides"),
        ({"lustre": {"importFrom": f"gs://u:{HF_SHAPED}@bucket/x/"}}, "lustre.importFrom"),
        ({"cluster": {"masterAuthorizedNetworks": [{"cidrBlock": HF_SHAPED}]}}, "cluster.masterAuthorizedNetworks"),
        ({"ray": {"ncclInstallerImage": f"us-docker.pkg.dev/x/y:{HF_SHAPED}"}}, "ray.ncclInstallerImage"),
    ],
)
def test_a_credential_pasted_into_the_wrong_key_is_never_repeated_in_the_error(raw, key):
    msg = rejection(**raw)
    assert f"nemo-rl-gke:{key}" in msg and "hf_abc" not in msg and "ABCD" not in msg, msg


def test_an_image_digest_is_not_taken_for_a_credential():
    from workloads.cli_args import looks_like_credential

    assert not looks_like_credential("ghcr.io/x/nccl@sha256:" + "0123456789abcdef" * 4)
    assert looks_like_credential(WANDB_SHAPED)


@pytest.mark.parametrize(
    "raw, key",
    [
        ({"cluster": {"minMasterVersion": "１.３５.０-gke.１０００"}}, "cluster.minMasterVersion"),
        ({"cluster": {"maintenanceStartTime": "0３:0０"}}, "cluster.maintenanceStartTime"),
        ({"ray": {"chartVersion": "١.٧.٠"}, "allowUntestedVersions": True}, "ray.chartVersion"),
        ({"region": "us-east١"}, "region"),
    ],
)
def test_versions_and_times_in_non_ascii_digits_are_refused(raw, key):
    assert rejection(**raw).startswith(f"nemo-rl-gke:{key}: ")


@pytest.mark.parametrize("path", ["gs://bucket/a/../b/", "gs://bucket/./b/", "gs://bucket/a/../"])
def test_a_dot_or_dot_dot_folder_in_lustre_import_from_is_refused(path):
    assert rejection(lustre={"importFrom": path}) == (
        f"nemo-rl-gke:lustre.importFrom: {path!r} has a '.' or '..' folder, which Cloud Storage reads literally; "
        "allowed: gs://bucket/path/ without '.' or '..' folders"
    )


@pytest.mark.parametrize(
    "cidr, says",
    [
        ("2001:db8::", "is an IPv6 address or range (what `curl ifconfig.me` prints on an IPv6 host)"),
        ("2001:db8::/64", "is an IPv6 address or range"),
        ("1.2.3.4/33", "is not an IPv4 CIDR; allowed: an IPv4 CIDR such as 203.0.113.7/32 (address/prefix length"),
        ("1.2.3", "is not an IPv4 CIDR; allowed: an IPv4 CIDR"),
        ("1.2.3.4/24", "has host bits set; allowed: an IPv4 CIDR such as 203.0.113.7/32: 1.2.3.0/24"),
    ],
)
def test_an_authorized_network_that_is_not_an_ipv4_cidr_says_what_is_allowed(cidr, says):
    msg = rejection(cluster={"controlPlaneAccess": "ip", "masterAuthorizedNetworks": [{"cidrBlock": cidr}]})
    assert msg.startswith(f"nemo-rl-gke:cluster.masterAuthorizedNetworks[0].cidrBlock: {cidr!r} {says}"), msg


@pytest.mark.parametrize(
    "value, says",
    [("null", "JSON null; allowed"), ("5", "a JSON number; allowed"), ("[" * 5000 + "]" * 5000, "nested too deeply")],
)
def test_a_pulumi_config_that_is_not_a_map_says_so_in_json_words(value, says, monkeypatch):
    from infra.config.engine import engine_config

    monkeypatch.setenv("PULUMI_CONFIG", value)
    with pytest.raises(ConfigError) as err:
        engine_config()
    assert str(err.value).startswith(f"PULUMI_CONFIG: {says}") and "NoneType" not in str(err.value)


# ---------------------------------------------------------------- issue 46: what the engine hands the program


@pytest.mark.parametrize(
    "value, says",
    [
        ('{"nodeCount": 1' + "0" * 5000 + "}", "nemo-rl-gke:gpuPool: a number of more than 4300 digits"),
        ("[" * 50_000 + "]" * 50_000, "nemo-rl-gke:gpuPool: nested too deeply"),
    ],
)
def test_a_json_string_value_too_big_or_too_deep_for_python_is_one_config_error_under_pulumi_up(value, says):
    from infra.config import namespaced

    with pytest.raises(ConfigError) as raised:
        namespaced({"nemo-rl-gke:project": "my-gcp-project", "nemo-rl-gke:gpuPool": value})
    assert str(raised.value).startswith(says) and "\n" not in str(raised.value)


@pytest.mark.parametrize("namespace", ["nemo-rl", "NeMo-RL", "rl-gke", "nemo_rl_gke", "NEMO-RL-GKE", "nemo"])
def test_a_namespace_that_reads_as_the_projects_name_is_refused_not_dropped(namespace):
    from infra.config import namespaced

    with pytest.raises(ConfigError, match="did you mean nemo-rl-gke:gpuPool"):
        namespaced({f"{namespace}:gpuPool": "{}"})


def test_the_engines_and_the_providers_namespaces_are_left_to_them():
    from infra.config import namespaced

    flat = {"gcp:project": "p", "kubernetes:context": "c", "pulumi:tags": "{}", "nemo-rl-gke:zone": "us-east1-b"}
    assert namespaced(flat) == {"zone": "us-east1-b"}


def test_the_consoles_url_of_a_disk_image_is_read_as_its_path():
    url = "https://www.googleapis.com/compute/v1/projects/my-images-1/global/images/nemo-rl-cache"
    cfg = parse({"project": "my-gcp-project", "gpuPool": {"imageCacheDiskImage": url}}, "dev")
    assert cfg.gpu_pool.image_cache_disk_image == "projects/my-images-1/global/images/nemo-rl-cache"


def test_a_gang_of_one_node_may_assume_a_preemption_an_hour_and_no_more():
    assert parse({"project": "my-gcp-project", "cost": {"spotPreemptionsPerNodeDay": 24}}, "dev")
    with pytest.raises(ConfigError, match="allowed: at most 12 with gpuPool.nodeCount 2"):
        parse(
            {"project": "my-gcp-project", "gpuPool": {"nodeCount": 2}, "cost": {"spotPreemptionsPerNodeDay": 13}}, "dev"
        )
    # An on-demand pool is never preempted: the rate is not used.
    assert parse(
        {
            "project": "my-gcp-project",
            "gpuPool": {"nodeCount": 2, "provisioning": "onDemand"},
            "cost": {"spotPreemptionsPerNodeDay": 24},
        },
        "dev",
    )


def test_max_lost_minutes_of_one_save_cycle_is_accepted_and_less_is_refused_by_the_job_builder():
    import math

    from conftest import spec_of

    from infra.run_plan import checkpoint_write_seconds_for

    cfg = parse({"project": "my-gcp-project"}, "dev")
    cycle_minutes = (cfg.recipe.step_seconds + checkpoint_write_seconds_for(cfg)) / 60
    least = math.ceil(cycle_minutes * 10) / 10
    ok = parse({"project": "my-gcp-project", "job": {"maxLostMinutes": least}}, "dev")
    assert "checkpointing.save_period=1 " in spec_of("dev", ok, wandb_key_set=False).entrypoint
    short = parse({"project": "my-gcp-project", "job": {"maxLostMinutes": max(1, least - 0.5)}}, "dev")
    with pytest.raises(ConfigError, match=f"^nemo-rl-gke:job.maxLostMinutes: .* allowed: at least {least:g}$"):
        spec_of("dev", short, wandb_key_set=False)
