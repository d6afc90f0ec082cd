"""A simulated Ray head on a fake clock: the job table, the node table and the jobs' drivers (a fake trainer).

Just enough of `ray.job_submission.JobSubmissionClient` for the watcher, the run owner and `workloads.submit`:
`list_jobs`, `get_job_info`, `get_job_logs`, `submit_job`, `stop_job`, `_do_request` (the node table at
`/api/v0/nodes`). A duplicate submission id fails as Ray's does over HTTP: a RuntimeError "Request failed
with status code 500: Traceback (most recent call last): ... already exists" (ray dashboard/modules/job/
job_manager.py `submit_job` raises ValueError "Job with submission_id ... already exists", which the
dashboard returns as a 500 with the traceback as its body; ray job_submission sdk `_raise_error`).

The trainer saves as NeMo-RL does (nemo_rl/utils/checkpoint.py, algorithms/grpo.py at v0.6.0): every
`save_period` steps it makes `tmp_step_<N>/training_info.json`; a synchronous save writes its shards
(`policy/weights/.metadata` last, as torch DCP writes it) and then renames the directory to `step_<N>`; an
asynchronous one (the DTensor v2 worker's `dcp.async_save`) renames at once and its background writer
re-creates `tmp_step_<N>` with the shards after the write time, leaving `step_<N>` without them (issue 34
item 1). A step directory is whole when it holds `policy/weights/.metadata`.

The trainer obeys the entrypoint the job builder made (`workloads.job_spec.build_job`), as NeMo-RL does: the
shell steps before `cd <image checkout>` run for real (bash, on the run's temp dir as the Lustre mount), and
the checkpoint dir, save period, step count and `checkpointing.is_async` come from its overrides (the last
value of a key wins), the save mode defaulting to the recipe's worker's own. It resumes from what NeMo-RL's
own lookup returns: the highest `step_<N>`, whole or not (nemo_rl/utils/checkpoint.py
`CheckpointManager.get_latest_checkpoint_path`, v0.6.0 5fb58893).
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from ray.job_submission import JobDetails

from workloads.gate import META_GATE, RESULT_MARKER, Check, GateReport
from workloads.job_spec import META_STACK
from workloads.run_owner import META_GATE_FOR, META_GATE_NODES
from workloads.size_ladder import LEASE_ENDED_LINE

WHOLE_MARK = Path("policy") / "weights" / ".metadata"
ACTIVE = ("PENDING", "RUNNING")
_STEP_DIR = re.compile(r"step_\d+")


def is_whole(step_dir: Path) -> bool:
    return (step_dir / WHOLE_MARK).is_file()


def step_dirs(ckpt: Path) -> dict[int, Path]:
    """The `step_<N>` directories NeMo-RL's lookup sees (the name matched whole, as its `re.fullmatch` does)."""
    try:
        names = os.listdir(ckpt)
    except OSError:
        return {}
    return {int(n[5:]): ckpt / n for n in names if _STEP_DIR.fullmatch(n) and (ckpt / n).is_dir()}


def nemo_rl_resume_step(ckpt: Path) -> int:
    """The step NeMo-RL resumes after: its `get_latest_checkpoint_path`, the highest `step_<N>` (0: none)."""
    return max(step_dirs(ckpt), default=0)


@functools.lru_cache(maxsize=16)
def _split(text: str) -> tuple[str, ...]:
    """`shlex.split`, remembered: the checkpoint step is a whole module as one word (~30 ms to split)."""
    try:
        return tuple(shlex.split(text))
    except ValueError:
        return ()


@functools.lru_cache(maxsize=4)
def _compiled(program: str) -> Any:
    return compile(program, "<string>", "exec")


def _run_python(program: str, args: list[str]) -> tuple[int, str]:
    """`python -c program args` in this process: its exit status and output."""
    out, argv = io.StringIO(), sys.argv
    code: Any = 0
    try:
        sys.argv = ["-c", *args]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            exec(_compiled(program), {"__name__": "__main__", "__builtins__": __builtins__})  # noqa: S102
    except SystemExit as done:
        code = done.code
    except Exception:  # noqa: BLE001 (an uncaught exception: Python prints it and exits 1)
        out.write(traceback.format_exc())
        code = 1
    finally:
        sys.argv = argv
    status = code if isinstance(code, int) else (0 if code is None else 1)
    if not isinstance(code, int) and code is not None:
        out.write(f"{code}\n")
    return status, out.getvalue()[-2000:]


