"""GkeNetworkObjects: one GKENetworkParamSet + Network per NIC, and the pod interface annotation.

No CRD schema of networking.gke.io ships with the references, so objects are checked field by field
against the shapes GKE documents (GKENetworkParamSet spec {vpc, vpcSubnet, deviceMode}; Network spec
{type: Device, parametersRef {group, kind, name}}), including that no other key is present.
"""

from __future__ import annotations

import json

import pytest
from conftest import ALL_STACKS, STACKS, stack_plan
from k8s_support import k8s_doc, record, sample_nics

from infra.gke_networks import GkeNetworkObjects, GkeNetworkObjectsArgs, interfaces_annotation

PARAMS = "kubernetes:networking.gke.io/v1:GKENetworkParamSet"
NETWORK = "kubernetes:networking.gke.io/v1:Network"


def build(nics=None):
    nics = nics if nics is not None else sample_nics()
    return record(lambda: GkeNetworkObjects("gke-networks", GkeNetworkObjectsArgs(nics)), resolve=lambda c: {})


def by_object_name(regs):
    """Name -> registration, in NIC order (registrations arrive in whatever order the RPCs finish)."""
    order = [n.network_object for n in sample_nics()]
    named = {r.inputs["metadata"]["name"]: r for r in regs}
    return dict(sorted(named.items(), key=lambda kv: order.index(kv[0]) if kv[0] in order else len(order)))


def test_every_nic_gets_a_parameter_set_naming_its_own_vpc_subnet_and_device_mode():
    rec = build()
    params = by_object_name(rec.by_type(PARAMS))
    assert list(params) == [n.network_object for n in sample_nics()], "one GKENetworkParamSet per NIC, in NIC order"
    for nic in sample_nics():
        doc = k8s_doc(params[nic.network_object])
        assert doc["apiVersion"] == "networking.gke.io/v1" and doc["kind"] == "GKENetworkParamSet", nic.network_object
        assert "namespace" not in doc["metadata"], f"{nic.network_object}: GKENetworkParamSet is cluster-scoped"
        assert doc["spec"] == {"vpc": nic.vpc, "vpcSubnet": nic.subnet, "deviceMode": nic.device_mode}, (
            nic.network_object
        )


def test_every_nic_gets_a_device_network_pointing_at_its_parameter_set():
    rec = build()
    params = by_object_name(rec.by_type(PARAMS))
    networks = by_object_name(rec.by_type(NETWORK))
    assert list(networks) == [n.network_object for n in sample_nics()]
    for name, reg in networks.items():
        doc = k8s_doc(reg)
        assert doc["kind"] == "Network" and "namespace" not in doc["metadata"], name
        assert doc["spec"] == {
            "type": "Device",
            "parametersRef": {"group": "networking.gke.io", "kind": "GKENetworkParamSet", "name": name},
        }, name
        assert params[name].urn in reg.dependencies, (
            f"Network {name} must be created after (deleted before) its parameter set"
        )


def test_gvnic_is_a_netdevice_and_every_rdma_nic_is_rdma():
    modes = {r.inputs["metadata"]["name"]: r.inputs["spec"]["deviceMode"] for r in build().by_type(PARAMS)}
    assert modes.pop("gvnic-1") == "NetDevice"
    assert set(modes) == {f"rdma-{i}" for i in range(8)} and set(modes.values()) == {"RDMA"}, modes


def test_the_interface_annotation_starts_with_the_default_network_then_follows_nic_order():
    entries = json.loads(interfaces_annotation(sample_nics()))
    assert entries[0] == {"interfaceName": "eth0", "network": "default"}
    assert entries[1:] == [
        {"interfaceName": f"eth{i + 1}", "network": n}
        for i, n in enumerate(["gvnic-1", *(f"rdma-{i}" for i in range(8))])
    ]


