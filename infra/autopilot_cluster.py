"""The GKE Autopilot cluster (`cluster.mode: autopilot`): regional, no node pools (GKE makes nodes from the
pods' requests, infra/autopilot_pods.py), otherwise as the Standard cluster with infra/gke_common.py.

Not sent: fields terraform-provider-google-beta declares `ConflictsWith: enable_autopilot` (set even when false:
`enableShieldedNodes`, `removeDefaultNodePool`, `networkPolicy`, `clusterAutoscaling.{enabled,resourceLimits}`,
...; google-beta/services/container/resource_container_cluster.go @93c65b2d), and `autopilotPrivilegedAdmissions`
(unset = GKE's allowlists, which admit the upstream NCCL installer).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi_gcp as gcp

from infra.config import ClusterConfig
from infra.gke_common import (
    CLOUD_PLATFORM_SCOPE,
    ClusterNetwork,
    cluster_options,
    cluster_settings,
    hand_on,
    node_service_account,
)
from infra.options import child_options
from infra.stack_context import GpuPoolFacts, StackContext


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
        self.location, self.project = ctx.region, ctx.project
        self.gpu_pool_facts = args.gpu_pool
        self.node_pools = []
        self.node_service_account, grants = node_service_account(name, ctx, child_options(self, opts))
        self.cluster = gcp.container.Cluster(
            f"{name}-cluster",
            **cluster_settings(ctx, cfg, args.network, args.legacy_lustre_port),
            location=ctx.region,
            description="nemo-rl-gke: GRPO training with NeMo-RL on Ray (Autopilot)",
            enable_autopilot=True,
            # Only the node identity: `enabled` and `resourceLimits` conflict with `enableAutopilot`.
            cluster_autoscaling={
                "auto_provisioning_defaults": {
                    "service_account": self.node_service_account.email,
                    "oauth_scopes": [CLOUD_PLATFORM_SCOPE],
                }
            },
            opts=cluster_options(self, opts, cfg, grants),
        )
        self.register_outputs(hand_on(self, cfg, location_flag="--region"))
