"""The preemption watcher's command, run in the cluster by the PreemptionWatcher Deployment:

    python -m workloads.watcher --address URL --spec-file PATH [--once] [--check-interval S]
        [--max-restarts N] [--backoff S] [--max-backoff S] [--pool-gpus N] [--resubmit-missing]
        [--heartbeat-file PATH] [--state-file PATH] [--run-file PATH]

It watches the job of the spec file (`JobSpec` JSON) on the Ray dashboard at `--address` and
resubmits it after a spot preemption (`workloads/preemption.py` has the rules). The policy starts
from `RecoveryPolicy`'s defaults and each flag overrides one value: the Deployment passes the stack's
`recovery` section as flags (`RecoveryPolicy.cli_args`). `--state-file` keeps what it saw across
restarts; `--heartbeat-file` is touched after every look, for the liveness probe. `--run-file` is the
run's plan-time values (`workloads.run_owner.RunPlan`, the ConfigMap's run.json): the gate each
resubmission passes first, where the checkpoints are, the node-hour price and budget of the run ledger,
and the gang wait (`gpuPool.capacity`: the bounded wait for every GPU worker before an attempt,
`workloads/gang_wait.py`), which reads the worker pods through the Kubernetes API with the pod's own
service-account token (`gang_view`).

The day-2 CLI's `watch` (`python -m jobctl watch --stack NAME`) runs the same loop from the user's
machine, on the stack's spec and recovery policy, with the same flags (`add_policy_flags`, `watch`), but
without the gang wait: the Kubernetes API it reads is the in-cluster one.

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

from workloads import cli_args, exit_codes, preemption
from workloads.job_spec import JobSpec
from workloads.run_owner import RunPlan

if TYPE_CHECKING:
    from workloads.gang_wait import GangView


def add_policy_flags(p: argparse.ArgumentParser) -> None:
    """The flags of one watch: each overrides one value of the recovery policy, or says where to keep state."""
    p.add_argument("--once", action="store_true", help="look once, act if needed, print the decision and exit")
    p.add_argument(
        "--check-interval",
        type=cli_args.seconds(positive=True),
        help="seconds between looks; default recovery.checkIntervalSeconds",
    )
    p.add_argument(
        "--max-restarts",
        type=cli_args.non_negative_int,
        help="consecutive automatic restarts; default recovery.maxRestarts",
    )
    p.add_argument(
        "--backoff",
        type=cli_args.seconds(positive=False),
        help="seconds before the first restart, doubling; default recovery.backoffSeconds",
    )
    p.add_argument(
        "--max-backoff",
        type=cli_args.seconds(positive=False),
        help="cap of the doubled wait; default recovery.maxBackoffSeconds",
    )
    p.add_argument("--heartbeat-file", help="file touched after every look (for a liveness probe)")
    p.add_argument(
        "--pool-gpus",
        type=cli_args.non_negative_int,
        metavar="N",
        help="resubmit only when Ray has N GPUs alive; default the stack's pool (0: do not wait)",
    )
    p.add_argument(
        "--resubmit-missing",
        action="store_true",
        help="submit the spec when the cluster has no job of it (job.submit on; default from the stack)",
    )
    p.add_argument(
        "--state-file", help="where the watcher keeps what it saw, to survive its own and the head's restarts"
    )
    p.add_argument(
        "--run-file",
        metavar="PATH",
        help="RunPlan JSON (gate, checkpoint dir, price, budget; the in-cluster watcher's run.json)",
    )


def with_flags(policy: preemption.RecoveryPolicy, args: argparse.Namespace) -> preemption.RecoveryPolicy:
    """`policy` with the values the flags of `add_policy_flags` set; a combination it refuses is a usage error."""
    changes = {
        "check_interval_seconds": args.check_interval,
        "max_restarts": args.max_restarts,
        "backoff_seconds": args.backoff,
        "max_backoff_seconds": args.max_backoff,
        "pool_gpus": args.pool_gpus,
        "resubmit_missing": True if args.resubmit_missing else None,
    }
    try:
        return dataclasses.replace(policy, **{k: v for k, v in changes.items() if v is not None})
    except ValueError as err:
        raise cli_args.UsageError(f"watch: {err}") from None


def load_run_file(path: Optional[str]) -> RunPlan:
    """The `RunPlan` of `--run-file` (the watcher ConfigMap's run.json); none: no gate, no ledger prices."""
    if not path:
        return RunPlan()
    try:
        # The bounded reader of user-named files: a FIFO or /dev/zero is refused, not waited on or read forever.
        data = json.loads(cli_args.read_user_file(path))
        if not isinstance(data, dict):
            raise ValueError("not a JSON object; allowed: the run.json of the watcher's ConfigMap")
        return RunPlan.from_dict(data)
    except (ValueError, TypeError, AttributeError, RecursionError) as err:
        raise exit_codes.CommandError(f"--run-file {path}: {str(err).splitlines()[0]}") from None


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


def watch(
    connect: Callable[[], Any],
    spec: JobSpec,
    policy: preemption.RecoveryPolicy,
    args: argparse.Namespace,
    out: TextIO,
    run: Optional[RunPlan] = None,
) -> int:
    """Watch `spec`'s job on the dashboard `connect` reaches, under `policy` and the flags of `add_policy_flags`;
    `run` (default: `--run-file`'s) gates each resubmission, bounds its gang wait and prices the run ledger."""
    run = run if run is not None else load_run_file(args.run_file)
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
    preemption.watch(
        client, spec, policy, once=args.once, out=out, heartbeat=heartbeat, state=state, run=run, gang=gang
    )
    return exit_codes.OK


def _connect_until_reachable(
    connect: Callable[[], Any], policy: preemption.RecoveryPolicy, heartbeat: Optional[Path], out: TextIO
) -> Any:
    """The watcher may start before the Ray head (or outlive a head restart): keep trying."""
    # Lazily: the CLI's parser imports this module, and `python -m jobctl submit --dry-run` never loads Ray.
    from workloads import submit

    reported = False
    while True:
        if heartbeat is not None:
            preemption._touch(heartbeat)
        try:
            return connect()
        except (submit.DashboardUnreachable, submit.DashboardError) as err:
            if not reported:
                out.write(f"waiting for the Ray dashboard: {err}\n")
                out.flush()
                reported = True
            time.sleep(policy.check_interval_seconds)


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
    add_policy_flags(p)
    return p


def _load_spec(path: str) -> JobSpec:
    try:
        return preemption.load_spec_file(path)
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
        policy = with_flags(preemption.RecoveryPolicy(), args)
        return watch(lambda: connect_address(args.address), spec, policy, args, out)

    return exit_codes.run(body, err)


if __name__ == "__main__":
    sys.exit(main())
