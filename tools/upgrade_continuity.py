"""Whether a release's continuity step resumes a running run where it was: the step run for real, offline, on a
temporary directory laid out as the earlier release saved the run (tools/upgrade_check.py, docs/day-2.md).

The job's entrypoint is `<continuity step>; cd <workdir> && python ...` (workloads/job_spec.py `build_job`): the
step runs before NeMo-RL in every attempt, whoever submits it, under /bin/sh as Ray's job supervisor runs an
entrypoint (ray-project/ray python/ray/dashboard/modules/job/job_supervisor.py `_exec_entrypoint`:
`subprocess.Popen(entrypoint, shell=True)`, ray 2.60.0). Here the earlier release's checkpoint directory holds two
whole saves, one `step_<N>` cut short by an async save and one `tmp_step_<N>` (as NeMo-RL writes them:
workloads/checkpoints.py), each with the `config.yaml` NeMo-RL saves beside it. The new release's step runs there
twice (every attempt runs it again), with the Lustre mount moved into the temporary directory and `python` this
interpreter (the image's Python in the cluster); then NeMo-RL's own rule, the highest `step_<N>` of the new
directory (nemo_rl/utils/checkpoint.py `get_latest_checkpoint_path`), must be the newest whole save.
"""

from __future__ import annotations

import json
import os
import posixpath
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

from workloads import checkpoints

STEP_TIMEOUT_S = 60
WHOLE_STEPS = (2, 4)
"""The earlier release's whole saves: the run must resume from the newest."""
TORN_STEP = 5
"""A `step_<N>` whose write an async save had not finished (no finish marker): NeMo-RL must not load it."""
CUT_SHORT_STEP = 6
"""A `tmp_step_<N>`: a save the attempt died in."""

_PRELUDE_END = re.compile(r"; cd (?:'[^']*'|[^\s;&|]+) && ")
_RUN_KEY = re.compile(r"(?P<model>.+)-seq(?P<seq>\d+)-(?P<backend>dtensor|megatron)-tp(?P<tp>\d+)-pp(?P<pp>\d+)")
_OVERRIDE = re.compile(r"(?:^|\s)\+{0,2}(policy\.[\w.]+)=(\S+)")


def prelude(entrypoint: str) -> str:
    """What the entrypoint runs before it changes to the image's checkout and starts NeMo-RL: the part before the
    first `; cd <workdir> && ` ("" when it starts NeMo-RL at once, as releases up to 1.0.0 did)."""
    found = _PRELUDE_END.search(entrypoint)
    return entrypoint[: found.start()] if found else ""


def mount_root(directory: str) -> str:
    """The Lustre mount of a checkpoint directory (`<mount>/checkpoints/...`, workloads/job_types.py
    `checkpoint_dir`): the part before `/checkpoints/`, "" for a mount at `/`."""
    at = directory.find("/checkpoints/")
    return directory[:at] if at >= 0 else posixpath.dirname(directory.rstrip("/"))


def problem(old_dir: str, new_dir: str, entrypoint: str, old_entrypoint: str = "") -> Optional[str]:
    """Why the release whose job runs `entrypoint` (checkpoints in `new_dir`) would not resume the run the earlier
    release saves in `old_dir` (its job ran `old_entrypoint`) from its newest whole checkpoint; None: it would."""
    step = prelude(entrypoint)
    if not step:
        if old_dir == new_dir:
            return None  # NeMo-RL starts at once and finds the run's steps where it left them
        return (
            f"its checkpoints move from {old_dir} to {new_dir}, and this release's entrypoint runs nothing before "
            "NeMo-RL that brings them over"
        )
    with tempfile.TemporaryDirectory(prefix="upgrade-check-continuity-") as tmp:
        return _run(Path(tmp), step, old_dir, new_dir, _saved_config(new_dir, old_entrypoint))


