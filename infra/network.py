"""The VPCs a GPU training cluster needs, and the private path from them to Managed Lustre.

A GPU node of the supported flavours has three kinds of NIC and each kind must sit on its own VPC
(https://cloud.google.com/kubernetes-engine/docs/tutorials/nemo-rl-gke;
https://cloud.google.com/vpc/docs/rdma-network-profiles):

- eth0, the primary gVNIC, on the cluster's VPC (pods, services, control-plane traffic);
- eth1, a second gVNIC, on the gVNIC VPC (host-to-host TCP: NCCL bootstrap, Gloo, data loading);
- eth2..eth9, one MRDMA NIC each, on a RoCE VPC created from the zone's `<zone>-vpc-roce` network
  profile, one subnet per NIC (GPUDirect RDMA between GPUs of different nodes).

The cluster's VPC also carries Private Service Access (a reserved range plus a Service Networking
peering): Managed Lustre lives in a Google-owned VPC and only reaches clients through that peering,
so the Lustre instance and the GKE cluster must be on this same VPC
(https://cloud.google.com/managed-lustre/docs/create-instance).

What the network hands on:
- to the cluster: the primary VPC/subnet and the secondary range names (`GkeCluster`), and the
  gVNIC + RDMA subnets in NIC order (the GPU pool's additional node networks);
- to Lustre: the VPC id and the PSA connection to wait for (`Lustre`);
- to the nodes, which have no public IP (private nodes, see `GkeCluster`): a Cloud Router with Cloud
  NAT for the cluster subnet, the only way out to nvcr.io, Hugging Face and PyPI (Google APIs,
  Artifact Registry and GCS are reached through Private Google Access on the subnet);
- to the Kubernetes half: `nics`, plain data from which the GKENetworkParamSet/Network objects and
  the pods' `networking.gke.io/interfaces` annotation are rendered.
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

DEFAULT_NETWORK = "default"
"""Name of the project's auto-mode VPC, and of its subnet in every region."""

GVNIC_NETWORK_OBJECT = "gvnic-1"
"""GKE `Network` object of the second gVNIC; the tutorial's name, kept so its manifests still apply."""

RDMA_NETWORK_OBJECT = "rdma-{index}"
SERVICE_NETWORKING = "servicenetworking.googleapis.com"

NAT_MIN_PORTS_PER_VM = 256
NAT_MAX_PORTS_PER_VM = 16384

PRIMARY_MTU = 8896
"""MTU of the cluster VPC: the Lustre docs measure about 10% more throughput at 8896 than at 1460."""


def roce_network_profile(project: str, zone: str) -> str:
    """The RoCE network profile of a zone: a RoCE VPC is pinned to this zone
    (https://cloud.google.com/vpc/docs/rdma-network-profiles)."""
    return f"projects/{project}/global/networkProfiles/{zone}-vpc-roce"


def network_id(project: str, network: pulumi.Input[str]) -> pulumi.Output[str]:
    """`projects/<p>/global/networks/<name>`: the one form GKE, Service Networking and Lustre all accept.

    Lustre only takes this form (pulumi-gcp `lustre.Instance.network` docs); building it from the
    network's `name` output keeps the dependency on the network resource.
    """
    return pulumi.Output.concat("projects/", project, "/global/networks/", network)


def subnet_id(project: str, region: str, subnet: pulumi.Input[str]) -> pulumi.Output[str]:
    """`projects/<p>/regions/<r>/subnetworks/<name>`, the relative form GKE accepts for `subnetwork`."""
    return pulumi.Output.concat("projects/", project, "/regions/", region, "/subnetworks/", subnet)


def nic_attachments(ctx: StackContext, flavour: Flavour) -> tuple[NicAttachment, ...]:
    """The GPU nodes' extra NICs in GKE's interface order: the gVNIC (eth1), then rdma-0.. (eth2..).

    Plain data known at plan time: `Networking` names its VPCs and subnets from it, and the GPU pool,
    the GKE Network objects and the Ray pods' interface annotation read the same tuple.
    """
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


