"""What the checkpoint directory says about a run: where a resubmission resumes, what a preemption lost.

Read as NeMo-RL writes it (NVIDIA-NeMo/RL nemo_rl/utils/checkpoint.py, v0.4.0 c751f811 = v0.6.0 5fb58893):
a save goes into `tmp_step_<N>/` and `finalize_checkpoint` renames it `step_<N>`; the run resumes from the
highest `step_<N>`. An async save (dtensor_policy_worker_v2.py at v0.6.0) renames before its write ends
(fixed in unreleased c95bec5a6), so a `step_<N>` counts only when whole (`is_whole`). A dead run's
`tmp_step_<N>` would be reused with stale shards: `clean_partial` removes it before a resubmission.
Steps come from GRPO's `===== Step <k>/<total> =====` banner (nemo_rl/algorithms/grpo.py v0.4.0 to v0.6.0).
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
"""After a head restart the attempt's workers live on until their raylet gives up on the GCS
(`gcs_rpc_server_reconnect_timeout_s`, 60 s, src/ray/common/ray_config_def.h)."""

_FINISHED = (".metadata", "model.safetensors.index.json")
"""What a save writes last: torch DCP's `.metadata` (torch/distributed/checkpoint/filesystem.py `_metadata_fn`;
NeMo-RL's nemo_rl/utils/native_checkpoint.py and Megatron's torch_dist saves) or Automodel's
`model.safetensors.index.json` (nemo_automodel/components/checkpoint/_backports/hf_storage.py)."""


@dataclass(frozen=True)
class CheckpointScan:
    complete: tuple[int, ...]
    partial: tuple[int, ...]
    incomplete: tuple[int, ...] = ()

    @property
    def latest(self) -> int:
        """The step a run resumes after (0: none)."""
        return self.complete[-1] if self.complete else 0


def _finished(save_dir: Path) -> bool:
    """A finish marker, and no directory with DCP shards (`*.distcp`) without one."""
    files = [p for p in save_dir.rglob("*") if p.is_file()]
    marked = {p.parent for p in files if p.name in _FINISHED}
    shards = {p.parent for p in files if p.suffix == ".distcp"}
    # Automodel's sharded safetensors save writes no marker at all: its shards are the save.
    return (bool(marked) or any(p.suffix == ".safetensors" for p in files)) and shards <= marked


def is_whole(step_dir: str | Path) -> bool:
    """The policy's weights (and optimizer, when there) finished (grpo.py saves `<step>/policy/{weights,optimizer}`)."""
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
    try:
        return max([path.stat().st_mtime, *(p.stat().st_mtime for p in path.rglob("*"))])
    except OSError:
        return 0.0


def clean_partial(directory: str | Path, *, quiet: float = 0.0, now: Optional[float] = None) -> list[str]:
    """Remove every `tmp_step_<N>` nothing wrote to for `quiet` seconds (only when no job of the run is active)."""
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
    """The highest step whose banner the driver printed, or None."""
    steps = [int(m.group(1)) for m in _STEP_BANNER.finditer(log_text or "")]
    return max(steps) if steps else None


def steps_lost(last_started: Optional[int], latest_complete: int) -> Optional[int]:
    """Steps no complete checkpoint keeps (the one it was in counts); None when not known."""
    if last_started is None:
        return None
    return max(last_started - latest_complete, 0)
