"""The GKE cluster, its CPU system pool and its multi-NIC GPU pool."""

from __future__ import annotations

import json

import pytest
from conftest import STACKS, merged, run_plan, stack_plan

from tools.mocks import FAKE_CA

CLUSTER = "gcp:container/cluster:Cluster"
POOL = "gcp:container/nodePool:NodePool"
SUBNET = "gcp:compute/subnetwork:Subnetwork"
NETWORK = "gcp:compute/network:Network"
COMPONENT = "nemo-rl-gke:infra:GkeCluster"

# Pulumi.<stack>.yaml and flavours.py: what the GPU pool of each committed stack must be.
EXPECTED = {
    "dev": {
        "zone": "us-east1-b",
        "machine": "a4-highgpu-8g",
        "gpu": "nvidia-b200",
        "nodes": 1,
        "deletion_protection": False,
        "system_machine": "n2-standard-8",
    },
    "b200": {
        "zone": "us-east1-b",
        "machine": "a4-highgpu-8g",
        "gpu": "nvidia-b200",
        "nodes": 8,
        "deletion_protection": True,
        "system_machine": "n2-highmem-16",
    },
    "h200": {
        "zone": "europe-west1-b",
        "machine": "a3-ultragpu-8g",
        "gpu": "nvidia-h200-141gb",
        "nodes": 2,
        "deletion_protection": True,
        "system_machine": "n2-highmem-16",
    },
}


def gpu_pool(plan):
    return plan.one(POOL, "-gpu-pool")


def system_pool(plan):
    return plan.one(POOL, "-system-pool")


def gpu_plan(**gpu_pool_patch):
    """The dev stack with its `gpuPool` changed."""
    return run_plan("dev", gpuPool=merged("dev", "gpuPool", gpu_pool_patch))


@pytest.mark.parametrize("stack", STACKS)
def test_cluster_is_regional_vpc_native_with_dataplane_v2_and_multi_networking(stack):
    plan, want = stack_plan(stack), EXPECTED[stack]
    cluster = plan.one(CLUSTER)
    i = cluster.inputs
    # A regional control plane, every node in the zone (the removed default pool included).
    assert i["location"] == want["zone"].rsplit("-", 1)[0], cluster.name
    assert i["nodeLocations"] == [want["zone"]], cluster.name
    assert i["name"] == f"{stack}-gke", cluster.name
    assert i["datapathProvider"] == "ADVANCED_DATAPATH", cluster.name
    assert i["enableMultiNetworking"] is True, cluster.name
    assert i["networkingMode"] == "VPC_NATIVE", cluster.name
    assert i["workloadIdentityConfig"] == {"workloadPool": "my-gcp-project.svc.id.goog"}, cluster.name
    assert i["removeDefaultNodePool"] is True and i["initialNodeCount"] == 1, cluster.name
    assert i["deletionProtection"] is want["deletion_protection"], cluster.name
    assert i["releaseChannel"] == {"channel": "REGULAR"}, cluster.name
    assert "minMasterVersion" not in i, f"{cluster.name}: unset, so the channel's default version is used"
    assert i["maintenancePolicy"] == {
        "dailyMaintenanceWindow": {"startTime": "03:00"},
        "maintenanceExclusions": [
            {
                "exclusionName": "no-minor-or-node-upgrades",
                "startTime": "2026-01-01T00:00:00Z",
                "exclusionOptions": {"scope": "NO_MINOR_OR_NODE_UPGRADES", "endTimeBehavior": "UNTIL_END_OF_SUPPORT"},
            }
        ],
    }, cluster.name
    assert "masterAuthorizedNetworksConfig" not in i, f"{cluster.name}: no authorized networks are configured"
    assert i["resourceLabels"]["component"] == "gke" and i["resourceLabels"]["stack"] == stack, cluster.name


