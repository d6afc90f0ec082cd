"""The size ladder: the GPU node counts a run can train on besides its full gang, each refused size with why,
and the resized job an attempt at a smaller size submits (docs/preemption-recovery.md, "Training on fewer nodes").

The plan computes the ladder once (`infra.run_plan`, from the recipe, the user's overrides and the pool); the
run's owner only reads it back from run.json (`RunPlan.shrink_sizes`) and resizes the spec it already holds with
`resized_spec`. A smaller size keeps the global batch: NeMo-RL splits `policy.train_global_batch_size` over the
data-parallel ranks it derives from the cluster size, and each rank accumulates gradients over its share
(NVIDIA-NeMo/RL v0.4.0 nemo_rl/models/policy/lm_policy.py `Policy.__init__`: DP = world size / (PP x CP x TP),
refused unless whole; `Policy.train` -> `shard_by_batch_size(dp_size, batch_size=train_global_batch_size)`,
nemo_rl/distributed/batched_data_dict.py: "Batch size (...) is not a multiple of shards (...)" and "Total batch
size (...) is not a multiple of batch_size (...)", the rollouts of a step over the global batch; the same at
v0.6.0 and v0.7.0). The run's checkpoint key leaves the node count out (`workloads.checkpoints.run_key`), torch
DCP reshards a DTensor checkpoint at load and Megatron's distributed optimizer takes a data-parallel change, so
every size resumes from the same `step_N`. Imports nothing but the standard library: the watcher ships it.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

NODES_KEY = "cluster.num_nodes"
"""The one entrypoint override that changes with the size: NeMo-RL's cluster is the whole pool and it subtracts a
non-colocated generation's own nodes itself (`workloads.job_spec._derived`, which derives nothing else from the
pool's node count; tests/test_size_ladder.py builds a job at a smaller size and checks the two agree)."""
LEASE_KEY = "checkpointing.checkpoint_must_save_by"
"""NeMo-RL's save-and-stop deadline, a duration since the training loop began as 'DD:HH:MM:SS'
(NVIDIA-NeMo/RL v0.4.0 nemo_rl/utils/timer.py `TimeoutChecker`, `convert_to_seconds`; nemo_rl/algorithms/grpo.py
saves a whole checkpoint at the first step whose end, plus the mean step time, passes it, prints
`LEASE_ENDED_LINE` and returns: the job SUCCEEDS; null in every recipe's config file at v0.4.0 ... v0.7.0)."""
LEASE_ENDED_LINE = "Timeout has been reached, stopping training early"
"""What grpo.py prints when `LEASE_KEY` ended the run (v0.4.0, v0.6.0, v0.7.0), not `max_num_steps`."""
LEASE_CAUSE = "leaseEnded"
"""The ledger cause of an attempt on fewer nodes that ended its lease on a whole checkpoint (not the run's end)."""
META_NODES = "nemo-rl-gke/nodes"
"""An attempt's GPU node count when it runs below the full gang (absent: the full gang)."""


@dataclass(frozen=True)
class NodeCount:
    """One node count of the ladder: `refused` is None when the run can train on it, else one line saying why."""

    nodes: int
    refused: Optional[str] = None

    @property
    def valid(self) -> bool:
        return self.refused is None


@dataclass(frozen=True)
class Shape:
    """What decides whether a node count fits, all plain values from the plan."""

    full_nodes: int
    gpus_per_node: int
    train_tensor_parallel: int
    train_pipeline_parallel: int = 1
    context_parallel: int = 1
    colocated: bool = True
    generation_nodes: int = 0
    generation_tensor_parallel: int = 1
    generation_pipeline_parallel: int = 1
    global_batch: int = 512
    rollouts_per_step: Optional[int] = None
    """`grpo.num_prompts_per_step x grpo.num_generations_per_prompt`; None: not known (the same at every size)."""
    min_nodes: int = 1
    """The recipe's own minimum."""


