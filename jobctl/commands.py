"""The CLI's commands: each takes the parsed flags, the stack and where to print, and returns the exit code.
`workloads.submit` is imported inside the commands that reach a dashboard: `submit --dry-run` never loads Ray."""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any, Callable, NamedTuple, Optional, TextIO

from infra.config import ConfigError, refuse_missing_secrets
from infra.stack_file import ROOT, present_secrets
from jobctl.stack import Stack, build_spec, gate_plan, pool_facts, run_plan
from workloads import cli_args, exit_codes, watcher
from workloads.exit_codes import CommandError
from workloads.job_types import META_RECIPE

# Stack outputs the CLI reads when no address is given (the program exports these names).
OUTPUT_ENDPOINT = "clusterEndpoint"
OUTPUT_CA = "clusterCaCertificate"
OUTPUT_HEAD_SERVICE = "rayHeadService"


def stack_outputs(stack: str) -> dict[str, Any]:
    """`pulumi stack output --json` of the stack, or {} when the CLI is missing or fails."""
    if shutil.which("pulumi") is None:
        return {}
    command = ["pulumi", "stack", "output", "--json", "--stack", stack]
    try:
        proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=60, check=True)
        outputs = json.loads(proc.stdout or "{}")
    except (OSError, subprocess.SubprocessError, json.JSONDecodeError):
        return {}
    return outputs if isinstance(outputs, dict) else {}


class GkeTarget(NamedTuple):
    """Where the Ray dashboard is behind the GKE API server's service proxy."""

    endpoint: str
    service: str
    namespace: str
    ca_file: Optional[str]
    ca_b64: Optional[str]


def gke_target(args: argparse.Namespace, stack: Stack) -> GkeTarget:
    """The endpoint, head service and CA from the flags, else from the stack outputs; checked."""
    from workloads import job_errors, ray_address

    outputs = {} if args.endpoint else stack_outputs(stack.name)
    endpoint_source = "--endpoint" if args.endpoint else f"stack output {OUTPUT_ENDPOINT}"
    endpoint = args.endpoint or outputs.get(OUTPUT_ENDPOINT)
    ca_file, head_service = args.ca_file, args.head_service or outputs.get(OUTPUT_HEAD_SERVICE)
    ca = outputs.get(OUTPUT_CA)
    ca_b64 = ca if not ca_file and isinstance(ca, str) and ca != "[secret]" else None
    if not endpoint:
        raise CommandError(
            f"no dashboard address: pass --address http://127.0.0.1:8265 (e.g. from `{cli_args.RUN} jobctl "
            "dashboard`), or --endpoint/--head-service (and --ca-file for an IP endpoint), or install the pulumi CLI "
            "so the stack outputs can be read"
        )
    try:
        ray_address.check_endpoint(endpoint)  # before needs_cluster_ca, which cannot parse a malformed URL either
    except job_errors.InvalidAddress as err:
        raise CommandError(f"{endpoint_source} {err.address}: {err.reason}") from None
    if not head_service:
        raise CommandError(f"the Ray head service is unknown: pass --head-service (stack output {OUTPUT_HEAD_SERVICE})")
    if ray_address.needs_cluster_ca(endpoint) and not (ca_file or ca_b64):
        raise CommandError(
            f"the cluster CA of the IP endpoint {endpoint} is unknown: pass --ca-file (stack output {OUTPUT_CA})"
        )
    if ca_file and not Path(ca_file).is_file():
        raise CommandError(f"--ca-file {ca_file}: no such file")
    return GkeTarget(endpoint, head_service, args.namespace or stack.config.ray.namespace, ca_file, ca_b64)


def connect(args: argparse.Namespace, stack: Stack):
    """The dashboard client: `--address`, else the GKE service proxy (flags, else the stack outputs)."""
    from workloads import submit

    if args.address:
        return watcher.connect_address(args.address)
    target = gke_target(args, stack)
    return submit.connect(
        gke_endpoint=target.endpoint,
        ca_file=target.ca_file,
        ca_cert_b64=target.ca_b64,
        namespace=target.namespace,
        service=target.service,
    )


