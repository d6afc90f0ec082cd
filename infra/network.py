"""The VPCs a GPU training cluster needs, and the private path from them to Managed Lustre.

Each kind of NIC of a GPU node sits on its own VPC (https://cloud.google.com/kubernetes-engine/docs/tutorials/
nemo-rl-gke; https://cloud.google.com/vpc/docs/rdma-network-profiles): eth0 on the cluster VPC, eth1 (a second
gVNIC) on the gVNIC VPC, eth2.. (MRDMA) on a RoCE VPC from the zone's `<zone>-vpc-roce` profile. Managed Lustre
reaches clients only through Private Service Access on the cluster VPC
(https://cloud.google.com/managed-lustre/docs/create-instance). Private nodes get out through Cloud NAT.
"""

from __future__ import annotations

import ipaddress
from dataclasses import asdict, dataclass
from typing import Optional

import pulumi
import pulumi_gcp as gcp

from infra.config import NetworkConfig
from infra.flavours import Flavour
from infra.naming import Limit
from infra.options import child_options
from infra.stack_context import NicAttachment, StackContext

COMPONENT = "network"

DEFAULT_NETWORK = "default"  # the project's auto-mode VPC, and its subnet in every region
GVNIC_NETWORK_OBJECT = "gvnic-1"  # the tutorial's name, kept so its manifests still apply

RDMA_NETWORK_OBJECT = "rdma-{index}"
SERVICE_NETWORKING = "servicenetworking.googleapis.com"

NAT_MIN_PORTS_PER_VM = 256
NAT_MAX_PORTS_PER_VM = 16384

PRIMARY_MTU = 8896  # the Lustre docs measure about 10% more throughput at 8896 than at 1460


def roce_network_profile(project: str, zone: str) -> str:
    return f"projects/{project}/global/networkProfiles/{zone}-vpc-roce"


def network_id(project: str, network: pulumi.Input[str]) -> pulumi.Output[str]:
    """The one form GKE, Service Networking and Lustre all accept (pulumi-gcp `lustre.Instance.network` docs)."""
    return pulumi.Output.concat("projects/", project, "/global/networks/", network)


def subnet_id(project: str, region: str, subnet: pulumi.Input[str]) -> pulumi.Output[str]:
    return pulumi.Output.concat("projects/", project, "/regions/", region, "/subnetworks/", subnet)


def nic_attachments(ctx: StackContext, flavour: Flavour) -> tuple[NicAttachment, ...]:
    """The GPU nodes' extra NICs in interface order (eth1 gVNIC, eth2.. RDMA): plain data for the pool, the GKE
    Network objects and the pods' interface annotation."""
    gvnic = NicAttachment(
        interface="eth1",
        network_object=GVNIC_NETWORK_OBJECT,
        vpc=ctx.name("gvnic-vpc", Limit.COMPUTE),
        subnet=ctx.name("gvnic-subnet", Limit.COMPUTE),
        device_mode="NetDevice",
    )
    rdma_vpc = ctx.name("rdma-vpc", Limit.COMPUTE)
    rdma = tuple(
        NicAttachment(
            interface=f"eth{i + 2}",
            network_object=RDMA_NETWORK_OBJECT.format(index=i),
            vpc=rdma_vpc,
            subnet=ctx.name(f"rdma-subnet-{i}", Limit.COMPUTE),
            device_mode="RDMA",
        )
        for i in range(flavour.rdma_nics)
    )
    return (gvnic, *rdma)


# Each cloud object's Pulumi name is `<component>-<role>` and its cloud name `ctx.name(role)`.


def _vpc(name: str, role: str, ctx: StackContext, description: str, mtu: int, child, **extra) -> gcp.compute.Network:
    return gcp.compute.Network(
        f"{name}-{role}",
        name=ctx.name(role, Limit.COMPUTE),
        project=ctx.project,
        description=description,
        auto_create_subnetworks=False,
        mtu=mtu,
        opts=child,
        **extra,
    )


def _subnet(name: str, role: str, ctx: StackContext, network, cidr: str, child, **extra) -> gcp.compute.Subnetwork:
    return gcp.compute.Subnetwork(
        f"{name}-{role}",
        name=ctx.name(role, Limit.COMPUTE),
        project=ctx.project,
        region=ctx.region,
        network=network,
        ip_cidr_range=cidr,
        opts=child,
        **extra,
    )


