"""The one choice between GKE Standard and Autopilot: the factory's pieces, and the cluster outputs both
modes hand on under the same names."""

from __future__ import annotations

import ast
from types import SimpleNamespace

import pytest
from conftest import ROOT, stack_plan
from k8s_support import record

from infra.cluster_mode import cluster_mode
from infra.gke_common import ClusterComponent
from infra.image_prepull import ImagePrePullArgs
from infra.placement import gpu_pool_facts, system_pool_name
from infra.stack_context import StackContext
from infra.stack_file import load_stack

CLUSTERS = {"dev": "nemo-rl-gke:infra:GkeCluster", "autopilot": "nemo-rl-gke:infra:AutopilotCluster"}


def test_the_program_never_branches_on_the_cluster_mode():
    tree = ast.parse((ROOT / "__main__.py").read_text())
    reads = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr == "mode"]
    names = [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in ("autopilot", "standard")]
    assert not reads and not names, f"__main__.py reads cluster.mode at lines {reads + names}: ask infra.cluster_mode"


def test_both_cluster_modes_hand_on_the_same_outputs_under_the_same_keys():
    outputs = {}
    for stack, typ in CLUSTERS.items():
        plan = stack_plan(stack)
        outputs[stack] = plan.component_outputs[plan.one(typ).urn]
    standard, autopilot = outputs["dev"], outputs["autopilot"]
    assert set(autopilot) <= set(standard), f"{CLUSTERS['autopilot']} hands on {sorted(set(autopilot) - set(standard))}"
    assert set(autopilot["gpuPoolFacts"]) == set(standard["gpuPoolFacts"])
    assert autopilot["nodePools"] == [] and standard["nodePools"] == ["dev-system", "dev-gpu"]
    assert autopilot["gpuPoolFacts"]["nodeSelector"]["cloud.google.com/gke-accelerator"] == "nvidia-h200-141gb"
    assert standard["gpuPoolFacts"]["nodeSelector"] == {"cloud.google.com/gke-nodepool": "dev-gpu"}


def network_stand_in():
    """The attributes `ClusterNetwork.of` reads from `Networking`."""
    return SimpleNamespace(
        primary_network="vpc",
        primary_subnet="subnet",
        pods_range_name="pods",
        services_range_name="services",
        pods_cidr=None,
        services_cidr=None,
        gvnic_network_name="gvnic",
        gvnic_subnet_name="gvnic-subnet",
        rdma_network_name="rdma",
        rdma_subnet_names=["rdma-0"],
    )


@pytest.mark.parametrize(
    ("stack", "component", "installer", "prepull"),
    [
        ("dev", "GkeCluster", "NcclRdmaInstaller", True),
        ("autopilot", "AutopilotCluster", "NcclRdmaInstallerAutopilot", False),
    ],
)
def test_the_factory_builds_each_modes_cluster_installer_and_pre_pull(stack, component, installer, prepull):
    cfg = load_stack(stack, ROOT).config
    ctx = StackContext.from_config(stack, cfg)
    pool, system = gpu_pool_facts(ctx, cfg), system_pool_name(ctx, cfg)
    mode = cluster_mode(cfg)

    def build():
        cluster = mode.cluster("gke", ctx, network_stand_in(), gpu_pool=pool, system_pool_name=system)
        nccl = mode.nccl_installer("nccl", cfg.ray.nccl_installer_image, [pool.accelerator_type])
        args = ImagePrePullArgs(cfg.recipe.image, cfg.ray.namespace, cluster.node_pool_names, pool.taints)
        return cluster, nccl, mode.image_prepull("image-prepull", args)

    rec = record(build)
    cluster, nccl, pulled = rec.result
    assert type(cluster).__name__ == component and rec.by_type(f"nemo-rl-gke:infra:{installer}"), installer
    missing = [a for a in ClusterComponent.__annotations__ if not hasattr(cluster, a)]
    assert not missing, f"{component} lacks {missing} of ClusterComponent"
    assert (pulled is not None) is prepull, f"{stack}: image pre-pull {pulled}"
    assert bool(rec.by_type("nemo-rl-gke:infra:ImagePrePull")) is prepull
    assert (mode.adapt_ray_values is not None) is (stack == "autopilot")
