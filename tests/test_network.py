"""The three VPCs of a GPU cluster and the Private Service Access path to Managed Lustre."""

from __future__ import annotations

import pytest
from conftest import STACKS, merged, run_plan, stack_plan

NETWORK = "gcp:compute/network:Network"
SUBNET = "gcp:compute/subnetwork:Subnetwork"
FIREWALL = "gcp:compute/firewall:Firewall"
ADDRESS = "gcp:compute/globalAddress:GlobalAddress"
CONNECTION = "gcp:servicenetworking/connection:Connection"
COMPONENT = "nemo-rl-gke:infra:Networking"

# What each committed stack file asks for (Pulumi.<stack>.yaml plus the config defaults).
EXPECTED = {
    "dev": {"project": "my-gcp-project", "region": "us-east1", "zone": "us-east1-b", "prefix": "dev"},
    "b200": {"project": "my-gcp-project", "region": "us-east1", "zone": "us-east1-b", "prefix": "b200"},
    "h200": {"project": "my-gcp-project", "region": "europe-west1", "zone": "europe-west1-b", "prefix": "h200"},
}
RDMA_CIDRS = [f"192.168.{n}.0/24" for n in range(1, 9)]


def network_named(plan, cloud_name):
    found = [r for r in plan.by_type(NETWORK) if r.inputs.get("name") == cloud_name]
    assert len(found) == 1, f"expected one network named {cloud_name}, found {[r.name for r in found]}"
    return found[0]


def rdma_subnets(plan):
    """The RDMA subnets in NIC order (by the index in their logical name)."""
    subnets = [r for r in plan.by_type(SUBNET) if "-rdma-subnet-" in r.name]
    return sorted(subnets, key=lambda r: int(r.name.rsplit("-", 1)[1]))


def component_outputs(plan):
    component = plan.one(COMPONENT)
    return plan.component_outputs[component.urn]


@pytest.mark.parametrize("stack", STACKS)
def test_rdma_vpc_is_a_roce_network_of_the_stack_zone(stack):
    plan, want = stack_plan(stack), EXPECTED[stack]
    vpc = plan.one(NETWORK, "-rdma-vpc")
    profile = f"projects/{want['project']}/global/networkProfiles/{want['zone']}-vpc-roce"
    assert vpc.inputs["networkProfile"] == profile, vpc.name
    assert vpc.inputs["mtu"] == 8896, vpc.name
    assert vpc.inputs["autoCreateSubnetworks"] is False, vpc.name
    assert vpc.inputs["name"] == f"{want['prefix']}-rdma-vpc", vpc.name


@pytest.mark.parametrize("stack", STACKS)
def test_each_rdma_nic_gets_its_own_subnet_with_the_configured_cidr_in_nic_order(stack):
    plan, want = stack_plan(stack), EXPECTED[stack]
    subnets = rdma_subnets(plan)
    assert [s.inputs["ipCidrRange"] for s in subnets] == RDMA_CIDRS
    names = [s.inputs["name"] for s in subnets]
    assert names == [f"{want['prefix']}-rdma-subnet-{i}" for i in range(8)]
    assert len(set(names)) == 8
    vpc = plan.one(NETWORK, "-rdma-vpc")
    for s in subnets:
        assert s.inputs["network"] == vpc.inputs["name"], s.name
        assert s.inputs["region"] == want["region"], s.name
        assert vpc.urn in s.dependencies, f"{s.name} does not wait for {vpc.name}"


