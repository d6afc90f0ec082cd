"""What the checkpoint directory says about a run: where a resubmission resumes, what a preemption lost; and the
step the job's entrypoint runs before NeMo-RL starts (`prepare`, also `python -m workloads.checkpoints`).

Read as NeMo-RL writes it (NVIDIA-NeMo/RL nemo_rl/utils/checkpoint.py, v0.4.0 c751f811 = v0.6.0 5fb58893):
a save goes into `tmp_step_<N>/` and `finalize_checkpoint` renames it `step_<N>`; the run resumes from the
highest `step_<N>`, unchecked (`get_latest_checkpoint_path`, the same at v0.4.0 c751f811, v0.5.0 6c708930,
v0.6.0 5fb58893 and v0.7.0 81aa43dd). An async save (dtensor_policy_worker_v2.py at v0.6.0) renames before its
write ends (fixed in unreleased c95bec5a6), so a `step_<N>` counts only when whole (`is_whole`), and `prepare`
renames every other one aside before each attempt. A dead run's `tmp_step_<N>` would be reused with stale
shards (`init_tmp_checkpoint` makes it with `exist_ok=True`): `clean_partial` removes it before an attempt.
Steps come from GRPO's `===== Step <k>/<total> =====` banner (nemo_rl/algorithms/grpo.py v0.4.0 to v0.6.0).

The job's entrypoint runs this module's code as `python -c` on the Ray head (`workloads.job_spec.build_job`),
with the NeMo-RL image's Python: it imports the standard library only (PyYAML, which NeMo-RL itself needs, only
when an earlier release's checkpoints are there to read).
"""

from __future__ import annotations

import errno
import os
import re
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

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

ASIDE_PREFIX = "incomplete_"
"""An incomplete `step_<N>` is renamed `incomplete_step_<N>` (`.2`, `.3`, ... when that is taken). NeMo-RL lists
steps with `glob("step_*")` and keeps the names `re.fullmatch(r"step_\\d+")` accepts (checkpoint.py
`get_latest_checkpoint_path`, and `_load_checkpoint_history`, by which `keep_top_k` deletes; v0.4.0 to v0.7.0):
it matches neither, so NeMo-RL never loads or deletes it. Not `old_step_<N>`: `finalize_checkpoint` renames onto
that name and deletes it."""

LOG = "nemo-rl-gke:"
ADOPTED = f"{LOG} resuming from the checkpoints of an earlier release"  # then what moved where
_ASIDE_TRIES = 100


class PrepareError(RuntimeError):
    """A rename the attempt needs failed: it stops rather than load a partial step or start beside its steps."""


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


def run_key(model: str, sequence_length: int, backend: str, tensor_parallel: int, pipeline_parallel: int) -> str:
    """The directory a run's checkpoints live in (`workloads.job_spec.checkpoint_key`): the model, the trained
    `policy.max_total_sequence_length` and the layout (checkpoints are saved per parallel rank)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model).strip("_.")
    return f"{slug}-seq{sequence_length}-{backend}-tp{tensor_parallel}-pp{pipeline_parallel}"


def run_key_of_config(config: object) -> Optional[str]:
    """The run key of a NeMo-RL config (`policy.model_name`, `policy.max_total_sequence_length`, the backend that is
    enabled and its TP and PP); None when it does not say."""
    policy = config.get("policy") if isinstance(config, dict) else None
    if not isinstance(policy, dict):
        return None
    megatron, dtensor = policy.get("megatron_cfg"), policy.get("dtensor_cfg")
    if isinstance(megatron, dict) and megatron.get("enabled") is True:
        backend = "megatron"
        tp, pp = megatron.get("tensor_model_parallel_size"), megatron.get("pipeline_model_parallel_size")
    else:
        backend, tp, pp = "dtensor", dtensor.get("tensor_parallel_size") if isinstance(dtensor, dict) else None, 1
    model, seq = policy.get("model_name"), policy.get("max_total_sequence_length")
    if not isinstance(model, str) or not all(isinstance(n, int) and not isinstance(n, bool) for n in (seq, tp, pp)):
        return None
    return run_key(model, seq, backend, tp, pp)


def recorded_run_key(step_dir: str | Path) -> Optional[str]:
    """The run key of the config NeMo-RL saved with a step: `init_tmp_checkpoint` writes the run's whole config
    into `config.yaml` with `yaml.safe_dump` (checkpoint.py v0.4.0 to v0.7.0); None when it does not say."""
    try:
        import yaml  # NeMo-RL's own dependency (checkpoint.py imports it), so in its image
    except ImportError:
        return None
    try:
        return run_key_of_config(yaml.safe_load((Path(step_dir) / "config.yaml").read_text()))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return None


def _steps(directory: Path) -> list[tuple[int, Path]]:
    """Every entry NeMo-RL could resume from (any `step_<N>`, as its glob and regex find them), lowest first."""
    try:
        entries = list(directory.iterdir())
    except OSError:
        return []
    return sorted((int(m.group(1)), entry) for entry in entries if (m := _COMPLETE.fullmatch(entry.name)))


def _rename_new(src: Path, dst: Path) -> None:
    """Rename `src` to `dst`, which must not exist; never into it, as `mv` does when a directory is there. rename(2)
    itself refuses a non-empty directory at `dst` (ENOTEMPTY) and replaces only an empty one, so a step that
    appears between this look and the rename is neither nested nor overwritten."""
    if os.path.lexists(dst):
        raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), str(dst))
    os.rename(src, dst)


def _set_aside(path: Path) -> Path:
    for n in range(1, _ASIDE_TRIES + 1):
        aside = path.with_name(f"{ASIDE_PREFIX}{path.name}{'' if n == 1 else f'.{n}'}")
        try:
            _rename_new(path, aside)
        except OSError as err:
            if err.errno in (errno.EEXIST, errno.ENOTEMPTY):
                continue  # taken, perhaps since the look: the next name
            raise PrepareError(f"cannot rename {path} to {aside.name}: {err.strerror or err}") from None
        return aside
    raise PrepareError(f"cannot rename {path} aside: {ASIDE_PREFIX}{path.name} to .{_ASIDE_TRIES} are all taken")


def set_aside_incomplete(directory: str | Path, say: Callable[[str], None]) -> list[str]:
    """Rename every `step_<N>` of `directory` that is not whole (`is_whole`) aside (`ASIDE_PREFIX`), kept, one line
    each: NeMo-RL's highest `step_<N>` is then the newest whole one. The names set aside."""
    done = []
    for _, path in _steps(Path(directory)):
        if is_whole(path):
            continue
        aside = _set_aside(path)
        say(f"{LOG} {path.name} in {directory} is not a whole save (no finish marker): renamed {aside.name}, kept")
        done.append(aside.name)
    return done


