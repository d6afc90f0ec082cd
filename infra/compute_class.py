"""The capacity ladder's custom ComputeClass: GKE's autoscaler walks its priorities, one GPU pool per rung, so
the program writes no fallback loop (https://cloud.google.com/kubernetes-engine/docs/concepts/
about-custom-compute-classes). Fields checked against GoogleCloudPlatform/compute-class-api @8067eaeb
(tests/reference/gke-computeclass/computeclass-v1.schema.json). Each rung is its own priority entry (pools of
one entry are unordered; kubernetes-engine-samples autoscaling/custom-compute-classes/dra/ccc-inference-1x8x24.yaml
@2b503651); no auto-creation and `DoNotScaleUp`, since an auto-created pool would lack the RDMA NICs; no active
migration, which would kill the gang mid-step.
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
    name: str
    pool_names: tuple[str, ...]
    rungs: tuple[str, ...]


class GpuComputeClass(pulumi.ComponentResource):
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