class EntrypointError(ValueError):
    """The entrypoint is not of the job builder's shape (`<shell steps>; cd <checkout> && python <script> ...`)."""


def parse_entrypoint(entrypoint: str) -> tuple[str, dict[str, str]]:
    """The shell steps the entrypoint runs before NeMo-RL, and NeMo-RL's overrides (key -> last value)."""
    shell, sep, command = entrypoint.rpartition(" && ")
    shell, cd, _ = shell.rpartition("cd ")
    argv = list(_split(command)) if sep else []
    if not cd or len(argv) < 2 or argv[0] != "python":
        raise EntrypointError(f"not a job builder's entrypoint: {entrypoint[-300:]!r}")
    overrides: dict[str, str] = {}
    for token in argv[2:]:
        key, eq, value = token.lstrip("+").partition("=")
        if eq:
            overrides[key] = value
    return shell.rstrip().rstrip(";"), overrides


def run_shell_steps(shell: str) -> tuple[int, str]:
    """Run the entrypoint's steps before NeMo-RL as the Ray job's shell would (its exit status and output);
    `python` is this venv's, as NeMo-RL's image has its own on the PATH. A lone `python -c PROGRAM ARGS || exit $?`
    (the job builder's checkpoint step) runs in this process: the same program on the same files, without a
    Python start per attempt (~0.1 s, hundreds of attempts)."""
    if not shell.strip():
        return 0, ""
    words = list(_split(shell))
    if len(words) >= 6 and words[:2] == ["python", "-c"] and words[-3:] == ["||", "exit", "$?"]:
        if not any(w in (";", "&&", "||", "|", "&") or w.startswith("$") for w in words[3:-3]):
            return _run_python(words[2], words[3:-3])
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    done = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, env=env, timeout=120)
    return done.returncode, (done.stdout + done.stderr)[-2000:]


@dataclass
class Trainer:
    """The driver of one training attempt: where it is, and the save it has in flight."""

    ckpt: Path
    total: int
    period: int
    step_s: float
    write_s: float
    is_async: bool
    shell: str = ""
    """The entrypoint's steps before NeMo-RL (the legacy move, the set-aside of an unfinished step_N)."""
    config: str = ""
    """The run's config as NeMo-RL saves it with every step (`config.yaml`, `init_tmp_checkpoint`)."""
    step: int = 0
    resumed: int = 0
    resumed_whole: bool = True
    next_at: float = 0.0
    save_step: Optional[int] = None
    save_done_at: float = 0.0
    fail_save: bool = False
    lease_s: Optional[float] = None
    """`checkpointing.checkpoint_must_save_by` in seconds (an attempt on fewer nodes, `recovery.shrink`)."""
    loop_start: float = 0.0
    lease_over: bool = False
    log: list[str] = field(default_factory=list)

    def start(self, now: float) -> Optional[str]:
        """Run the shell steps, then resume as NeMo-RL does; the failure's output when a shell step failed."""
        code, output = run_shell_steps(self.shell)
        self.log.extend(line for line in output.splitlines() if line)
        if code != 0:
            return f"the entrypoint's shell steps exited {code}: {output[-500:]}"
        self.resumed = nemo_rl_resume_step(self.ckpt)
        self.resumed_whole = not self.resumed or is_whole(self.ckpt / f"step_{self.resumed}")
        self.step, self.next_at, self.loop_start = self.resumed + 1, now + self.step_s, now
        self.log.append(f"resumed from step_{self.resumed}" if self.resumed else "no checkpoint: from step 0")
        self.banner()
        return None

    def banner(self) -> None:
        self.log.append(f"{'=' * 25} Step {self.step}/{self.total} {'=' * 25}")

    def save_in_flight(self) -> bool:
        return self.save_step is not None

    def advance(self, now: float) -> Optional[str]:
        """Run until `now`; 'succeeded', 'failed' (the save failed) or None (still running)."""
        while True:
            if self.save_step is not None:
                if now < self.save_done_at:
                    return None
                if self.fail_save:
                    self.log.append("OSError: [Errno 5] Input/output error (checkpoint write)")
                    return "failed"
                self._finish_save(self.save_step)
                self.save_step = None
                if self.lease_over:  # grpo.py: saved at the deadline, then stops (the job succeeds)
                    self.log.append(LEASE_ENDED_LINE)
                    return "succeeded"
                if self.step > self.total:
                    return "succeeded"
                self.next_at = now + self.step_s
                continue
            if now < self.next_at:
                return None
            done = self.step
            self.step += 1
            # NeMo-RL's `TimeoutChecker`: the step's end plus a step past the deadline saves and stops.
            self.lease_over = self.lease_s is not None and now - self.loop_start + self.step_s > self.lease_s
            if done % self.period == 0 or done == self.total or self.lease_over:
                self._begin_save(done, now)
                continue
            if self.step > self.total:
                return "succeeded"
            self.banner()
            self.next_at += self.step_s

    def _begin_save(self, step: int, now: float) -> None:
        tmp = self.ckpt / f"tmp_step_{step}"
        tmp.mkdir(parents=True, exist_ok=True)
        (tmp / "training_info.json").write_text(json.dumps({"step": step}))
        if self.config:
            (tmp / "config.yaml").write_text(self.config)
        if self.is_async:  # grpo.py renames as soon as save_checkpoint returns
            self._rename(step)
        self.save_step, self.save_done_at = step, now + self.write_s
        if self.step <= self.total:
            self.banner()

    def _finish_save(self, step: int) -> None:
        tmp = self.ckpt / f"tmp_step_{step}"
        (tmp / WHOLE_MARK).parent.mkdir(parents=True, exist_ok=True)
        (tmp / WHOLE_MARK).write_text("{}")
        if not self.is_async:
            self._rename(step)

    def _rename(self, step: int) -> None:
        final = self.ckpt / f"step_{step}"
        if final.exists():
            shutil.rmtree(final)
        (self.ckpt / f"tmp_step_{step}").rename(final)


