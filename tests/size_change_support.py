"""A resume at another world size on real torch code, for tests/test_size_ladder.py: a small model sharded with
FSDP2 (DTensor parameters, as NeMo-RL's DTensor v2 worker shards its policy) trained at world size 2 over gloo on
the CPU, saved with torch DCP, then resumed at world size 2 and at world size 1 with the same global batch, the
single rank accumulating gradients over the two halves of it. Only torch is imported here: `torch.multiprocessing`
spawns the ranks, which import this module and nothing of the suite."""

from __future__ import annotations

import io
import json
import os
from typing import Any

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import (
    get_model_state_dict,
    get_optimizer_state_dict,
    set_model_state_dict,
    set_optimizer_state_dict,
)

GLOBAL_BATCH = 16
STEPS_BEFORE_SAVE = 3
RESUMED_STEPS = 2


def model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The global batch of `step`: the same on every rank and at every world size (as a resumed dataloader's)."""
    g = torch.Generator().manual_seed(100 + step)
    x = torch.randn(GLOBAL_BATCH, 8, generator=g)
    return x, x.sum(dim=1, keepdim=True).sin()


def train_step(net: torch.nn.Module, opt: torch.optim.Optimizer, step: int, rank: int, world: int) -> float:
    """One optimizer step over the global batch: each rank takes its 1/`world` share, in micro-batches of
    GLOBAL_BATCH/2 (gradient accumulation at world size 1); FSDP2 averages the gradients over the ranks. Returns the
    global batch's mean loss before the update."""
    x, y = batch(step)
    share = GLOBAL_BATCH // world
    x, y = x[rank * share : (rank + 1) * share], y[rank * share : (rank + 1) * share]
    micro = GLOBAL_BATCH // 2
    chunks = share // micro
    total = torch.zeros(())
    for i in range(chunks):
        loss = torch.nn.functional.mse_loss(net(x[i * micro : (i + 1) * micro]), y[i * micro : (i + 1) * micro])
        (loss / chunks).backward()
        total += loss.detach() / chunks
    opt.step()
    opt.zero_grad()
    if world > 1:
        dist.all_reduce(total, op=dist.ReduceOp.AVG)
    return float(total)


def _sharded(world: int) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    net = model()
    fully_shard(net, mesh=init_device_mesh("cpu", (world,)))
    return net, torch.optim.Adam(net.parameters(), lr=0.02)


def _load(net: torch.nn.Module, opt: torch.optim.Optimizer, checkpoint: str) -> None:
    state: dict[str, Any] = {"model": get_model_state_dict(net), "optim": get_optimizer_state_dict(net, opt)}
    dcp.load(state, checkpoint_id=checkpoint)
    set_model_state_dict(net, state["model"])
    set_optimizer_state_dict(net, opt, state["optim"])


def resumed_steps(net: torch.nn.Module, opt: torch.optim.Optimizer, rank: int, world: int) -> list[float]:
    return [train_step(net, opt, STEPS_BEFORE_SAVE + i, rank, world) for i in range(RESUMED_STEPS)]


def _objects_without_numpy() -> None:
    """torch 2.13 turns a gathered object's bytes back with `tensor.numpy()` (torch/distributed/distributed_c10d.py
    `_tensor_to_object`), which DCP's save planning goes through; the test venv has no NumPy (requirements-test.txt),
    so the same uint8 bytes are read with `tolist()` instead."""
    try:
        import numpy  # noqa: F401
    except ImportError:
        from torch.distributed import distributed_c10d as c10d

        def tensor_to_object(tensor: torch.Tensor, tensor_size: int, group: Any) -> Any:
            return c10d._unpickler(io.BytesIO(bytes(tensor.cpu().tolist())[:tensor_size])).load()

        c10d._tensor_to_object = tensor_to_object


def at_world_size_2(rank: int, port: int, checkpoint: str, out: str) -> None:
    """Rank `rank` of 2: train, save with DCP, then resume from it at the same size in a fresh model."""
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    _objects_without_numpy()
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        net, opt = _sharded(2)
        for step in range(STEPS_BEFORE_SAVE):
            train_step(net, opt, step, rank, 2)
        dcp.save(
            {"model": get_model_state_dict(net), "optim": get_optimizer_state_dict(net, opt)}, checkpoint_id=checkpoint
        )
        dist.barrier()
        fresh, fresh_opt = _sharded(2)
        _load(fresh, fresh_opt, checkpoint)
        losses = resumed_steps(fresh, fresh_opt, rank, 2)
        if rank == 0:
            with open(out, "w") as f:
                json.dump(losses, f)
    finally:
        dist.destroy_process_group()


def at_world_size_1(checkpoint: str, load: bool = True) -> list[float]:
    """The same run resumed on one rank without a process group (DCP reshards the two ranks' shards at load)."""
    net = model()
    opt = torch.optim.Adam(net.parameters(), lr=0.02)
    if load:
        _load(net, opt, checkpoint)
    return resumed_steps(net, opt, 0, 1)
