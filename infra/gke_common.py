"""What the Standard and the Autopilot cluster share: the arguments they take from the network, the
outputs they hand on (`ClusterComponent`), and the pieces both build the same way: add-ons, how
clients reach the control plane, the maintenance policy, the node identity, the Workload Identity pool.

Not a component: `infra/cluster.py` (`GkeCluster`) and `infra/autopilot_cluster.py`
(`AutopilotCluster`) import it, and neither imports the other; `infra/cluster_mode.py` picks one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Protocol, Sequence

import pulumi
import pulumi_gcp as gcp

from infra.config import ClusterConfig
from infra.naming import Limit
from infra.stack_context import GpuPoolFacts, StackContext

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
"""Node VM scope: access is governed by IAM on the node service account, not by legacy scopes."""

NODE_SERVICE_ACCOUNT_ROLES = (
    "roles/container.defaultNodeServiceAccount",
    "roles/artifactregistry.reader",
)
"""What the node VMs need: GKE's least-privilege role for node service accounts (logs, metrics,
resource metadata, autoscaling metrics) and image pulls from Artifact Registry (GKE "Configure GKE node
service accounts", docs.cloud.google.com/kubernetes-engine/security/configure-node-service-accounts;
CIS GKE Benchmark 2.0 5.2.1). Replaces the older list of logWriter, metricWriter, monitoring.viewer
and resourceMetadata.writer that the role bundles."""

UPGRADE_EXCLUSION_START = "2026-01-01T00:00:00Z"
CLUSTER_TIMEOUTS = pulumi.CustomTimeouts(create="60m", update="90m", delete="60m")


@dataclass(frozen=True)
class ClusterNetwork:
    """What a cluster takes from `Networking`: the primary VPC and subnet, the pod and service ranges,
    and the GPU nodes' additional networks in NIC order (outputs, so the cluster waits for them)."""

    primary_network: pulumi.Input[str]
    """`projects/<p>/global/networks/<name>`."""
    primary_subnet: pulumi.Input[str]
    """`projects/<p>/regions/<r>/subnetworks/<name>`."""
    pods_range_name: Optional[str]
    """None on the `default` network: GKE makes the ranges from the CIDRs."""
    services_range_name: Optional[str]
    pods_cidr: Optional[str]
    services_cidr: Optional[str]
    node_networks: tuple[tuple[pulumi.Input[str], pulumi.Input[str]], ...] = ()
    """(network, subnetwork) of eth1 (the gVNIC), then of each RDMA NIC (eth2..)."""

    @classmethod
    def of(cls, networking: Any) -> "ClusterNetwork":
        """From the `infra.network.Networking` component."""
        return cls(
            primary_network=networking.primary_network,
            primary_subnet=networking.primary_subnet,
            pods_range_name=networking.pods_range_name,
            services_range_name=networking.services_range_name,
            pods_cidr=networking.pods_cidr,
            services_cidr=networking.services_cidr,
            node_networks=(
                (networking.gvnic_network_name, networking.gvnic_subnet_name),
                *((networking.rdma_network_name, subnet) for subnet in networking.rdma_subnet_names),
            ),
        )


class ClusterComponent(Protocol):
    """What a cluster component (`GkeCluster`, `AutopilotCluster`) hands on to the rest of the program."""

    cluster: gcp.container.Cluster
    """The GKE cluster resource: in-cluster objects are `deleted_with` it."""
    name: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    """Where API clients connect: the DNS endpoint's host name (`controlPlaneAccess: dns`) or the IP."""
    ca_certificate: Optional[pulumi.Output[str]]
    """Base64 PEM of the CA that signs `endpoint`'s certificate (the cluster CA, for the IP endpoint);
    None for the DNS endpoint, whose certificate is publicly trusted."""
    control_plane_access: str
    location: str
    """The control plane's location: a region or the stack's zone. GPU nodes are in the zone either way."""
    project: str
    workload_pool: pulumi.Output[str]
    """The Workload Identity pool as the cluster reports it: grants to Kubernetes service accounts take it
    from here, so they wait for the cluster that creates the pool."""
    credentials_command: pulumi.Output[str]
    node_service_account: gcp.serviceaccount.Account
    """The identity of every node VM (not of the pods)."""
    node_pools: Sequence[gcp.container.NodePool]
    """Every node pool (none on Autopilot); Kubernetes objects that need nodes depend on these."""
    node_pool_names: tuple[str, ...]
    """The pools' names, known at plan time (none on Autopilot)."""
    gpu_pool_facts: GpuPoolFacts
    """What workloads need to target and configure the GPU nodes (plan-time data)."""
    node_name_prefix: str
    """How GKE starts the names of the cluster's node VMs (`gke-` Standard, `gk3-` Autopilot)."""