@pytest.mark.parametrize("stack", STACKS)
def test_gvnic_vpc_has_one_subnet_and_lets_its_nodes_talk_on_every_port(stack):
    plan, want = stack_plan(stack), EXPECTED[stack]
    vpc = plan.one(NETWORK, "-gvnic-vpc")
    assert vpc.inputs["mtu"] == 8896 and vpc.inputs["autoCreateSubnetworks"] is False, vpc.name
    assert "networkProfile" not in vpc.inputs, f"{vpc.name} must be a plain VPC (gVNIC NICs cannot join a RoCE VPC)"
    subnet = plan.one(SUBNET, "-gvnic-subnet")
    assert subnet.inputs["ipCidrRange"] == "192.168.0.0/24", subnet.name
    assert subnet.inputs["network"] == vpc.inputs["name"] and subnet.inputs["region"] == want["region"], subnet.name
    rule = plan.one(FIREWALL, "-gvnic-allow-internal")
    assert rule.inputs["network"] == vpc.inputs["name"], rule.name
    assert rule.inputs["direction"] == "INGRESS", rule.name
    assert rule.inputs["sourceRanges"] == ["192.168.0.0/24"], rule.name
    assert sorted(a["protocol"] for a in rule.inputs["allows"]) == ["icmp", "tcp", "udp"], rule.name
    assert all("ports" not in a for a in rule.inputs["allows"]), f"{rule.name} must allow every port"


def test_gvnic_firewall_follows_a_reconfigured_gvnic_range():
    cidr = "172.16.0.0/24"
    plan = run_plan("dev", network=merged("dev", "network", {"gvnicCidr": cidr}))
    assert plan.one(SUBNET, "-gvnic-subnet").inputs["ipCidrRange"] == cidr
    assert plan.one(FIREWALL, "-gvnic-allow-internal").inputs["sourceRanges"] == [cidr]


@pytest.mark.parametrize("stack", STACKS)
def test_primary_subnet_carries_the_pod_and_service_ranges(stack):
    plan, want = stack_plan(stack), EXPECTED[stack]
    vpc = network_named(plan, f"{want['prefix']}-vpc")
    assert vpc.inputs["autoCreateSubnetworks"] is False, vpc.name
    subnet = plan.one(SUBNET, "network-subnet")
    assert subnet.inputs["ipCidrRange"] == "10.0.0.0/20", subnet.name
    assert subnet.inputs["network"] == vpc.inputs["name"], subnet.name
    assert subnet.inputs["secondaryIpRanges"] == [
        {"rangeName": f"{want['prefix']}-pods", "ipCidrRange": "10.4.0.0/14"},
        {"rangeName": f"{want['prefix']}-services", "ipCidrRange": "10.8.0.0/20"},
    ], subnet.name


@pytest.mark.parametrize("stack", STACKS)
def test_psa_reserves_the_configured_range_for_vpc_peering_on_the_cluster_vpc(stack):
    plan, want = stack_plan(stack), EXPECTED[stack]
    vpc_id = f"projects/{want['project']}/global/networks/{want['prefix']}-vpc"
    address = plan.one(ADDRESS)
    assert address.inputs["purpose"] == "VPC_PEERING", address.name
    assert address.inputs["addressType"] == "INTERNAL", address.name
    assert (address.inputs["address"], address.inputs["prefixLength"]) == ("10.16.0.0", 22), address.name
    assert address.inputs["network"] == vpc_id, address.name
    connection = plan.one(CONNECTION)
    assert connection.inputs["service"] == "servicenetworking.googleapis.com", connection.name
    assert connection.inputs["network"] == vpc_id, connection.name
    assert connection.inputs["reservedPeeringRanges"] == [address.inputs["name"]], connection.name
    assert address.urn in connection.dependencies, f"{connection.name} does not wait for {address.name}"


@pytest.mark.parametrize("stack", STACKS)
def test_lustre_firewall_opens_port_988_from_the_psa_range_on_the_cluster_vpc(stack):
    plan, want = stack_plan(stack), EXPECTED[stack]
    rule = plan.one(FIREWALL, "-allow-lustre")
    assert rule.inputs["network"] == f"{want['prefix']}-vpc", rule.name
    assert rule.inputs["sourceRanges"] == ["10.16.0.0/22"], rule.name
    assert rule.inputs["allows"] == [{"protocol": "tcp", "ports": ["988"]}], rule.name


def test_legacy_lustre_port_opens_6988_instead():
    plan = run_plan("dev", lustre=merged("dev", "lustre", {"legacyPort": True}))
    rule = plan.one(FIREWALL, "-allow-lustre")
    assert rule.inputs["allows"] == [{"protocol": "tcp", "ports": ["6988"]}], rule.name