def workers_command(stack: Stack, replicas: int) -> str:
    """The kubectl command that asks for the Ray workers by hand. Index 0: the chart renders `worker` first
    (ray-project/kuberay helm-chart/ray-cluster/templates/raycluster-cluster.yaml); the patch's first op tests the
    group's name, so it fails rather than scale another group."""
    from infra.ray_cluster import RAY_CLUSTER_NAME, WORKER_GROUP

    spec = "/spec/workerGroupSpecs/0/"
    ops = [
        {"op": "test", "path": spec + "groupName", "value": WORKER_GROUP},
        {"op": "replace", "path": spec + "replicas", "value": replicas},
    ]
    patch = json.dumps(ops)
    return f"kubectl -n {stack.config.ray.namespace} patch raycluster {RAY_CLUSTER_NAME} --type json -p '{patch}'"


def ensure_workers(
    args: argparse.Namespace, stack: Stack, client: Any, out: TextIO, token_provider=None
) -> Callable[[], int]:
    """The step that asks for the Ray GPU workers before an attempt or a gate (`workloads.worker_group`): through
    the GKE API server with the dashboard proxy's token and CA, then counted in Ray; with `--address` there is no
    Kubernetes API to ask, so missing workers are an error that gives the kubectl command."""
    from infra.ray_cluster import RAY_CLUSTER_NAME, WORKER_GROUP
    from infra.training_job import ray_cluster_timeout_s
    from workloads import worker_group
    from workloads.gang_wait import VIEW_ERRORS, KubeGangView
    from workloads.readiness import DEFAULT_TIMEOUT_S

    replicas = pool_facts(stack).node_count
    command = workers_command(stack, replicas)
    show = functools.partial(print, file=out, flush=True)
    # As long as the deploy waits for them (`pulumi up`'s submission): the gang wait's bound, else an hour.
    timeout = ray_cluster_timeout_s(run_plan(stack)) or DEFAULT_TIMEOUT_S

    def view() -> Optional[KubeGangView]:
        if args.address:
            return None
        target = gke_target(args, stack)
        return KubeGangView.on_gke(
            target.endpoint,
            target.namespace,
            RAY_CLUSTER_NAME,
            WORKER_GROUP,
            ca_file=target.ca_file,
            ca_b64=target.ca_b64,
            token=token_provider,
        )

    def ensure() -> int:  # only when an attempt or a gate is about to start: a kept job asks for nothing
        try:
            return worker_group.ensure_workers(
                view(),
                replicas,
                lambda: worker_group.alive_gpu_nodes(client),
                timeout_s=timeout,
                on_line=show,
                fallback=command,
            )
        except VIEW_ERRORS as err:
            raise CommandError(
                f"cannot ask for the Ray workers ({replicas}) through the GKE API ({err}); run `{command}`, then "
                "submit again"
            ) from None
        except worker_group.WorkersNotReady as err:
            raise CommandError(str(err)) from None

    return ensure


class StatusLine:
    """The live status while waiting: one rewritten line on a TTY, a line per change otherwise."""

    def __init__(self, job_id: str, out: TextIO):
        self.job_id, self.out, self.tty = job_id, out, out.isatty()
        self.last: Optional[str] = None
        self.width = 0

    def __call__(self, status: Any, elapsed: float) -> None:
        text = f"{self.job_id}  {status}  {int(elapsed) // 60:d}:{int(elapsed) % 60:02d}"
        if self.tty:  # padded over the longer line it rewrites
            self.out.write("\r" + text.ljust(self.width))
            self.width = len(text)
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
    return exit_codes.OK if str(final) == "SUCCEEDED" else exit_codes.JOB_FAILED


def _client_and_job(args: argparse.Namespace, stack: Stack) -> tuple[Any, str]:
    """The dashboard client and the job `--job` names, else the stack's newest."""
    from workloads import submit

    client = connect(args, stack)
    if args.job:
        return client, args.job
    latest = submit.latest_job(client, stack.name)
    if latest is None:
        raise CommandError(f"no job of stack {stack.name} on {client.get_address()}; `submit` one, or pass --job")
    return client, latest.submission_id