def handed_on_outputs(cluster: ClusterComponent) -> dict[str, Any]:
    """The outputs every cluster component registers, under the same keys."""
    facts = cluster.gpu_pool_facts
    return {
        "name": cluster.name,
        "endpoint": cluster.endpoint,
        "controlPlaneAccess": cluster.control_plane_access,
        "location": cluster.location,
        "credentialsCommand": cluster.credentials_command,
        "workloadPool": cluster.workload_pool,
        "nodeServiceAccount": cluster.node_service_account.email,
        "nodePools": list(cluster.node_pool_names),
        "gpuPoolFacts": {
            "poolName": facts.pool_name,
            "nodeCount": facts.node_count,
            "gpusPerNode": facts.gpus_per_node,
            "acceleratorType": facts.accelerator_type,
            "taints": list(facts.taints),
            "nodeSelector": facts.node_selector,
            "nics": [n.interface for n in facts.nics],
            # The capacity ladder's class and pool -> rung map (what the run owner's gang report names).
            **(
                {"computeClass": facts.compute_class, "rungPools": {p.name: p.rung for p in facts.rung_pools}}
                if facts.compute_class
                else {}
            ),
        },
    }


def maintenance_policy(cfg: ClusterConfig) -> dict[str, Any]:
    """The daily window, and (by default) an exclusion that keeps GKE from upgrading nodes mid-run.

    Node upgrades recreate GPU nodes and kill the Ray workers of a running job; the exclusion blocks
    minor and node upgrades until the version's end of support while control-plane patches continue
    (the scope Google's A4 and Managed Lustre Cluster Toolkit blueprints use). Upgrade the pools by
    hand between runs. The start time is fixed, not "now", so the cluster does not diff on every run;
    a start in the past is accepted (those blueprints use one).
    """
    policy: dict[str, Any] = {"daily_maintenance_window": {"start_time": cfg.maintenance_start_time}}
    if cfg.block_node_upgrades:
        policy["maintenance_exclusions"] = [
            {
                "exclusion_name": "no-minor-or-node-upgrades",
                "start_time": UPGRADE_EXCLUSION_START,
                "exclusion_options": {
                    "scope": "NO_MINOR_OR_NODE_UPGRADES",
                    "end_time_behavior": "UNTIL_END_OF_SUPPORT",
                },
            }
        ]
    return policy


def credentials_command(
    cluster_name: pulumi.Input[str], location: str, project: str, *, dns: bool, location_flag: str = "--location"
) -> pulumi.Output[str]:
    """The gcloud command that writes a kubeconfig entry for the cluster (at its DNS endpoint when `dns`);
    `--location` takes a region or a zone."""
    return pulumi.Output.concat(
        "gcloud container clusters get-credentials ",
        cluster_name,
        f" {location_flag} ",
        location,
        " --project ",
        project,
        " --dns-endpoint" if dns else "",
    )


def control_plane_settings(cfg: ClusterConfig) -> dict[str, Any]:
    """Cluster arguments (snake_case) for how clients reach the control plane (`cluster.controlPlaneAccess`).

    Nodes get internal IPs only either way. Without `masterIpv4CidrBlock` GKE (1.29+) connects them to
    the control plane over Private Service Connect, which does not use the endpoints set here.

    Both endpoint blocks are always spelled out: the provider fills an omitted block from the cloud
    (optional + computed), so leaving one out on a switch between `dns` and `ip` would change nothing.
    """
    if cfg.control_plane_access == "dns":
        return {
            # With the IP endpoints off the provider reads `enablePrivateEndpoint` back as true
            # (terraform-provider-google's flattening of ipEndpointsConfig); saying so avoids a diff on
            # every preview. Only on the real cloud: that the read-back matches.
            "private_cluster_config": {"enable_private_nodes": True, "enable_private_endpoint": True},
            # Only on the real cloud: that turning the IP endpoints off at creation leaves nothing
            # (add-ons, the Lustre CSI driver, the Ray operator) needing them; GKE documents the DNS
            # endpoint as serving every Kubernetes API request, service proxy included.
            "control_plane_endpoints_config": {
                "dns_endpoint_config": {"allow_external_traffic": True},
                "ip_endpoints_config": {"enabled": False},
            },
        }
    return {
        # The public endpoint stays for `pulumi up` and kubectl, restricted by the authorized networks;
        # the DNS endpoint is closed to user traffic so the allow-list is the only way in.
        "private_cluster_config": {"enable_private_nodes": True, "enable_private_endpoint": False},
        "control_plane_endpoints_config": {
            "dns_endpoint_config": {"allow_external_traffic": False},
            "ip_endpoints_config": {"enabled": True},
        },
        "master_authorized_networks_config": _authorized_networks(cfg),
    }


