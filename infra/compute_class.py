"""The capacity ladder's custom ComputeClass: GKE's autoscaler walks its priorities, one GPU pool per rung.

GKE already runs the fallback from one capacity type to the next (spot, flex-start, a reservation,
on-demand): a custom ComputeClass (`cloud.google.com/v1`) lists node configurations in priority order and
the cluster autoscaler scales up the first one it can, over manually created node pools as well as
auto-created ones ("About custom ComputeClasses",
https://cloud.google.com/kubernetes-engine/docs/concepts/about-custom-compute-classes; the field reference
https://cloud.google.com/kubernetes-engine/docs/reference/crds/computeclass, both read 2026-12-03). So the
program writes no fallback loop of its own: it creates one GPU pool per rung (infra/cluster.py) and this
class over them, and the Ray workers select the class (`cloud.google.com/compute-class: NAME`).

What the manifest sets, each field checked against the schema derived from Google's Go API types
(tests/reference/gke-computeclass/computeclass-v1.schema.json, GoogleCloudPlatform/compute-class-api @8067eaeb,
where `nodePoolAutoCreation.enabled`, `activeMigration.optimizeRulePriority` and `whenUnsatisfiable` are required):
- `priorities`: one `{nodepools: [POOL]}` per rung, in ladder order. The pools of one entry are not ordered
  among themselves, so each rung is its own entry (the reference's `nodepools` example; Google's sample
  kubernetes-engine-samples autoscaling/custom-compute-classes/dra/ccc-inference-1x8x24.yaml @2b503651 does the same).
- `nodePoolAutoCreation.enabled: false`: node auto-creation does not support the RDMA multi-network set-up
  (additional node networks), so every pool is one this program creates, with the NICs and RDMA networks.
- `whenUnsatisfiable: DoNotScaleUp`: when no rung can be scaled up, nothing else is: an auto-created
  fallback would have no RDMA NICs (and `ScaleUpAnyway` on manual pools has nothing to add).
- `activeMigration.optimizeRulePriority: false`: GKE would otherwise move running workers to a higher rung
  when it frees up, killing the gang mid-step.

A gang of `gpuPool.nodeCount` nodes may come from several rungs (3 spot + 5 on-demand): every pool is in
the same zone, on the same machine type and the same RDMA networks, so NCCL sees one fabric either way.

Version: custom ComputeClasses need GKE 1.30.3-gke.1451000 in Standard clusters (infra.placement); the
flavours' minimums (1.31+, 1.32+) are above it. Only on a real cluster: the class's status conditions and
how fast the autoscaler moves from one rung to the next (infra.placement.FALLBACK_NOTE).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

import pulumi
import pulumi_kubernetes as k8s

from infra.naming import MANAGED_LABELS
from infra.options import child_options

API_VERSION = "cloud.google.com/v1"
KIND = "ComputeClass"


def compute_class_manifest(name: str, pool_names: Sequence[str]) -> dict[str, Any]:
    """The ComputeClass whose priorities are `pool_names` in order (a pure builder: no Outputs)."""
    if not pool_names:
        raise ValueError("a ComputeClass needs at least one node pool")
    if len(set(pool_names)) != len(pool_names):
        raise ValueError(f"node pools listed twice: {', '.join(pool_names)}")
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name, "labels": dict(MANAGED_LABELS)},
        "spec": {
            "priorities": [{"nodepools": [pool]} for pool in pool_names],
            "nodePoolAutoCreation": {"enabled": False},
            "whenUnsatisfiable": "DoNotScaleUp",
            "activeMigration": {"optimizeRulePriority": False},
        },
    }


@dataclass(frozen=True)
class GpuComputeClassArgs:
    """What `GpuComputeClass` needs: the class's name and the rungs' pool names in priority order."""

    name: str
    pool_names: tuple[str, ...]
    rungs: tuple[str, ...]
    """The rung labels in the same order (the class's description says them)."""


class GpuComputeClass(pulumi.ComponentResource):
    """The ladder's ComputeClass object in the cluster (cluster-scoped)."""

    def __init__(self, name: str, args: GpuComputeClassArgs, opts: Optional[pulumi.ResourceOptions] = None) -> None:
        super().__init__("nemo-rl-gke:infra:GpuComputeClass", name, None, opts)
        # No `spec.description`: it appears only in later versions of the reference page (minimum version unread).
        manifest = compute_class_manifest(args.name, args.pool_names)
        self.resource = k8s.apiextensions.CustomResource(
            f"{name}-class",
            api_version=manifest["apiVersion"],
            kind=manifest["kind"],
            metadata=manifest["metadata"],
            spec=manifest["spec"],
            opts=child_options(self, opts),
        )
        self.class_name = args.name
        self.register_outputs({"className": args.name, "pools": list(args.pool_names)})