def _ingress(name: str, role: str, ctx: StackContext, network, description: str, source: str, allows, child):
    return gcp.compute.Firewall(
        f"{name}-{role}",
        name=ctx.name(role, Limit.COMPUTE),
        project=ctx.project,
        network=network,
        description=description,
        direction="INGRESS",
        source_ranges=[source],
        allows=allows,
        opts=child,
    )


@dataclass(frozen=True)
class NetworkingArgs:
    ctx: StackContext
    network: NetworkConfig
    flavour: Flavour
    lustre_port: int  # `infra.storage.lustre_port`


class Networking(pulumi.ComponentResource):
    """Primary, gVNIC and RDMA VPCs, subnets, firewalls and Private Service Access. Names are plain data
    (`nics`) because the Kubernetes objects naming them render at plan time. One gVNIC VPC: every flavour has one
    extra gVNIC (tests/test_flavours.py), and each non-RDMA NIC needs a VPC of its own."""

    def __init__(self, name: str, args: NetworkingArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("nemo-rl-gke:infra:Networking", name, None, opts)
        ctx, cfg, flavour, lustre_port = args.ctx, args.network, args.flavour, args.lustre_port
        child = child_options(self, opts)
        project, region = ctx.project, ctx.region
        self.lustre_port = lustre_port
        self.pods_cidr, self.services_cidr = cfg.pods_cidr, cfg.services_cidr
        self.nics = nic_attachments(ctx, flavour)

        self._primary(name, ctx, cfg, child)
        self._cloud_nat(name, ctx, child)
        self._gvnic(name, ctx, cfg, child)
        self._rdma(name, ctx, cfg, child)
        self._private_service_access(name, ctx, cfg, lustre_port, child)
        self.register_outputs(
            {
                "primaryNetwork": self.primary_network,
                "primaryNetworkName": self.primary_network_name,
                "primarySubnet": self.primary_subnet,
                "podsRangeName": self.pods_range_name,
                "servicesRangeName": self.services_range_name,
                "gvnicNetworkName": self.gvnic_network_name,
                "gvnicSubnetName": self.gvnic_subnet_name,
                "rdmaNetworkName": self.rdma_network_name,
                "rdmaSubnetNames": self.rdma_subnet_names,
                "nics": [asdict(n) for n in self.nics],
                "psaPeering": self.psa_connection.peering,
                "natName": self.nat.name,
                "lustrePort": lustre_port,
                "region": region,
                "project": project,
            }
        )

    def _primary(self, name: str, ctx: StackContext, cfg: NetworkConfig, child: pulumi.ResourceOptions) -> None:
        if cfg.use_default_network:
            # Not ours to change: GKE creates and names the secondary ranges from podsCidr/servicesCidr.
            self.primary_network_name = pulumi.Output.from_input(DEFAULT_NETWORK)
            self.primary_network = network_id(ctx.project, DEFAULT_NETWORK)
            self.primary_subnet = subnet_id(ctx.project, ctx.region, DEFAULT_NETWORK)
            self.pods_range_name = None
            self.services_range_name = None
            return

        description = "nemo-rl-gke cluster VPC: nodes (eth0), pods, services, and the Managed Lustre peering"
        vpc = _vpc(name, "vpc", ctx, description, PRIMARY_MTU, child)
        self.pods_range_name = ctx.name("pods", Limit.COMPUTE)
        self.services_range_name = ctx.name("services", Limit.COMPUTE)
        subnet = _subnet(
            name,
            "subnet",
            ctx,
            vpc.name,
            cfg.primary_cidr,
            child,
            secondary_ip_ranges=[
                {"range_name": self.pods_range_name, "ip_cidr_range": cfg.pods_cidr},
                {"range_name": self.services_range_name, "ip_cidr_range": cfg.services_cidr},
            ],
            private_ip_google_access=True,
        )
        self.primary_network_name = vpc.name
        self.primary_network = network_id(ctx.project, vpc.name)
        self.primary_subnet = subnet_id(ctx.project, ctx.region, subnet.name)

    def _cloud_nat(self, name: str, ctx: StackContext, child: pulumi.ResourceOptions) -> None:
        """NAT for the cluster subnet only (also on the shared `default` VPC); dynamic ports for a node's
        thousands of parallel downloads."""
        self.router = gcp.compute.Router(
            f"{name}-router",
            name=ctx.name("router", Limit.COMPUTE),
            project=ctx.project,
            region=ctx.region,
            network=self.primary_network_name,
            description="nemo-rl-gke Cloud NAT router for the private cluster nodes",
            opts=child,
        )
        self.nat = gcp.compute.RouterNat(
            f"{name}-nat",
            name=ctx.name("nat", Limit.COMPUTE),
            project=ctx.project,
            region=ctx.region,
            router=self.router.name,
            nat_ip_allocate_option="AUTO_ONLY",
            source_subnetwork_ip_ranges_to_nat="LIST_OF_SUBNETWORKS",
            subnetworks=[{"name": self.primary_subnet, "source_ip_ranges_to_nats": ["ALL_IP_RANGES"]}],
            enable_dynamic_port_allocation=True,
            # Endpoint-independent mapping cannot be combined with dynamic port allocation.
            enable_endpoint_independent_mapping=False,
            min_ports_per_vm=NAT_MIN_PORTS_PER_VM,
            max_ports_per_vm=NAT_MAX_PORTS_PER_VM,
            log_config={"enable": True, "filter": "ERRORS_ONLY"},
            opts=child,
        )

    def _gvnic(self, name: str, ctx: StackContext, cfg: NetworkConfig, child: pulumi.ResourceOptions) -> None:
        description = "nemo-rl-gke second gVNIC of the GPU nodes (eth1): host-to-host TCP"
        vpc = _vpc(name, "gvnic-vpc", ctx, description, cfg.gvnic_mtu, child)
        subnet = _subnet(name, "gvnic-subnet", ctx, vpc.name, cfg.gvnic_cidr, child)
        # NCCL/Gloo bootstrap and Ray use arbitrary ports between nodes; only the gVNIC subnet sends here.
        allows = [{"protocol": "tcp"}, {"protocol": "udp"}, {"protocol": "icmp"}]
        description = "Node-to-node traffic on the gVNIC VPC"
        _ingress(name, "gvnic-allow-internal", ctx, vpc.name, description, cfg.gvnic_cidr, allows, child)
        self.gvnic_network_name = vpc.name
        self.gvnic_subnet_name = subnet.name
        self.nic_subnets = [subnet]  # in NIC order: the GKE Network objects wait for them

    def _rdma(self, name: str, ctx: StackContext, cfg: NetworkConfig, child: pulumi.ResourceOptions) -> None:
        description = "nemo-rl-gke RoCE VPC for the MRDMA NICs of the GPU nodes (eth2..)"
        profile = roce_network_profile(ctx.project, ctx.zone)
        vpc = _vpc(name, "rdma-vpc", ctx, description, cfg.rdma_mtu, child, network_profile=profile)
        self.rdma_subnet_names = []
        for i, cidr in enumerate(cfg.rdma_cidrs):
            subnet = _subnet(name, f"rdma-subnet-{i}", ctx, vpc.name, cidr, child)
            self.rdma_subnet_names.append(subnet.name)
            self.nic_subnets.append(subnet)
        # No firewall rule: the RoCE NICs carry only RDMA, not IP (the tutorial creates none).
        self.rdma_network_name = vpc.name

    def _private_service_access(
        self, name: str, ctx: StackContext, cfg: NetworkConfig, lustre_port: int, child: pulumi.ResourceOptions
    ) -> None:
        psa = ipaddress.IPv4Network(cfg.psa_cidr)
        address = gcp.compute.GlobalAddress(
            f"{name}-psa-range",
            name=ctx.name("psa-range", Limit.COMPUTE),
            project=ctx.project,
            description="Range Google services (Managed Lustre) allocate from through the VPC peering",
            purpose="VPC_PEERING",
            address_type="INTERNAL",
            # Fixed so config validation can prove it overlaps no other range.
            address=str(psa.network_address),
            prefix_length=psa.prefixlen,
            network=self.primary_network,
            labels=ctx.labels(COMPONENT),
            opts=child,
        )
        self.psa_connection = gcp.servicenetworking.Connection(
            f"{name}-psa",
            network=self.primary_network,
            service=SERVICE_NETWORKING,
            reserved_peering_ranges=[address.name],
            # Deleting the connection right after Lustre often fails while the producer still holds the range.
            # No updateOnCreationFail: it would replace an existing connection's (e.g. Cloud SQL's) ranges.
            deletion_policy="REMOVE_PEERING",
            opts=child,
        )
        # Lustre servers connect back to the clients on the LNet port
        # (https://cloud.google.com/managed-lustre/docs/connect-from-kubernetes-engine-existing-instance).
        description = f"Managed Lustre (LNet TCP {lustre_port}) from the private services range"
        allows = [{"protocol": "tcp", "ports": [str(lustre_port)]}]
        _ingress(name, "allow-lustre", ctx, self.primary_network_name, description, cfg.psa_cidr, allows, child)
