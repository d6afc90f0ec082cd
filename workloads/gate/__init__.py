"""The acceptance gate: prove the GPUs, the fabric and Lustre before the expensive job starts.

A NeMo-RL run that starts on a broken cluster does not fail: NCCL without the gIB plugin (not
installed, or the host's NCCL shadowing the image's) falls back to TCP sockets over eth0 and the run
is several times slower; Lustre mounted over the wrong interface makes checkpoints crawl. The gate
measures instead of trusting, in a few minutes, on the Ray cluster itself:

1. GPUs: one process per GPU opens its device, checks the name (e.g. "B200") and runs a small matmul;
   every worker must show all its GPUs healthy.
2. Fabric: the same processes form one `torch.distributed` group across all worker nodes (NCCL in the
   cluster) and time `all_gather_into_tensor`, nccl-tests style; their NCCL INFO log must show the
   expected net plugin, and the bus bandwidth must reach the flavour's floor.
3. Storage: every worker writes to the Lustre mount in parallel streams, then reads back the files
   ANOTHER worker wrote, against the instance's aggregate throughput.

Its rooms, by job:
    checklist    the plan (`GatePlan`), the policies and the one "gate off" rule (`gate_in_force`), the
                 typical duration, the nccl-tests bandwidth arithmetic
    verdict      the checks, the NCCL log parser, the report, `enforce`/`GateFailed`, `parse_result`
    gate_job     the client: the gate as a Ray job (`start_on_cluster`, `result_on_cluster`, `run_on_cluster`)
    driver       the job's entrypoint on the cluster (`python -m workloads.gate run <plan>`, `run`)
    probe        the per-node Ray actor (`NodeProbe`)
    collective   the per-GPU process (`python -m workloads.gate rank <spec file>`), torch only there
    storage_io   the per-node Lustre writes and reads

Everything device- and fabric-specific is a value of the `GatePlan`: the cluster runs
`backend="nccl", device="cuda", expect_net="gIB"`; the tests run the same orchestration on a local Ray
head with `backend="gloo", device="cpu"` and a temporary directory for the mount, and check the NCCL
log parser on recorded logs.

Known only on the real cloud (tests cannot show it): the bus bandwidth torch.distributed reaches on
these machines (the floor leaves half of Google's published figure as margin), the Lustre throughput a
handful of clients reach, the NCCL version the image and the gIB installer bring (the parser reads the
lines NCCL 2.21 to 2.30 print), and whether the API-server proxy passes the `py_modules` upload (a PUT
to the dashboard's /api/packages, through the same `_do_request` as every Job API call). The training
actors of NeMo-RL get the driver's (the head's) environment on top of the worker's (NVIDIA-NeMo/RL
nemo_rl/distributed/virtual_cluster.py `init_ray`): the gate proves the workers' NCCL setup, so the head
must not override it (issue 12a aligns the head's library path with the workers').

Imports: the standard library at module level everywhere; Ray inside the functions that run on the
cluster; torch only in the per-GPU process; of the project only `workloads.submit` (client side, lazily)
and `workloads.version_check`. The names below are re-exported for callers; a test that replaces one
patches the module that defines it.
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
