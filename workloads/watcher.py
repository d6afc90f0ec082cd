"""The preemption watcher's command, run in the cluster by the PreemptionWatcher Deployment:

    python -m workloads.watcher --address URL --spec-file PATH --run-file PATH
        [--heartbeat-file PATH] [--state-file PATH] [--once] [--check-interval S]

It watches the job of the spec file (`JobSpec` JSON) on the Ray dashboard at `--address` and
resubmits it after a spot preemption (`workloads/recovery/` has the rules). Everything it is told about
the run comes from ONE file, `--run-file`: the run's plan-time values (`workloads.run_owner.RunPlan`, the
ConfigMap's run.json, built once by `infra.run_plan.run_plan_for_stack`): the recovery policy (check
interval, restarts, backoff, the pool's GPUs to wait for, whether a missing job is submitted), the gate
each resubmission passes first, where the checkpoints are, the node-hour price and budget of the run
ledger, and the gang wait (`gpuPool.capacity`: the bounded wait for every GPU worker before an attempt,
`workloads/gang_wait.py`), which reads the worker pods through the Kubernetes API with the pod's own
service-account token (`gang_view`). Without `--run-file`: the policy's defaults, no gate, no prices.

The other flags are the ones a person types: where the dashboard and the files are, `--state-file`
(what it saw, kept across restarts), `--heartbeat-file` (touched after every look, for the liveness
probe), `--once` (look once, act if needed, print the decision and exit: to see what the watcher would
do) and `--check-interval` (look more or less often while you watch it yourself). The restart cap, the
backoff and the GPUs to wait for are the stack's (`recovery.*`, `gpuPool`, `job.submit`): change them in
the stack file, which `pulumi up` and `python -m jobctl watch` both read.

The day-2 CLI's `watch` (`python -m jobctl watch --stack NAME`) runs the same loop from the user's
machine, on the run plan `pulumi up` ships (`run_plan_for_stack`, or `--run-file`), with the same flags
(`add_watch_flags`, `watch`), but without the gang wait: the Kubernetes API it reads is the in-cluster one.

What ships: `infra/watcher_deployment.py` puts this module and exactly the `workloads` modules it
imports (lazy imports included) into the watcher's ConfigMap, so only an edit to one of those rolls
the pod. Nothing outside `workloads` may be imported here: the NeMo-RL image has no Pulumi and no
`infra` (tests/test_watcher.py runs the shipped files that way).

Exit codes: `workloads/exit_codes.py`.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, TextIO

from workloads import cli_args, exit_codes, recovery
from workloads.job_types import JobSpec
from workloads.run_owner import RunPlan

if TYPE_CHECKING:
    from workloads.gang_wait import GangView


def add_watch_flags(p: argparse.ArgumentParser) -> None:
    """The flags of one watch a person types (the module docstring says why no others)."""
    p.add_argument("--once", action="store_true", help="look once, act if needed, print the decision and exit")
    p.add_argument(
        "--check-interval",
        type=cli_args.seconds(positive=True),
        help="seconds between looks; default the run plan's (recovery.checkIntervalSeconds)",
    )
    p.add_argument("--heartbeat-file", help="file touched after every look (for a liveness probe)")
    p.add_argument(
        "--state-file", help="where the watcher keeps what it saw, to survive its own and the head's restarts"
    )
    p.add_argument(
        "--run-file",
        metavar="PATH",
        help="RunPlan JSON: recovery policy, gate, checkpoint dir, price, budget (the in-cluster watcher's run.json)",
    )


def policy_of(run: RunPlan, args: argparse.Namespace) -> recovery.RecoveryPolicy:
    """The run plan's recovery policy with `--check-interval`, if given; a value it refuses is a usage error."""
    try:
        policy = recovery.RecoveryPolicy.from_dict(run.recovery)
        if args.check_interval is not None:
            policy = dataclasses.replace(policy, check_interval_seconds=args.check_interval)
    except (ValueError, TypeError) as err:
        raise cli_args.UsageError(f"watch: {err}") from None
    return policy


def load_run_file(path: Optional[str]) -> RunPlan:
    """The `RunPlan` of `--run-file` (the watcher ConfigMap's run.json); none: no gate, no ledger prices."""
    if not path:
        return RunPlan()
    try:
        return RunPlan.from_dict(json.loads(Path(path).read_text()))
    except (OSError, ValueError, TypeError) as err:
        raise exit_codes.CommandError(f"--run-file {path}: {err}") from None


def gang_view(run: RunPlan, out: TextIO) -> Optional["GangView"]:
    """The gang wait's view of the worker pods (`KubeGangView`, the Kubernetes API as this pod's service
    account), or None: the stack has no gang wait, or this is not a pod of the cluster (then one line says
    that attempts are submitted without it, once the pool's GPUs are alive in Ray)."""
    if run.gang_max_wait_minutes is None:
        return None
    from workloads.gang_wait import KubeGangView

    why = "the run plan names no RayCluster (the day-2 CLI's watch has no gang wait)"
    if run.gang_wait:
        assert run.ray_namespace and run.ray_cluster and run.ray_worker_group
        try:
            return KubeGangView.in_cluster(run.ray_namespace, run.ray_cluster, run.ray_worker_group)
        except (KeyError, OSError) as err:  # no KUBERNETES_SERVICE_HOST, no token file
            why = f"no in-cluster Kubernetes API here ({type(err).__name__}: {err})"
    out.write(
        f"no gang wait (gpuPool.capacity.maxWaitMinutes {run.gang_max_wait_minutes}): {why}; attempts are "
        "submitted once the pool's GPUs are alive in Ray\n"
    )
    return None