def adopt_legacy(legacy: str | Path, current: str | Path, say: Callable[[str], None], key: str = "") -> list[str]:
    """Move each whole `step_<N>` of `legacy` (where releases up to 5971cc4 saved: `checkpoints/<stack>/<recipe>`)
    that `current` lacks and this run saved (the run key of its `config.yaml` is `key`, by default `current`'s
    name: `workloads.job_types.run_checkpoint_subdir`) into `current`, in one line; say in one line which stay
    and why; remove `legacy`'s dead `tmp_step_<N>`. `current` is inside `legacy` on the same filesystem, so each
    move is one rename. The steps moved."""
    old, new = Path(legacy), Path(current)
    key = key or new.name
    moved, left = [], []
    for _, path in _steps(old):
        target = new / path.name
        if os.path.lexists(target):
            continue  # moved by an attempt stopped part way, or saved by this run since
        if not is_whole(path):
            left.append(f"{path.name} (not whole)")
            continue
        theirs = recorded_run_key(path)
        if theirs != key:
            left.append(f"{path.name} ({'its config.yaml names no run' if theirs is None else f'run {theirs}'})")
            continue
        try:
            new.mkdir(parents=True, exist_ok=True)
            _rename_new(path, target)
        except OSError as err:
            raise PrepareError(f"cannot move {path} to {target}: {err.strerror or err}") from None
        moved.append(path.name)
    if moved:
        say(f"{ADOPTED}: moved {' '.join(moved)} from {old} to {new}")
    if left:
        say(f"{LOG} left in {old}, not whole checkpoints of run {key}: {', '.join(left)}")
    removed = clean_partial(old, quiet=QUIET_SECONDS)  # no release saves there any more
    if removed:
        say(f"{LOG} removed the earlier release's partial save(s) {' '.join(removed)} from {old}")
    return moved


def prepare(current: str | Path, legacy: str | Path | None, say: Callable[[str], None]) -> int:
    """What runs before every attempt, whoever submits it: set `current`'s incomplete steps aside, adopt `legacy`'s
    whole steps of this run (when given), remove `current`'s dead partial saves. Returns the step NeMo-RL then
    resumes from (0: none), `scan(current).latest`. Raises `PrepareError` when a rename fails."""
    set_aside_incomplete(current, say)
    if legacy is not None:
        adopt_legacy(legacy, current, say)
    removed = clean_partial(current, quiet=QUIET_SECONDS)
    if removed:
        say(f"{LOG} removed the dead partial save(s) {' '.join(removed)} from {current}")
    return scan(current).latest


def main(argv: list[str]) -> int:
    """`CHECKPOINT_DIR [LEGACY_DIR]`: `prepare`, its lines and the resume step on stdout; a failure in one line on
    stderr, exit 1; bad arguments, exit 2."""
    if len(argv) not in (1, 2) or not all(arg.startswith("/") for arg in argv):
        print(f"{LOG} usage: CHECKPOINT_DIR [LEGACY_DIR], absolute paths; got {argv}", file=sys.stderr)
        return 2

    def say(line: str) -> None:
        print(line, flush=True)

    try:
        latest = prepare(argv[0], argv[1] if len(argv) == 2 else None, say)
    except (PrepareError, OSError) as err:
        print(f"{LOG} {err}: the attempt stops here rather than resume from the wrong step", file=sys.stderr)
        return 1
    say(f"{LOG} NeMo-RL resumes from step_{latest}" if latest else f"{LOG} NeMo-RL starts at step 0: no whole step")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
