"""The in-cluster watcher's command (`python -m workloads.watcher`, workloads/watcher.py): run from the
files its ConfigMap ships, with Pulumi, `infra` and the CLI unimportable, against the local Ray head.
The watch loop itself is tests/test_owner_loop.py; the CLI's `watch`, tests/test_jobctl.py.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time

import pytest
from gate_support import python_job
from ray_head import JOB_TIMEOUT

from infra.watcher_deployment import RUN_KEY, SPEC_KEY, UNPACK_SCRIPT, archive, config_map_data, watcher_files
from workloads import submit as jobs
from workloads import watcher
from workloads.recovery import RecoveryPolicy
from workloads.run_owner import RunPlan

pytestmark = pytest.mark.filterwarnings("ignore:ssl=None is deprecated:DeprecationWarning")

FAST = RecoveryPolicy(check_interval_seconds=0.2, max_restarts=2, backoff_seconds=0, max_backoff_seconds=0)

BLOCK_WHAT_THE_IMAGE_LACKS = """
import importlib.abc, runpy, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('pulumi', 'pulumi_gcp', 'pulumi_kubernetes', 'infra', 'jobctl', 'tools'):
            raise ImportError(f'{name} is not in the watcher image')
sys.meta_path.insert(0, Block())
sys.argv = ['workloads.watcher'] + sys.argv[1:]
runpy.run_module('workloads.watcher', run_name='__main__', alter_sys=True)
"""


def test_the_pod_command_runs_from_what_the_init_container_unpacks_from_the_configmap_alone(client, head, tmp_path):
    # SIGTERM: its pod stopped (a SIGKILL of a driver on the head is its out-of-memory kill, not restarted).
    spec = python_job("t-pod", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)")
    data = config_map_data(spec, RunPlan(recovery=FAST.to_dict()))
    (tmp_path / "workloads.zip").write_bytes(archive(watcher_files()))
    code = tmp_path / "code"
    # The init container's own command, on the archive the ConfigMap carries.
    subprocess.run([sys.executable, "-S", "-c", UNPACK_SCRIPT, tmp_path / "workloads.zip", code], check=True)
    (tmp_path / SPEC_KEY).write_text(data[SPEC_KEY])
    (tmp_path / RUN_KEY).write_text(data[RUN_KEY])
    jobs.submit_attempt(client, spec, 1)
    jobs.wait(client, spec.submission_id, timeout=JOB_TIMEOUT, poll_interval=0.2)
    heartbeat = tmp_path / "heartbeat"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RAY_ADDRESS")}
    env.update(PYTHONPATH=str(code), PYTHONDONTWRITEBYTECODE="1")
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            BLOCK_WHAT_THE_IMAGE_LACKS,
            "--address",
            head.address,
            "--spec-file",
            str(tmp_path / SPEC_KEY),
            "--run-file",
            str(tmp_path / RUN_KEY),
            "--once",
            "--heartbeat-file",
            str(heartbeat),
        ],
        cwd=code,
        env=env,
        capture_output=True,
        text=True,
        timeout=JOB_TIMEOUT,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"resubmitted as {spec.submission_id}-r2" in proc.stdout, proc.stdout
    assert heartbeat.exists()
    assert [j.submission_id for j in jobs.list_jobs(client, "t-pod")][-1] == f"{spec.submission_id}-r2"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--spec-file", "spec.json"], "error: the following arguments are required: --address\n"),
        (["--address", "http://127.0.0.1:8265"], "error: the following arguments are required: --spec-file\n"),
        (
            ["--address", "http://127.0.0.1:8265", "--spec-file", "{missing}"],
            "error: --spec-file {missing}: not found; allowed: a regular file of at most 1048576 bytes\n",
        ),
        (
            ["--address", "http://127.0.0.1:8265", "--spec-file", "{spec}", "--run-file", "{missing}", "--once"],
            "error: --run-file {missing}: not found; allowed: a regular file of at most 1048576 bytes\n",
        ),
        (
            ["--address", "ftp://127.0.0.1:8265", "--spec-file", "{spec}", "--once"],
            "error: --address ftp://127.0.0.1:8265: scheme 'ftp' is not allowed; allowed: http, https\n",
        ),
        (
            ["--address", "http://127.0.0.1:8265", "--spec-file", "{spec}", "--run-file", "{bad_policy}", "--once"],
            "error: watch: max backoff must be at least the backoff\n",
        ),
        (
            ["--address", "http://127.0.0.1:8265", "--spec-file", "{spec}", "--max-restarts", "3"],
            "error: unrecognized arguments: --max-restarts 3\n",
        ),
        (
            ["--address", "http://127.0.0.1:8265", "--spec-file", "{spec}", "--check-interval", "0"],
            "error: argument --check-interval: '0' is not allowed; allowed: a number of seconds above 0\n",
        ),
    ],
)
def test_a_command_the_watcher_cannot_run_is_one_line_and_exit_2(argv, message, tmp_path):
    spec = tmp_path / "spec.json"
    spec.write_text(config_map_data(python_job("t-args", "pass"))[SPEC_KEY])
    bad_policy = tmp_path / "run.json"
    bad_policy.write_text(json.dumps(RunPlan(recovery={"backoff_seconds": 9, "max_backoff_seconds": 1}).to_dict()))
    paths = {"missing": str(tmp_path / "missing.json"), "spec": str(spec), "bad_policy": str(bad_policy)}
    out, err = io.StringIO(), io.StringIO()
    assert watcher.main([a.format(**paths) for a in argv], out=out, err=err) == 2
    assert (out.getvalue(), err.getvalue()) == ("", message.format(**paths))


def test_the_gang_wait_runs_only_in_a_cluster_pod_and_says_so_in_one_line_where_it_cannot(monkeypatch):
    from workloads.run_owner import RunPlan

    out = io.StringIO()
    assert watcher.gang_view(RunPlan(), out) is None and out.getvalue() == "", "no gpuPool.capacity: no gang wait"
    # The day-2 CLI's RunPlan names no RayCluster (infra.run_plan without the Ray component).
    assert watcher.gang_view(RunPlan(gang_max_wait_minutes=90), out) is None
    in_pod = RunPlan(gang_max_wait_minutes=90, ray_namespace="nemo-rl", ray_cluster="nemo-rl", ray_worker_group="gpu")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert watcher.gang_view(in_pod, out) is None
    assert out.getvalue().splitlines() == [
        "no gang wait (gpuPool.capacity.maxWaitMinutes 90): the run plan names no RayCluster (the day-2 CLI's watch "
        "has no gang wait); attempts are submitted once the pool's GPUs are alive in Ray",
        "no gang wait (gpuPool.capacity.maxWaitMinutes 90): no in-cluster Kubernetes API here (KeyError: "
        "'KUBERNETES_SERVICE_HOST'); attempts are submitted once the pool's GPUs are alive in Ray",
    ]


def test_the_heartbeat_stays_fresh_while_the_watcher_waits_for_an_unreachable_head(tmp_path):
    """The liveness probe fails once the heartbeat is older than `heartbeat_limit`. Each fake sleep ages the
    file past that bound (as a long image pull would); every next try must find it fresh again."""
    from infra.watcher_deployment import heartbeat_limit

    heartbeat = tmp_path / "heartbeat"
    limit = heartbeat_limit(FAST)
    tries: list[float] = []

    def sleep(_seconds: float) -> None:
        old = time.time() - 10 * limit
        os.utime(heartbeat, (old, old))

    def connect():
        age = time.time() - heartbeat.stat().st_mtime
        tries.append(age)
        assert age <= limit, f"heartbeat {age:.0f} s old on try {len(tries)}: the liveness probe would restart the pod"
        if len(tries) < 4:
            raise jobs.DashboardUnreachable("http://127.0.0.1:1")
        return "client"

    heartbeat.touch()
    out = io.StringIO()
    assert watcher._connect_until_reachable(connect, FAST, heartbeat, out, sleep=sleep) == "client"
    assert len(tries) == 4
    assert out.getvalue().count("waiting for the Ray dashboard") == 1
