"""What the checkpoint directory says about a run: where a resubmission resumes, what a preemption lost.

Read from the directory exactly as NeMo-RL writes it (NVIDIA-NeMo/RL nemo_rl/utils/checkpoint.py,
identical at v0.4.0 c751f811 and v0.6.0 5fb58893, the pinned images' tags):
- `init_tmp_checkpoint(step)` creates `tmp_step_<step>/` and writes `training_info.json` into it FIRST,
  so that file marks nothing; the algorithm then saves its shards into the same directory;
- `finalize_checkpoint` renames `tmp_step_<step>` to `step_<step>` (via `old_step_<step>` when that
  step exists already): a complete checkpoint is a directory named exactly `step_<N>`;
- `get_latest_checkpoint_path` resumes from the highest `step_<N>` (`re.fullmatch(r"step_\\d+")`), so
  the resume step is that N (the step saved is `total_steps + 1` after step N ran, nemo_rl/algorithms/grpo.py).

Nothing in NeMo-RL removes a `tmp_step_<N>` left by a run killed mid-save, and a later save of the
same step reuses the directory (`mkdir(exist_ok=True)`) with the dead run's shards still in it:
`clean_partial` removes them before a resubmission, when no attempt can be writing.

Steps done by an attempt come from its driver log: NeMo-RL's GRPO loop prints a banner
`========================= Step <k>/<total> =========================` when step k starts
(grpo.py at v0.4.0, v0.5.0, v0.6.0; k counts within the epoch, which is the run for these recipes:
their max_num_steps is below one epoch of their data).
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

_COMPLETE = re.compile(r"step_(\d+)")
_PARTIAL = re.compile(r"tmp_step_(\d+)")
_STEP_BANNER = re.compile(r"={5,} Step (\d+)/\d+ ={5,}")


@dataclass(frozen=True)
class CheckpointScan:
    """The checkpoint directory at one moment."""

    complete: tuple[int, ...]
    """Steps with a complete `step_<N>`, ascending."""
    partial: tuple[int, ...]
    """Steps with a `tmp_step_<N>` (a save in progress, or a dead run's leftover)."""

    @property
    def latest(self) -> int:
        """The step a run resumes after (0: none, it starts from scratch)."""
        return self.complete[-1] if self.complete else 0


def scan(directory: str | Path) -> CheckpointScan:
    """What `directory` holds; a missing directory holds nothing (no checkpoint yet)."""
    complete, partial = [], []
    try:
        entries = list(Path(directory).iterdir())
    except OSError:
        return CheckpointScan((), ())
    for entry in entries:
        if not entry.is_dir():
            continue
        if m := _COMPLETE.fullmatch(entry.name):
            complete.append(int(m.group(1)))
        elif m := _PARTIAL.fullmatch(entry.name):
            partial.append(int(m.group(1)))
    return CheckpointScan(tuple(sorted(complete)), tuple(sorted(partial)))


def clean_partial(directory: str | Path) -> list[str]:
    """Remove every `tmp_step_<N>` of `directory` (call it only when no attempt runs); returns their names."""
    removed = []
    for step in scan(directory).partial:
        path = Path(directory) / f"tmp_step_{step}"
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
