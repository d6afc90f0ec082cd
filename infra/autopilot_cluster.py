"""The GKE Autopilot cluster (`cluster.mode: autopilot`), the GKE tutorial's recommended mode.

Autopilot has no node pools: GKE creates and sizes nodes from the pods' requests and node selectors
(infra/autopilot_pods.py), bills GPU pods by the node they occupy, and manages upgrades, repair and
node security itself. The cluster is regional (Autopilot clusters are), in the stack's region; the GPU
workers select the stack's zone, where the RoCE VPC and Lustre are.

Same as the Standard cluster (infra/cluster.py), with the same helpers (infra/gke_common.py): the
primary VPC and its secondary ranges, multi-networking (Autopilot always runs Dataplane V2), the Ray
operator add-on with its logging and monitoring, the Lustre CSI driver, Workload Identity, private
nodes, the control plane through its DNS endpoint only (`cluster.controlPlaneAccess`), the maintenance
window and exclusion, deletion protection, and a dedicated node service account (Autopilot takes it
through `clusterAutoscaling.autoProvisioningDefaults`, the field `gcloud container clusters
create-auto --service-account` sets).

Not sent, on purpose: terraform-provider-google-beta (which pulumi-gcp bridges) declares these fields
`ConflictsWith: enable_autopilot`, and the Terraform SDK counts a field as set when it is present,
whatever its value (`false` included): `enableShieldedNodes`, `removeDefaultNodePool`, `nodePools`,
`defaultMaxPodsPerNode`, `enableIntranodeVisibility`, `networkPolicy`,
`addonsConfig.{networkPolicyConfig,dnsCacheConfig,statefulHaConfig}`,
`clusterAutoscaling.{enabled,resourceLimits}`, `binaryAuthorization.enabled`
(google-beta/services/container/resource_container_cluster.go @93c65b2d). Autopilot fixes what they
would say (Shielded nodes on, no default pool). Also left to Autopilot: `datapathProvider` (always
ADVANCED_DATAPATH; optional + computed, so the read-back does not diff), `nodeConfig`,
`initialNodeCount`, `autopilotPrivilegedAdmissions` (unset = GKE's approved allowlists, which admit the
upstream NCCL installer: infra/nccl_autopilot.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import pulumi
import pulumi_gcp as gcp

from infra.config import ClusterConfig
from infra.gke_common import (
    CLOUD_PLATFORM_SCOPE,
    CLUSTER_TIMEOUTS,
    ClusterNetwork,
    addons_config,
    client_endpoint,
    control_plane_settings,
    credentials_command,
    handed_on_outputs,
    ip_allocation_policy,
    maintenance_policy,
    node_service_account,
    workload_pool_of,
)
from infra.naming import Limit
from infra.options import child_options
from infra.stack_context import GpuPoolFacts, StackContext

COMPONENT = "gke"


@dataclass(frozen=True)
class AutopilotClusterArgs:
    """What `AutopilotCluster` needs; `gpu_pool` is the plan-time facts of `infra.placement` (node labels)."""

    ctx: StackContext
    cluster: ClusterConfig
    network: ClusterNetwork
    legacy_lustre_port: bool
    gpu_pool: GpuPoolFacts


class AutopilotCluster(pulumi.ComponentResource):
    """A regional GKE Autopilot cluster: no node pools; hands on what `infra.gke_common.ClusterComponent` lists."""

    cluster: gcp.container.Cluster
    name: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    """Where API clients connect: the DNS endpoint's host name (`controlPlaneAccess: dns`) or the IP."""
    ca_certificate: Optional[pulumi.Output[str]]
    """The cluster CA for the IP endpoint; None for the publicly trusted DNS endpoint."""
    control_plane_access: str
    location: str
    """The region of the control plane; GPU nodes are in the stack's zone."""
    project: str
    node_service_account: gcp.serviceaccount.Account
    """The identity of every node VM GKE creates (not of the pods)."""
    node_service_account_grants: list[gcp.projects.IAMMember]
    node_pools: list[gcp.container.NodePool]
    """Always empty: Autopilot has no node pools to wait for."""
    node_pool_names: tuple[str, ...] = ()
    gpu_pool_facts: GpuPoolFacts
    """What workloads need to select and configure the GPU nodes (plan-time data, node labels)."""
    workload_pool: pulumi.Output[str]
    """The Workload Identity pool as the cluster reports it (see `GkeCluster.workload_pool`)."""
    credentials_command: pulumi.Output[str]
    node_name_prefix = "gk3"
    """How GKE starts the names of Autopilot node VMs (`gk3-<cluster>-...`)."""

    def __init__(self, name: str, args: AutopilotClusterArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("nemo-rl-gke:infra:AutopilotCluster", name, None, opts)
        ctx, cfg = args.ctx, args.cluster
        self.location = ctx.region
        self.project = ctx.project
        self.gpu_pool_facts = args.gpu_pool
        self.node_pools = []
        # The caller's depends_on (e.g. the project APIs) reaches every child (infra/options.py).
        self.node_service_account, self.node_service_account_grants = node_service_account(
            self, name, ctx, child_options(self, opts)
        )
        self._cluster(name, args, opts)
        self.control_plane_access = cfg.control_plane_access
        self.endpoint, self.ca_certificate = client_endpoint(self.cluster, cfg)
        self.credentials_command = credentials_command(
            self.cluster.name,
            ctx.region,
            ctx.project,
            dns=cfg.control_plane_access == "dns",
            location_flag="--region",
        )
        self.register_outputs(handed_on_outputs(self))

    def _cluster(self, name: str, args: AutopilotClusterArgs, opts: Optional[pulumi.ResourceOptions]) -> None:
        ctx, cfg, networking = args.ctx, args.cluster, args.network
        self.cluster = gcp.container.Cluster(
            f"{name}-cluster",
            name=ctx.name("gke", Limit.GKE_CLUSTER),
            project=ctx.project,
            location=ctx.region,
            description="nemo-rl-gke: GRPO training with NeMo-RL on Ray (Autopilot)",
            enable_autopilot=True,
            network=networking.primary_network,
            subnetwork=networking.primary_subnet,
            networking_mode="VPC_NATIVE",
            ip_allocation_policy=ip_allocation_policy(networking),
            # Pods take the GPU nodes' extra NICs through the GKE Network objects
            # (https://cloud.google.com/kubernetes-engine/docs/how-to/setup-multinetwork-support-for-pods).
            enable_multi_networking=True,
            workload_identity_config={"workload_pool": f"{ctx.project}.svc.id.goog"},
            addons_config=addons_config(args.legacy_lustre_port),
            cluster_autoscaling=autopilot_node_defaults(self.node_service_account.email),
            release_channel={"channel": cfg.release_channel},
            min_master_version=cfg.min_master_version,
            maintenance_policy=maintenance_policy(cfg),
            **control_plane_settings(cfg),
            deletion_protection=cfg.deletion_protection,
            resource_labels=ctx.labels(COMPONENT),
            opts=child_options(
                self,
                opts,
                # Nodes GKE creates run as the account from the start: it must hold its roles first.
                depends_on=self.node_service_account_grants,
                custom_timeouts=CLUSTER_TIMEOUTS,
                # Refused in the preview of `pulumi destroy`, before anything is deleted (see GkeCluster).
                protect=cfg.deletion_protection,
            ),
        )
        self.name = self.cluster.name
        # Grants to Kubernetes service accounts take the pool from here: they wait for the cluster.
        self.workload_pool = self.cluster.workload_identity_config.apply(workload_pool_of)


def autopilot_node_defaults(service_account: pulumi.Input[str]) -> dict[str, Any]:
    """`clusterAutoscaling` for Autopilot: only the node identity (snake_case). `enabled` and
    `resourceLimits` conflict with `enableAutopilot` in the provider and are never sent."""
    return {
        "auto_provisioning_defaults": {
            "service_account": service_account,
            "oauth_scopes": [CLOUD_PLATFORM_SCOPE],
        }
    }
