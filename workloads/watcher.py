"""The preemption watcher's command, run in the cluster by the PreemptionWatcher Deployment:

    python -m workloads.watcher --address URL --spec-file PATH --run-file PATH
        [--heartbeat-file PATH] [--state-file PATH] [--once] [--check-interval S]

It watches the spec file's job and resubmits it after a spot preemption (`workloads/recovery/`). All it
knows of the run comes from `--run-file` (`RunPlan`, the ConfigMap's run.json); the other flags are the
ones a person types. `python -m jobctl watch` runs the same loop without the gang wait. Only `workloads`
modules may be imported: infra/watcher_deployment.py ships exactly those it imports. Exit codes:
`workloads/exit_codes.py`.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
import time
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, TextIO

from workloads import cli_args, exit_codes, recovery
from workloads.job_types import JobSpec
from workloads.run_owner import RunPlan

if TYPE_CHECKING:
    from workloads.gang_wait import GangView


def add_watch_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--once", action="store_true", help="look once, act if needed, print the decision and exit")
    p.add_argument(
        "--check-interval",
        type=cli_args.seconds(positive=True),
        help="seconds between looks; default the run plan's (recovery.checkIntervalSeconds)",
    )
    # `''` (an unset variable) is refused, not read as "no file": without a run file the defaults would apply.
    heartbeat_help = "file touched after every look (for a liveness probe)"
    p.add_argument("--heartbeat-file", type=cli_args.file_path, help=heartbeat_help)
    state_help = "where the watcher keeps what it saw, to survive its own and the head's restarts"
    p.add_argument("--state-file", type=cli_args.file_path, help=state_help)
    p.add_argument(
        "--run-file",
        type=cli_args.file_path,
        metavar="PATH",
        help="RunPlan JSON: recovery policy, gate, checkpoint dir, price, budget (the in-cluster watcher's run.json)",
    )


def policy_of(run: RunPlan, args: argparse.Namespace) -> recovery.RecoveryPolicy:
    """The run plan's recovery policy with `--check-interval`; a value it refuses is a usage error."""
    try:
        policy = recovery.RecoveryPolicy.from_dict(run.recovery)
        if args.check_interval is not None:
            policy = dataclasses.replace(policy, check_interval_seconds=args.check_interval)
    except (ValueError, TypeError) as err:
        raise cli_args.UsageError(f"watch: {err}") from None
    return policy


def load_run_file(path: Optional[str]) -> RunPlan:
    return _read_json("--run-file", path, "run.json", _run_plan) if path else RunPlan()


def _run_plan(data: dict) -> RunPlan:
    """The run plan of run.json, each field of its type (a node count as text or a list for the recovery policy
    would fail later, mid-run, as a traceback); the shape check is the ledger's (`ledger._fits`)."""
    from workloads.ledger import _fits

    hints = typing.get_type_hints(RunPlan)
    for name, value in data.items():
        hint = hints.get(name)
        if typing.get_origin(hint) is dict and Any in typing.get_args(hint):  # `_fits` takes no Any: a map is a map
            hint = dict
        if hint is not None and name != "gang_rungs" and not _fits(value, hint):
            raise ValueError(f"{name}: {type(value).__name__} is not allowed; allowed: {_type_name(hint)}")
    rungs = data.get("gang_rungs") or []
    if not isinstance(rungs, list) or not all(isinstance(r, list) and len(r) == 2 for r in rungs):
        raise ValueError("gang_rungs: allowed: a list of [node pool, rung] pairs")
    return RunPlan.from_dict(data)


def _type_name(hint: Any) -> str:
    return str(hint).replace("typing.", "").replace("NoneType", "null")


def _read_json(flag: str, path: str, what: str, build: Callable[[dict], Any]) -> Any:
    """`build` of a JSON object file the flag names; anything else is one line naming the flag."""
    try:
        # The bounded reader of user-named files: a FIFO or /dev/zero is refused, not waited on or read forever;
        # NaN, Infinity and 1e309 are refused as JSON refuses them.
        data = cli_args.loads_json(cli_args.read_user_file(path))
        if not isinstance(data, dict):
            raise ValueError(f"not a JSON object; allowed: the {what} of the watcher's ConfigMap")
        return build(data)
    except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError) as err:
        if isinstance(err, KeyError):  # its message is the bare key
            reason = f"no field {err.args[0]!r}; allowed: the {what} of the watcher's ConfigMap"
        else:
            reason = str(err).splitlines()[0] if str(err).strip() else type(err).__name__
        raise exit_codes.CommandError(f"{flag} {path}: {reason}") from None


