"""What the Standard and Autopilot clusters (`infra/cluster.py`) share: their
network arguments, the outputs they hand on, and the pieces both build the same way."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Protocol, Sequence

import pulumi
import pulumi_gcp as gcp

from infra.config import ClusterConfig
from infra.naming import Limit
from infra.options import child_options
from infra.stack_context import GpuPoolFacts, StackContext

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"  # access is governed by IAM, not scopes

NODE_SERVICE_ACCOUNT_ROLES = ("roles/container.defaultNodeServiceAccount", "roles/artifactregistry.reader")
"""GKE's least-privilege node role and image pulls (docs.cloud.google.com/kubernetes-engine/security/
configure-node-service-accounts; CIS GKE Benchmark 2.0 5.2.1)."""
IMAGE_STREAMING_ROLE = "roles/serviceusage.serviceUsageConsumer"
"""With `cluster.imageStreaming`: what GKE Image streaming asks of a node service account that is not the default one,
in the project hosting the images (kubernetes-engine/docs/how-to/image-streaming, Requirements); a grant of the
account like the others, so every pool waits for it."""

UPGRADE_EXCLUSION_START = "2026-01-01T00:00:00Z"
CLUSTER_TIMEOUTS = pulumi.CustomTimeouts(create="60m", update="90m", delete="60m")
COMPONENT = "gke"


@dataclass(frozen=True)
class ClusterNetwork:
    primary_network: pulumi.Input[str]
    primary_subnet: pulumi.Input[str]
    pods_range_name: Optional[str]  # None on the `default` network: GKE makes the ranges from the CIDRs
    services_range_name: Optional[str]
    pods_cidr: Optional[str]
    services_cidr: Optional[str]
    node_networks: tuple[tuple[pulumi.Input[str], pulumi.Input[str]], ...] = ()  # (network, subnet) eth1, eth2..

    @classmethod
    def of(cls, networking: Any) -> "ClusterNetwork":
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
    cluster: gcp.container.Cluster  # in-cluster objects are `deleted_with` it
    name: pulumi.Output[str]
    endpoint: pulumi.Output[str]  # the DNS endpoint's host name or the IP
    ca_certificate: Optional[pulumi.Output[str]]  # None for the publicly trusted DNS endpoint
    control_plane_access: str
    location: str  # a region or the stack's zone; GPU nodes are in the zone either way
    project: str
    workload_pool: pulumi.Output[str]  # grants take it from here, so they wait for the cluster
    credentials_command: pulumi.Output[str]
    node_service_account: gcp.serviceaccount.Account
    node_pools: Sequence[gcp.container.NodePool]  # none on Autopilot
    node_pool_names: tuple[str, ...]
    gpu_pool_facts: GpuPoolFacts
    node_name_prefix: str  # `gke-` Standard, `gk3-` Autopilot


def cluster_settings(
    ctx: StackContext, cfg: ClusterConfig, networking: ClusterNetwork, legacy_lustre_port: bool
) -> dict[str, Any]:
    """The `gcp.container.Cluster` arguments (snake_case) both modes send alike."""
    return {
        "name": ctx.name("gke", Limit.GKE_CLUSTER),
        "project": ctx.project,
        "network": networking.primary_network,
        "subnetwork": networking.primary_subnet,
        "networking_mode": "VPC_NATIVE",
        "ip_allocation_policy": ip_allocation_policy(networking),
        # Pods take the GPU nodes' extra NICs
        # (https://cloud.google.com/kubernetes-engine/docs/how-to/setup-multinetwork-support-for-pods).
        "enable_multi_networking": True,
        "workload_identity_config": {"workload_pool": f"{ctx.project}.svc.id.goog"},
        "addons_config": addons_config(legacy_lustre_port),
        "release_channel": {"channel": cfg.release_channel},
        # Unset: the channel's default version, which GKE keeps available; a pinned minimum is refused once it
        # leaves the channel.
        "min_master_version": cfg.min_master_version,
        "maintenance_policy": maintenance_policy(cfg),
        **control_plane_settings(cfg),
        "deletion_protection": cfg.deletion_protection,
        "resource_labels": ctx.labels(COMPONENT),
    }


def cluster_options(
    parent: pulumi.Resource,
    opts: Optional[pulumi.ResourceOptions],
    cfg: ClusterConfig,
    grants: Sequence[pulumi.Resource],
    **extra: Any,
) -> pulumi.ResourceOptions:
    """After the node account's grants (nodes run as it from the start, even the removed default pool's)."""
    return child_options(
        parent,
        opts,
        depends_on=list(grants),
        custom_timeouts=CLUSTER_TIMEOUTS,
        # GKE's deletionProtection only refuses the cluster's own delete, which `pulumi destroy` reaches last:
        # Lustre (exported), the node pools and every in-cluster object would go first. Pulumi's `protect` refuses
        # in the preview, before anything is executed (pulumi/pulumi pkg/resource/deploy/step.go DeleteStep.Apply,
        # pkg/backend/apply.go PreviewThenPromptThenExecute); only `--skip-preview` or the Automation API still
        # delete the rest first (docs/deploy.md). Both follow `cluster.deletionProtection`.
        protect=cfg.deletion_protection,
        **extra,
    )


def hand_on(component: Any, cfg: ClusterConfig, location_flag: str = "--location") -> dict[str, Any]:
    """Sets what `ClusterComponent` lists of `component.cluster` (name, workload pool, endpoint, CA, credentials);
    returns the outputs both modes register."""
    cluster = component.cluster
    component.name = cluster.name
    component.workload_pool = cluster.workload_identity_config.apply(_workload_pool)
    component.control_plane_access = cfg.control_plane_access
    dns = cfg.control_plane_access == "dns"
    if dns:
        component.endpoint = cluster.control_plane_endpoints_config.apply(_dns_endpoint)
        component.ca_certificate = None
    else:
        component.endpoint = cluster.endpoint
        component.ca_certificate = cluster.master_auth.apply(lambda auth: auth.cluster_ca_certificate)
    tail = f" {location_flag} {component.location} --project {component.project}" + (" --dns-endpoint" if dns else "")
    component.credentials_command = pulumi.Output.concat(
        "gcloud container clusters get-credentials ", cluster.name, tail
    )
    facts = component.gpu_pool_facts
    return {
        "name": component.name,
        "endpoint": component.endpoint,
        "controlPlaneAccess": component.control_plane_access,
        "location": component.location,
        "credentialsCommand": component.credentials_command,
        "workloadPool": component.workload_pool,
        "nodeServiceAccount": component.node_service_account.email,
        "nodePools": list(component.node_pool_names),
        "gpuPoolFacts": {
            "poolName": facts.pool_name,
            "nodeCount": facts.node_count,
            "gpusPerNode": facts.gpus_per_node,
            "acceleratorType": facts.accelerator_type,
            "taints": list(facts.taints),
            "nodeSelector": facts.node_selector,
            "nics": [n.interface for n in facts.nics],
            **(
                {"computeClass": facts.compute_class, "rungPools": {p.name: p.rung for p in facts.rung_pools}}
                if facts.compute_class
                else {}
            ),
        },
    }


def maintenance_policy(cfg: ClusterConfig) -> dict[str, Any]:
    """By default no minor or node upgrades mid-run (they recreate GPU nodes), the scope Google's A4 Cluster
    Toolkit blueprints use; a fixed start so the cluster does not diff on every run."""
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


def control_plane_settings(cfg: ClusterConfig) -> dict[str, Any]:
    """Both endpoint blocks always spelled out: the provider fills an omitted (optional + computed) block from
    the cloud, so a switch between `dns` and `ip` would change nothing. With `dns` the provider reads
    `enablePrivateEndpoint` back as true (terraform-provider-google's flattening of ipEndpointsConfig): saying so
    avoids a diff on every preview. With `ip` the DNS endpoint is closed: the authorized networks are the way in."""
    dns = cfg.control_plane_access == "dns"
    settings = {
        "private_cluster_config": {"enable_private_nodes": True, "enable_private_endpoint": dns},
        "control_plane_endpoints_config": {
            "dns_endpoint_config": {"allow_external_traffic": dns},
            "ip_endpoints_config": {"enabled": not dns},
        },
    }
    return settings if dns else {**settings, "master_authorized_networks_config": _authorized_networks(cfg)}


def _authorized_networks(cfg: ClusterConfig) -> Optional[dict[str, Any]]:
    """None only when opened on purpose (`cluster.allowPublicControlPlane`, which the config requires then): an
    empty block would lock everyone out."""
    if not cfg.master_authorized_networks:
        return None
    return {
        "cidr_blocks": [
            {"cidr_block": n.cidr_block, "display_name": n.display_name or n.cidr_block}
            for n in cfg.master_authorized_networks
        ],
        "gcp_public_cidrs_access_enabled": False,
    }


def node_service_account(
    name: str, ctx: StackContext, child: pulumi.ResourceOptions, streaming: bool = False
) -> tuple[gcp.serviceaccount.Account, list[gcp.projects.IAMMember]]:
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
        for role in (*NODE_SERVICE_ACCOUNT_ROLES, *((IMAGE_STREAMING_ROLE,) if streaming else ()))
    ]
    return account, grants


def addons_config(legacy_lustre_port: bool) -> dict[str, Any]:
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
            # From GKE 1.35.2-gke.1842000 the driver spreads Lustre TCP over every standard NIC; eth1's
            # gVNIC VPC has no peering to Lustre: keep Lustre on eth0.
            "disable_multi_nic": True,
        },
        "gcs_fuse_csi_driver_config": {"enabled": True},
    }


def _workload_pool(config: Any) -> str:
    pool = getattr(config, "workload_pool", None)
    if not pool:
        raise ValueError("the cluster reports no workloadIdentityConfig.workloadPool; Workload Identity is off")
    return pool


def _dns_endpoint(config: Any) -> str:
    endpoint = getattr(getattr(config, "dns_endpoint_config", None), "endpoint", None)
    if not endpoint:
        raise ValueError(
            "the cluster reports no controlPlaneEndpointsConfig.dnsEndpointConfig.endpoint; "
            "set cluster.controlPlaneAccess: ip to use the IP endpoint"
        )
    return endpoint


def ip_allocation_policy(networking: ClusterNetwork) -> dict[str, Any]:
    if networking.pods_range_name and networking.services_range_name:
        return {
            "cluster_secondary_range_name": networking.pods_range_name,
            "services_secondary_range_name": networking.services_range_name,
        }
    return {"cluster_ipv4_cidr_block": networking.pods_cidr, "services_ipv4_cidr_block": networking.services_cidr}
