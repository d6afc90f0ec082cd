"""The acceptance gate: prove the GPUs, the fabric and Lustre before the expensive job starts
(docs/acceptance-gate.md). Everything device-specific is a value of the `GatePlan`, so tests run the same
orchestration with gloo on CPU. NeMo-RL's actors get the head's environment on top of the worker's
(NVIDIA-NeMo/RL nemo_rl/distributed/virtual_cluster.py `init_ray`), so the head must not override the
workers' NCCL setup. A test that replaces a re-exported name patches its defining module.
"""

from workloads.gate.checklist import GB, POLICIES, GatePlan, bus_bandwidth, estimated_seconds, gate_in_force
from workloads.gate.driver import main, run, worker_nodes
from workloads.gate.gate_job import META_GATE, job_entrypoint, result_on_cluster, run_on_cluster, start_on_cluster
from workloads.gate.probe import NodeProbe
from workloads.gate.verdict import (
    RESULT_MARKER,
    Check,
    GateFailed,
    GateReport,
    NcclNetInfo,
    check_fabric,
    check_gpus,
    check_storage,
    enforce,
    fabric_from,
    gbps,
    net_check,
    parse_nccl_log,
    parse_result,
)

__all__ = [
    "GB",
    "META_GATE",
    "POLICIES",
    "RESULT_MARKER",
    "Check",
    "GateFailed",
    "GatePlan",
    "GateReport",
    "NcclNetInfo",
    "NodeProbe",
    "bus_bandwidth",
    "check_fabric",
    "check_gpus",
    "check_storage",
    "enforce",
    "estimated_seconds",
    "fabric_from",
    "gate_in_force",
    "gbps",
    "job_entrypoint",
    "main",
    "net_check",
    "parse_nccl_log",
    "parse_result",
    "result_on_cluster",
    "run",
    "run_on_cluster",
    "start_on_cluster",
    "worker_nodes",
]
