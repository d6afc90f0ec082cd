"""The acceptance gate of a stack: what `workloads.gate` checks, against floors from data/acceptance_gate.yaml.
Built once here for the Pulumi program and `jobctl`. The fabric floor is a fraction of the flavour's published
inter-node bus bandwidth (none on one node); the storage floor a fraction of Lustre's aggregate throughput.
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
    """A plain number, or `{value, estimate}` (an estimate and how it was made)."""
    if isinstance(entry, Mapping):
        return float(entry["value"]), " ".join(str(entry["estimate"]).split())
    return float(entry), None


def gpu_name(accelerator_type: str) -> str:
    """`nvidia-h200-141gb` -> "H200", as in torch.cuda.get_device_name's "NVIDIA H200"."""
    return accelerator_type.split("-")[1].upper()


def gate_plan_for_stack(cfg: StackConfig, pool: PoolShape, thresholds: Optional[Mapping[str, Any]] = None) -> GatePlan:
    data = thresholds if thresholds is not None else load_thresholds()
    fabric, storage = data["fabric"], data["storage"]
    flavour = cfg.flavour_spec
    nodes = pool.node_count
    fraction = float(fabric["floor_fraction"])
    entry = fabric["flavours"].get(flavour.name)
    if entry is None:
        # A new flavour deploys with nothing else: measured and shown, not enforced, until a figure is added.
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
    """The stack's version-matrix row; nothing outside the matrix, whose versions are only reported."""
    from infra.version_matrix import report

    expect = report(cfg.version_pins)["expect"]
    return {"expect_nccl": expect["nccl"], "expect_gib": expect["gib"]}
