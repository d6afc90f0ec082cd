"""Command line for a stack's training job.

    python -m workloads submit [--stack NAME] [--dry-run] [--gate POLICY] [--wait [--timeout S]]
    python -m workloads gate   [--stack NAME]   (the acceptance gate on demand: GPUs, fabric, Lustre)
    python -m workloads status [--stack NAME] [--job ID] [--wait [--timeout S]] [--ledger-file PATH]
    python -m workloads logs   [--stack NAME] [--job ID] [--follow] [--tail N]
    python -m workloads stop   [--stack NAME] [--job ID]
    python -m workloads list   [--stack NAME]
    python -m workloads watch  [--stack NAME | --spec-file PATH] [--once] [--check-interval S]
                               [--max-restarts N] [--backoff S] [--max-backoff S] [--pool-gpus N]
                               [--resubmit-missing] [--state-file PATH] [--run-file PATH]
    python -m workloads dashboard [--stack NAME] [--port P]   (the Ray dashboard on 127.0.0.1)

The job comes from the stack file (`Pulumi.<stack>.yaml`, default `dev`), built exactly as
`pulumi up` builds it, so both agree on its submission id. Without `--job`, status/logs/stop act
on the stack's newest job.

Where the dashboard is, first match wins:
  --address URL          a dashboard URL, e.g. the one `python -m workloads dashboard` serves;
  --endpoint HOST        the GKE endpoint and --head-service, through the API server's service
                         proxy with your Google credentials; an IP endpoint also needs --ca-file
                         (the DNS endpoint's certificate is publicly trusted);
  pulumi stack output    when the `pulumi` CLI is installed: clusterEndpoint, rayHeadService
                         and (IP endpoint only) clusterCaCertificate of the stack.

`submit --dry-run` prints the submission id, entrypoint and runtime env and touches no network.

`submit` runs the acceptance gate first (`workloads/acceptance_gate.py`, docs/acceptance-gate.md)
when a job is really going to be submitted, under the stack's `job.gate` policy (`--gate` overrides
it once): on `enforce` a failed gate prints one line naming what failed and the numbers, and nothing
is submitted. `gate` runs it on demand and prints its lines, numbers and cost.

`logs --tail N` prints only the last N lines of the log (with --follow: the last N lines, then
the new output as it comes).

`watch` resubmits the job after a spot preemption (`workloads/preemption.py`); the policy comes from
the stack's `recovery` section (the GPUs to wait for from `gpuPool`, `--resubmit-missing` from
`job.submit`), each flag overrides one value; `--state-file` keeps what it saw across restarts. With `--spec-file` (the in-cluster
watcher) the spec is read from that JSON instead of a stack file, `--address` is required, and
nothing outside the `workloads` package is imported (no Pulumi in the Ray image).

Exit codes: 0 ok; 1 the job ended FAILED or STOPPED (with --wait); 2 bad config, unknown job or
usage; 3 the dashboard is unreachable or refused the credentials; 4 --timeout passed; 5 the
acceptance gate failed (`gate`, or `submit` under enforce).
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, TextIO

from workloads import cli_args

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_STACK = "dev"

# Stack outputs the CLI reads when no address is given (the program exports these names).
OUTPUT_ENDPOINT = "clusterEndpoint"
OUTPUT_CA = "clusterCaCertificate"
OUTPUT_HEAD_SERVICE = "rayHeadService"

EXIT_OK, EXIT_JOB_FAILED, EXIT_USAGE, EXIT_UNREACHABLE, EXIT_TIMEOUT, EXIT_GATE_FAILED = 0, 1, 2, 3, 4, 5


class CliError(Exception):
    """A one-line error with its exit code."""

    def __init__(self, message: str, code: int = EXIT_USAGE):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Stack:
    name: str
    config: Any  # infra.config.StackConfig
    secret_keys: frozenset[str]

    @property
    def wandb_key_set(self) -> bool:
        from infra.config import wandb_key_set  # lazily: `watch --spec-file` runs where Pulumi is not installed

        return wandb_key_set(self.secret_keys)


def load_stack(name: str, config_file: Optional[str] = None) -> Stack:
    """Read and validate `Pulumi.<name>.yaml` (or `config_file`) the way the Pulumi program does."""
    from infra.config import ConfigError
    from infra.stack_file import StackFileError
    from infra.stack_file import load_stack as load_stack_file

    try:
        # `pulumi up` would stop here (infra.config.load), so the job must not run either.
        loaded = load_stack_file(name, ROOT, Path(config_file) if config_file else None)
    except StackFileError as err:
        raise CliError(str(err)) from None
    except ConfigError as err:
        raise CliError(str(err).replace("\n", "; ")) from None
    return Stack(name, loaded.config, loaded.secret_keys)


def build_spec(stack: Stack):
    """The stack's job exactly as `pulumi up` builds it (same pool facts, same spec, same id)."""
    from infra.cluster import gpu_pool_facts
    from infra.config import ConfigError
    from infra.stack_context import StackContext
    from infra.training_job import job_spec_for_stack

    pool = gpu_pool_facts(StackContext.from_config(stack.name, stack.config), stack.config)
    try:
        return job_spec_for_stack(stack.name, stack.config, wandb_key_set=stack.wandb_key_set, pool=pool)
    except ConfigError as err:
        raise CliError(str(err)) from None