@pytest.mark.parametrize("stack", STACKS)
def test_cluster_uses_the_primary_subnet_and_the_secondary_ranges_the_plan_creates(stack):
    plan = stack_plan(stack)
    cluster = plan.one(CLUSTER)
    subnet = plan.one(SUBNET, "network-subnet")
    vpc = plan.one(NETWORK, "network-vpc")
    assert cluster.inputs["network"] == f"projects/my-gcp-project/global/networks/{vpc.inputs['name']}", cluster.name
    assert cluster.inputs["subnetwork"] == (
        f"projects/my-gcp-project/regions/{subnet.inputs['region']}/subnetworks/{subnet.inputs['name']}"
    ), cluster.name
    ranges = [r["rangeName"] for r in subnet.inputs["secondaryIpRanges"]]
    assert cluster.inputs["ipAllocationPolicy"] == {
        "clusterSecondaryRangeName": ranges[0],
        "servicesSecondaryRangeName": ranges[1],
    }, cluster.name
    assert {vpc.urn, subnet.urn} <= set(cluster.dependencies), f"{cluster.name} does not wait for its network"


def test_on_the_default_network_gke_creates_the_pod_and_service_ranges_from_the_config():
    plan = run_plan("dev", network=merged("dev", "network", {"useDefaultNetwork": True}))
    cluster = plan.one(CLUSTER)
    assert cluster.inputs["network"] == "projects/my-gcp-project/global/networks/default", cluster.name
    assert cluster.inputs["subnetwork"] == "projects/my-gcp-project/regions/us-east1/subnetworks/default", cluster.name
    assert cluster.inputs["ipAllocationPolicy"] == {
        "clusterIpv4CidrBlock": "10.4.0.0/14",
        "servicesIpv4CidrBlock": "10.8.0.0/20",
    }, cluster.name


@pytest.mark.parametrize("stack", STACKS)
def test_ray_operator_lustre_csi_and_gcs_fuse_addons_are_enabled(stack):
    cluster = stack_plan(stack).one(CLUSTER)
    addons = cluster.inputs["addonsConfig"]
    assert addons["rayOperatorConfigs"] == [
        {"enabled": True, "rayClusterLoggingConfig": {"enabled": True}, "rayClusterMonitoringConfig": {"enabled": True}}
    ], cluster.name
    assert addons["lustreCsiDriverConfig"] == {
        "enabled": True,
        "enableLegacyLustrePort": False,
        "disableMultiNic": True,
    }, cluster.name
    assert addons["gcsFuseCsiDriverConfig"] == {"enabled": True}, cluster.name


def test_configured_authorized_networks_restrict_the_control_plane():
    cluster_cfg = merged(
        "dev",
        "cluster",
        {
            "controlPlaneAccess": "ip",
            "masterAuthorizedNetworks": [
                {"cidrBlock": "203.0.113.0/24", "displayName": "office"},
                {"cidrBlock": "198.51.100.7/32"},
            ],
        },
    )
    cluster = run_plan("dev", cluster=cluster_cfg).one(CLUSTER)
    assert cluster.inputs["masterAuthorizedNetworksConfig"] == {
        "cidrBlocks": [
            {"cidrBlock": "203.0.113.0/24", "displayName": "office"},
            {"cidrBlock": "198.51.100.7/32", "displayName": "198.51.100.7/32"},
        ],
        "gcpPublicCidrsAccessEnabled": False,
    }, cluster.name


