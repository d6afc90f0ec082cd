"""What the checkpoint directory says about a run: where a resubmission resumes, what a preemption lost.

Read from the directory exactly as NeMo-RL writes it (NVIDIA-NeMo/RL nemo_rl/utils/checkpoint.py,
identical at v0.4.0 c751f811 and v0.6.0 5fb58893, the pinned images' tags):
- `init_tmp_checkpoint(step)` creates `tmp_step_<step>/` and writes `training_info.json` into it FIRST,
  so that file marks nothing; the algorithm then saves its shards into the same directory;
- `finalize_checkpoint` renames `tmp_step_<step>` to `step_<step>` (via `old_step_<step>` when that
  step exists already): a complete checkpoint is a directory named exactly `step_<N>`;
- `get_latest_checkpoint_path` resumes from the highest `step_<N>` (`re.fullmatch(r"step_\\d+")`), so
  the resume step is that N (the step saved is `total_steps + 1` after step N ran, nemo_rl/algorithms/grpo.py).

A `step_<N>` can exist before its files do: at v0.6.0 the DTensor v2 worker saves with `dcp.async_save`
(nemo_rl/models/policy/workers/dtensor_policy_worker_v2.py `"is_async": True`) and grpo.py renames the
directory as soon as `save_checkpoint` returns; the background writer then re-creates `tmp_step_<N>`
(NeMo-RL's own fix, unreleased commit c95bec5a6, "wait for async writes before promoting tmp_step_N").
The job spec turns async saves off (workloads/job_spec.py `checkpointing.is_async`); this reader does
not trust the name alone either: a `step_<N>` counts only when it is whole (`is_whole`).

Nothing in NeMo-RL removes a `tmp_step_<N>` left by a run killed mid-save, and a later save of the
same step reuses the directory (`mkdir(exist_ok=True)`) with the dead run's shards still in it:
`clean_partial` removes them before a resubmission, when no job of the run is active; when the job
table has forgotten the attempt (a head restart), only those nothing wrote to for `QUIET_SECONDS`.

Steps done by an attempt come from its driver log: NeMo-RL's GRPO loop prints a banner
`========================= Step <k>/<total> =========================` when step k starts
(grpo.py at v0.4.0, v0.5.0, v0.6.0; k counts within the epoch, which is the run for these recipes:
their max_num_steps is below one epoch of their data).
"""

from __future__ import annotations

import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

_COMPLETE = re.compile(r"step_(\d+)")
_PARTIAL = re.compile(r"tmp_step_(\d+)")
_STEP_BANNER = re.compile(r"={5,} Step (\d+)/\d+ ={5,}")

QUIET_SECONDS = 180.0
"""After a head restart the job table no longer shows the attempt, but its workers (and an async writer
in them) live on until their raylet gives up on the GCS (Ray's `gcs_rpc_server_reconnect_timeout_s`,
60 s by default, src/ray/common/ray_config_def.h): a `tmp_step_<N>` written to more recently than this
may have a live writer then."""

_FINISHED = (".metadata", "model.safetensors.index.json")
"""What a save writes last, once every shard is on disk: torch DCP's `FileSystemWriter.finish` writes
`.metadata` (torch/distributed/checkpoint/filesystem.py `_metadata_fn`, the format of NeMo-RL's DTensor
v1 `dcp.save` (nemo_rl/utils/native_checkpoint.py) and of its optimizer state, and of Megatron's
`torch_dist` saves); Automodel's safetensors writer writes `model.safetensors.index.json` in `finish`
(nemo_automodel/components/checkpoint/_backports/hf_storage.py)."""


@dataclass(frozen=True)
class CheckpointScan:
    """The checkpoint directory at one moment."""

    complete: tuple[int, ...]
    """Steps with a whole `step_<N>` (`is_whole`), ascending."""
    partial: tuple[int, ...]
    """Steps with a `tmp_step_<N>` (a save in progress, or a dead run's leftover)."""
    incomplete: tuple[int, ...] = ()
    """Steps with a `step_<N>` whose files are not all there (an async save renamed before its write ended)."""

    @property
    def latest(self) -> int:
        """The step a run resumes after (0: none, it starts from scratch)."""
        return self.complete[-1] if self.complete else 0


def _finished(save_dir: Path) -> bool:
    """`save_dir` (a policy's `weights` or `optimizer` directory) holds a save that reached its `finish`:
    a finish marker, and none of its directories holds DCP shards (`*.distcp`) without one beside them."""
    files = [p for p in save_dir.rglob("*") if p.is_file()]
    marked = {p.parent for p in files if p.name in _FINISHED}
    shards = {p.parent for p in files if p.suffix == ".distcp"}
    # Automodel's sharded safetensors save writes no marker at all: its shards are the save.
    return (bool(marked) or any(p.suffix == ".safetensors" for p in files)) and shards <= marked


def is_whole(step_dir: str | Path) -> bool:
    """Whether a checkpoint directory holds its whole save: grpo.py saves the policy into
    `<step>/policy/weights` and `<step>/policy/optimizer` (nemo_rl/algorithms/grpo.py at v0.4.0 ... v0.6.0);
    the weights must be finished, and the optimizer too when its directory exists."""
    policy = Path(step_dir) / "policy"
    weights, optimizer = policy / "weights", policy / "optimizer"
    if not weights.is_dir() or not _finished(weights):
        return False
    return not optimizer.exists() or _finished(optimizer)


def scan(directory: str | Path) -> CheckpointScan:
    """What `directory` holds; a missing directory holds nothing (no checkpoint yet)."""
    complete, partial, incomplete = [], [], []
    try:
        entries = list(Path(directory).iterdir())
    except OSError:
        return CheckpointScan((), ())
    for entry in entries:
        if not entry.is_dir():
            continue
        if m := _COMPLETE.fullmatch(entry.name):
            (complete if is_whole(entry) else incomplete).append(int(m.group(1)))
        elif m := _PARTIAL.fullmatch(entry.name):
            partial.append(int(m.group(1)))
    return CheckpointScan(tuple(sorted(complete)), tuple(sorted(partial)), tuple(sorted(incomplete)))


def _newest_write(path: Path) -> float:
    """The newest modification time of `path` or anything under it (0 when it cannot be read)."""
    try:
        return max([path.stat().st_mtime, *(p.stat().st_mtime for p in path.rglob("*"))])
    except OSError:
        return 0.0


def clean_partial(directory: str | Path, *, quiet: float = 0.0, now: Optional[float] = None) -> list[str]:
    """Remove every `tmp_step_<N>` of `directory` nothing wrote to for `quiet` seconds (call it only when
    no job of the run is active); returns their names. Pass `quiet=QUIET_SECONDS` when the job table
    cannot say (it lost the attempt): a writer of that attempt may still be filling one."""
    now = time.time() if now is None else now
    removed = []
    for step in scan(directory).partial:
        path = Path(directory) / f"tmp_step_{step}"
        if now - _newest_write(path) < quiet:
            continue
        shutil.rmtree(path, ignore_errors=True)
        if not path.exists():
            removed.append(path.name)
    return removed


def last_started_step(log_text: str) -> Optional[int]:
    """The highest step whose banner the driver printed (the step it was in when it ended), or None."""
    steps = [int(m.group(1)) for m in _STEP_BANNER.finditer(log_text or "")]
    return max(steps) if steps else None


def steps_lost(last_started: Optional[int], latest_complete: int) -> Optional[int]:
    """Steps an attempt ran that no complete checkpoint keeps: the step it was in counts (it is redone).
    None when the log showed no step (not known)."""
    if last_started is None:
        return None
    return max(last_started - latest_complete, 0)