def gate_plan(stack: Stack):
    """The stack's acceptance gate exactly as `pulumi up` hands it to the job submission."""
    from infra.cluster import gpu_pool_facts
    from infra.gate_plan import gate_plan_for_stack
    from infra.stack_context import StackContext

    return gate_plan_for_stack(stack.config, gpu_pool_facts(StackContext.from_config(stack.name, stack.config), stack.config))


def run_gate(client, stack: Stack, out: TextIO):
    """Run the stack's acceptance gate on the cluster, printing its lines; returns the `GateReport`."""
    from workloads import acceptance_gate

    def show(line: str) -> None:
        out.write(line + "\n")
        out.flush()

    report = acceptance_gate.run_on_cluster(client, gate_plan(stack), label=stack.name, on_line=show)
    for line in report.lines():
        show(line)
    return report


def _stack_outputs(stack: str) -> dict[str, Any]:
    """`pulumi stack output --json` of the stack, or {} when the CLI is missing or fails."""
    if shutil.which("pulumi") is None:
        return {}
    try:
        proc = subprocess.run(
            ["pulumi", "stack", "output", "--json", "--stack", stack],
            cwd=ROOT, capture_output=True, text=True, timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return {}
    if proc.returncode != 0:
        return {}
    try:
        outputs = json.loads(proc.stdout or "{}")
    except json.JSONDecodeError:
        return {}
    return outputs if isinstance(outputs, dict) else {}


@dataclass(frozen=True)
class GkeTarget:
    """Where the Ray dashboard is behind the GKE API server's service proxy."""

    endpoint: str
    service: str
    namespace: str
    ca_file: Optional[str]
    ca_b64: Optional[str]


def gke_target(args: argparse.Namespace, stack: Stack) -> GkeTarget:
    """The endpoint, head service and CA from the flags, else from the stack outputs; checked."""
    from workloads import submit

    endpoint, ca_file, head_service = args.endpoint, args.ca_file, args.head_service
    endpoint_source = "--endpoint"
    ca_b64: Optional[str] = None
    if not endpoint:
        endpoint_source = f"stack output {OUTPUT_ENDPOINT}"
        outputs = _stack_outputs(stack.name)
        endpoint = outputs.get(OUTPUT_ENDPOINT)
        head_service = head_service or outputs.get(OUTPUT_HEAD_SERVICE)
        ca = outputs.get(OUTPUT_CA)
        if not ca_file and isinstance(ca, str) and ca != "[secret]":
            ca_b64 = ca
    if not endpoint:
        raise CliError(
            "no dashboard address: pass --address http://127.0.0.1:8265 (e.g. from `python -m workloads dashboard`), "
            "or --endpoint/--head-service (and --ca-file for an IP endpoint), or install the pulumi CLI so the stack "
            "outputs can be read"
        )
    try:
        submit.check_endpoint(endpoint)  # before needs_cluster_ca, which cannot parse a malformed URL either
    except submit.InvalidAddress as err:
        raise CliError(f"{endpoint_source} {endpoint}: {err.reason}") from None
    if not head_service:
        raise CliError(f"the Ray head service is unknown: pass --head-service (stack output {OUTPUT_HEAD_SERVICE})")
    if submit.needs_cluster_ca(endpoint) and not (ca_file or ca_b64):
        raise CliError(f"the cluster CA of the IP endpoint {endpoint} is unknown: pass --ca-file (stack output {OUTPUT_CA})")
    if ca_file and not Path(ca_file).is_file():
        raise CliError(f"--ca-file {ca_file}: no such file")
    return GkeTarget(endpoint, head_service, args.namespace or stack.config.ray.namespace, ca_file, ca_b64)


def connect(args: argparse.Namespace, stack: Optional[Stack]):
    """The dashboard client. `stack` gives the stack outputs and the namespace; with `--address` it is
    not used and may be None (`watch --spec-file`)."""
    from workloads import submit

    if args.address:
        try:
            return submit.connect(args.address)
        except submit.InvalidAddress as err:
            raise CliError(f"--address {args.address}: {err.reason}") from None
    target = gke_target(args, stack)
    return submit.connect(
        gke_endpoint=target.endpoint,
        ca_file=target.ca_file,
        ca_cert_b64=target.ca_b64,
        namespace=target.namespace,
        service=target.service,
    )


class StatusLine:
    """The live status while waiting: one rewritten line on a TTY, a line per change otherwise."""

    def __init__(self, job_id: str, out: TextIO):
        self.job_id, self.out = job_id, out
        self.tty = out.isatty()
        self.last: Optional[str] = None
        self.width = 0

    def __call__(self, status: Any, elapsed: float) -> None:
        text = f"{self.job_id}  {status}  {int(elapsed) // 60:d}:{int(elapsed) % 60:02d}"
        if self.tty:
            pad = max(self.width - len(text), 0)
            self.out.write("\r" + text + " " * pad)
            self.width = len(text)
            self.out.flush()
        elif str(status) != self.last:
            self.out.write(text + "\n")
            self.out.flush()
        self.last = str(status)

    def close(self) -> None:
        if self.tty and self.width:
            self.out.write("\n")
            self.out.flush()


def _wait(client, job_id: str, timeout: Optional[float], out: TextIO) -> int:
    from workloads import submit

    line = StatusLine(job_id, out)
    try:
        final = submit.wait(client, job_id, timeout=timeout, on_status=line)
    finally:
        line.close()
    return EXIT_OK if str(final) == "SUCCEEDED" else EXIT_JOB_FAILED


def _job_id(args: argparse.Namespace, client, stack: Stack) -> str:
    from workloads import submit

    if args.job:
        return args.job
    latest = submit.latest_job(client, stack.name)
    if latest is None:
        raise CliError(f"no job of stack {stack.name} on {client.get_address()}; `submit` one, or pass --job")
    return latest.submission_id


def cmd_submit(args: argparse.Namespace, stack: Stack, out: TextIO) -> int:
    from infra.config import ConfigError, refuse_missing_secrets
    from infra.stack_file import present_secrets

    spec = build_spec(stack)
    if not args.dry_run:  # the job would fail on the cluster without them; `pulumi up` refuses too
        try:
            refuse_missing_secrets(stack.config, present_secrets(stack.secret_keys))
        except ConfigError as err:
            raise CliError(str(err).replace("\n", "; ")) from None
    if args.dry_run:
        out.write(f"submission id: {spec.submission_id}\n")
        out.write(f"entrypoint: {spec.entrypoint}\n")
        out.write(f"runtime env: {json.dumps(spec.runtime_env, sort_keys=True)}\n")
        return EXIT_OK
    from workloads import run_owner

    client = connect(args, stack)
    policy = args.gate or stack.config.gate_policy
    gate = run_owner.GateSetup(policy, gate_plan(stack) if policy != "off" else None)

    def show(line: str) -> None:
        out.write(line + "\n")
        out.flush()

    # As the run's owner submits: never beside a running gate, and after this attempt's own gate.
    result, report = run_owner.submit_gated(client, spec, gate, on_line=show)
    for line in report.lines() if report is not None else ():
        show(line)
    for old in result.stopped:
        out.write(f"stopped {old} (another spec of stack {stack.name})\n")
    verb = "submitted" if result.created else "already on the cluster:"
    out.write(f"{verb} {result.submission_id} ({result.status})\n")
    out.flush()
    if args.wait:
        return _wait(client, result.submission_id, args.timeout, out)
    return EXIT_OK


def cmd_gate(args: argparse.Namespace, stack: Stack, out: TextIO) -> int:
    report = run_gate(connect(args, stack), stack, out)
    return EXIT_OK if report.ok else EXIT_GATE_FAILED


def cmd_status(args: argparse.Namespace, stack: Stack, out: TextIO) -> int:
    from workloads import submit

    client = connect(args, stack)
    job_id = _job_id(args, client, stack)
    if args.wait:
        return _wait(client, job_id, args.timeout, out)
    details = submit.info(client, job_id)
    message = f"  {details.message}" if details.message else ""
    out.write(f"{job_id}  {details.status}{message}\n")
    _print_ledger(args, client, stack, out)
    return EXIT_OK


def _print_ledger(args: argparse.Namespace, client, stack: Stack, out: TextIO) -> None:
    """The run ledger (every attempt: cause, node-hours, steps lost, spend) as a table, read from
    `--ledger-file` or, through a small Ray job, from the head's Lustre mount where the watcher keeps it."""
    import time

    from workloads import ledger as run_ledger
    from workloads import submit

    if args.ledger_file:
        found = run_ledger.LedgerFile(args.ledger_file).load(stack.name, build_spec(stack).submission_id)
        found = found if found.attempts or found.events else None
    else:
        from infra.watcher_deployment import ledger_on_lustre

        try:
            found = run_ledger.read_on_head(client, ledger_on_lustre(stack.config.ray.mount_path, stack.name), stack=stack.name)
        except submit.JobError as err:
            out.write(f"run ledger: not readable ({err})\n")
            return
    if found is None:
        out.write("run ledger: none yet (the preemption watcher writes it once it sees an attempt)\n")
        return
    for line in run_ledger.table(found, time.time()):
        out.write(line + "\n")


def cmd_logs(args: argparse.Namespace, stack: Stack, out: TextIO) -> int:
    from workloads import submit

    client = connect(args, stack)
    job_id = _job_id(args, client, stack)
    for chunk in submit.logs(client, job_id, follow=args.follow, tail=args.tail):
        out.write(chunk)
        out.flush()
    return EXIT_OK


def cmd_stop(args: argparse.Namespace, stack: Stack, out: TextIO) -> int:
    from workloads import submit

    client = connect(args, stack)
    job_id = _job_id(args, client, stack)
    was_running = submit.stop(client, job_id)
    out.write(f"{job_id}: {'stop requested' if was_running else 'not running'}\n")
    return EXIT_OK


def cmd_list(args: argparse.Namespace, stack: Stack, out: TextIO) -> int:
    from workloads import submit
    from workloads.job_spec import META_RECIPE

    client = connect(args, stack)
    jobs = submit.list_jobs(client, stack.name)
    if not jobs:
        out.write(f"no jobs of stack {stack.name}\n")
        return EXIT_OK
    width = max(len(j.submission_id) for j in jobs)
    for j in jobs:
        out.write(f"{j.submission_id:<{width}}  {str(j.status):<9}  {j.metadata.get(META_RECIPE, '')}\n")
    return EXIT_OK


def cmd_watch(args: argparse.Namespace, stack: Optional[Stack], out: TextIO) -> int:
    import dataclasses

    from workloads import preemption

    if stack is None:  # --spec-file: the in-cluster watcher
        if not args.address:
            raise CliError("watch --spec-file needs --address (the Ray dashboard URL)")
        try:
            spec = preemption.load_spec_file(args.spec_file)
        except (OSError, ValueError, KeyError) as err:
            raise CliError(f"--spec-file {args.spec_file}: {err}") from None
        policy = preemption.RecoveryPolicy()
        run = _run_file(args.run_file)
    else:
        spec = build_spec(stack)
        cfg = stack.config
        policy = preemption.RecoveryPolicy.from_config(
            cfg.recovery,
            pool_gpus=cfg.gpu_pool.node_count * cfg.flavour_spec.gpus_per_node,
            resubmit_missing=cfg.job.submit,
        )
        run = _run_file(args.run_file) if args.run_file else run_plan(stack, spec)
    changes = {
        "check_interval_seconds": args.check_interval,
        "max_restarts": args.max_restarts,
        "backoff_seconds": args.backoff,
        "max_backoff_seconds": args.max_backoff,
        "pool_gpus": args.pool_gpus,
        "resubmit_missing": True if args.resubmit_missing else None,
    }
    try:
        policy = dataclasses.replace(policy, **{k: v for k, v in changes.items() if v is not None})
    except ValueError as err:
        raise CliError(f"watch: {err}") from None
    heartbeat = Path(args.heartbeat_file) if args.heartbeat_file else None
    if args.once:
        client = connect(args, stack)
    else:
        client = _connect_until_reachable(args, stack, policy, heartbeat, out)
    out.write(
        f"watching {spec.submission_id} on {client.get_address()}: every {policy.check_interval_seconds:g}s, "
        f"at most {policy.max_restarts} restart(s), backoff {policy.backoff_seconds:g}s doubling to "
        f"{policy.max_backoff_seconds:g}s\n"
    )
    out.flush()
    state = Path(args.state_file) if args.state_file else None
    preemption.watch(client, spec, policy, once=args.once, out=out, heartbeat=heartbeat, state=state, run=run)
    return EXIT_OK


def _run_file(path: Optional[str]):
    """The `RunPlan` of `--run-file` (the watcher ConfigMap's run.json); none: no gate, no ledger prices."""
    from workloads import run_owner

    if not path:
        return run_owner.RunPlan()
    try:
        return run_owner.RunPlan.from_dict(json.loads(Path(path).read_text()))
    except (OSError, ValueError, TypeError) as err:
        raise CliError(f"--run-file {path}: {err}") from None


def run_plan(stack: Stack, spec):
    """The stack's `RunPlan` exactly as `pulumi up` ships it to the watcher; the checkpoints are not visible
    from this machine (they are on Lustre), so steps lost are not read here."""
    import dataclasses

    from infra.cluster import gpu_pool_facts
    from infra.stack_context import StackContext
    from infra.watcher_deployment import run_plan_for_stack

    pool = gpu_pool_facts(StackContext.from_config(stack.name, stack.config), stack.config)
    return dataclasses.replace(run_plan_for_stack(spec, stack.config, pool, gate_plan(stack)), checkpoint_dir=None)


def _connect_until_reachable(args: argparse.Namespace, stack: Optional[Stack], policy, heartbeat, out: TextIO):
    """The watcher may start before the Ray head (or outlive a head restart): keep trying."""
    import time

    from workloads import submit
    from workloads import preemption

    reported = False
    while True:
        if heartbeat is not None:
            preemption._touch(heartbeat)
        try:
            return connect(args, stack)
        except (submit.DashboardUnreachable, submit.DashboardError) as err:
            if not reported:
                out.write(f"waiting for the Ray dashboard: {err}\n")
                out.flush()
                reported = True
            time.sleep(policy.check_interval_seconds)


def cmd_dashboard(args: argparse.Namespace, stack: Stack, out: TextIO) -> int:
    """Serve the Ray dashboard on 127.0.0.1 through the API server, with the user's Google token."""
    from workloads import dashboard

    if args.address:
        raise CliError(f"--address {args.address} is a dashboard already: open it in a browser")
    target = gke_target(args, stack)
    dashboard.serve_cluster(
        target.endpoint,
        target.namespace,
        target.service,
        ca_file=target.ca_file,
        ca_cert_b64=target.ca_b64,
        port=args.port,
        on_ready=lambda url: print(f"Ray dashboard of stack {stack.name}: {url}/  (Ctrl-C stops)", file=out, flush=True),
    )
    return EXIT_OK


COMMANDS: dict[str, Callable[[argparse.Namespace, Stack, TextIO], int]] = {
    "submit": cmd_submit,
    "gate": cmd_gate,
    "status": cmd_status,
    "logs": cmd_logs,
    "stop": cmd_stop,
    "list": cmd_list,
    "watch": cmd_watch,
    "dashboard": cmd_dashboard,
}


def parser() -> argparse.ArgumentParser:
    common = cli_args.OneLineParser(add_help=False)
    common.add_argument(
        "--stack", type=cli_args.stack_name, default=DEFAULT_STACK, help=f"stack name (Pulumi.<stack>.yaml); default {DEFAULT_STACK}"
    )
    common.add_argument("--config-file", metavar="PATH", help="read the stack config from PATH (as `pulumi up --config-file`)")
    common.add_argument("--address", help="Ray dashboard URL, e.g. http://127.0.0.1:8265")
    common.add_argument("--endpoint", help="GKE cluster endpoint, to go through the API server's service proxy")
    common.add_argument("--ca-file", help="PEM file of the cluster CA (with an IP --endpoint)")
    common.add_argument("--head-service", help="Ray head service name (with --endpoint)")
    common.add_argument("--namespace", type=cli_args.namespace, help="namespace of the Ray cluster; default ray.namespace of the stack")
    p = cli_args.OneLineParser(prog="python -m workloads", description="Submit and watch the stack's NeMo-RL job.")
    sub = p.add_subparsers(dest="command", required=True, metavar="{submit,gate,status,logs,stop,list,watch,dashboard}")
    s = sub.add_parser("submit", parents=[common], help="submit the stack's job (idempotent)")
    s.add_argument("--dry-run", action="store_true", help="print entrypoint and runtime env; no network")
    s.add_argument(
        "--gate", choices=("enforce", "warn", "off"), help="acceptance gate policy for this submission; default job.gate of the stack"
    )
    s.add_argument("--wait", action="store_true", help="wait until the job ends, showing its status")
    s.add_argument("--timeout", type=cli_args.seconds(positive=True), help="with --wait: give up after this many seconds (exit 4)")
    sub.add_parser("gate", parents=[common], help="run the acceptance gate (GPUs, fabric, Lustre) on the cluster now")
    s = sub.add_parser("status", parents=[common], help="show a job's status and the run ledger")
    s.add_argument("--job", help="submission id; default the stack's newest job")
    s.add_argument("--ledger-file", metavar="PATH", help="read the run ledger from PATH instead of the head's Lustre mount")
    s.add_argument("--wait", action="store_true", help="wait until the job ends, showing its status")
    s.add_argument("--timeout", type=cli_args.seconds(positive=True), help="with --wait: give up after this many seconds (exit 4)")
    s = sub.add_parser("logs", parents=[common], help="print a job's log")
    s.add_argument("--job", help="submission id; default the stack's newest job")
    s.add_argument("--follow", action="store_true", help="keep streaming until the job ends")
    s.add_argument("--tail", type=cli_args.positive_int, metavar="N", help="only the last N lines (with --follow: then the new ones)")
    s = sub.add_parser("stop", parents=[common], help="stop a job")
    s.add_argument("--job", help="submission id; default the stack's newest job")
    sub.add_parser("list", parents=[common], help="list the stack's jobs")
    s = sub.add_parser("watch", parents=[common], help="resubmit the stack's job after a spot preemption")
    s.add_argument("--spec-file", help="JobSpec JSON to watch instead of the stack's (the in-cluster watcher); needs --address")
    s.add_argument("--once", action="store_true", help="look once, act if needed, print the decision and exit")
    s.add_argument("--check-interval", type=cli_args.seconds(positive=True), help="seconds between looks; default recovery.checkIntervalSeconds")
    s.add_argument("--max-restarts", type=cli_args.non_negative_int, help="consecutive automatic restarts; default recovery.maxRestarts")
    s.add_argument("--backoff", type=cli_args.seconds(positive=False), help="seconds before the first restart, doubling; default recovery.backoffSeconds")
    s.add_argument("--max-backoff", type=cli_args.seconds(positive=False), help="cap of the doubled wait; default recovery.maxBackoffSeconds")
    s.add_argument("--heartbeat-file", help="file touched after every look (for a liveness probe)")
    s.add_argument("--pool-gpus", type=cli_args.non_negative_int, metavar="N",
                   help="resubmit only when Ray has N GPUs alive; default the stack's pool (0: do not wait)")
    s.add_argument("--resubmit-missing", action="store_true",
                   help="submit the spec when the cluster has no job of it (job.submit on; default from the stack)")
    s.add_argument("--state-file", help="where the watcher keeps what it saw, to survive its own and the head's restarts")
    s.add_argument("--run-file", help="RunPlan JSON (gate, checkpoint dir, price, budget; the in-cluster watcher's run.json)")
    s = sub.add_parser("dashboard", parents=[common], help="serve the Ray dashboard on 127.0.0.1 (no kubectl)")
    s.add_argument("--port", type=cli_args.port, default=8265, help="local port; 0 picks a free one (default 8265)")
    return p


def _exit_code(exc: BaseException) -> Optional[int]:
    """The exit code of an error the user can act on, or None for a bug (left to raise)."""
    if isinstance(exc, CliError):
        return exc.code
    from workloads.job_spec import JobBuildError

    if isinstance(exc, JobBuildError):
        return EXIT_USAGE
    gate = sys.modules.get("workloads.acceptance_gate")
    if gate is not None and isinstance(exc, gate.GateFailed):  # its message is the one line
        return EXIT_GATE_FAILED
    submit = sys.modules.get("workloads.submit")  # imported lazily: --dry-run never loads Ray
    if submit is None or not isinstance(exc, submit.JobError):
        return None
    if isinstance(exc, (submit.DashboardUnreachable, submit.DashboardAuthError)):
        return EXIT_UNREACHABLE
    if isinstance(exc, submit.WaitTimeout):
        return EXIT_TIMEOUT
    if isinstance(exc, (submit.UnknownJob, submit.InvalidAddress)):
        return EXIT_USAGE
    dashboard = sys.modules.get("workloads.dashboard")
    if dashboard is not None and isinstance(exc, dashboard.ProxyError):  # e.g. the local port is taken
        return EXIT_USAGE
    return EXIT_JOB_FAILED


def main(argv: Optional[list[str]] = None, out: Optional[TextIO] = None, err: Optional[TextIO] = None) -> int:
    """Run one command; returns the exit code. Errors a user can act on print one line."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        args = parser().parse_args(argv)
    except cli_args.UsageError as exc:
        err.write(f"error: {exc}\n")
        return EXIT_USAGE
    # Ray's job SDK logs every websocket close at INFO; the CLI prints what matters itself.
    logging.getLogger("ray.dashboard.modules.job.sdk").setLevel(logging.WARNING)
    try:
        stack = None if getattr(args, "spec_file", None) else load_stack(args.stack, args.config_file)
        return COMMANDS[args.command](args, stack, out)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        code = _exit_code(exc)
        if code is None:
            raise
        err.write(f"error: {exc}\n")
        return code


if __name__ == "__main__":
    sys.exit(main())
