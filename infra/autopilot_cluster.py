"""The GKE Autopilot cluster (`cluster.mode: autopilot`): regional, no node pools (GKE makes nodes from the
pods' requests, infra/autopilot_pods.py), otherwise as the Standard cluster with infra/gke_common.py.

Not sent: fields terraform-provider-google-beta declares `ConflictsWith: enable_autopilot` (set even when false:
`enableShieldedNodes`, `removeDefaultNodePool`, `networkPolicy`, `clusterAutoscaling.{enabled,resourceLimits}`,
...; google-beta/services/container/resource_container_cluster.go @93c65b2d), and `autopilotPrivilegedAdmissions`
(unset = GKE's allowlists, which admit the upstream NCCL installer).
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
    ctx: StackContext
    cluster: ClusterConfig
    network: ClusterNetwork
    legacy_lustre_port: bool
    gpu_pool: GpuPoolFacts


class AutopilotCluster(pulumi.ComponentResource):
    """A regional GKE Autopilot cluster: no node pools; hands on what `infra.gke_common.ClusterComponent` lists."""

    node_pool_names: tuple[str, ...] = ()
    node_name_prefix = "gk3"

    def __init__(self, name: str, args: AutopilotClusterArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("nemo-rl-gke:infra:AutopilotCluster", name, None, opts)
        ctx, cfg = args.ctx, args.cluster
        self.location = ctx.region
        self.project = ctx.project
        self.gpu_pool_facts = args.gpu_pool
        self.node_pools = []
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
        self.workload_pool = self.cluster.workload_identity_config.apply(workload_pool_of)


def autopilot_node_defaults(service_account: pulumi.Input[str]) -> dict[str, Any]:
    """Only the node identity: `enabled` and `resourceLimits` conflict with `enableAutopilot`."""
    return {
        "auto_provisioning_defaults": {
            "service_account": service_account,
            "oauth_scopes": [CLOUD_PLATFORM_SCOPE],
        }
    }
