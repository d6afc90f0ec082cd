"""The one place the program picks between GKE Standard and Autopilot (`cluster.mode`): `cluster_mode(cfg)`
returns the mode's cluster, NCCL installer, image pre-pull (none on Autopilot: no nodes before the Ray pods)
and Ray values rewrite, so the program never branches on the mode itself."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Optional

import pulumi

from infra.autopilot_cluster import AutopilotCluster, AutopilotClusterArgs
from infra.autopilot_pods import ray_values_for_autopilot
from infra.cluster import GkeCluster, GkeClusterArgs
from infra.config import StackConfig
from infra.gke_common import ClusterComponent, ClusterNetwork
from infra.image_prepull import ImagePrePull, ImagePrePullArgs
from infra.nccl import NcclRdmaInstaller, NcclRdmaInstallerArgs
from infra.nccl_autopilot import NcclRdmaInstallerAutopilot, NcclRdmaInstallerAutopilotArgs
from infra.stack_context import GpuPoolFacts, StackContext

RayValues = dict[str, Any]


@dataclass(frozen=True)
class ClusterMode(ABC):
    name: str
    cfg: StackConfig
    adapt_ray_values: Optional[Callable[[RayValues], RayValues]]  # `RayClusterArgs.adapt_values`

    @abstractmethod
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

    @abstractmethod
    def nccl_installer(
        self, name: str, image: str, accelerator_types: Sequence[str], opts: Optional[pulumi.ResourceOptions] = None
    ) -> pulumi.ComponentResource:
        """The NCCL gIB plugin installer DaemonSet."""

    @abstractmethod
    def image_prepull(
        self, name: str, args: ImagePrePullArgs, opts: Optional[pulumi.ResourceOptions] = None
    ) -> Optional[ImagePrePull]:
        """The image pre-pull DaemonSet, or None where there are no pools."""


class _Standard(ClusterMode):
    def cluster(self, name, ctx, network, *, gpu_pool, system_pool_name, opts=None) -> ClusterComponent:
        if system_pool_name is None:
            raise ValueError("a Standard cluster needs its system pool's name (infra.placement.system_pool_name)")
        cfg = self.cfg
        args = GkeClusterArgs(
            ctx=ctx,
            cluster=cfg.cluster,
            gpu_pool_config=cfg.gpu_pool,
            flavour=cfg.flavour_spec,
            network=ClusterNetwork.of(network),
            legacy_lustre_port=cfg.lustre_needs_legacy_port,
            gpu_pool=gpu_pool,
            system_pool_name=system_pool_name,
        )
        return GkeCluster(name, args, opts)

    def nccl_installer(self, name, image, accelerator_types, opts=None) -> pulumi.ComponentResource:
        return NcclRdmaInstaller(name, NcclRdmaInstallerArgs(image, tuple(accelerator_types)), opts)

    def image_prepull(self, name, args, opts=None) -> Optional[ImagePrePull]:
        return ImagePrePull(name, args, opts)


class _Autopilot(ClusterMode):
    def cluster(self, name, ctx, network, *, gpu_pool, system_pool_name, opts=None) -> ClusterComponent:
        cfg = self.cfg
        args = AutopilotClusterArgs(
            ctx=ctx,
            cluster=cfg.cluster,
            network=ClusterNetwork.of(network),
            legacy_lustre_port=cfg.lustre_needs_legacy_port,
            gpu_pool=gpu_pool,
        )
        return AutopilotCluster(name, args, opts)

    def nccl_installer(self, name, image, accelerator_types, opts=None) -> pulumi.ComponentResource:
        # Upstream's Autopilot installer in its own namespace: GKE admits it by an allowlist of that exact spec.
        return NcclRdmaInstallerAutopilot(name, NcclRdmaInstallerAutopilotArgs(image, tuple(accelerator_types)), opts)

    def image_prepull(self, name, args, opts=None) -> Optional[ImagePrePull]:
        return None


def cluster_mode(cfg: StackConfig) -> ClusterMode:
    if cfg.cluster.mode == "autopilot":
        pod_limits = cfg.flavour_spec.autopilot_pod
        return _Autopilot("autopilot", cfg, lambda values: ray_values_for_autopilot(values, pod_limits))
    return _Standard("standard", cfg, None)
