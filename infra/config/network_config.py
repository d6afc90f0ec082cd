"""`network`: the VPCs, subnets and address ranges; and the checks of `network.*` that need other
sections (run by `StackConfig`, in its order)."""

from __future__ import annotations

import ipaddress
import itertools
from typing import Annotated

from pydantic import AfterValidator, Field

from infra.config.base import Model
from infra.config.errors import KeyedValueError, shown
from infra.flavours import Flavour

# Ranges a VPC subnet or secondary range cannot use (VPC docs "prohibited IPv4 ranges"; RFC 6890).
_RESERVED_RANGES = (
    (ipaddress.IPv4Network("0.0.0.0/8"), '"this" network'),
    (ipaddress.IPv4Network("127.0.0.0/8"), "loopback"),
    (ipaddress.IPv4Network("169.254.0.0/16"), "link-local, where the metadata server lives"),
    (ipaddress.IPv4Network("224.0.0.0/4"), "multicast"),
    (ipaddress.IPv4Network("255.255.255.255/32"), "broadcast"),
)
_SMALLEST_SUBNET = 29  # VPC docs: a subnet's primary IPv4 range is at least a /29
_DEFAULT_VPC_RANGE = ipaddress.IPv4Network("10.128.0.0/9")


def _ipv4_network(text: str) -> str:
    try:
        return str(ipaddress.IPv4Network(text, strict=True))
    except ValueError as err:
        raise ValueError(f"{shown(text)} is not allowed ({err}); allowed: an IPv4 range such as 10.0.0.0/20") from None


def check_usable_in_a_vpc(cidr: str) -> str:
    """No range in a block a VPC cannot use."""
    for reserved, what in _RESERVED_RANGES:
        if ipaddress.IPv4Network(cidr).overlaps(reserved):
            raise ValueError(
                f"{cidr} overlaps {reserved} ({what}), which a VPC cannot use; allowed: private ranges "
                "such as 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16"
            )
    return cidr


def check_subnet_size(cidr: str) -> str:
    """No subnet smaller than the smallest Google Cloud creates."""
    if ipaddress.IPv4Network(cidr).prefixlen > _SMALLEST_SUBNET:
        raise ValueError(
            f"{cidr} is smaller than a /{_SMALLEST_SUBNET}, the smallest subnet Google Cloud creates; "
            f"allowed: /{_SMALLEST_SUBNET} or larger"
        )
    return cidr


def check_psa_prefix(v: str) -> str:
    """The Private Service Access range is a /23 or larger, as Managed Lustre needs."""
    if ipaddress.IPv4Network(v).prefixlen > 23:
        raise ValueError(f"{v} is smaller than Managed Lustre needs; allowed: a /23 or larger range")
    return v


def check_no_overlaps(network: NetworkConfig) -> None:
    """No two ranges the stack allocates overlap; on the `default` VPC none overlaps its auto-mode subnets."""
    named = {
        "gvnicCidr": network.gvnic_cidr,
        "psaCidr": network.psa_cidr,
        "podsCidr": network.pods_cidr,
        "servicesCidr": network.services_cidr,
        **({} if network.use_default_network else {"primaryCidr": network.primary_cidr}),
        **{f"rdmaCidrs[{i}]": c for i, c in enumerate(network.rdma_cidrs)},
    }
    ranges = {k: ipaddress.IPv4Network(v) for k, v in named.items()}
    for (ka, a), (kb, b) in itertools.combinations(ranges.items(), 2):
        if a.overlaps(b):
            raise KeyedValueError(
                kb, f"{b} overlaps network.{ka} ({a}); allowed: ranges disjoint from every other range"
            )
    if network.use_default_network:
        # The cluster joins the project's `default` VPC, whose auto-mode subnets take 10.128.0.0/9
        # (VPC docs, auto mode IPv4 ranges); a custom-mode `default` VPC is not known here.
        for key, net in ranges.items():
            if net.overlaps(_DEFAULT_VPC_RANGE):
                raise KeyedValueError(
                    key,
                    f"{net} overlaps {_DEFAULT_VPC_RANGE}, the subnets of the `default` VPC the cluster joins with "
                    "network.useDefaultNetwork; allowed: a range outside 10.128.0.0/9",
                )


Range = Annotated[str, AfterValidator(_ipv4_network), AfterValidator(check_usable_in_a_vpc)]
"""An IPv4 range, in its canonical spelling, that a VPC can use."""
Subnet = Annotated[Range, AfterValidator(check_subnet_size)]


class NetworkConfig(Model):
    """VPCs, subnets and address ranges."""

    use_default_network: bool = False
    """Put the cluster on the project's `default` VPC instead of a new one."""
    primary_cidr: Subnet = "10.0.0.0/20"
    """Primary subnet of the cluster's VPC (nodes)."""
    pods_cidr: Range = "10.4.0.0/14"
    """Secondary range for pods."""
    services_cidr: Range = "10.8.0.0/20"
    """Secondary range for services."""
    gvnic_cidr: Subnet = "192.168.0.0/24"
    """Subnet of the gVNIC VPC (the second NIC of each GPU node)."""
    rdma_cidrs: tuple[Subnet, ...] = tuple(f"192.168.{n}.0/24" for n in range(1, 9))
    """One subnet per RDMA NIC, in NIC order (rdma-0 first); as many as the flavour has RDMA NICs."""
    psa_cidr: Annotated[Range, AfterValidator(check_psa_prefix)] = "10.16.0.0/22"
    """Private Service Access range for Managed Lustre (/23 or larger)."""
    rdma_mtu: int = Field(8896, ge=1300, le=8896)
    """MTU of the RDMA VPC (RoCE default 8896)."""
    gvnic_mtu: int = Field(8896, ge=1300, le=8896)
    """MTU of the gVNIC VPC."""

    checks = (check_no_overlaps,)


def check_address_room(network: NetworkConfig, gpu_nodes: int, system_nodes: int) -> None:
    """The pod range and the primary subnet hold addresses for every node the stack runs."""
    # Every node takes a /24 of the pod range (GKE's default of 110 pods per node, which the node
    # pools keep) and one address of the primary subnet; the system pool surges one node on upgrade.
    nodes = gpu_nodes + system_nodes + 1
    pods = ipaddress.IPv4Network(network.pods_cidr)
    if pods.prefixlen > 24 or 2 ** (24 - pods.prefixlen) < nodes:
        need = 24 - max(nodes - 1, 1).bit_length()
        raise KeyedValueError(
            "network.podsCidr",
            f"{pods} holds pod addresses for {2 ** max(24 - pods.prefixlen, 0)} node(s), the stack runs up to {nodes} "
            f"(a /24 each); allowed: a /{need} or larger",
        )
    primary = ipaddress.IPv4Network(network.primary_cidr)
    if not network.use_default_network and primary.num_addresses - 4 < nodes:
        raise KeyedValueError(
            "network.primaryCidr",
            f"{primary} has {primary.num_addresses - 4} usable addresses, the stack runs up to {nodes} nodes; "
            "allowed: a larger range",
        )


def check_rdma_subnets(network: NetworkConfig, flavour: Flavour) -> None:
    """One RDMA subnet per RDMA NIC of the flavour."""
    if len(network.rdma_cidrs) != flavour.rdma_nics:
        raise KeyedValueError(
            "network.rdmaCidrs",
            f"has {len(network.rdma_cidrs)} entries; flavour {flavour.name} has "
            f"{flavour.rdma_nics} RDMA NICs and needs exactly that many subnets",
        )
