"""Least privilege and private by default, on every committed stack.

- the nodes run as a dedicated service account holding exactly the roles nodes need, never the
  Compute Engine default account, and no key is ever created;
- the nodes have no public IP and reach the internet through Cloud NAT; the control plane is
  reachable only from configured CIDRs, or from anywhere only when a stack says so explicitly;
- every node is a Shielded VM with Secure Boot and integrity monitoring;
- the Ray dashboard (job API) and GCS ports stay inside the cluster;
- the artifacts bucket survives `pulumi destroy` unless the stack opts in.
"""

from __future__ import annotations

from typing import Any, Iterator

import pytest
from conftest import ALL_STACKS, STACKS, merged, run_plan, stack_plan

from infra.config import ConfigError
from infra.gke_common import IMAGE_STREAMING_ROLE
from tools.estimates import stack_config

CLUSTER = "gcp:container/cluster:Cluster"
POOL = "gcp:container/nodePool:NodePool"
ACCOUNT = "gcp:serviceaccount/account:Account"
PROJECT_IAM = "gcp:projects/iAMMember:IAMMember"
BUCKET_IAM = "gcp:storage/bucketIAMMember:BucketIAMMember"
BUCKET = "gcp:storage/bucket:Bucket"
ROUTER = "gcp:compute/router:Router"
NAT = "gcp:compute/routerNat:RouterNat"
SUBNET = "gcp:compute/subnetwork:Subnetwork"
RELEASE = "kubernetes:helm.sh/v3:Release"

# GKE "Configure GKE node service accounts": the least-privilege role made for nodes, plus image pulls.
NODE_ROLES = {
    "roles/container.defaultNodeServiceAccount",
    "roles/artifactregistry.reader",
}
REGIONS = {"dev": "us-east1", "b200": "us-east1", "h200": "europe-west1"}
KEY_TYPES = ("gcp:serviceaccount/key:Key", "gcp:storage/hmacKey:HmacKey", "gcp:projects/apiKey:ApiKey")


