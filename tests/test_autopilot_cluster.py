"""The Autopilot cluster (`AutopilotCluster` of infra/cluster.py), from the committed autopilot stack's plan.

The conflict list is terraform-provider-google-beta's (google-beta/services/container/
resource_container_cluster.go @93c65b2d: every field with `ConflictsWith: enable_autopilot`): the SDK
counts a field as set when it is present at all, so the tests check presence, not value.
"""

import json

import pytest
from conftest import STACKS, stack_plan

from infra.gke_common import NODE_SERVICE_ACCOUNT_ROLES
from tools.offline_plan import render_tree

CLUSTER = "gcp:container/cluster:Cluster"
POOL = "gcp:container/nodePool:NodePool"
ACCOUNT = "gcp:serviceaccount/account:Account"
PROJECT_IAM = "gcp:projects/iAMMember:IAMMember"

CONFLICTS_WITH_AUTOPILOT = (
    "enableShieldedNodes",
    "removeDefaultNodePool",
    "nodePools",
    "defaultMaxPodsPerNode",
    "enableIntranodeVisibility",
    "networkPolicy",
    "addonsConfig.networkPolicyConfig",
    "addonsConfig.dnsCacheConfig",
    "addonsConfig.statefulHaConfig",
    "clusterAutoscaling.enabled",
    "clusterAutoscaling.resourceLimits",
    "binaryAuthorization.enabled",
)


def present(inputs: dict, path: str) -> bool:
    node = inputs
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def autopilot_plan():
    return stack_plan("autopilot")


def test_the_autopilot_stack_has_one_autopilot_cluster_and_no_node_pool():
    plan = autopilot_plan()
    (cluster,) = plan.by_type(CLUSTER)
    assert cluster.inputs["enableAutopilot"] is True, cluster.name
    assert plan.by_type(POOL) == [], [p.name for p in plan.by_type(POOL)]
    assert [r.name for r in plan.resources if r.type == "nemo-rl-gke:infra:AutopilotCluster"] == ["gke"]
    assert not [r for r in plan.resources if r.type == "nemo-rl-gke:infra:GkeCluster"]


@pytest.mark.parametrize("field", CONFLICTS_WITH_AUTOPILOT)
def test_no_field_the_provider_refuses_next_to_enable_autopilot_is_sent_even_as_false(field):
    (cluster,) = autopilot_plan().by_type(CLUSTER)
    assert not present(cluster.inputs, field), f"{cluster.name}: {field} conflicts with enableAutopilot"


def test_the_conflict_check_sees_a_field_sent_as_false():
    assert present({"enableShieldedNodes": False}, "enableShieldedNodes")
    assert present({"clusterAutoscaling": {"enabled": False}}, "clusterAutoscaling.enabled")
    assert not present({"clusterAutoscaling": {"autoProvisioningDefaults": {}}}, "clusterAutoscaling.enabled")


@pytest.mark.parametrize("stack", STACKS)
def test_standard_clusters_never_send_enable_autopilot_not_even_false(stack):
    # With removeDefaultNodePool: true, a present enableAutopilot (false included) fails at preview
    # (terraform-provider-google #20991, pulumi-gcp #2881).
    (cluster,) = stack_plan(stack).by_type(CLUSTER)
    assert "enableAutopilot" not in cluster.inputs, cluster.name
    assert cluster.inputs["removeDefaultNodePool"] is True


def test_the_cluster_is_regional_with_multi_networking_ray_lustre_and_workload_identity():
    (cluster,) = autopilot_plan().by_type(CLUSTER)
    inputs = cluster.inputs
    assert inputs["location"] == "europe-west1", "Autopilot clusters are regional"
    assert inputs["enableMultiNetworking"] is True and inputs["networkingMode"] == "VPC_NATIVE"
    assert inputs["workloadIdentityConfig"] == {"workloadPool": "my-gcp-project.svc.id.goog"}
    (ray,) = inputs["addonsConfig"]["rayOperatorConfigs"]
    assert ray == {
        "enabled": True,
        "rayClusterLoggingConfig": {"enabled": True},
        "rayClusterMonitoringConfig": {"enabled": True},
    }
    assert inputs["addonsConfig"]["lustreCsiDriverConfig"]["enabled"] is True
    # Autopilot always runs Dataplane V2; sending it is not needed (optional + computed).
    assert "datapathProvider" not in inputs and "nodeConfig" not in inputs and "initialNodeCount" not in inputs