def test_the_annotation_names_exactly_the_network_objects_created_one_to_one():
    rec = build()
    published = rec.outputs_of("nemo-rl-gke:infra:GkeNetworkObjects")
    created = list(by_object_name(rec.by_type(NETWORK)))
    annotated = [e["network"] for e in json.loads(published["interfacesAnnotation"])[1:]]
    assert annotated == created == published["networkNames"]
    assert len(set(annotated)) == len(annotated)


def test_objects_are_named_after_their_role_under_the_component():
    rec = build()
    (component,) = rec.by_type("nemo-rl-gke:infra:GkeNetworkObjects")
    for reg in rec.by_type(PARAMS) + rec.by_type(NETWORK):
        assert reg.parent == component.urn, f"{reg.name} is not a child of the component"
        assert reg.name.startswith("gke-networks-"), reg.name


# ---------------------------------------------------------------- whole program


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_vpc_and_subnet_names_are_the_ones_the_network_component_creates(stack):
    plan = stack_plan(stack)
    vpcs = {r.inputs["name"] for r in plan.by_type("gcp:compute/network:Network")}
    subnets = {r.inputs["name"]: r for r in plan.by_type("gcp:compute/subnetwork:Subnetwork")}
    params = plan.by_type(PARAMS)
    assert len(params) == 9, [r.name for r in params]
    for reg in params:
        spec = reg.inputs["spec"]
        assert spec["vpc"] in vpcs, f"{reg.name}: VPC {spec['vpc']} is not created by the stack"
        assert spec["vpcSubnet"] in subnets, f"{reg.name}: subnet {spec['vpcSubnet']} is not created by the stack"
        network = subnets[spec["vpcSubnet"]].inputs["network"]
        assert network == spec["vpc"] or network.endswith(f"/networks/{spec['vpc']}"), (
            f"{reg.name}: subnet {spec['vpcSubnet']} is not in VPC {spec['vpc']}"
        )


@pytest.mark.parametrize("stack", ALL_STACKS)
def test_each_parameter_set_waits_for_the_subnet_it_names(stack):
    plan = stack_plan(stack)
    subnets = {r.inputs["name"]: r for r in plan.by_type("gcp:compute/subnetwork:Subnetwork")}
    for reg in plan.by_type(PARAMS):
        subnet = subnets[reg.inputs["spec"]["vpcSubnet"]]
        assert subnet.urn in reg.dependencies, f"{reg.name} does not wait for {subnet.name}"


@pytest.mark.parametrize("stack", STACKS)
def test_each_annotated_interface_is_the_node_network_the_gpu_pool_attaches_at_that_position(stack):
    plan = stack_plan(stack)
    pool = next(p for p in plan.by_type("gcp:container/nodePool:NodePool") if p.inputs.get("networkConfig"))
    attached = [c["subnetwork"] for c in pool.inputs["networkConfig"]["additionalNodeNetworkConfigs"]]
    subnet_of = {r.inputs["metadata"]["name"]: r.inputs["spec"]["vpcSubnet"] for r in plan.by_type(PARAMS)}
    (release,) = plan.by_type("kubernetes:helm.sh/v3:Release")
    annotation = json.loads(release.inputs["values"]["worker"]["annotations"]["networking.gke.io/interfaces"])
    # eth1 is the node's first additional network, eth2 the second, ...
    pod_order = [subnet_of[e["network"]] for e in annotation[1:]]
    assert [e["interfaceName"] for e in annotation[1:]] == [f"eth{i + 1}" for i in range(len(attached))]
    assert pod_order == attached, (
        f"{release.name}: annotated interfaces do not follow {pool.name}'s additional networks"
    )


def test_network_objects_do_not_wait_for_the_node_pools_so_destroy_cannot_deadlock_on_them():
    plan = stack_plan("h200")
    pools = {p.urn for p in plan.by_type("gcp:container/nodePool:NodePool")}
    for reg in plan.by_type(PARAMS) + plan.by_type(NETWORK):
        assert not pools & set(reg.dependencies), f"{reg.name} depends on a node pool"