def cmd_submit(args: argparse.Namespace, stack: Stack, out: TextIO) -> int:
    spec = build_spec(stack)
    if args.dry_run:
        out.write(f"submission id: {spec.submission_id}\n")
        out.write(f"entrypoint: {spec.entrypoint}\n")
        out.write(f"runtime env: {json.dumps(spec.runtime_env, sort_keys=True)}\n")
        return exit_codes.OK
    try:  # the job would fail on the cluster without them; `pulumi up` refuses too
        refuse_missing_secrets(stack.config, present_secrets(stack.secret_keys))
    except ConfigError as err:
        raise CommandError(str(err).replace("\n", "; ")) from None
    from workloads import run_owner

    client = connect(args, stack)
    # `--gate` overrides the stack's policy; without it the gate is the run plan's, as `pulumi up` submits.
    gate = run_owner.GateSetup.of(args.gate, gate_plan(stack)) if args.gate else run_plan(stack).gate
    show = functools.partial(print, file=out, flush=True)  # the gate's lines come while it runs
    # As the run's owner submits: never beside a running gate, and after this attempt's own gate; the attempt's
    # number from the run ledger when a head restart emptied the job table (`run_owner.next_attempt`).
    ledger = functools.partial(_ledger_on_head, client, stack)
    # The workers only when an attempt is submitted: a kept job (running, succeeded) asks for none.
    result, report = run_owner.submit_gated(
        client, spec, gate, on_line=show, ledger=ledger, ensure_workers=ensure_workers(args, stack, client, out)
    )
    for line in report.lines() if report is not None else ():
        show(line)
    for old in result.stopped:
        out.write(f"stopped {old} (another spec of stack {stack.name})\n")
    verb = "submitted" if result.created else "already on the cluster:"
    out.write(f"{verb} {result.submission_id} ({result.status})\n")
    out.flush()
    if args.wait:
        return _wait(client, result.submission_id, args.timeout, out)
    return exit_codes.OK


def cmd_gate(args: argparse.Namespace, stack: Stack, out: TextIO) -> int:
    from workloads import gate

    client = connect(args, stack)
    if args.address:  # no Kubernetes API to ask: the gate itself says how many worker nodes Ray has
        command = workers_command(stack, pool_facts(stack).node_count)
        out.write(f"Ray workers not asked for (--address reaches only the dashboard); if released: {command}\n")
    else:
        ensure_workers(args, stack, client, out)()
    show = functools.partial(print, file=out, flush=True)  # the gate's lines come while it runs
    report = gate.run_on_cluster(client, gate_plan(stack), label=stack.name, on_line=show)
    for line in report.lines():
        show(line)
    return exit_codes.OK if report.ok else exit_codes.GATE_FAILED


def cmd_status(args: argparse.Namespace, stack: Stack, out: TextIO) -> int:
    from workloads import submit

    # A `--ledger-file` that is not a ledger is refused before any request, as every bad flag is.
    ledger = _ledger_file(args.ledger_file, stack) if args.ledger_file else None
    client, job_id = _client_and_job(args, stack)
    if args.wait:
        return _wait(client, job_id, args.timeout, out)
    details = submit.info(client, job_id)
    message = f"  {cli_args.shown_line(details.message, 300)}" if details.message else ""
    out.write(f"{job_id}  {details.status}{message}\n")
    _print_ledger(args, client, stack, out, ledger)
    return exit_codes.OK


def _ledger_file(path: str, stack: Stack):
    """The run ledger in `--ledger-file`, None when it holds no attempt of the stack's run; a file that is not a
    ledger (a FIFO, /dev/zero, a list, NaN, a time of 1e300) is one line naming the flag."""
    from workloads import ledger as run_ledger

    try:
        found = run_ledger.LedgerFile(path).load(stack.name, build_spec(stack).run_id, refuse=True)
    except ValueError as err:
        raise CommandError(f"--ledger-file {path}: {err}") from None
    return found if found.attempts or found.events else None


def _ledger_on_head(client, stack: Stack):
    """The run ledger, read through a small Ray job from the head's Lustre mount where the watcher keeps it."""
    from infra.run_plan import ledger_on_lustre
    from workloads import ledger

    return ledger.read_on_head(client, ledger_on_lustre(stack.config.ray.mount_path, stack.name), stack=stack.name)