@dataclass(frozen=True)
class NetworkingArgs:
    """What `Networking` needs: the stack's network config, the flavour (its NICs) and the Lustre port."""

    ctx: StackContext
    network: NetworkConfig
    flavour: Flavour
    lustre_port: int
    """The LNet port the Lustre firewall opens (`infra.storage.lustre_port`)."""


class Networking(pulumi.ComponentResource):
    """Primary, gVNIC and RDMA VPCs, their subnets and firewalls, and Private Service Access.

    Names are decided here and published as plain data (`nics`) because the Kubernetes objects that
    refer to them are rendered at plan time; the `*_name` Outputs carry the same strings plus the
    dependency on the resource, for inputs of other cloud resources.
    """

    primary_network: pulumi.Output[str]
    """The cluster VPC as `projects/<p>/global/networks/<name>` (GKE `network`, Lustre `network`)."""
    primary_network_name: pulumi.Output[str]
    primary_subnet: pulumi.Output[str]
    """The cluster subnet as `projects/<p>/regions/<r>/subnetworks/<name>` (GKE `subnetwork`)."""
    pods_range_name: Optional[str]
    """Secondary range for pods; None on the `default` network, where GKE creates and names it."""
    services_range_name: Optional[str]
    """Secondary range for services; None on the `default` network, where GKE creates and names it."""
    pods_cidr: str
    services_cidr: str
    gvnic_network_name: pulumi.Output[str]
    gvnic_subnet_name: pulumi.Output[str]
    rdma_network_name: pulumi.Output[str]
    rdma_subnet_names: list[pulumi.Output[str]]
    """One subnet per RDMA NIC, in NIC order (rdma-0 first)."""
    nic_subnets: list[gcp.compute.Subnetwork]
    """The subnets of the GPU nodes' extra NICs in NIC order (gVNIC, rdma-0..): what the GKE Network
    objects name, so they can wait for them."""
    nics: tuple[NicAttachment, ...]
    """The GPU nodes' extra NICs in NIC order: the gVNIC (eth1) first, then rdma-0..N (eth2..)."""
    psa_connection: gcp.servicenetworking.Connection
    """The Service Networking peering; Lustre must wait for it (it is not implied by any input)."""
    router: gcp.compute.Router
    nat: gcp.compute.RouterNat
    """Cloud NAT of the cluster subnet: outbound internet for nodes without external IPs."""
    lustre_port: int
    """The TCP port the Lustre firewall opens (988, or 6988 in legacy mode)."""

    def __init__(self, name: str, args: NetworkingArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("nemo-rl-gke:infra:Networking", name, None, opts)
        ctx, cfg, flavour, lustre_port = args.ctx, args.network, args.flavour, args.lustre_port
        if flavour.gvnic_extra_nics != 1:
            # Compute Engine puts every non-RDMA NIC of a VM on a different VPC (only RoCE VPCs take
            # several NICs); a second extra gVNIC would need a second gVNIC VPC, not built here.
            raise ValueError(
                f"flavour {flavour.name}: {flavour.gvnic_extra_nics} extra gVNIC NICs; only 1 is supported"
            )
        if len(cfg.rdma_cidrs) != flavour.rdma_nics:
            raise ValueError(
                f"{len(cfg.rdma_cidrs)} RDMA subnets for the {flavour.rdma_nics} RDMA NICs of flavour {flavour.name}"
            )
        # The caller's depends_on (the APIs these resources call) holds for each child.
        child = child_options(self, opts)
        project, region = ctx.project, ctx.region
        self.lustre_port = lustre_port
        self.pods_cidr, self.services_cidr = cfg.pods_cidr, cfg.services_cidr
        # The NICs' VPC and subnet names are decided here, once, and the VPCs below take them.
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

    # ------------------------------------------------------------------ primary VPC

    def _primary(self, name: str, ctx: StackContext, cfg: NetworkConfig, child: pulumi.ResourceOptions) -> None:
        if cfg.use_default_network:
            # The project's auto-mode VPC already has a subnet named `default` in every region. It is
            # not ours to change, so no secondary ranges are added: GKE creates them from
            # podsCidr/servicesCidr (see GkeCluster) and names them itself.
            # Only on the real cloud: that the default VPC exists (some organisations delete it).
            self.primary_network_name = pulumi.Output.from_input(DEFAULT_NETWORK)
            self.primary_network = network_id(ctx.project, DEFAULT_NETWORK)
            self.primary_subnet = subnet_id(ctx.project, ctx.region, DEFAULT_NETWORK)
            self.pods_range_name = None
            self.services_range_name = None
            return

        vpc = gcp.compute.Network(
            f"{name}-vpc",
            name=ctx.name("vpc", Limit.COMPUTE),
            project=ctx.project,
            description="nemo-rl-gke cluster VPC: nodes (eth0), pods, services, and the Managed Lustre peering",
            auto_create_subnetworks=False,
            mtu=PRIMARY_MTU,
            opts=child,
        )
        self.pods_range_name = ctx.name("pods", Limit.COMPUTE)
        self.services_range_name = ctx.name("services", Limit.COMPUTE)
        subnet = gcp.compute.Subnetwork(
            f"{name}-subnet",
            name=ctx.name("subnet", Limit.COMPUTE),
            project=ctx.project,
            region=ctx.region,
            network=vpc.name,
            ip_cidr_range=cfg.primary_cidr,
            # VPC-native GKE takes pod and service IPs from these named ranges (ip-alias).
            secondary_ip_ranges=[
                {"range_name": self.pods_range_name, "ip_cidr_range": cfg.pods_cidr},
                {"range_name": self.services_range_name, "ip_cidr_range": cfg.services_cidr},
            ],
            # Nodes reach Google APIs (Artifact Registry, GCS, Hugging Face mirrors on GCS) without NAT.
            private_ip_google_access=True,
            opts=child,
        )
        self.primary_network_name = vpc.name
        self.primary_network = network_id(ctx.project, vpc.name)
        self.primary_subnet = subnet_id(ctx.project, ctx.region, subnet.name)

    # ------------------------------------------------------------------ Cloud NAT

    def _cloud_nat(self, name: str, ctx: StackContext, child: pulumi.ResourceOptions) -> None:
        """A Cloud Router and NAT in the cluster's region for the cluster subnet only.

        Listing the subnet (rather than every subnet of the VPC) keeps the NAT to the cluster's nodes
        and pods even on the shared `default` VPC. Dynamic port allocation lets a node open thousands of
        parallel connections (image layers, sharded dataset and model downloads) without exhausting
        its ports. Only on the real cloud: the egress throughput a 70B model download reaches.
        """
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

    # ------------------------------------------------------------------ gVNIC VPC

    def _gvnic(self, name: str, ctx: StackContext, cfg: NetworkConfig, child: pulumi.ResourceOptions) -> None:
        gvnic = self.nics[0]
        vpc = gcp.compute.Network(
            f"{name}-gvnic-vpc",
            name=gvnic.vpc,
            project=ctx.project,
            description="nemo-rl-gke second gVNIC of the GPU nodes (eth1): host-to-host TCP",
            auto_create_subnetworks=False,
            mtu=cfg.gvnic_mtu,
            opts=child,
        )
        subnet = gcp.compute.Subnetwork(
            f"{name}-gvnic-subnet",
            name=gvnic.subnet,
            project=ctx.project,
            region=ctx.region,
            network=vpc.name,
            ip_cidr_range=cfg.gvnic_cidr,
            opts=child,
        )
        # A new VPC denies all ingress; NCCL/Gloo bootstrap and Ray use arbitrary ports between nodes.
        # The GKE NeMo RL tutorial allows 192.168.0.0/16; only the gVNIC subnet ever sends on this VPC,
        # so its own range is enough and follows the config.
        gcp.compute.Firewall(
            f"{name}-gvnic-allow-internal",
            name=ctx.name("gvnic-allow-internal", Limit.COMPUTE),
            project=ctx.project,
            network=vpc.name,
            description="Node-to-node traffic on the gVNIC VPC",
            direction="INGRESS",
            source_ranges=[cfg.gvnic_cidr],
            allows=[{"protocol": "tcp"}, {"protocol": "udp"}, {"protocol": "icmp"}],
            opts=child,
        )
        self.gvnic_network_name = vpc.name
        self.gvnic_subnet_name = subnet.name
        self.nic_subnets = [subnet]

    # ------------------------------------------------------------------ RDMA VPC

    def _rdma(self, name: str, ctx: StackContext, cfg: NetworkConfig, child: pulumi.ResourceOptions) -> None:
        rdma = self.nics[1:]
        vpc = gcp.compute.Network(
            f"{name}-rdma-vpc",
            name=rdma[0].vpc,
            project=ctx.project,
            description="nemo-rl-gke RoCE VPC for the MRDMA NICs of the GPU nodes (eth2..)",
            auto_create_subnetworks=False,
            # The profile makes this a RoCE VPC that accepts only MRDMA NICs, pinned to one zone.
            network_profile=roce_network_profile(ctx.project, ctx.zone),
            mtu=cfg.rdma_mtu,
            opts=child,
        )
        self.rdma_subnet_names = []
        for i, (cloud_name, cidr) in enumerate(zip((nic.subnet for nic in rdma), cfg.rdma_cidrs, strict=True)):
            subnet = gcp.compute.Subnetwork(
                f"{name}-rdma-subnet-{i}",
                name=cloud_name,
                project=ctx.project,
                # RoCE subnets must be in the region of the profile's zone
                # (https://cloud.google.com/vpc/docs/rdma-network-profiles).
                region=ctx.region,
                network=vpc.name,
                ip_cidr_range=cidr,
                opts=child,
            )
            self.rdma_subnet_names.append(subnet.name)
            self.nic_subnets.append(subnet)
        # No firewall rule: the tutorial creates none for the RoCE VPC, whose NICs carry only RDMA
        # (not IP) traffic between GPUs. Only on the real cloud: that the zone offers the profile and
        # that the project has quota for it.
        self.rdma_network_name = vpc.name

    # ------------------------------------------------------------------ Private Service Access

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
            # Fixed rather than GCP-chosen so config validation can prove it overlaps no other range.
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
            # Deleting the connection right after Lustre often fails while the producer side still
            # holds the range; removing the peering instead lets `pulumi destroy` delete the VPC.
            # Only on the real cloud: how long the producer side lingers.
            # On the default VPC an existing connection (e.g. Cloud SQL's) makes this create fail;
            # updateOnCreationFail is deliberately not set, as it would replace that connection's ranges.
            deletion_policy="REMOVE_PEERING",
            opts=child,
        )
        # Lustre servers connect back to the clients: allow their range to the LNet port
        # (988; 6988 when the legacy port is in use)
        # (https://cloud.google.com/managed-lustre/docs/connect-from-kubernetes-engine-existing-instance).
        gcp.compute.Firewall(
            f"{name}-allow-lustre",
            name=ctx.name("allow-lustre", Limit.COMPUTE),
            project=ctx.project,
            network=self.primary_network_name,
            description=f"Managed Lustre (LNet TCP {lustre_port}) from the private services range",
            direction="INGRESS",
            source_ranges=[cfg.psa_cidr],
            allows=[{"protocol": "tcp", "ports": [str(lustre_port)]}],
            opts=child,
        )