def _authorized_networks(cfg: ClusterConfig) -> Optional[dict[str, Any]]:
    """The configured CIDRs, and nothing else (not even Google Cloud's public ranges).

    None only when the user opened the control plane on purpose (`cluster.allowPublicControlPlane`;
    config validation refuses an empty list otherwise): an empty block would lock everyone out,
    `pulumi up` included.
    """
    if not cfg.master_authorized_networks:
        if not cfg.allow_public_control_plane:
            raise ValueError("cluster.masterAuthorizedNetworks is empty and cluster.allowPublicControlPlane is false")
        return None
    return {
        "cidr_blocks": [
            {"cidr_block": n.cidr_block, "display_name": n.display_name or n.cidr_block}
            for n in cfg.master_authorized_networks
        ],
        "gcp_public_cidrs_access_enabled": False,
    }


def node_service_account(
    parent: pulumi.Resource, name: str, ctx: StackContext, child: Optional[pulumi.ResourceOptions] = None
) -> tuple[gcp.serviceaccount.Account, list[gcp.projects.IAMMember]]:
    """The node VMs' dedicated service account (no keys) and its grants of `NODE_SERVICE_ACCOUNT_ROLES`;
    `child`: their resource options (default: children of `parent`)."""
    child = child or pulumi.ResourceOptions(parent=parent)
    account = gcp.serviceaccount.Account(
        f"{name}-node-sa",
        account_id=ctx.name("nodes", Limit.SERVICE_ACCOUNT_ID),
        project=ctx.project,
        display_name=f"nemo-rl-gke nodes ({ctx.stack})",
        description="Identity of the GKE node VMs: logs, metrics, image pulls. No keys.",
        opts=child,
    )
    grants = [
        gcp.projects.IAMMember(
            f"{name}-node-sa-{role.removeprefix('roles/').replace('.', '-')}",
            project=ctx.project,
            role=role,
            member=account.member,
            opts=child,
        )
        for role in NODE_SERVICE_ACCOUNT_ROLES
    ]
    return account, grants


def client_endpoint(
    cluster: gcp.container.Cluster, cfg: ClusterConfig
) -> tuple[pulumi.Output[str], Optional[pulumi.Output[str]]]:
    """Where API clients connect and the CA to verify it with (None for the publicly trusted DNS endpoint)."""
    if cfg.control_plane_access == "dns":
        return cluster.control_plane_endpoints_config.apply(_dns_endpoint), None
    return cluster.endpoint, cluster.master_auth.apply(lambda auth: auth.cluster_ca_certificate)


def addons_config(legacy_lustre_port: bool) -> dict[str, Any]:
    """The cluster add-ons (snake_case): Ray operator, Lustre CSI, GCS FUSE CSI."""
    return {
        "ray_operator_configs": [
            {
                "enabled": True,
                "ray_cluster_logging_config": {"enabled": True},
                "ray_cluster_monitoring_config": {"enabled": True},
            }
        ],
        "lustre_csi_driver_config": {
            "enabled": True,
            "enable_legacy_lustre_port": legacy_lustre_port,
            # From GKE 1.35.2-gke.1842000 the driver spreads Lustre TCP over every standard NIC,
            # which the Lustre docs allow only when all of them are on one VPC. The GPU nodes'
            # eth1 is on the gVNIC VPC, which has no peering to Lustre: keep Lustre on eth0.
            # Only on the real cloud: whether the driver would have skipped eth1 by itself.
            "disable_multi_nic": True,
        },
        # Lets pods mount the artifact bucket as a volume; free when unused.
        "gcs_fuse_csi_driver_config": {"enabled": True},
    }


def workload_pool_of(config: Any) -> str:
    """`workloadIdentityConfig.workloadPool` as the cluster reports it (`<project>.svc.id.goog`)."""
    pool = getattr(config, "workload_pool", None) if config is not None else None
    if not pool:
        raise ValueError("the cluster reports no workloadIdentityConfig.workloadPool; Workload Identity is off")
    return pool


def _dns_endpoint(config: Any) -> str:
    """The host name of the DNS endpoint (`controlPlaneEndpointsConfig.dnsEndpointConfig.endpoint`)."""
    dns = getattr(config, "dns_endpoint_config", None) if config is not None else None
    endpoint = getattr(dns, "endpoint", None) if dns is not None else None
    if not endpoint:
        # GKE documents the field as always present; a provider that did not read it back would
        # otherwise leave the Kubernetes provider with an empty server address.
        raise ValueError(
            "the cluster reports no controlPlaneEndpointsConfig.dnsEndpointConfig.endpoint; "
            "set cluster.controlPlaneAccess: ip to use the IP endpoint"
        )
    return endpoint


def ip_allocation_policy(networking: ClusterNetwork) -> dict[str, Any]:
    """Pods and services from the subnet's named ranges, or GKE-made ranges on the default network."""
    if networking.pods_range_name and networking.services_range_name:
        return {
            "cluster_secondary_range_name": networking.pods_range_name,
            "services_secondary_range_name": networking.services_range_name,
        }
    # The default subnet is not ours to add ranges to: GKE creates them from these CIDRs.
    return {
        "cluster_ipv4_cidr_block": networking.pods_cidr,
        "services_ipv4_cidr_block": networking.services_cidr,
    }