@pytest.mark.parametrize("stack", STACKS)
def test_gpu_pool_runs_the_flavour_machines_on_spot_with_the_gpu_taint(stack):
    plan, want = stack_plan(stack), EXPECTED[stack]
    pool = gpu_pool(plan)
    node = pool.inputs["nodeConfig"]
    assert pool.inputs["name"] == f"{stack}-gpu", pool.name
    assert node["machineType"] == want["machine"], pool.name
    assert node["guestAccelerators"] == [
        {"type": want["gpu"], "count": 8, "gpuDriverInstallationConfig": {"gpuDriverVersion": "LATEST"}}
    ], pool.name
    assert node["spot"] is True, pool.name
    # Spot consumes no reservation (Cluster Toolkit gke-node-pool's precondition for spot).
    assert node["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}, pool.name
    assert "flexStart" not in node, pool.name
    # From 0 to nodeCount: nodes only for pending pods; no initialNodeCount (ForceNew on a live pool).
    assert pool.inputs["autoscaling"] == {
        "totalMinNodeCount": 0,
        "totalMaxNodeCount": want["nodes"],
        "locationPolicy": "ANY",
    }, pool.name
    assert "nodeCount" not in pool.inputs and "initialNodeCount" not in pool.inputs, pool.name
    assert node["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}], pool.name
    assert node["gvnic"] == {"enabled": True}, pool.name
    assert node["imageType"] == "COS_CONTAINERD", pool.name
    assert (node["diskType"], node["diskSizeGb"]) == ("hyperdisk-balanced", 500), pool.name
    assert node["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}, pool.name
    region = want["zone"].rsplit("-", 1)[0]
    assert pool.inputs["location"] == region and pool.inputs["nodeLocations"] == [want["zone"]], pool.name


@pytest.mark.parametrize("stack", STACKS)
def test_gke_repairs_and_upgrades_the_nodes_of_both_pools_of_the_committed_stacks(stack):
    # Only queued provisioning (flex-start) turns repair off: a repaired node would leave its request.
    plan = stack_plan(stack)
    for pool in (gpu_pool(plan), system_pool(plan)):
        assert pool.inputs["management"] == {"autoRepair": True, "autoUpgrade": True}, pool.name


@pytest.mark.parametrize("stack", STACKS)
def test_compact_placement_is_not_requested_by_the_committed_stacks(stack):
    pool = gpu_pool(stack_plan(stack))
    assert "placementPolicy" not in pool.inputs, pool.name


def test_compact_placement_is_requested_when_the_stack_asks():
    pool = gpu_pool(run_plan("b200", gpuPool=merged("b200", "gpuPool", {"compactPlacement": True})))
    assert pool.inputs["placementPolicy"] == {"type": "COMPACT"}, pool.name


@pytest.mark.parametrize("stack", STACKS)
def test_gpu_pool_attaches_the_gvnic_then_eight_distinct_rdma_subnets_the_plan_creates(stack):
    plan = stack_plan(stack)
    pool = gpu_pool(plan)
    extra = pool.inputs["networkConfig"]["additionalNodeNetworkConfigs"]
    assert len(extra) == 9, pool.name
    subnets = {s.inputs["name"]: s for s in plan.by_type(SUBNET)}
    networks = {n.inputs["name"]: n for n in plan.by_type(NETWORK)}
    for entry in extra:
        assert entry["subnetwork"] in subnets, (
            f"{pool.name} names subnet {entry['subnetwork']} the plan does not create"
        )
        subnet = subnets[entry["subnetwork"]]
        assert subnet.inputs["network"] == entry["network"], f"{pool.name}: {subnet.name} is not in {entry['network']}"
        assert subnet.urn in pool.dependencies, f"{pool.name} does not wait for {subnet.name}"
    gvnic, rdma = extra[0], extra[1:]
    assert gvnic == {"network": f"{stack}-gvnic-vpc", "subnetwork": f"{stack}-gvnic-subnet"}, pool.name
    assert "networkProfile" not in networks[gvnic["network"]].inputs, pool.name
    assert len({e["subnetwork"] for e in rdma}) == 8, pool.name
    assert {e["network"] for e in rdma} == {f"{stack}-rdma-vpc"}, pool.name
    assert networks[f"{stack}-rdma-vpc"].inputs["networkProfile"].endswith("-vpc-roce"), pool.name
    assert [subnets[e["subnetwork"]].inputs["ipCidrRange"] for e in rdma] == [f"192.168.{n}.0/24" for n in range(1, 9)]


@pytest.mark.parametrize("stack", STACKS)
def test_system_pool_hosts_the_ray_head_on_cpu_nodes(stack):
    plan, want = stack_plan(stack), EXPECTED[stack]
    pool = system_pool(plan)
    node = pool.inputs["nodeConfig"]
    assert node["machineType"] == want["system_machine"], pool.name
    assert "guestAccelerators" not in node and "taints" not in node, pool.name
    assert pool.inputs["nodeCount"] == 1, pool.name
    assert node["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}, pool.name
    assert "networkConfig" not in pool.inputs, pool.name


def test_reservation_provisioning_consumes_exactly_the_named_reservation():
    pool = gpu_pool(gpu_plan(provisioning="reservation", reservationName="my-a4-block"))
    node = pool.inputs["nodeConfig"]
    assert node["reservationAffinity"] == {
        "consumeReservationType": "SPECIFIC_RESERVATION",
        "key": "compute.googleapis.com/reservation-name",
        "values": ["my-a4-block"],
    }, pool.name
    assert "spot" not in node and "nodeCount" not in pool.inputs, pool.name
    assert pool.inputs["autoscaling"]["totalMinNodeCount"] == 0, pool.name
    assert pool.inputs["management"] == {"autoRepair": True, "autoUpgrade": True}, pool.name


def test_flex_start_provisioning_gets_nodes_from_an_empty_autoscaled_pool_without_a_queue():
    plan = run_plan("dev", gpuPool=merged("dev", "gpuPool", {"provisioning": "flexStart", "nodeCount": 2}))
    pool = gpu_pool(plan)
    node = pool.inputs["nodeConfig"]
    assert node["flexStart"] is True, pool.name
    assert node["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}, pool.name
    assert "spot" not in node, pool.name
    assert "queuedProvisioning" not in pool.inputs, pool.name
    assert pool.inputs["autoscaling"] == {"totalMinNodeCount": 0, "totalMaxNodeCount": 2, "locationPolicy": "ANY"}, (
        pool.name
    )
    assert pool.inputs["initialNodeCount"] == 0 and "nodeCount" not in pool.inputs, pool.name
    assert pool.inputs["management"] == {"autoRepair": False, "autoUpgrade": True}, pool.name


def test_on_demand_provisioning_sets_neither_spot_nor_a_reservation():
    pool = gpu_pool(gpu_plan(provisioning="onDemand"))
    node = pool.inputs["nodeConfig"]
    assert not {"spot", "flexStart", "reservationAffinity"} & set(node), pool.name
    assert "queuedProvisioning" not in pool.inputs and "nodeCount" not in pool.inputs, pool.name
    assert pool.inputs["autoscaling"] == {"totalMinNodeCount": 0, "totalMaxNodeCount": 1, "locationPolicy": "ANY"}
    assert pool.inputs["management"] == {"autoRepair": True, "autoUpgrade": True}, pool.name


@pytest.mark.parametrize("stack", STACKS)
def test_cluster_and_pools_have_long_custom_timeouts(stack):
    plan = stack_plan(stack)
    cluster = plan.one(CLUSTER)
    assert cluster.options["customTimeouts"] == {"create": "60m", "update": "90m", "delete": "60m"}, cluster.name
    for pool in plan.by_type(POOL):
        assert pool.options["customTimeouts"] == {"create": "120m", "update": "120m", "delete": "60m"}, pool.name


@pytest.mark.parametrize("stack", STACKS)
def test_node_pools_belong_to_and_wait_for_the_cluster(stack):
    plan = stack_plan(stack)
    cluster = plan.one(CLUSTER)
    for pool in plan.by_type(POOL):
        assert pool.inputs["cluster"] == cluster.inputs["name"], pool.name
        assert pool.inputs["location"] == cluster.inputs["location"], pool.name
        assert cluster.urn in pool.dependencies, f"{pool.name} does not wait for {cluster.name}"


@pytest.mark.parametrize("stack", STACKS)
def test_cluster_resources_are_children_of_the_cluster_component(stack):
    plan = stack_plan(stack)
    component = plan.one(COMPONENT)
    for r in [plan.one(CLUSTER), *plan.by_type(POOL)]:
        assert r.parent == component.urn, f"{r.name} is not parented by {component.name}"
        assert r.name.startswith(f"{component.name}-"), r.name


@pytest.mark.parametrize("stack", STACKS)
def test_gpu_pool_facts_describe_the_pool_for_workloads(stack):
    plan, want = stack_plan(stack), EXPECTED[stack]
    facts = plan.component_outputs[plan.one(COMPONENT).urn]["gpuPoolFacts"]
    assert facts == {
        "poolName": f"{stack}-gpu",
        "nodeCount": want["nodes"],
        "gpusPerNode": 8,
        "acceleratorType": want["gpu"],
        "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}],
        "nodeSelector": {"cloud.google.com/gke-nodepool": f"{stack}-gpu"},
        "nics": [f"eth{n}" for n in range(1, 10)],
    }


@pytest.mark.parametrize("stack", STACKS)
def test_exports_tell_the_user_how_to_reach_the_cluster(stack):
    outputs = stack_plan(stack).outputs
    zone = EXPECTED[stack]["zone"]
    assert outputs["clusterName"] == f"{stack}-gke"
    region = zone.rsplit("-", 1)[0]
    # The DNS endpoint's host name, read back from the cluster; its certificate needs no cluster CA.
    assert outputs["clusterEndpoint"] == f"gke-0123456789abcdef0123456789abcdef-123456789012.{region}.gke.goog"
    assert "clusterCaCertificate" not in outputs, stack
    assert outputs["kubectlCredentialsCommand"] == (
        f"gcloud container clusters get-credentials {stack}-gke --location {region} --project my-gcp-project "
        "--dns-endpoint"
    )
    assert outputs["clusterLocation"] == region
    assert outputs["networkName"] == f"{stack}-vpc"
    assert outputs["gvnicNetworkName"] == f"{stack}-gvnic-vpc"
    assert outputs["rdmaNetworkName"] == f"{stack}-rdma-vpc"


def test_a_cluster_that_reports_no_dns_endpoint_fails_with_a_message_naming_the_way_out():
    from types import SimpleNamespace

    from infra.gke_common import _dns_endpoint

    host = "gke-0123456789abcdef-123456789012.us-east1.gke.goog"
    assert _dns_endpoint(SimpleNamespace(dns_endpoint_config=SimpleNamespace(endpoint=host))) == host
    for reported in (
        None,
        SimpleNamespace(dns_endpoint_config=None),
        SimpleNamespace(dns_endpoint_config=SimpleNamespace(endpoint="")),
    ):
        with pytest.raises(
            ValueError,
            match=r"reports no controlPlaneEndpointsConfig\.dnsEndpointConfig\.endpoint; "
            r"set cluster\.controlPlaneAccess: ip",
        ):
            _dns_endpoint(reported)


def test_with_ip_access_the_exports_are_the_ip_endpoint_and_the_cluster_ca():
    plan = run_plan(
        "h200", cluster=merged("h200", "cluster", {"controlPlaneAccess": "ip", "allowPublicControlPlane": True})
    )
    outputs = plan.outputs
    assert outputs["controlPlaneAccess"] == "ip"
    assert outputs["clusterEndpoint"] == "203.0.113.10"
    assert outputs["clusterCaCertificate"] == FAKE_CA
    assert not outputs["kubectlCredentialsCommand"].endswith("--dns-endpoint"), outputs["kubectlCredentialsCommand"]


@pytest.mark.parametrize("stack", STACKS)
def test_gpu_pool_declares_the_bundled_local_ssds_as_ephemeral_storage(stack):
    plan = stack_plan(stack)
    pool = plan.one("gcp:container/nodePool:NodePool", "gpu-pool")
    ssd = pool.inputs["nodeConfig"].get("ephemeralStorageLocalSsdConfig")
    assert ssd == {"localSsdCount": 32}, f"{pool.name}: an undeclared bundled SSD makes the pool diff and be replaced"


def test_node_upgrades_are_allowed_when_the_exclusion_is_switched_off():
    plan = run_plan("dev", cluster=merged("dev", "cluster", {"blockNodeUpgrades": False}))
    cluster = plan.one("gcp:container/cluster:Cluster")
    assert cluster.inputs["maintenancePolicy"] == {"dailyMaintenanceWindow": {"startTime": "03:00"}}, cluster.name


@pytest.mark.parametrize("stack", STACKS)
def test_the_system_pool_boot_disk_holds_the_nemo_rl_image(stack):
    # Cluster Toolkit's A4 and A3 Ultra blueprints: system_node_pool_disk_size_gb 200.
    plan = stack_plan(stack)
    (system,) = [
        p
        for p in plan.by_type("gcp:container/nodePool:NodePool")
        if not p.inputs["nodeConfig"].get("guestAccelerators")
    ]
    assert system.inputs["nodeConfig"]["diskSizeGb"] >= 200, system.name


@pytest.mark.parametrize("stack", ["dev", "b200", "h200"])
def test_deletion_protection_also_protects_the_cluster_in_pulumi_so_destroy_refuses_in_its_preview(stack):
    # GKE's flag alone fails only the cluster's own delete, after everything that depends on it is gone.
    plan = stack_plan(stack)
    cluster = plan.one("gcp:container/cluster:Cluster")
    protected = cluster.inputs["deletionProtection"]
    assert bool(cluster.options.get("protect")) is protected, cluster.name
    # Only the cluster: a protected parent would protect its children too.
    others = [r.name for r in plan.resources if r.options.get("protect") and r.urn != cluster.urn]
    assert others == [], others


def test_deletion_protection_true_protects_the_cluster_and_false_does_not():
    on = run_plan("dev", cluster={"deletionProtection": True, "systemPool": {"machineType": "n2-standard-8"}})
    off = run_plan("dev", cluster={"deletionProtection": False, "systemPool": {"machineType": "n2-standard-8"}})
    assert on.one("gcp:container/cluster:Cluster").options.get("protect") is True
    assert "protect" not in off.one("gcp:container/cluster:Cluster").options


def test_both_pools_are_pinned_to_the_zone_of_the_roce_vpc_and_lustre():
    plan = stack_plan("b200")
    for pool in plan.by_type(POOL):
        assert pool.inputs["nodeLocations"] == ["us-east1-b"], pool.name
    assert plan.one("gcp:lustre/instance:Instance").inputs["location"] == "us-east1-b"


def test_a_zonal_control_plane_is_an_option_in_the_zone_with_its_zone_left_implied():
    plan = run_plan("dev", cluster=merged("dev", "cluster", {"controlPlaneLocation": "zonal"}))
    cluster = plan.one(CLUSTER)
    assert cluster.inputs["location"] == "us-east1-b" and "nodeLocations" not in cluster.inputs, cluster.inputs
    for pool in plan.by_type(POOL):
        assert pool.inputs["location"] == "us-east1-b" and pool.inputs["nodeLocations"] == ["us-east1-b"], pool.name
    assert plan.outputs["kubectlCredentialsCommand"].startswith(
        "gcloud container clusters get-credentials dev-gke --location us-east1-b "
    )
    kubeconfig = json.loads(plan.one("pulumi:providers:kubernetes").inputs["kubeconfig"])
    assert kubeconfig["current-context"] == "gke_my-gcp-project_us-east1-b_dev-gke"


def test_the_kubeconfig_context_names_the_regional_location():
    kubeconfig = json.loads(stack_plan("dev").one("pulumi:providers:kubernetes").inputs["kubeconfig"])
    assert kubeconfig["current-context"] == "gke_my-gcp-project_us-east1_dev-gke"


@pytest.mark.parametrize("stack", STACKS)
def test_the_cluster_sends_dcgm_gpu_metrics_to_managed_prometheus_as_the_blueprints_do(stack):
    config = stack_plan(stack).one(CLUSTER).inputs["monitoringConfig"]
    assert config["managedPrometheus"] == {"enabled": True}
    assert "DCGM" in config["enableComponents"] and "SYSTEM_COMPONENTS" in config["enableComponents"]
    # Values GKE accepts (pulumi-gcp ClusterMonitoringConfig.enable_components).
    assert set(config["enableComponents"]) <= {
        "SYSTEM_COMPONENTS",
        "APISERVER",
        "SCHEDULER",
        "CONTROLLER_MANAGER",
        "STORAGE",
        "HPA",
        "POD",
        "DAEMONSET",
        "DEPLOYMENT",
        "STATEFULSET",
        "KUBELET",
        "CADVISOR",
        "DCGM",
        "JOBSET",
    }


@pytest.mark.parametrize("stack", STACKS)
def test_both_node_pools_are_deleted_before_they_are_replaced_because_their_names_are_fixed(stack):
    pools = stack_plan(stack).by_type(POOL)
    assert len(pools) == 2
    for pool in pools:
        assert pool.options.get("deleteBeforeReplace") is True, f"{pool.name}: created first, GKE would answer 409"


@pytest.mark.parametrize("stack", STACKS)
def test_the_job_is_stopped_before_either_pool_is_replaced_and_submitted_again_after(stack):
    plan = stack_plan(stack)
    (job,) = [r for r in plan.resources if r.type.endswith("JobSubmission")]
    pools = {p.urn for p in plan.by_type(POOL)}
    assert pools <= set(job.options.get("replaceWith", [])), job.name


# ----------------------------------------------------------------------------- the capacity ladder's rungs


LADDER_MANAGEMENT = {"auto_repair": True, "auto_upgrade": True}
LADDER_SCALING = {"total_min_node_count": 0, "total_max_node_count": 4}


@pytest.mark.parametrize(
    "rung,node_config,pool",
    [
        (
            ("reservation", "res-a"),
            {
                "reservation_affinity": {
                    "consume_reservation_type": "SPECIFIC_RESERVATION",
                    "key": "compute.googleapis.com/reservation-name",
                    "values": ["res-a"],
                }
            },
            {"management": LADDER_MANAGEMENT, "initial_node_count": 0, "autoscaling": LADDER_SCALING},
        ),
        (
            ("onDemand", None),
            {},
            {"management": LADDER_MANAGEMENT, "initial_node_count": 0, "autoscaling": LADDER_SCALING},
        ),
        (
            ("flexStart", None),
            {"flex_start": True, "reservation_affinity": {"consume_reservation_type": "NO_RESERVATION"}},
            {
                "management": {"auto_repair": False, "auto_upgrade": True},
                "initial_node_count": 0,
                "autoscaling": {**LADDER_SCALING, "location_policy": "ANY"},
            },
        ),
    ],
)
def test_a_ladder_rungs_pool_is_provisioned_as_the_rung_says_starting_empty_and_autoscaled(rung, node_config, pool):
    # The pool's own `provisioning` (spot, the default) is not the rung's: the rung decides, and every
    # rung's pool starts at 0 nodes and grows to the pool's node count only when the class reaches it.
    from infra.cluster import gpu_node_config, provisioning_settings
    from infra.config import Provisioning, Rung, parse
    from infra.flavours import FLAVOURS

    pool_cfg = parse({"project": "my-gcp-project", "gpuPool": {"nodeCount": 4}}, "dev").gpu_pool
    assert pool_cfg.provisioning is Provisioning.SPOT
    the_rung = Rung(Provisioning(rung[0]), rung[1])
    assert provisioning_settings(pool_cfg, the_rung) == {"node_config": node_config, "pool": pool}
    config = gpu_node_config(pool_cfg, FLAVOURS["b200"], {}, {}, the_rung)
    assert "spot" not in config and config.get("reservation_affinity") == node_config.get("reservation_affinity")


def test_the_gpu_node_config_carries_the_labels_and_declares_local_ssds_only_for_a_flavour_with_some():
    import dataclasses

    from infra.cluster import gpu_node_config
    from infra.config import parse
    from infra.flavours import FLAVOURS

    pool_cfg = parse({"project": "my-gcp-project"}, "dev").gpu_pool
    labels = {"nemo-rl-gke-stack": "dev", "team": "rl"}
    config = gpu_node_config(pool_cfg, FLAVOURS["b200"], {}, labels)
    assert config["resource_labels"] == labels
    assert config["ephemeral_storage_local_ssd_config"] == {"local_ssd_count": FLAVOURS["b200"].local_ssd_count}
    without = gpu_node_config(pool_cfg, dataclasses.replace(FLAVOURS["b200"], local_ssd_count=0), {}, labels)
    assert "ephemeral_storage_local_ssd_config" not in without


@pytest.mark.parametrize("stack", STACKS)
def test_the_gpu_pool_is_in_the_stacks_project_upgrades_in_place_and_carries_the_stacks_labels(stack):
    pool = gpu_pool(stack_plan(stack))
    node = pool.inputs["nodeConfig"]
    assert pool.inputs["project"] == "my-gcp-project", pool.name
    # No spare GPU capacity to surge into: one node at a time, in place.
    assert pool.inputs["upgradeSettings"] == {"strategy": "SURGE", "maxSurge": 0, "maxUnavailable": 1}, pool.name
    assert node["resourceLabels"] == {"component": "gke", "stack": stack, "managed-by": "pulumi", "app": "nemo-rl-gke"}
    assert node["serviceAccount"] == f"{stack}-nodes@my-gcp-project.iam.gserviceaccount.com", pool.name


def test_each_ladder_pool_is_labelled_and_tainted_for_its_compute_class_and_provisioned_as_its_rung():
    from infra.naming import COMPUTE_CLASS_LABEL

    pools = {p.inputs["name"]: p for p in stack_plan("b200-ladder").by_type(POOL) if "-gpu-" in p.inputs["name"]}
    assert set(pools) == {"b200-ladder-gpu-spot", "b200-ladder-gpu-flex", "b200-ladder-gpu-ondemand"}, set(pools)
    for name, pool in pools.items():
        node = pool.inputs["nodeConfig"]
        (cls,) = node["labels"].values()
        assert node["labels"] == {COMPUTE_CLASS_LABEL: cls}, name
        assert node["taints"] == [
            {"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"},
            {"key": COMPUTE_CLASS_LABEL, "value": cls, "effect": "NO_SCHEDULE"},
        ], name
        assert pool.inputs["initialNodeCount"] == 0 and "nodeCount" not in pool.inputs, name
    assert pools["b200-ladder-gpu-flex"].inputs["nodeConfig"]["flexStart"] is True


# ----------------------------------------------------------------------------- gpuPool.imageCacheDiskImage


def test_an_image_cache_disk_image_becomes_every_gpu_nodes_secondary_boot_disk_with_image_streaming():
    plan = run_plan("dev", gpuPool=merged("dev", "gpuPool", {"imageCacheDiskImage": "global/images/nemo-rl-v050"}))
    pool = gpu_pool(plan)
    node = pool.inputs["nodeConfig"]
    assert node["secondaryBootDisks"] == [
        {"diskImage": "global/images/nemo-rl-v050", "mode": "CONTAINER_IMAGE_CACHE"}
    ], pool.name
    assert node["gcfsConfig"] == {"enabled": True}, pool.name
    assert "secondaryBootDisks" not in system_pool(plan).inputs["nodeConfig"], "the system pool got the cache"


def test_every_gpu_node_image_and_gke_floor_is_one_the_secondary_boot_disk_page_admits():
    # GKE's secondary boot disk page: Standard from 1.28.3-gke.1067000 (earlier revisions); issue 45 reports COS from
    # 1.30.1-gke.1329000 and Ubuntu from 1.35.0-gke.1403000 (infra/cluster.py image_cache_settings). The program's
    # nodes are COS and its floor is above both; an Ubuntu flavour or a lower floor must revisit this.
    from infra.flavours import FLAVOURS
    from infra.version_matrix import load, parse_version

    assert {f.image_type for f in FLAVOURS.values()} == {"COS_CONTAINERD"}
    for row in load()["rows"]:
        assert parse_version(row["gke"]["min"]) >= parse_version("1.30.1-gke.1329000"), row["id"]


def test_without_an_image_cache_the_gpu_pool_has_no_secondary_boot_disk_nor_image_streaming():
    node = gpu_pool(stack_plan("dev")).inputs["nodeConfig"]
    assert not {"secondaryBootDisks", "gcfsConfig"} & set(node), "dev-gpu"


@pytest.mark.parametrize("image", ["nemo-rl", "projects/x/global/images/a", "global/images/Upper"])
def test_an_image_cache_disk_image_that_is_no_disk_image_path_is_refused(image):
    from infra.config import ConfigError, parse

    with pytest.raises(ConfigError, match=r"gpuPool\.imageCacheDiskImage"):
        parse({"project": "my-gcp-project", "gpuPool": {"imageCacheDiskImage": image}}, "dev")