def _run(tmp: Path, step: str, old_dir: str, new_dir: str, config: dict) -> Optional[str]:
    lustre = tmp / "lustre"
    old_root, new_root = mount_root(old_dir), mount_root(new_dir)
    old = lustre / old_dir[len(old_root) :].lstrip("/")
    new = lustre / new_dir[len(new_root) :].lstrip("/")
    for n in WHOLE_STEPS:
        _save(old / f"step_{n}", config, whole=True)
    _save(old / f"step_{TORN_STEP}", config, whole=False)
    (old / f"tmp_step_{CUT_SHORT_STEP}" / "policy").mkdir(parents=True)
    script = _rebased(step, new_root, str(lustre))
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "python"  # a script, not a link: a link to a venv's python would lose the venv
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
    shim.chmod(0o755)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}", "HOME": str(tmp)}
    newest = WHOLE_STEPS[-1]
    for attempt in (1, 2):
        try:
            proc = subprocess.run(
                ["/bin/sh", "-c", script], cwd=tmp, env=env, capture_output=True, text=True, timeout=STEP_TIMEOUT_S
            )
        except subprocess.TimeoutExpired:
            return f"its continuity step (run before NeMo-RL in every attempt) ran past {STEP_TIMEOUT_S} s"
        if proc.returncode != 0:
            lines = [line for line in proc.stderr.splitlines() if line.strip()]
            last = lines[-1] if lines else f"exit code {proc.returncode}"
            why = _shown(last.strip(), lustre, new_root)[:300]
            return (
                f"its continuity step (run before NeMo-RL in every attempt) fails on the checkpoints "
                f"{old_dir} holds (attempt {attempt}): {why}"
            )
        resumes = _nemo_rl_resume_step(new)
        saved = f"the run's newest whole checkpoint, step_{newest} in {old_dir}"
        if resumes == 0:
            return (
                f"after its continuity step NeMo-RL finds no step_N in {new_dir} and starts at step 0: {saved}, is lost"
            )
        if resumes < newest:
            why = f"NeMo-RL resumes from step_{resumes}, not from {saved}: the steps between are lost"
            return f"after its continuity step {why}"
        if resumes > newest or not checkpoints.is_whole(new / f"step_{resumes}"):
            return (
                f"after its continuity step NeMo-RL resumes from step_{resumes} in {new_dir}, a save whose write never "
                f"finished (attempt {attempt}), instead of {saved}"
            )
    return None


def _nemo_rl_resume_step(directory: Path) -> int:
    """The highest `step_<N>` directory, whole or not: NeMo-RL's `get_latest_checkpoint_path` (0: none)."""
    try:
        names = [p.name for p in directory.iterdir() if p.is_dir()]
    except OSError:
        return 0
    steps = [int(m.group(1)) for name in names if (m := re.fullmatch(r"step_(\d+)", name))]
    return max(steps, default=0)


def _save(step_dir: Path, config: dict, whole: bool) -> None:
    """A save as NeMo-RL writes it: `policy/{weights,optimizer}` DCP shards, each with its finish marker when
    whole (workloads/checkpoints.py `is_whole`), `training_info.json` and the run's config (`config.yaml`)."""
    for part in ("weights", "optimizer"):
        shards = step_dir / "policy" / part
        shards.mkdir(parents=True)
        (shards / "__0_0.distcp").write_bytes(b"shard")
        if whole:
            (shards / ".metadata").write_bytes(b"finished")
    (step_dir / "training_info.json").write_text(json.dumps({"step": int(step_dir.name.split("_")[-1])}))
    (step_dir / "config.yaml").write_text(json.dumps(config))  # JSON is YAML: `yaml.safe_load` reads it


def _saved_config(new_dir: str, old_entrypoint: str) -> dict:
    """The run's config as NeMo-RL saves it with each step (`config.yaml`), as far as the run key reads it
    (workloads/checkpoints.py `recorded_run_key`): the new directory's run key, then the earlier release's own
    overrides of those keys (the run it really trained)."""
    policy: dict = {"dtensor_cfg": {}, "megatron_cfg": {"enabled": False}}
    key = _RUN_KEY.fullmatch(posixpath.basename(new_dir.rstrip("/")))
    if key:
        policy["model_name"] = key["model"]
        policy["max_total_sequence_length"] = int(key["seq"])
        if key["backend"] == "megatron":
            policy["megatron_cfg"] = {
                "enabled": True,
                "tensor_model_parallel_size": int(key["tp"]),
                "pipeline_model_parallel_size": int(key["pp"]),
            }
        else:
            policy["dtensor_cfg"]["tensor_parallel_size"] = int(key["tp"])
    for name, value in _OVERRIDE.findall(old_entrypoint):
        value = value.strip("'\"")
        if name == "policy.model_name":
            policy["model_name"] = value
        elif name == "policy.max_total_sequence_length" and value.isdigit():
            policy["max_total_sequence_length"] = int(value)
        elif name == "policy.dtensor_cfg.tensor_parallel_size" and value.isdigit():
            policy["dtensor_cfg"]["tensor_parallel_size"] = int(value)
        elif name in (
            "policy.megatron_cfg.tensor_model_parallel_size",
            "policy.megatron_cfg.pipeline_model_parallel_size",
        ):
            if value.isdigit() and policy["megatron_cfg"].get("enabled"):
                policy["megatron_cfg"][name.rsplit(".", 1)[1]] = int(value)
    return {"policy": policy}


def _rebased(script: str, root: str, target: str) -> str:
    """`script` with the Lustre mount `root` moved to `target`: every path below it, and nothing else."""
    prefix, into = (root, target) if root else ("/checkpoints", f"{target}/checkpoints")
    return re.sub(r"(?<![\w./-])" + re.escape(prefix) + r"(?=/|[\s'\";|&)]|$)", lambda _m: into, script)


def _shown(text: str, lustre: Path, root: str) -> str:
    """A line of the step's output with the temporary mount named as the real one."""
    return text.replace(str(lustre), root or "")