@dataclass
class SimJob:
    submission_id: str
    entrypoint: str
    metadata: dict[str, str]
    runtime_env: dict[str, Any]
    start_ms: int
    status: str = "PENDING"
    end_ms: Optional[int] = None
    exit_code: Optional[int] = None
    message: str = ""
    trainer: Optional[Trainer] = None
    gate_ok: Optional[bool] = None
    log: str = ""

    def details(self) -> JobDetails:
        ended = self.status not in ACTIVE
        return JobDetails(
            type="SUBMISSION",
            entrypoint=self.entrypoint,
            status=self.status,
            message=self.message,
            error_type=None,
            driver_exit_code=self.exit_code if ended else None,
            start_time=self.start_ms,
            end_time=self.end_ms if ended else None,
            submission_id=self.submission_id,
            metadata=dict(self.metadata),
            runtime_env=self.runtime_env,
        )

    def text(self) -> str:
        return "\n".join(self.trainer.log) + "\n" if self.trainer is not None else self.log


class _Response:
    def __init__(self, rows: list[dict[str, Any]]):
        self.status_code, self._rows = 200, rows

    def json(self) -> dict[str, Any]:
        return {"data": {"result": {"result": self._rows}}}


class SimRay:
    """The simulated head; `world` (the soak's run) is told of every submission and stop (`on_submit`)."""

    def __init__(self, world: Any, address: str, gpu_nodes: int, rng: random.Random):
        self.world, self.address, self.rng = world, address, rng
        self.jobs: dict[str, SimJob] = {}
        self.nodes: list[dict[str, Any]] = [self._node("head", gpus=0)]
        self.bad_node: Optional[str] = None
        self.serial = 0
        for _ in range(gpu_nodes):
            self.add_gpu_node()

    def _node(self, name: str, gpus: int) -> dict[str, Any]:
        return {
            "node_id": name,
            "is_head_node": name == "head",
            "start_time_ms": self.world.now_ms(),
            "node_ip": f"10.0.0.{len(getattr(self, 'nodes', [])) + 1}",
            "state": "ALIVE",
            "resources_total": {"CPU": 8.0, **({"GPU": float(gpus)} if gpus else {})},
            "end_time_ms": None,
            "state_message": "",
        }

    def add_gpu_node(self) -> str:
        self.serial += 1
        node = self._node(f"gpu-{self.serial}", gpus=8)
        self.nodes.append(node)
        return node["node_id"]

    def alive_gpu_nodes(self) -> list[str]:
        return sorted(n["node_id"] for n in self.nodes if n["state"] == "ALIVE" and n["resources_total"].get("GPU"))

    def restart_head(self, back_ms: int) -> None:
        """The head pod restarts without GCS fault tolerance: the job table is gone (the drivers with it); the
        new head's node row starts when it is back."""
        self.jobs.clear()
        self.nodes[0]["start_time_ms"] = back_ms

    def kill_node(self, node_id: str, now_ms: int) -> None:
        for n in self.nodes:
            if n["node_id"] == node_id:
                n.update(state="DEAD", end_time_ms=now_ms, state_message="raylet received SIGTERM (preempted)")

    # ------------------------------------------------------------------ the client's surface

    def get_address(self) -> str:
        return self.address

    def list_jobs(self) -> list[JobDetails]:
        self.world.maybe_api_fault("list_jobs")
        return [j.details() for j in self.jobs.values()]

    def get_job_info(self, job_id: str) -> JobDetails:
        if job_id not in self.jobs:
            raise RuntimeError(f"Request failed with status code 404: Job {job_id} does not exist.")
        return self.jobs[job_id].details()

    def get_job_logs(self, job_id: str) -> str:
        return self.get_job_info(job_id) and self.jobs[job_id].text()

    def stop_job(self, job_id: str) -> bool:
        job = self.jobs.get(job_id)
        if job is None:
            raise RuntimeError(f"Request failed with status code 404: Job {job_id} does not exist.")
        if job.status not in ACTIVE:
            return False
        self.world.on_stop(job)
        self.end(job, "STOPPED", None, "Job was intentionally stopped.")
        return True

    def delete_job(self, job_id: str) -> bool:
        return self.jobs.pop(job_id, None) is not None

    def _do_request(self, method: str, path: str, **_: Any) -> _Response:
        self.world.maybe_api_fault("nodes")
        return _Response([dict(n) for n in self.nodes])

    def submit_job(self, *, entrypoint: str, submission_id: str, runtime_env: Any = None, metadata: Any = None) -> str:
        if submission_id in self.jobs:
            raise RuntimeError(
                "Request failed with status code 500: Traceback (most recent call last):\n"
                '  File "ray/dashboard/modules/job/job_head.py", line 390, in submit_job\n'
                f"ValueError: Job with submission_id {submission_id} already exists. "
                "Please use a different submission_id.\n."
            )
        meta = dict(metadata or {})
        job = SimJob(submission_id, entrypoint, meta, dict(runtime_env or {}), self.world.now_ms())
        if META_GATE in meta:
            job.gate_ok = self.bad_node is None or self.bad_node not in meta.get(META_GATE_NODES, "").split(",")
        elif META_STACK in meta:
            job.trainer = self.world.new_trainer(entrypoint)
        self.world.on_submit(job)
        self.jobs[submission_id] = job
        return submission_id

    # ------------------------------------------------------------------ the drivers

    def end(self, job: SimJob, status: str, exit_code: Optional[int], message: str) -> None:
        job.status, job.exit_code, job.message, job.end_ms = status, exit_code, message, self.world.now_ms()

    def tick(self, now: float) -> None:
        for job in list(self.jobs.values()):
            if job.status == "PENDING" and self.world.now_ms() - job.start_ms >= 5000:
                job.status = "RUNNING"
                failed = job.trainer.start(now) if job.trainer is not None else None
                if failed is not None:
                    self.end(job, "FAILED", 1, failed)
                    continue
            if job.status != "RUNNING":
                continue
            if job.trainer is not None:
                outcome = job.trainer.advance(now)
                if outcome == "succeeded":
                    self.end(job, "SUCCEEDED", 0, "Job finished successfully.")
                elif outcome == "failed":
                    self.end(job, "FAILED", 1, "Traceback (most recent call last):\n" + job.text()[-2000:])
            elif job.gate_ok is not None and self.world.now_ms() - job.start_ms >= 60_000:
                self._end_gate(job)
            elif job.gate_ok is None and META_GATE_FOR not in job.metadata and job.trainer is None:
                self.end(job, "SUCCEEDED", 0, "Job finished successfully.")  # the destroy mark's `true`

    def _end_gate(self, job: SimJob) -> None:
        nodes = job.metadata.get(META_GATE_NODES, "")
        check = Check("gpus", bool(job.gate_ok), f"{'all' if job.gate_ok else 'not all'} GPUs healthy on {nodes}")
        job.log = RESULT_MARKER + json.dumps(GateReport((check,), 30.0, 2).to_dict()) + "\n"
        self.end(job, "SUCCEEDED", 0, "Job finished successfully.")