def why_refused(shape: Shape, nodes: int) -> Optional[str]:
    """Why the run cannot train on `nodes` GPU nodes, or None when it can."""
    s = shape
    train_nodes = nodes if s.colocated else nodes - s.generation_nodes
    if train_nodes < 1:
        return f"generation keeps its own {s.generation_nodes} node(s) (not colocated): none left to train on"
    gpus = train_nodes * s.gpus_per_node
    model = s.train_tensor_parallel * s.train_pipeline_parallel * s.context_parallel
    layout = f"TP {s.train_tensor_parallel} x PP {s.train_pipeline_parallel} x CP {s.context_parallel} = {model}"
    if gpus % model:
        return f"{gpus} training GPUs are not a multiple of {layout}"
    dp = gpus // model
    if s.global_batch % dp:
        return (
            f"data parallel {dp} ({gpus} GPUs / {model}) does not divide policy.train_global_batch_size "
            f"{s.global_batch}"
        )
    if s.rollouts_per_step is not None and s.rollouts_per_step % s.global_batch:
        return (
            f"{s.rollouts_per_step} rollouts per step are not a multiple of policy.train_global_batch_size "
            f"{s.global_batch}"
        )
    gen_gpus = gpus if s.colocated else s.generation_nodes * s.gpus_per_node
    vllm = s.generation_tensor_parallel * s.generation_pipeline_parallel
    if gen_gpus % vllm:
        return f"{gen_gpus} generation GPUs are not a multiple of vLLM TP x PP = {vllm}"
    if nodes < s.min_nodes:
        return f"below the recipe's minimum of {s.min_nodes} node(s)"
    return None


def ladder(shape: Shape) -> tuple[NodeCount, ...]:
    """Every node count from the full gang down to 1, largest first, each valid or refused with why."""
    return tuple(NodeCount(n, why_refused(shape, n)) for n in range(shape.full_nodes, 0, -1))


def smaller_sizes(rungs: Sequence[NodeCount], min_nodes: int = 1) -> tuple[int, ...]:
    """The valid node counts below the full gang (the first rung) and at least `min_nodes`, largest first."""
    return tuple(r.nodes for r in rungs[1:] if r.valid and r.nodes >= min_nodes)


def lease_text(minutes: float) -> str:
    """`minutes` as NeMo-RL's 'DD:HH:MM:SS' (whole seconds)."""
    total = max(1, int(round(minutes * 60)))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    return f"{days:02d}:{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"


def size_overrides(nodes: int, lease_minutes: float) -> tuple[str, ...]:
    """The overrides an attempt at `nodes` (below the full gang) runs with: its size and its lease."""
    return (f"{NODES_KEY}={nodes}", f"{LEASE_KEY}={lease_text(lease_minutes)}")


def choose(sizes: Sequence[Mapping[str, Any]], alive: int) -> Optional[Mapping[str, Any]]:
    """The largest size of run.json's `shrink_sizes` that `alive` GPU nodes can hold, or None."""
    fits = [s for s in sizes if int(s["nodes"]) <= alive]
    return max(fits, key=lambda s: int(s["nodes"]), default=None)


_ARGV_START = re.compile(r"(?:^|\s)&& (?=python )")


def resized_entrypoint(entrypoint: str, overrides: Sequence[str]) -> str:
    """`entrypoint` (`workloads.job_spec.build_job`'s: `<prepare>; cd <workdir> && python <script> ...`) with each
    `key=value` of `overrides` replacing the NeMo-RL argument of the same key, or appended when it has none.
    Raises ValueError when the entrypoint is not of that form."""
    starts = list(_ARGV_START.finditer(entrypoint))
    if not starts:
        raise ValueError("the job's entrypoint does not end with `&& python <script> ...`")
    cut = starts[-1].end()
    argv = shlex.split(entrypoint[cut:])
    for override in overrides:
        key = override.partition("=")[0]
        at = [i for i, token in enumerate(argv) if token.lstrip("+").partition("=")[0] == key]
        if len(at) > 1:
            raise ValueError(f"the job's entrypoint sets {key} {len(at)} times")
        if at:
            argv[at[0]] = override
        else:
            argv.append(override)
    return entrypoint[:cut] + shlex.join(argv)


def resized_spec(spec: Any, nodes: int, overrides: Sequence[str]) -> Any:
    """The run's `JobSpec` for an attempt on `nodes` GPU nodes: the same submission id, run id and spec hash (the
    same run, attempts numbered on), the entrypoint with `overrides`, and `META_NODES` saying its size."""
    return dataclasses.replace(
        spec,
        entrypoint=resized_entrypoint(spec.entrypoint, overrides),
        metadata={**spec.metadata, META_NODES: str(nodes)},
    )


def attempt_nodes(job: Any, full: int) -> int:
    """The GPU node count an attempt was submitted at (`META_NODES`, else the full gang)."""
    value = str((getattr(job, "metadata", None) or {}).get(META_NODES, "") or "")
    return int(value) if value.isdigit() and int(value) > 0 else full