def test_default_network_option_creates_no_cluster_vpc_and_peers_the_default_vpc():
    plan = run_plan("dev", network=merged("dev", "network", {"useDefaultNetwork": True}))
    names = {r.inputs.get("name") for r in plan.by_type(NETWORK)}
    assert names == {"dev-gvnic-vpc", "dev-rdma-vpc"}
    assert not [r for r in plan.by_type(SUBNET) if r.name == "network-subnet"]
    default_id = "projects/my-gcp-project/global/networks/default"
    assert plan.one(ADDRESS).inputs["network"] == default_id
    assert plan.one(CONNECTION).inputs["network"] == default_id
    assert plan.one(FIREWALL, "-allow-lustre").inputs["network"] == "default"


def test_on_the_default_network_cloud_nat_serves_only_the_cluster_subnet():
    plan = run_plan("dev", network=merged("dev", "network", {"useDefaultNetwork": True}))
    router, nat = plan.one("gcp:compute/router:Router"), plan.one("gcp:compute/routerNat:RouterNat")
    assert router.inputs["network"] == "default" and router.inputs["region"] == "us-east1", router.name
    # Not ALL_SUBNETWORKS: other workloads of the shared default VPC keep their own egress.
    assert nat.inputs["sourceSubnetworkIpRangesToNat"] == "LIST_OF_SUBNETWORKS", nat.name
    assert [s["name"] for s in nat.inputs["subnetworks"]] == [
        "projects/my-gcp-project/regions/us-east1/subnetworks/default"
    ], nat.name


@pytest.mark.parametrize("stack", STACKS)
def test_cloud_nat_allocates_ports_dynamically_and_logs_errors(stack):
    nat = stack_plan(stack).one("gcp:compute/routerNat:RouterNat")
    assert nat.inputs["enableDynamicPortAllocation"] is True, nat.name
    assert nat.inputs["enableEndpointIndependentMapping"] is False, nat.name
    assert nat.inputs["minPortsPerVm"] < nat.inputs["maxPortsPerVm"], nat.name
    assert nat.inputs["logConfig"] == {"enable": True, "filter": "ERRORS_ONLY"}, nat.name


@pytest.mark.parametrize("stack", STACKS)
def test_nics_list_the_gvnic_then_each_rdma_subnet_as_eth1_to_eth9(stack):
    plan, want = stack_plan(stack), EXPECTED[stack]
    nics = component_outputs(plan)["nics"]
    p = want["prefix"]
    assert nics[0] == {
        "interface": "eth1",
        "network_object": "gvnic-1",
        "vpc": f"{p}-gvnic-vpc",
        "subnet": f"{p}-gvnic-subnet",
        "device_mode": "NetDevice",
    }
    assert nics[1:] == [
        {
            "interface": f"eth{i + 2}",
            "network_object": f"rdma-{i}",
            "vpc": f"{p}-rdma-vpc",
            "subnet": f"{p}-rdma-subnet-{i}",
            "device_mode": "RDMA",
        }
        for i in range(8)
    ]
    created = {r.inputs["name"] for r in plan.by_type(SUBNET)}
    assert {n["subnet"] for n in nics} <= created, "a NIC names a subnet the plan does not create"


@pytest.mark.parametrize("stack", STACKS)
def test_every_network_resource_is_a_child_of_the_networking_component(stack):
    plan = stack_plan(stack)
    component = plan.one(COMPONENT)
    children = [r for r in plan.resources if r.type in (NETWORK, SUBNET, FIREWALL, ADDRESS, CONNECTION)]
    assert len(children) == 3 + 10 + 2 + 1 + 1
    for r in children:
        assert r.parent == component.urn, f"{r.name} is not parented by {component.name}"
        assert r.name.startswith(f"{component.name}-"), r.name
        assert r.inputs.get("project", "my-gcp-project") == "my-gcp-project", r.name
    outputs = component_outputs(plan)
    assert outputs["rdmaSubnetNames"] == [f"{stack}-rdma-subnet-{i}" for i in range(8)]
    assert outputs["primaryNetwork"] == f"projects/my-gcp-project/global/networks/{stack}-vpc"
