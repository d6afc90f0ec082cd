"""Where a stack builds, and the plan-time facts the infrastructure hands to the workloads (plain data; cloud
values travel as Outputs on the components)."""

from __future__ import annotations

from dataclasses import dataclass, field

from infra.config import StackConfig
from infra.naming import COMPUTE_CLASS_LABEL, NODE_POOL_LABEL, Limit, cloud_name, labels


@dataclass(frozen=True)
class StackContext:
    stack: str
    project: str
    region: str
    zone: str
    prefix: str
    user_labels: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_config(cls, stack: str, cfg: StackConfig) -> "StackContext":
        return cls(
            stack=stack,
            project=cfg.project,
            region=cfg.region,
            zone=cfg.zone,
            prefix=cfg.name_prefix or stack,
            user_labels=dict(cfg.labels),
        )

    def name(self, role: str, limit: Limit | int = Limit.COMPUTE) -> str:
        return cloud_name(self.prefix, role, limit)

    def labels(self, component: str) -> dict[str, str]:
        return labels(self.stack, component, self.user_labels)


@dataclass(frozen=True)
class NicAttachment:
    """One extra NIC of a GPU node: pod interface name -> GKE Network object -> VPC/subnet."""

    interface: str  # eth1, eth2, ...
    network_object: str  # gvnic-1, rdma-0, ...
    vpc: str
    subnet: str
    device_mode: str  # NetDevice for gVNIC, RDMA for MRDMA


@dataclass(frozen=True)
class RungPool:
    """One GPU node pool of the capacity ladder (infra/placement.py `capacity_ladder`)."""

    name: str
    rung: str  # `spot`, `flexStart`, `onDemand` or `reservation NAME`


@dataclass(frozen=True)
class GpuPoolFacts:
    pool_name: str
    node_count: int
    gpus_per_node: int
    accelerator_type: str
    machine_type: str
    vcpus: int
    memory_gib: int
    nccl_tuner_config: str
    taints: tuple[dict[str, str], ...]
    nics: tuple[NicAttachment, ...]  # gVNIC first, then rdma-0..N
    node_labels: tuple[tuple[str, str], ...] = ()  # Autopilot's selector; empty: the pods select the pool
    compute_class: str | None = None  # the ladder's ComputeClass (two or more rungs)
    rung_pools: tuple[RungPool, ...] = ()  # the ladder's pools in priority order

    @property
    def node_selector(self) -> dict[str, str]:
        if self.node_labels:
            return dict(self.node_labels)
        if self.compute_class:
            return {COMPUTE_CLASS_LABEL: self.compute_class}
        return {NODE_POOL_LABEL: self.pool_name}

    @property
    def pool_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.rung_pools) or (self.pool_name,)