def check_state_file(path: Optional[str]) -> None:
    """`--state-file` names a regular file or a path not there yet (the watcher writes it by rename); a FIFO, a
    device or a directory is one line before anything runs (the read would wait on a FIFO, or read /dev/zero for
    ever; the write by rename would replace a FIFO another program reads)."""
    if path is None:
        return
    if not os.path.lexists(path):
        return
    try:
        cli_args.read_user_file(path)
    except cli_args.UnreadableFile as err:
        raise exit_codes.CommandError(f"--state-file {path}: {err}") from None


def _in_cluster(run: RunPlan) -> tuple[Optional["GangView"], str]:
    """A `KubeGangView` of the run's worker group as this pod's service account, or None and why not."""
    from workloads.gang_wait import KubeGangView

    assert run.ray_namespace and run.ray_cluster and run.ray_worker_group
    try:
        return KubeGangView.in_cluster(run.ray_namespace, run.ray_cluster, run.ray_worker_group), ""
    except (KeyError, OSError) as err:  # no KUBERNETES_SERVICE_HOST, no token file
        return None, f"no in-cluster Kubernetes API here ({type(err).__name__}: {err})"


def gang_view(run: RunPlan, out: TextIO) -> Optional["GangView"]:
    """The gang wait's `KubeGangView`, or None (no gang wait, or not in a pod: one line says so)."""
    if run.gang_max_wait_minutes is None:
        return None
    view, why = (
        _in_cluster(run)
        if run.gang_wait
        else (None, "the run plan names no RayCluster (the day-2 CLI's watch has no gang wait)")
    )
    if view is None:
        out.write(
            f"no gang wait (gpuPool.capacity.maxWaitMinutes {run.gang_max_wait_minutes}): {why}; attempts are "
            "submitted once the pool's GPUs are alive in Ray\n"
        )
    return view


def worker_release(run: RunPlan, gang: Optional["GangView"], out: TextIO) -> Optional["GangView"]:
    """What releases the workers when the run ends: the gang view, else a `KubeGangView`; None: off or not in a pod."""
    if not run.releases_workers:
        return None
    view, why = (gang, "") if gang is not None else _in_cluster(run)
    if view is None:
        out.write(f"workers are not released when the run ends: {why}\n")
    return view


def watch(
    connect: Callable[[], Any],
    spec: JobSpec,
    args: argparse.Namespace,
    out: TextIO,
    run: Optional[RunPlan] = None,
) -> int:
    """Watch `spec`'s job on the dashboard `connect` reaches; `run` defaults to `--run-file`'s."""
    run = run if run is not None else load_run_file(args.run_file)
    policy = policy_of(run, args)
    check_state_file(args.state_file)
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
    """The watcher may start before the Ray head: keep trying, touching the heartbeat before every try (the
    head may wait for its image longer than the liveness probe's bound, `heartbeat_limit`)."""
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
    p.add_argument(
        "--spec-file", required=True, type=cli_args.file_path, metavar="PATH", help="the JobSpec JSON to watch"
    )
    add_watch_flags(p)
    return p


def main(argv: Optional[list[str]] = None, out: Optional[TextIO] = None, err: Optional[TextIO] = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    # Ray's job SDK logs every websocket close at INFO; the watcher prints what matters itself.
    logging.getLogger("ray.dashboard.modules.job.sdk").setLevel(logging.WARNING)

    def body() -> int:
        args = parser().parse_args(argv)
        spec = _read_json("--spec-file", args.spec_file, "spec.json", JobSpec.from_dict)
        return watch(lambda: connect_address(args.address), spec, args, out)

    return exit_codes.run(body, err)


if __name__ == "__main__":
    sys.exit(main())
