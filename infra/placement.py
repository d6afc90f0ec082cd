"""Plan-time placement: on which nodes the training runs, decided once before any resource exists.

`gpu_pool_facts` is where the GPU workers land (the node pool's name on Standard; on Autopilot the
node labels GKE makes nodes for: accelerator, count, zone and capacity type) and what those nodes are
(count, GPUs, machine, taints, NICs); `system_pool_name` is where the CPU pods (Ray head, watcher) go.
The program calls each once (`__main__.py`) and hands the result to every consumer: the node pools,
the NCCL installer, the Ray values, the job spec, the watcher, the dashboard; the CLI and the offline
estimates call the same functions.

This is the room for a capacity decision (docs/architecture.md, "Rooms"): falling back from spot to
another capacity type when spot is stocked out, or choosing among zones, belongs here, as a pure
function of the config (and of data such as infra/zones.py's catalogue or infra/prices.py's table)
whose one result every consumer reads. What can only be known on the real cloud (whether a zone has
capacity now) cannot be decided at plan time; such a decision can only pick between configured options.
"""

from __future__ import annotations

from typing import Optional

from infra.autopilot_pods import gpu_node_labels
from infra.config import StackConfig
from infra.naming import Limit
from infra.network import nic_attachments
from infra.pod_facts import kubernetes_taint
from infra.stack_context import GpuPoolFacts, StackContext


def system_pool_name(ctx: StackContext, cfg: StackConfig) -> Optional[str]:
    """The CPU pool's name: the Ray head and the watcher select it by this (plan-time) value. None on
    Autopilot, which has no pools: they run on its default general-purpose compute class."""
    if cfg.cluster.mode == "autopilot":
        return None
    return ctx.name("system", Limit.GKE_NODE_POOL)


def gpu_pool_facts(ctx: StackContext, cfg: StackConfig) -> GpuPoolFacts:
    """What workloads need to know about the GPU nodes, decided before any resource exists.

    The program and `python -m jobctl` both take the pool from here, so they build the same job.
    """
    flavour = cfg.flavour_spec
    if cfg.cluster.mode == "autopilot":
        # No pool: the workers select the GPU nodes GKE makes for them by label (infra/autopilot_pods.py).
        pool_name = f"autopilot-{flavour.accelerator_type}"
        node_labels = gpu_node_labels(
            zone=ctx.zone,
            accelerator_type=flavour.accelerator_type,
            gpus_per_node=flavour.gpus_per_node,
            provisioning=cfg.gpu_pool.provisioning,
            reservation_name=cfg.gpu_pool.reservation_name,
        )
    else:
        pool_name, node_labels = ctx.name("gpu", Limit.GKE_NODE_POOL), ()
    return GpuPoolFacts(
        pool_name=pool_name,
        node_count=cfg.gpu_pool.node_count,
        gpus_per_node=flavour.gpus_per_node,
        accelerator_type=flavour.accelerator_type,
        machine_type=flavour.machine_type,
        vcpus=flavour.vcpus,
        memory_gib=flavour.memory_gib,
        nccl_tuner_config=flavour.nccl_tuner_config,
        taints=(kubernetes_taint(flavour.gpu_taint),),
        nics=nic_attachments(ctx, flavour),
        node_labels=node_labels,
    )
