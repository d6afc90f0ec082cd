"""The acceptance gate of a stack: what `workloads.gate` checks, and against which numbers.

Built once from the validated config, the GPU pool facts and data/acceptance_gate.yaml (the floors
and their sources), and handed on: the Pulumi program passes it to the job submission's props (the
post-deploy hook runs the gate before it submits), `python -m jobctl gate|submit` calls the same
function for the same stack file, and the offline plan's deploy-time estimate reads it from those props.

Fabric floor: `floor_fraction` x the flavour's published all_gather bus bandwidth across nodes; none on a
one-node pool, which has no inter-node fabric (NVLink only; the published figures are across nodes).
Storage floor: `floor_fraction` x the Lustre instance's aggregate throughput (capacity x tier). Each
worker node writes, then reads, what the instance moves in `target_seconds` at full speed, split over
the nodes and clamped to [min_bytes_per_node, max_bytes_per_node].
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Optional

import yaml

from infra.config import StackConfig, lustre_aggregate_mb_s
from workloads.gate import GB, GatePlan
from workloads.job_spec import PoolShape

THRESHOLDS_FILE = Path(__file__).resolve().parent.parent / "data" / "acceptance_gate.yaml"
MIB = 1 << 20


@lru_cache(maxsize=2)
def load_thresholds(path: Path = THRESHOLDS_FILE) -> Mapping[str, Any]:
    return yaml.safe_load(path.read_text())


def published_value(entry: Any) -> tuple[float, Optional[str]]:
    """A plain number (read from its source), or `{value, estimate}` (an estimate and how it was made)."""
    if isinstance(entry, Mapping):
        return float(entry["value"]), " ".join(str(entry["estimate"]).split())
    return float(entry), None


def gpu_name(accelerator_type: str) -> str:
    """What every device name must contain, from the GKE accelerator type: `nvidia-b200` -> "B200",
    `nvidia-h200-141gb` -> "H200" (torch.cuda.get_device_name reports "NVIDIA B200", "NVIDIA H200")."""
    return accelerator_type.split("-")[1].upper()


def gate_plan_for_stack(cfg: StackConfig, pool: PoolShape, thresholds: Optional[Mapping[str, Any]] = None) -> GatePlan:
    """The stack's `GatePlan` (NCCL on the GPUs, gIB expected; the Lustre mount of the Ray pods)."""
    data = thresholds if thresholds is not None else load_thresholds()
    fabric, storage = data["fabric"], data["storage"]
    flavour = cfg.flavour_spec
    nodes = pool.node_count
    fraction = float(fabric["floor_fraction"])
    entry = fabric["flavours"].get(flavour.name)
    if entry is None:
        # A new catalogue flavour needs nothing else to deploy: its bandwidth is measured and shown, not
        # enforced, until a published figure is added (tests/test_gate_plan.py covers the committed ones).
        published, busbw_source = (
            0.0,
            f"no published bus bandwidth for flavour {flavour.name} in {THRESHOLDS_FILE.name}: measured, not enforced",
        )
    else:
        published, estimate = published_value(entry["published_busbw_gbps"])
        busbw_source = f"{fraction:g} x {published:g} GB/s: {' '.join(str(entry['source']).split())}"
        if estimate:
            busbw_source += f" (ESTIMATE: {estimate})"
    expected = lustre_aggregate_mb_s(cfg.lustre.capacity_gib, cfg.lustre.per_unit_storage_throughput) * 1e6 / GB
    per_node = int(expected * GB * float(storage["target_seconds"]) / nodes)
    per_node = min(max(per_node, int(storage["min_bytes_per_node"])), int(storage["max_bytes_per_node"]))
    return GatePlan(
        node_count=nodes,
        gpus_per_node=pool.gpus_per_node,
        gpu_name=gpu_name(flavour.accelerator_type),
        busbw_floor_gbps=round(published * fraction, 2) if nodes > 1 else 0.0,
        busbw_source=busbw_source,
        mount_path=cfg.ray.mount_path,
        storage_expected_gbps=round(expected, 3),
        storage_floor_gbps=round(expected * float(storage["floor_fraction"]), 3),
        storage_source=(
            f"{float(storage['floor_fraction']):g} x {cfg.lustre.capacity_gib} GiB x "
            f"{cfg.lustre.per_unit_storage_throughput} MB/s/TiB: {' '.join(str(storage['source']).split())}"
        ),
        storage_bytes_per_node=per_node // MIB * MIB,
        storage_streams=int(storage["streams_per_node"]),
        collective=str(fabric["collective"]),
        message_bytes=int(fabric["message_bytes"]),
        warmup_iters=int(fabric["warmup_iters"]),
        iters=int(fabric["iters"]),
        timeout_s=float(data["timeout_seconds"]),
        **expected_versions(cfg),
    )


def expected_versions(cfg: StackConfig) -> dict[str, Optional[str]]:
    """What the gate checks the NCCL log against: the stack's version-matrix row (infra/version_matrix.py);
    nothing for a stack outside the matrix (allowUntestedVersions), whose versions are only reported."""
    from infra.version_matrix import report

    expect = report(cfg.version_pins)["expect"]
    return {"expect_nccl": expect["nccl"], "expect_gib": expect["gib"]}
