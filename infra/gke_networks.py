"""The GKE multi-network objects that let Ray worker pods use the GPU nodes' extra NICs.

A node pool's additional node networks (infra/cluster.py) only attach NICs to the VMs. A pod gets
one of them only through a cluster-scoped `Network` object (type Device) whose `parametersRef`
points at a `GKENetworkParamSet` naming the VPC, subnet and device mode, and only when its
`networking.gke.io/interfaces` annotation lists that Network (GKE multi-network docs,
https://cloud.google.com/kubernetes-engine/docs/how-to/setup-multinetwork-support-for-pods). Field names checked against
public manifests applying these objects
(networking.gke.io/v1: GKENetworkParamSet spec {vpc, vpcSubnet, deviceMode}; Network spec
{type: Device, parametersRef {group, kind, name}}).

Everything is derived from the `NicAttachment`s the network component publishes, in NIC order, so
the Network names, the VPC/subnet names and the pod annotation cannot drift apart.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_kubernetes as k8s

from infra.naming import MANAGED_LABELS
from infra.options import child_options
from infra.stack_context import NicAttachment

API_VERSION = "networking.gke.io/v1"
DEVICE_MODES = ("NetDevice", "RDMA")
DEFAULT_INTERFACE = "eth0"
"""The pod's primary interface on the cluster VPC; NCCL/Gloo bootstrap traffic stays on it."""

# Deleting these objects never needs to wait on anything of ours (the pods that use them are gone
# first). Whether GKE holds a finalizer on them while a node pool still lists the network can only be
# seen on a real cluster; a bound keeps `pulumi destroy` from waiting forever if it does.
DELETE_TIMEOUT = pulumi.CustomTimeouts(delete="15m")


def interfaces_annotation(nics: tuple[NicAttachment, ...]) -> str:
    """The `networking.gke.io/interfaces` value: eth0 on the default network, then each NIC in order."""
    entries = [{"interfaceName": DEFAULT_INTERFACE, "network": "default"}]
    entries += [{"interfaceName": nic.interface, "network": nic.network_object} for nic in nics]
    return json.dumps(entries, separators=(",", ":"))


def check_nics(nics: tuple[NicAttachment, ...]) -> None:
    """Refuse a NIC list that would produce clashing or meaningless objects, before registering any."""
    problems = []
    if not nics:
        problems.append("no NICs: the GPU pool has no additional networks to expose to pods")
    for label, values in (
        ("Network object name", [n.network_object for n in nics]),
        ("interface", [n.interface for n in nics]),
    ):
        dupes = sorted({v for v in values if values.count(v) > 1})
        if dupes:
            problems.append(f"duplicate {label}(s): {', '.join(dupes)}")
    for nic in nics:
        if nic.interface == DEFAULT_INTERFACE:
            problems.append(f"{nic.network_object}: interface {DEFAULT_INTERFACE} is the pod's default network")
        if nic.device_mode not in DEVICE_MODES:
            problems.append(
                f"{nic.network_object}: deviceMode {nic.device_mode!r} is not one of {', '.join(DEVICE_MODES)}"
            )
        if nic.network_object == "default":
            problems.append("a Network object may not be called 'default' (that name is the pod network)")
    if problems:
        raise ValueError("GkeNetworkObjects: " + "; ".join(problems))


@dataclass(frozen=True)
class GkeNetworkObjectsArgs:
    """What `GkeNetworkObjects` renders: the GPU nodes' extra NICs in NIC order (`GpuPoolFacts.nics`)."""

    nics: tuple[NicAttachment, ...]


class GkeNetworkObjects(pulumi.ComponentResource):
    """One GKENetworkParamSet + Network pair per extra NIC (gvnic-1, rdma-0..7).

    Deliberately NOT made to wait for (or be deleted before) the GPU node pool: creating these needs
    only the VPCs and subnets (the program makes them wait for `Networking.nic_subnets`), and if GKE refuses to
    delete a Network while a node pool still uses it,
    an order "Network objects before node pools" would deadlock `pulumi destroy`. Without an edge both
    are deleted in parallel, which works either way; the Ray release, which does use them, depends on
    this component and is deleted first.
    """

    network_names: list[str]
    """Network object names in NIC order (what the pod annotation references)."""
    interfaces_annotation: str
    """JSON for the pods' `networking.gke.io/interfaces` annotation."""
    param_sets: list[k8s.apiextensions.CustomResource]
    networks: list[k8s.apiextensions.CustomResource]

    def __init__(self, name: str, args: GkeNetworkObjectsArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        nics = tuple(args.nics)
        check_nics(nics)  # before registering anything: a refused list leaves no half-made component
        super().__init__("nemo-rl-gke:infra:GkeNetworkObjects", name, None, opts)
        self.param_sets = []
        self.networks = []
        for nic in nics:
            self._objects(name, nic, opts)
        self.network_names = [nic.network_object for nic in nics]
        self.interfaces_annotation = interfaces_annotation(nics)
        self.register_outputs({"networkNames": self.network_names, "interfacesAnnotation": self.interfaces_annotation})

    def _objects(self, name: str, nic: NicAttachment, opts: Optional[pulumi.ResourceOptions]) -> None:
        """The parameter set and the Network object of one NIC."""
        params = k8s.apiextensions.CustomResource(
            f"{name}-params-{nic.network_object}",
            api_version=API_VERSION,
            kind="GKENetworkParamSet",
            metadata={"name": nic.network_object, "labels": dict(MANAGED_LABELS)},
            spec={"vpc": nic.vpc, "vpcSubnet": nic.subnet, "deviceMode": nic.device_mode},
            opts=child_options(self, opts, custom_timeouts=DELETE_TIMEOUT),
        )
        network = k8s.apiextensions.CustomResource(
            f"{name}-network-{nic.network_object}",
            api_version=API_VERSION,
            kind="Network",
            metadata={"name": nic.network_object, "labels": dict(MANAGED_LABELS)},
            spec={
                "type": "Device",
                "parametersRef": {
                    "group": "networking.gke.io",
                    "kind": "GKENetworkParamSet",
                    "name": nic.network_object,
                },
            },
            # Created after, and deleted before, the parameter set it points at.
            opts=child_options(self, opts, depends_on=[params], custom_timeouts=DELETE_TIMEOUT),
        )
        self.param_sets.append(params)
        self.networks.append(network)
