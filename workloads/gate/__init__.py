"""The acceptance gate: prove the GPUs, the fabric and Lustre before the expensive job starts.

A run on a broken cluster does not fail, it crawls: NCCL without the gIB plugin falls back to sockets
over eth0, Lustre over the wrong interface makes checkpoints slow. So the gate measures, on the Ray
cluster itself: each GPU's name and a matmul; an `all_gather_into_tensor` across all workers whose NCCL
log must name the expected net and whose bus bandwidth must reach the flavour's floor; and parallel
Lustre writes, each worker reading back another's files.

Rooms: checklist (`GatePlan`, policies, the one "gate off" rule `gate_in_force`), verdict (checks, NCCL
log parser, report), gate_job (the client), driver (the job's entrypoint), probe (the per-node actor),
collective (the per-GPU process, torch only there), storage_io. Everything device-specific is a value of
the `GatePlan`, so tests run the same orchestration with gloo on CPU.

Known only on the real cloud: the bandwidth reached (the floor leaves half of Google's figure as
margin), Lustre throughput, the NCCL version (the parser reads NCCL 2.21 to 2.30), and whether the API
proxy passes the `py_modules` upload. NeMo-RL's actors get the head's environment on top of the
worker's (NVIDIA-NeMo/RL nemo_rl/distributed/virtual_cluster.py `init_ray`), so the head must not
override the workers' NCCL setup. A test that replaces a re-exported name patches its defining module.
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