def worker_release(run: RunPlan, gang: Optional["GangView"], out: TextIO) -> Optional["GangView"]:
    """What releases the workers when the run ends (`recovery.releaseWorkersAfterRun`): the gang wait's view
    where there is one (it patches the same RayCluster), else a `KubeGangView` of this pod's service account;
    None: the setting is off, the run plan names no RayCluster (the day-2 CLI's watch), or this is not a pod of
    the cluster (then one line says the workers stay)."""
    if not run.releases_workers:
        return None
    if gang is not None:
        return gang
    from workloads.gang_wait import KubeGangView

    assert run.ray_namespace and run.ray_cluster and run.ray_worker_group
    try:
        return KubeGangView.in_cluster(run.ray_namespace, run.ray_cluster, run.ray_worker_group)
    except (KeyError, OSError) as err:  # no KUBERNETES_SERVICE_HOST, no token file
        out.write(
            f"workers are not released when the run ends: no in-cluster Kubernetes API here ({type(err).__name__}: "
            f"{err})\n"
        )
        return None


def watch(
    connect: Callable[[], Any],
    spec: JobSpec,
    args: argparse.Namespace,
    out: TextIO,
    run: Optional[RunPlan] = None,
) -> int:
    """Watch `spec`'s job on the dashboard `connect` reaches, with the flags of `add_watch_flags`; `run`
    (default: `--run-file`'s) holds the recovery policy, gates each resubmission, bounds its gang wait and
    prices the run ledger."""
    run = run if run is not None else load_run_file(args.run_file)
    policy = policy_of(run, args)
    heartbeat = Path(args.heartbeat_file) if args.heartbeat_file else None
    client = connect() if args.once else _connect_until_reachable(connect, policy, heartbeat, out)
    out.write(
        f"watching {spec.submission_id} on {client.get_address()}: every {policy.check_interval_seconds:g}s, "
        f"at most {policy.max_restarts} restart(s), backoff {policy.backoff_seconds:g}s doubling to "
        f"{policy.max_backoff_seconds:g}s\n"
    )
    out.flush()
    state = Path(args.state_file) if args.state_file else None
    gang = gang_view(run, out)
    release = worker_release(run, gang, out)
    recovery.watch(
        client,
        spec,
        policy,
        once=args.once,
        out=out,
        heartbeat=heartbeat,
        state=state,
        run=run,
        gang=gang,
        release=release,
    )
    return exit_codes.OK


def _connect_until_reachable(
    connect: Callable[[], Any],
    policy: recovery.RecoveryPolicy,
    heartbeat: Optional[Path],
    out: TextIO,
    sleep: Callable[[float], None] = time.sleep,
) -> Any:
    """The watcher may start before the Ray head (or outlive a head restart): keep trying. The heartbeat is
    touched before every try: the head's pod may wait for the ~20 GB NeMo-RL image far longer than the liveness
    probe's bound (infra/watcher_deployment.py `heartbeat_limit`), and a probe that failed then would restart
    the watcher over and over (tests/test_watcher.py holds it)."""
    # Lazily: the CLI's parser imports this module, and `python -m jobctl submit --dry-run` never loads Ray.
    from workloads import submit

    reported = False
    while True:
        if heartbeat is not None:
            recovery.touch(heartbeat)
        try:
            return connect()
        except (submit.DashboardUnreachable, submit.DashboardError) as err:
            if not reported:
                out.write(f"waiting for the Ray dashboard: {err}\n")
                out.flush()
                reported = True
            sleep(policy.check_interval_seconds)


def connect_address(address: str) -> Any:
    """The dashboard client of `--address`; a malformed URL is one line naming the flag."""
    from workloads import submit  # lazily, as in `_connect_until_reachable`

    try:
        return submit.connect(address)
    except submit.InvalidAddress as err:
        raise exit_codes.CommandError(f"--address {err.address}: {err.reason}") from None


def parser() -> argparse.ArgumentParser:
    p = cli_args.OneLineParser(
        prog="python -m workloads.watcher",
        description="Resubmit the spec file's job after a spot preemption (the in-cluster watcher).",
    )
    p.add_argument("--address", required=True, help="Ray dashboard URL, e.g. http://nemo-rl-head-svc.nemo-rl.svc:8265")
    p.add_argument("--spec-file", required=True, metavar="PATH", help="the JobSpec JSON to watch")
    add_watch_flags(p)
    return p


def _load_spec(path: str) -> JobSpec:
    try:
        return recovery.load_spec_file(path)
    except (OSError, ValueError, KeyError) as err:
        raise exit_codes.CommandError(f"--spec-file {path}: {err}") from None


def main(argv: Optional[list[str]] = None, out: Optional[TextIO] = None, err: Optional[TextIO] = None) -> int:
    """Run the watcher; returns the exit code. Errors it cannot recover from print one line."""
    out = out or sys.stdout
    err = err or sys.stderr
    # Ray's job SDK logs every websocket close at INFO; the watcher prints what matters itself.
    logging.getLogger("ray.dashboard.modules.job.sdk").setLevel(logging.WARNING)

    def body() -> int:
        args = parser().parse_args(argv)
        spec = _load_spec(args.spec_file)
        return watch(lambda: connect_address(args.address), spec, args, out)

    return exit_codes.run(body, err)


if __name__ == "__main__":
    sys.exit(main())