def walk(value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """Every (path, value) pair of a nested structure."""
    yield path, value
    if isinstance(value, dict):
        for k, v in value.items():
            yield from walk(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from walk(v, f"{path}[{i}]")


def node_account(plan):
    account = plan.one(ACCOUNT)
    email = f"{account.inputs['accountId']}@my-gcp-project.iam.gserviceaccount.com"
    return account, email


# ---------------------------------------------------------------- least privilege


@pytest.mark.parametrize("stack", STACKS)
def test_the_node_service_account_holds_exactly_the_roles_nodes_need(stack):
    plan = stack_plan(stack)
    account, email = node_account(plan)
    assert account.inputs["accountId"] == f"{stack}-nodes", account.name
    grants = plan.by_type(PROJECT_IAM)
    # cluster.imageStreaming adds the one role GKE Image streaming asks of a non-default node account.
    roles = NODE_ROLES | ({IMAGE_STREAMING_ROLE} if stack_config(plan).cluster.image_streaming else set())
    assert {g.inputs["role"] for g in grants} == roles, [g.name for g in grants]
    assert len(grants) == len(roles), [g.name for g in grants]
    for grant in grants:
        assert grant.inputs["member"] == f"serviceAccount:{email}", grant.name
        assert grant.inputs["project"] == "my-gcp-project", grant.name
        assert account.urn in grant.dependencies, f"{grant.name} does not wait for {account.name}"


@pytest.mark.parametrize("stack", STACKS)
def test_every_node_pool_and_the_initial_pool_run_as_the_dedicated_account(stack):
    plan = stack_plan(stack)
    _, email = node_account(plan)
    grants = {g.urn for g in plan.by_type(PROJECT_IAM)}
    cluster = plan.one(CLUSTER)
    assert cluster.inputs["nodeConfig"]["serviceAccount"] == email, cluster.name
    # The removed default pool's config must never force a cluster replacement later.
    assert cluster.options["ignoreChanges"] == ["nodeConfig"], cluster.name
    for pool in plan.by_type(POOL):
        assert pool.inputs["nodeConfig"]["serviceAccount"] == email, pool.name
        assert "compute@developer" not in pool.inputs["nodeConfig"]["serviceAccount"], pool.name
        missing = grants - set(pool.dependencies)
        assert not missing, f"{pool.name} may start before its account's roles: {sorted(missing)}"
    assert stack_plan(stack).outputs["nodeServiceAccount"] == email


@pytest.mark.parametrize("stack", STACKS)
def test_no_service_account_key_or_other_long_lived_credential_exists(stack):
    plan = stack_plan(stack)
    keys = [r.name for r in plan.resources if r.type in KEY_TYPES]
    assert not keys, f"long-lived credentials: {keys}"
    for r in plan.resources:
        for path, value in walk(r.inputs):
            assert value != "GOOGLE_APPLICATION_CREDENTIALS", f"{r.name}: {path} points pods at a key file"
            assert not (isinstance(path, str) and path.endswith(("privateKey", "private_key"))), f"{r.name}: {path}"


@pytest.mark.parametrize("stack", STACKS)
def test_the_workload_identity_only_uses_objects_of_its_own_bucket(stack):
    plan = stack_plan(stack)
    bucket = plan.one(BUCKET)
    principal_grants = [
        r
        for r in plan.resources
        if r.type in (BUCKET_IAM, PROJECT_IAM) and str(r.inputs.get("member", "")).startswith("principal://")
    ]
    assert [(g.type, g.inputs["role"], g.inputs["bucket"]) for g in principal_grants] == [
        (BUCKET_IAM, "roles/storage.objectUser", bucket.inputs["name"])
    ], [g.name for g in principal_grants]


@pytest.mark.parametrize("stack", STACKS)
def test_the_preemption_watcher_runs_as_a_service_account_no_iam_grant_names(stack):
    plan = stack_plan(stack)
    (watcher,) = [d for d in plan.by_type("kubernetes:apps/v1:Deployment") if d.name.endswith("watcher-deployment")]
    pod = watcher.inputs["spec"]["template"]["spec"]
    account = pod["serviceAccountName"]
    namespace = watcher.inputs["metadata"]["namespace"]
    accounts = {
        (a.inputs["metadata"]["namespace"], a.inputs["metadata"]["name"])
        for a in plan.by_type("kubernetes:core/v1:ServiceAccount")
    }
    assert (namespace, account) in accounts, f"{watcher.name} runs as {account}, which the stack does not create"
    # Every IAM resource of any kind, every member form that can reach a KSA: its own principal, the
    # legacy `serviceAccount:<pool>[ns/ksa]`, and a namespace-wide principalSet.
    iam = [r for r in plan.resources if "iam" in r.type.lower()]
    members = [str(m) for r in iam for m in [r.inputs.get("member"), *(r.inputs.get("members") or [])] if m]
    workload_subjects = [m for m in members if m.startswith("principal://")]
    reaching = [
        m
        for m in members
        if m.endswith(f"/ns/{namespace}/sa/{account}")
        or m.endswith(f".svc.id.goog[{namespace}/{account}]")
        or (m.startswith("principalSet://") and f"/namespace/{namespace}" in m)
    ]
    assert workload_subjects and not reaching, f"{watcher.name}: IAM grants reach its KSA {account}: {reaching}"


# ---------------------------------------------------------------- private by default


@pytest.mark.parametrize("stack", STACKS)
def test_nodes_have_no_public_ip_and_the_control_plane_has_no_ip_endpoint(stack):
    cluster = stack_plan(stack).one(CLUSTER)
    assert cluster.inputs["privateClusterConfig"] == {"enablePrivateNodes": True, "enablePrivateEndpoint": True}, (
        cluster.name
    )
    assert cluster.inputs["controlPlaneEndpointsConfig"] == {
        "dnsEndpointConfig": {"allowExternalTraffic": True},
        "ipEndpointsConfig": {"enabled": False},
    }, cluster.name


@pytest.mark.parametrize("stack", STACKS)
def test_cloud_nat_gives_the_cluster_subnet_a_way_out_in_the_cluster_region(stack):
    plan = stack_plan(stack)
    router, nat, subnet = plan.one(ROUTER), plan.one(NAT), plan.one(SUBNET, "network-subnet")
    assert router.inputs["region"] == nat.inputs["region"] == REGIONS[stack] == subnet.inputs["region"], nat.name
    assert router.inputs["network"] == f"{stack}-vpc", router.name
    assert nat.inputs["router"] == router.inputs["name"] and router.urn in nat.dependencies, nat.name
    assert nat.inputs["sourceSubnetworkIpRangesToNat"] == "LIST_OF_SUBNETWORKS", nat.name
    assert nat.inputs["subnetworks"] == [
        {
            "name": f"projects/my-gcp-project/regions/{REGIONS[stack]}/subnetworks/{subnet.inputs['name']}",
            "sourceIpRangesToNats": ["ALL_IP_RANGES"],
        }
    ], nat.name
    assert nat.inputs["natIpAllocateOption"] == "AUTO_ONLY", nat.name


@pytest.mark.parametrize("stack", STACKS)
def test_committed_stacks_reach_the_control_plane_through_the_iam_guarded_dns_endpoint_only(stack):
    plan = stack_plan(stack)
    cluster = plan.one(CLUSTER)
    assert "allowPublicControlPlane" not in plan.config["nemo-rl-gke:cluster"], stack
    assert "masterAuthorizedNetworksConfig" not in cluster.inputs, cluster.name
    assert plan.outputs["controlPlaneAccess"] == "dns", stack
    assert plan.outputs["clusterEndpoint"].endswith(".gke.goog"), plan.outputs["clusterEndpoint"]


IP_ACCESS = {"controlPlaneAccess": "ip"}


def test_with_ip_access_the_configured_cidrs_are_the_only_way_to_the_control_plane():
    cluster_cfg = merged(
        "b200",
        "cluster",
        {**IP_ACCESS, "masterAuthorizedNetworks": [{"cidrBlock": "198.51.100.7/32", "displayName": "ci"}]},
    )
    cluster = run_plan("b200", cluster=cluster_cfg).one(CLUSTER)
    assert cluster.inputs["masterAuthorizedNetworksConfig"] == {
        "cidrBlocks": [{"cidrBlock": "198.51.100.7/32", "displayName": "ci"}],
        "gcpPublicCidrsAccessEnabled": False,
    }, cluster.name
    assert cluster.inputs["privateClusterConfig"] == {"enablePrivateNodes": True, "enablePrivateEndpoint": False}, (
        cluster.name
    )
    # Spelled out, so a stack switching from dns turns the IP endpoint back on and the DNS one off.
    assert cluster.inputs["controlPlaneEndpointsConfig"] == {
        "dnsEndpointConfig": {"allowExternalTraffic": False},
        "ipEndpointsConfig": {"enabled": True},
    }, cluster.name


def test_with_ip_access_an_open_control_plane_has_no_authorized_networks_block():
    cluster = run_plan("dev", cluster=merged("dev", "cluster", {**IP_ACCESS, "allowPublicControlPlane": True})).one(
        CLUSTER
    )
    assert "masterAuthorizedNetworksConfig" not in cluster.inputs, cluster.name


@pytest.mark.parametrize("stack", STACKS)
def test_with_ip_access_an_empty_authorized_network_list_is_refused_unless_the_stack_opens_the_control_plane(stack):
    with pytest.raises(ConfigError) as info:
        run_plan(stack, cluster=merged(stack, "cluster", IP_ACCESS))
    message = str(info.value)
    assert message.startswith("nemo-rl-gke:cluster.masterAuthorizedNetworks: is empty"), message
    assert "masterAuthorizedNetworks: [{cidrBlock: <your egress IP>/32}]" in message
    assert "cluster.allowPublicControlPlane: true" in message
    assert "\n" not in message


def test_with_ip_access_authorized_networks_and_an_open_control_plane_together_are_refused():
    cluster_cfg = merged(
        "dev",
        "cluster",
        {**IP_ACCESS, "allowPublicControlPlane": True, "masterAuthorizedNetworks": [{"cidrBlock": "198.51.100.7/32"}]},
    )
    with pytest.raises(
        ConfigError,
        match=r"^nemo-rl-gke:cluster\.allowPublicControlPlane: true contradicts "
        r"the configured cluster\.masterAuthorizedNetworks; allowed: false",
    ):
        run_plan("dev", cluster=cluster_cfg)


@pytest.mark.parametrize(
    ("setting", "key"),
    [
        ({"masterAuthorizedNetworks": [{"cidrBlock": "198.51.100.7/32"}]}, "masterAuthorizedNetworks"),
        ({"allowPublicControlPlane": True}, "allowPublicControlPlane"),
    ],
)
def test_ip_endpoint_settings_are_refused_with_dns_access_rather_than_silently_ignored(setting, key):
    with pytest.raises(ConfigError) as info:
        run_plan("dev", cluster=merged("dev", "cluster", setting))
    message = str(info.value)
    assert message.startswith(f"nemo-rl-gke:cluster.{key}: "), message
    assert "cluster.controlPlaneAccess: dns turns off" in message and "cluster.controlPlaneAccess: ip" in message, (
        message
    )


@pytest.mark.parametrize("stack", STACKS)
def test_every_node_is_a_shielded_vm_with_secure_boot_and_integrity_monitoring(stack):
    plan = stack_plan(stack)
    cluster = plan.one(CLUSTER)
    shielded = {"enableSecureBoot": True, "enableIntegrityMonitoring": True}
    assert cluster.inputs["enableShieldedNodes"] is True, cluster.name
    assert cluster.inputs["nodeConfig"]["shieldedInstanceConfig"] == shielded, cluster.name
    pools = plan.by_type(POOL)
    assert len(pools) == 2
    for pool in pools:
        assert pool.inputs["nodeConfig"]["shieldedInstanceConfig"] == shielded, pool.name


@pytest.mark.parametrize("stack", STACKS)
def test_the_ray_dashboard_and_gcs_ports_are_never_exposed_outside_the_cluster(stack):
    plan = stack_plan(stack)
    release = plan.one(RELEASE)
    values = release.inputs["values"]
    assert values["service"] == {"type": "ClusterIP"}, release.name
    for path, value in walk(values):
        assert value not in ("LoadBalancer", "NodePort"), f"{release.name}: {path} = {value}"
        assert not path.endswith(("hostPort", "serviceType", "headService")), f"{release.name}: {path}"
    assert not values["head"].get("hostNetwork"), f"{release.name}: the head shares the node's network"
    exposed = [
        r.name
        for r in plan.resources
        if r.type.endswith((":Ingress", ":Gateway", ":HTTPRoute"))
        or (
            r.type == "kubernetes:core/v1:Service"
            and (r.inputs.get("spec") or {}).get("type") in ("LoadBalancer", "NodePort")
        )
    ]
    assert not exposed, f"exposed outside the cluster: {exposed}"


@pytest.mark.parametrize("stack, kept", [("dev", False), ("b200", True), ("h200", True)])
def test_the_bucket_is_retained_on_destroy_unless_the_stack_opts_in(stack, kept):
    bucket = stack_plan(stack).one(BUCKET)
    assert bucket.options.get("retainOnDelete", False) is kept, f"{bucket.name}: {bucket.options}"
    assert bucket.inputs["forceDestroy"] is (not kept), bucket.name
    assert bucket.inputs["publicAccessPrevention"] == "enforced", bucket.name


# ---------------------------------------------------------------- nothing the cluster makes outlives it


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_no_kubernetes_object_makes_a_cloud_resource_that_would_outlive_the_cluster(stack):
    """In-cluster objects are `deleted_with` the cluster (destroy never asks its API), so nothing may make
    GKE create a cloud resource of its own: a LoadBalancer Service (forwarding rule, NEG), an Ingress or
    Gateway (load balancer), a claim on a dynamic StorageClass or a generic ephemeral volume (a
    persistent disk). The Lustre PV is static, `Retain`, its instance Pulumi's own."""
    plan = stack_plan(stack)
    kube = [r for r in plan.resources if r.custom and r.type.startswith("kubernetes:")]
    for r in kube:
        kind = r.type.rsplit(":", 1)[-1]
        assert kind not in ("Ingress", "Gateway", "StorageClass"), f"{r.name}: {kind}"
        if kind == "Service":
            assert r.inputs.get("spec", {}).get("type", "ClusterIP") in ("ClusterIP", "NodePort"), r.name
        if kind == "PersistentVolumeClaim":
            spec = r.inputs["spec"]
            assert spec.get("storageClassName") == "" and spec.get("volumeName"), f"{r.name}: a dynamic claim"
        if kind == "PersistentVolume":
            assert r.inputs["spec"]["persistentVolumeReclaimPolicy"] == "Retain", r.name
        for path, value in walk(r.inputs):
            assert not (isinstance(value, dict) and "volumeClaimTemplate" in value), (
                f"{r.name}: {path} ephemeral volume"
            )
            assert not path.endswith("volumeClaimTemplates"), f"{r.name}: {path}"
    (release,) = [r for r in kube if r.type == RELEASE]
    assert release.inputs["values"]["service"]["type"] == "ClusterIP", "the Ray head Service"
