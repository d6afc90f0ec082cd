"""The soak's faults that are about Ray itself, on a real private Ray head on loopback
(`tests.local_ray_head`): a second submitter of the same attempt id, a stop, and the driver killed by
SIGTERM, each against a fake trainer run as a real Ray job (steps of 0.2 s, synchronous saves, resuming from
the highest `step_N` as NeMo-RL does). Its spec is its own, not the job builder's: these faults are about Ray's
job table, and the builder's entrypoint needs NeMo-RL's image (its checkout, its `python`); the simulated runs
use the builder's (tests/soak/soak_run.py)."""

from __future__ import annotations

import os
import shlex
import signal
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Callable, Optional

from workloads import submit
from workloads.job_spec import JobSpec
from workloads.job_types import META_SPEC_HASH
from workloads.recovery import Action, RecoveryPolicy, Watcher
from workloads.run_owner import RunPlan

REAL_FAULTS = ("duplicate_submission", "stop", "driver_killed")
JOB_TIMEOUT = 240.0
TRAINER = """
import os, re, sys, time
d, pidf = sys.argv[1], sys.argv[2]
os.makedirs(d, exist_ok=True)
done = sorted(int(n[5:]) for n in os.listdir(d) if re.fullmatch(r'step_[0-9]+', n))
start = done[-1] if done else 0
whole = not done or os.path.exists(os.path.join(d, f'step_{start}', 'policy', 'weights', '.metadata'))
print(f'resumed from step_{start} whole={whole}', flush=True)
open(pidf + '.tmp', 'w').write(str(os.getpid())); os.rename(pidf + '.tmp', pidf)
for step in range(start + 1, 7):
    print('=' * 25, f'Step {step}/6', '=' * 25, flush=True)
    time.sleep(float(os.environ.get('SOAK_STEP_S', '0.2')))
    if step % 2 == 0:
        tmp = os.path.join(d, f'tmp_step_{step}')
        os.makedirs(os.path.join(tmp, 'policy', 'weights'), exist_ok=True)
        open(os.path.join(tmp, 'policy', 'weights', '.metadata'), 'w').write('{}')
        os.rename(tmp, os.path.join(d, f'step_{step}'))
"""
POLICY = RecoveryPolicy(0.2, 2, 0.0, 0.0)


def _spec(workdir: Path, step_s: float) -> JobSpec:
    code = f"{shlex.quote(sys.executable)} -c {shlex.quote(TRAINER)} {workdir / 'ckpt'} {workdir / 'driver.pid'}"
    env = {"env_vars": {"RAY_OVERRIDE_JOB_RUNTIME_ENV": "1", "SOAK_STEP_S": str(step_s), "RUN": uuid.uuid4().hex}}
    return JobSpec.create(stack="soak-real", recipe="grpo", entrypoint=code, runtime_env=env)


def _until(what: str, ok: Callable[[], Any]) -> Any:
    deadline = time.monotonic() + JOB_TIMEOUT
    while time.monotonic() < deadline:
        value = ok()
        if value:
            return value
        time.sleep(0.2)
    raise TimeoutError(f"the real-Ray soak waited {JOB_TIMEOUT:g}s for {what}")


def _ended(client: Any, job_id: str) -> bool:
    return submit.status(client, job_id) in submit.TERMINAL


def play_real(client: Any, fault: str, workdir: Path) -> list[str]:
    """One fault on the real head; the violations it showed."""
    workdir.mkdir(parents=True, exist_ok=True)
    spec = _spec(workdir, 5.0 if fault != "driver_killed" else 0.5)
    job_id, _ = submit.submit_attempt(client, spec, 1)
    pid_file = workdir / "driver.pid"
    _until("the driver's pid", pid_file.exists)
    watcher = Watcher(client, spec, POLICY, run=RunPlan(checkpoint_dir=str(workdir / "ckpt")))
    found: list[str] = []
    try:
        if fault == "duplicate_submission":
            found += _duplicate(client, spec, job_id)
        elif fault == "stop":
            found += _stop(client, watcher, job_id)
        else:
            found += _kill(client, watcher, spec, job_id, int(pid_file.read_text()))
    finally:
        for job in submit.list_jobs(client, spec.stack):
            if job.status not in submit.TERMINAL:
                submit.stop(client, job.submission_id)
    return [f"real Ray, {fault}: {v}" for v in found]


def _duplicate(client: Any, spec: JobSpec, job_id: str) -> list[str]:
    try:
        again, created = submit.submit_attempt(client, spec, 1)
    except submit.JobError as err:
        return [f"a second submitter of {job_id} was not told to adopt it: {err}"]
    return [f"{job_id} was created twice"] if created or again != job_id else []


def _stop(client: Any, watcher: Watcher, job_id: str) -> list[str]:
    stopped_ms = int(time.time() * 1000)
    submit.stop(client, job_id)
    _until(f"{job_id} to stop", lambda: _ended(client, job_id))
    decision = watcher.step()
    # The head is shared by the soak's real runs, each a spec of its own (a `RUN` env var): the earlier runs' jobs,
    # their `-r2` resubmissions too, are older than this stop and not this run's.
    later = [
        j.submission_id
        for j in submit.list_jobs(client, watcher.spec.stack)
        if j.submission_id != job_id
        and (j.metadata.get(META_SPEC_HASH) == watcher.spec.spec_hash or (j.start_time or 0) >= stopped_ms)
    ]
    bad = [] if decision.action is Action.DONE else [f"after a stop the watcher decided {decision.action.value}"]
    return bad + ([f"{', '.join(later)} started after a stop"] if later else [])


def _kill(client: Any, watcher: Watcher, spec: JobSpec, job_id: str, pid: int) -> list[str]:
    time.sleep(1.2)  # a few steps and a save
    os.kill(pid, signal.SIGTERM)
    _until(f"{job_id} to end", lambda: _ended(client, job_id))
    decision: Optional[Any] = _until("the watcher's resubmission", lambda: _resubmitted(watcher))
    if decision.action is not Action.RESUBMIT:
        return [f"after the driver was killed the watcher decided {decision.action.value}: {decision.reason}"]
    second = submit.attempt_id(spec.submission_id, 2)
    _until(f"{second} to end", lambda: _ended(client, second))
    log = "".join(submit.logs(client, second))
    return [] if "whole=True" in log else [f"{second} resumed from a checkpoint that is not whole: {log[:200]}"]


def _resubmitted(watcher: Watcher) -> Any:
    decision = watcher.step()
    return decision if decision.action is not Action.WAIT else None
