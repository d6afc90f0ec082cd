"""The acceptance gate's per-GPU process (`python -m workloads.gate rank <spec file>`, one per GPU, started
by the node's probe, `workloads.gate.probe.NodeProbe.ranks`): open the device, check it with a small
matmul, then join one `torch.distributed` group across all worker nodes and time the collective as
nccl-tests does; its report is a JSON file the probe reads back.

Why one process per GPU: that is how NCCL is measured (nccl-tests and Google's published numbers run one
rank per GPU, 8 per node), the processes inherit the worker pod's environment exactly as Ray's workers do
(NCCL_NET=gIB and the gIB library path, sourced by the worker's start command before `ray start`), and a
process that dies of a broken GPU cannot take the probe along.

Imports: the standard library at module level; torch only inside `rank_main` (the NeMo-RL image's torch).
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any, Mapping

from workloads.gate.checklist import bus_bandwidth


def rank_main(spec_path: str) -> int:
    """One process per GPU: probe the device, then join the collective; writes its report as JSON."""
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
    """nccl-tests' out-of-place timing: warm up, then `iters` back-to-back ops between two syncs; the
    slowest rank's time counts. nccl-tests by default reports the average over ranks (`-a 1`; NVIDIA/nccl-tests
    src/common.cu v2.19.6 `static int average = 1`); the slowest rank is its `-a 3`, stricter than the
    published averages the floor comes from, so a single slow rank fails the gate. Checks the gathered data."""
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