def test_the_cluster_has_private_nodes_and_only_the_dns_control_plane_endpoint():
    (cluster,) = autopilot_plan().by_type(CLUSTER)
    assert cluster.inputs["privateClusterConfig"] == {"enablePrivateNodes": True, "enablePrivateEndpoint": True}
    assert cluster.inputs["controlPlaneEndpointsConfig"] == {
        "dnsEndpointConfig": {"allowExternalTraffic": True},
        "ipEndpointsConfig": {"enabled": False},
    }
    assert "masterAuthorizedNetworksConfig" not in cluster.inputs


def test_nodes_gke_creates_run_as_the_dedicated_account_which_holds_its_roles_first():
    plan = autopilot_plan()
    (cluster,) = plan.by_type(CLUSTER)
    (account,) = plan.by_type(ACCOUNT)
    email = f"{account.inputs['accountId']}@my-gcp-project.iam.gserviceaccount.com"
    assert cluster.inputs["clusterAutoscaling"] == {
        "autoProvisioningDefaults": {
            "serviceAccount": email,
            "oauthScopes": ["https://www.googleapis.com/auth/cloud-platform"],
        }
    }
    grants = {g.urn for g in plan.by_type(PROJECT_IAM)}
    assert len(grants) == len(NODE_SERVICE_ACCOUNT_ROLES) and grants <= set(cluster.dependencies), (
        f"{cluster.name} may start before its nodes' roles"
    )


def test_clients_get_credentials_for_the_region_and_the_provider_is_named_after_it():
    plan = autopilot_plan()
    assert plan.outputs["clusterLocation"] == "europe-west1"
    assert plan.outputs["kubectlCredentialsCommand"] == (
        "gcloud container clusters get-credentials autopilot-gke --region europe-west1 --project my-gcp-project "
        "--dns-endpoint"
    )
    (provider,) = plan.by_type("pulumi:providers:kubernetes")
    assert provider.inputs["clusterIdentifier"] == "gke_my-gcp-project_europe-west1_autopilot-gke"


def test_the_dashboard_reads_the_regional_cluster_and_the_zonal_lustre_and_gpu_vms():
    plan = autopilot_plan()
    doc = json.loads(plan.one("gcp:monitoring/dashboard:Dashboard").inputs["dashboardJson"])
    filters = [
        ds["timeSeriesQuery"]["timeSeriesFilter"]["filter"]
        for tile in doc["mosaicLayout"]["tiles"]
        for ds in (tile["widget"].get("xyChart") or {}).get("dataSets", [])
    ]
    k8s = [f for f in filters if 'resource.type="k8s_' in f]
    lustre = [f for f in filters if "lustre.googleapis.com" in f]
    assert k8s and all('resource.label."location"="europe-west1"' in f for f in k8s), k8s
    assert lustre and all('resource.label."location"="europe-west1-b"' in f for f in lustre), lustre
    metric = plan.one("gcp:logging/metric:Metric", "preemptions").inputs["filter"]
    # Autopilot names its node VMs gk3-<cluster>-...; the VMs are in the zone.
    assert (
        'protoPayload.resourceName:"/instances/gk3-autopilot-gke"' in metric
        and 'resource.labels.zone="europe-west1-b"' in metric
    )


def test_the_plan_counts_the_gpu_nodes_autopilot_will_create_for_the_workers():
    text = render_tree(autopilot_plan())
    assert "GPU nodes: 2   GPUs: 16" in text


def test_a_callers_depends_on_reaches_every_child_of_the_autopilot_cluster():
    import pulumi
    import pulumi_gcp as gcp
    from k8s_support import CTX, gpu_pool, record

    from infra.cluster import AutopilotCluster, AutopilotClusterArgs
    from infra.config import ClusterConfig
    from infra.gke_common import ClusterNetwork

    network = ClusterNetwork(
        primary_network="vpc",
        primary_subnet="subnet",
        pods_range_name="pods",
        services_range_name="services",
        pods_cidr=None,
        services_cidr=None,
    )

    def build():
        api = gcp.projects.Service("container-api", service="container.googleapis.com", project=CTX.project)
        args = AutopilotClusterArgs(CTX, ClusterConfig(mode="autopilot"), network, False, gpu_pool())
        AutopilotCluster("gke", args, opts=pulumi.ResourceOptions(depends_on=[api]))
        return api

    rec = record(build)
    (api,) = rec.by_type("gcp:projects/service:Service")
    children = [r for r in rec.resources if r.custom and r.type != api.type]
    assert {r.type for r in children} == {CLUSTER, ACCOUNT, PROJECT_IAM}
    late = [r.name for r in children if api.urn not in r.dependencies]
    assert not late, f"created before the API they need: {late}"