def _print_ledger(args: argparse.Namespace, client, stack: Stack, out: TextIO, from_file=None) -> None:
    """The run ledger (every attempt: cause, node-hours, steps lost, spend) as a table, then the run's goodput,
    read from `--ledger-file` (`from_file`, already read) or the head."""
    import time

    from workloads import goodput, submit
    from workloads import ledger as run_ledger

    if args.ledger_file:
        found = from_file
    else:
        try:
            found = _ledger_on_head(client, stack)
            if found is not None:  # the head read checks the shape; NaN or a time of 1e300 would fail in the table
                cli_args.loads_json(json.dumps(found.to_dict()), run_ledger.LedgerFile.LARGEST)
        except submit.JobError as err:
            out.write(f"run ledger: not readable ({cli_args.shown_line(str(err), 300)})\n")
            return
        except ValueError as err:
            out.write(f"run ledger: not readable (a number in it: {err})\n")
            return
    if found is None:
        out.write("run ledger: none yet (the preemption watcher writes it once it sees an attempt)\n")
        return
    now, run = time.time(), run_plan(stack)
    times = dict(step_seconds=run.step_seconds, write_seconds=run.checkpoint_write_seconds, save_period=run.save_period)
    for line in [*run_ledger.table(found, now), *goodput.lines(found, now, **times, full_nodes=run.node_count or None)]:
        out.write(line + "\n")


def cmd_logs(args: argparse.Namespace, stack: Stack, out: TextIO) -> int:
    from workloads import submit

    client, job_id = _client_and_job(args, stack)
    for chunk in submit.logs(client, job_id, follow=args.follow, tail=args.tail):
        out.write(chunk)
        out.flush()
    return exit_codes.OK


def cmd_stop(args: argparse.Namespace, stack: Stack, out: TextIO) -> int:
    from workloads import submit

    client, job_id = _client_and_job(args, stack)
    was_running = submit.stop(client, job_id)
    out.write(f"{job_id}: {'stop requested' if was_running else 'not running'}\n")
    return exit_codes.OK


def cmd_list(args: argparse.Namespace, stack: Stack, out: TextIO) -> int:
    from workloads import submit

    client = connect(args, stack)
    jobs = submit.list_jobs(client, stack.name)
    if not jobs:
        out.write(f"no jobs of stack {stack.name}\n")
        return exit_codes.OK
    # What the head sent, one bounded line each (a job submitted by hand may carry anything in its metadata).
    rows = [
        (cli_args.shown_line(j.submission_id, 200), cli_args.shown_line(str(j.metadata.get(META_RECIPE, "")), 200), j)
        for j in jobs
    ]
    width = max(len(job_id) for job_id, _, _ in rows)
    for job_id, recipe, j in rows:
        out.write(f"{job_id:<{width}}  {str(j.status):<9}  {recipe}\n")
    return exit_codes.OK


def cmd_watch(args: argparse.Namespace, stack: Stack, out: TextIO) -> int:
    """The in-cluster watcher's loop (`workloads.watcher`) on the stack's spec and run plan, as `pulumi up` ships."""
    spec = build_spec(stack)
    run = watcher.load_run_file(args.run_file) if args.run_file else run_plan(stack)
    return watcher.watch(lambda: connect(args, stack), spec, args, out, run=run)


def cmd_dashboard(args: argparse.Namespace, stack: Stack, out: TextIO) -> int:
    """Serve the Ray dashboard on 127.0.0.1 through the API server, with the user's Google token."""
    from workloads import dashboard, job_errors

    if args.address:
        raise CommandError(
            f"--address {job_errors.redacted(args.address)} is a dashboard already: open it in a browser"
        )
    target = gke_target(args, stack)
    dashboard.serve_cluster(
        target.endpoint,
        target.namespace,
        target.service,
        ca_file=target.ca_file,
        ca_cert_b64=target.ca_b64,
        port=args.port,
        on_ready=lambda url: print(
            f"Ray dashboard of stack {stack.name}: {url}/  (Ctrl-C stops)", file=out, flush=True
        ),
    )
    return exit_codes.OK


# Each `cmd_<name>` above is the command `<name>`, in the order `--help` lists them.
COMMANDS: dict[str, Callable[[argparse.Namespace, Stack, TextIO], int]] = {
    name.removeprefix("cmd_"): command for name, command in list(globals().items()) if name.startswith("cmd_")
}
