"""The gate's per-GPU process (`python -m workloads.gate rank <spec file>`): check the device with a matmul,
then time the collective across all workers as nccl-tests does, one rank per GPU as NCCL is measured;
the report is a JSON file. torch only inside `rank_main`.
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any, Mapping

from workloads.gate.checklist import bus_bandwidth


def rank_main(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    out = Path(spec["out"])
    report: dict[str, Any] = {"rank": spec["rank"], "node_rank": spec["node_rank"], "host": socket.gethostname()}

    def save() -> None:
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(report))
        tmp.replace(out)

    try:
        import torch
        import torch.distributed as dist

        if spec["device"] == "cuda":
            local = spec["local_rank"]
            torch.cuda.set_device(local)
            device = torch.device("cuda", local)
            report["device_count"] = torch.cuda.device_count()
            report["device_name"] = torch.cuda.get_device_name(local)
        else:
            device = torch.device("cpu")
            report["device_count"] = 1
            report["device_name"] = "cpu"
        a = torch.randn(512, 512, device=device)
        b = a @ a.T
        _sync(torch, device)
        report["device_ok"] = bool(torch.isfinite(b).all().item())
    except Exception as err:  # a missing or broken GPU: report it, do not join the group
        report["device_error"] = f"{type(err).__name__}: {err}"[:300]
        save()
        return 1
    save()
    try:
        import datetime

        dist.init_process_group(
            spec["backend"],
            init_method=f"tcp://{spec['master_addr']}:{spec['master_port']}",
            rank=spec["rank"],
            world_size=spec["world"],
            timeout=datetime.timedelta(seconds=spec["timeout_s"]),
        )
        report.update(_time_collective(torch, dist, device, spec))
        dist.destroy_process_group()
    except Exception as err:
        report["collective_error"] = f"{type(err).__name__}: {err}".splitlines()[0][:300]
        save()
        return 1
    save()
    return 0


def _sync(torch: Any, device: Any) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _time_collective(torch: Any, dist: Any, device: Any, spec: Mapping[str, Any]) -> dict[str, Any]:
    """nccl-tests' out-of-place timing; the slowest rank's time counts (nccl-tests `-a 3`, stricter than its
    default average, NVIDIA/nccl-tests src/common.cu v2.19.6 `average = 1`). Checks the gathered data."""
    world, rank = spec["world"], spec["rank"]
    elements = max(spec["message_bytes"] // 4 // world, 1)  # float32 per rank
    if spec["collective"] == "all_gather":
        inp = torch.full((elements,), float(rank), dtype=torch.float32, device=device)
        outp = torch.empty(elements * world, dtype=torch.float32, device=device)
        size = elements * world * 4

        def op() -> None:
            dist.all_gather_into_tensor(outp, inp)
    else:
        inp = torch.ones(elements * world, dtype=torch.float32, device=device)
        outp = inp
        size = elements * world * 4

        def op() -> None:
            dist.all_reduce(inp)

    for _ in range(spec["warmup_iters"]):
        op()
    _sync(torch, device)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(spec["iters"]):
        op()
    _sync(torch, device)
    elapsed = torch.tensor([(time.perf_counter() - start) / spec["iters"]], dtype=torch.float64, device=device)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    seconds = float(elapsed.item())
    wrong = 0
    if spec["collective"] == "all_gather":
        expected = torch.arange(world, dtype=torch.float32, device=device).repeat_interleave(elements)
        wrong = int((outp != expected).sum().item())
    algbw, busbw = bus_bandwidth(spec["collective"], size, seconds, world)
    return {"size_bytes": size, "seconds_per_op": seconds, "algbw_gbps": algbw, "busbw_gbps": busbw, "wrong": wrong}
