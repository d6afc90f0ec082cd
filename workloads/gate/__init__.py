"""The acceptance gate: prove the GPUs, the fabric and Lustre before the expensive job starts
(docs/acceptance-gate.md). Everything device-specific is a value of the `GatePlan`, so tests run the same
orchestration with gloo on CPU. NeMo-RL's actors get the head's environment on top of the worker's
(NVIDIA-NeMo/RL nemo_rl/distributed/virtual_cluster.py `init_ray`), so the head must not override the
workers' NCCL setup. A test that replaces a re-exported name patches its defining module.
"""

from workloads.gate.checklist import GB, POLICIES, GatePlan, estimated_seconds, gate_in_force
from workloads.gate.gate_job import META_GATE, run_on_cluster
from workloads.gate.probe import NodeProbe
from workloads.gate.verdict import RESULT_MARKER, Check, GateFailed, GateReport, check_gpus, fabric_from, parse_nccl_log

__all__ = [
    "GB",
    "META_GATE",
    "POLICIES",
    "RESULT_MARKER",
    "Check",
    "GateFailed",
    "GatePlan",
    "GateReport",
    "NodeProbe",
    "check_gpus",
    "estimated_seconds",
    "fabric_from",
    "gate_in_force",
    "parse_nccl_log",
    "run_on_cluster",
]
