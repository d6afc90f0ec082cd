"""The one place the program picks between GKE Standard and Autopilot (`cluster.mode`): `cluster_mode(cfg)`
returns the mode's cluster, NCCL installer, image pre-pull (none on Autopilot: no nodes before the Ray pods)
and Ray values rewrite, so the program never branches on the mode itself."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Optional

import pulumi

from infra.autopilot_pods import ray_values_for_autopilot
from infra.cluster import AutopilotCluster, AutopilotClusterArgs, GkeCluster, GkeClusterArgs
from infra.config import StackConfig
from infra.gke_common import ClusterComponent, ClusterNetwork
from infra.image_prepull import ImagePrePull, ImagePrePullArgs
from infra.nccl import NcclRdmaInstaller, NcclRdmaInstallerArgs
from infra.stack_context import GpuPoolFacts, StackContext

RayValues = dict[str, Any]


@dataclass(frozen=True)
class ClusterMode:
    name: str  # `cluster.mode`
    cfg: StackConfig
    adapt_ray_values: Optional[Callable[[RayValues], RayValues]]  # `RayClusterArgs.adapt_values`

    @property
    def autopilot(self) -> bool:
        return self.name == "autopilot"

    def cluster(
        self,
        name: str,
        ctx: StackContext,
        network: Any,
        *,
        gpu_pool: GpuPoolFacts,
        system_pool_name: Optional[str],
        opts: Optional[pulumi.ResourceOptions] = None,
    ) -> ClusterComponent:
        """The cluster on `network` (the `Networking` component)."""
        cfg = self.cfg
        shared: dict[str, Any] = {
            "ctx": ctx,
            "cluster": cfg.cluster,
            "network": ClusterNetwork.of(network),
            "legacy_lustre_port": cfg.lustre_needs_legacy_port,
            "gpu_pool": gpu_pool,
        }
        if self.autopilot:
            return AutopilotCluster(name, AutopilotClusterArgs(**shared), opts)
        if system_pool_name is None:
            raise ValueError("a Standard cluster needs its system pool's name (infra.placement.system_pool_name)")
        standard = GkeClusterArgs(
            **shared, gpu_pool_config=cfg.gpu_pool, flavour=cfg.flavour_spec, system_pool_name=system_pool_name
        )
        return GkeCluster(name, standard, opts)

    def nccl_installer(
        self, name: str, image: str, accelerator_types: Sequence[str], opts: Optional[pulumi.ResourceOptions] = None
    ) -> NcclRdmaInstaller:
        """On Autopilot upstream's installer in its own namespace: GKE admits it by an allowlist of that exact spec."""
        return NcclRdmaInstaller(name, NcclRdmaInstallerArgs(image, tuple(accelerator_types), self.autopilot), opts)

    def image_prepull(
        self, name: str, args: ImagePrePullArgs, opts: Optional[pulumi.ResourceOptions] = None
    ) -> Optional[ImagePrePull]:
        """None on Autopilot, which has no nodes before the Ray pods ask for them."""
        return None if self.autopilot else ImagePrePull(name, args, opts)


def cluster_mode(cfg: StackConfig) -> ClusterMode:
    if cfg.cluster.mode == "autopilot":
        pod_limits = cfg.flavour_spec.autopilot_pod
        return ClusterMode("autopilot", cfg, lambda values: ray_values_for_autopilot(values, pod_limits))
    return ClusterMode("standard", cfg, None)
