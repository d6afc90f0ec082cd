"""The Pulumi dynamic provider that submits the training job on `pulumi up` (docs/day-2.md, "The job").

Pulumi pickles the provider by module path into the stack state (docs/architecture.md), so the class stays
here and the logic lives in `workloads.submit`. Props, snake_case: the `JobSpec` (`SPEC_KEYS`); the
connection (`address`, or `gke_endpoint`, `ca_cert_b64`, `namespace`, `head_service`); `ray_cluster_name`
(empty: no readiness wait); `worker_group` and `worker_replicas` (the GPU workers an attempt asks for,
workloads/worker_group.py; absent: none asked for); the optional timeouts `ready_timeout`, `ray_cluster_timeout`,
`http_timeout`; `gate_policy`, `gate_plan`; `ledger_path`. No secret: the provider takes a Google token
(Application Default Credentials) at run time. Outputs add `submission_id` (`-r<N>` for a retried attempt),
`status` and `gate_result` (`GateReport.outputs`, or `{"ran": false, ...}`).

Create and update first wait for the RayCluster's head (`workloads.readiness`: Helm's wait does not understand
the custom resource), then for the dashboard, then submit the way the run's owner does (`run_owner.submit_gated`:
the workers asked for and counted in Ray first, since the Helm values install none and a finished run released
them; an `enforce` gate that fails raises `GateFailed` and nothing is submitted). Create asks for the workers as
soon as the RayCluster exists, so the GPU nodes boot while the head starts, as the chart's own replicas did.
A new `spec_hash` replaces the resource, old deleted first; delete stops every attempt and waits for each to end
(before the Lustre export); read keeps the recorded state when the dashboard cannot be asked (a refresh must not
need the Ray head up).
"""

from __future__ import annotations

import contextlib
import sys
import time
from typing import Any

from pulumi.dynamic import CreateResult, DiffResult, ReadResult, ResourceProvider, UpdateResult

from workloads.job_types import JobSpec

SPEC_KEYS = ("entrypoint", "runtime_env", "submission_id", "metadata", "spec_hash")
CONNECTION_KEYS = (
    "address",
    "gke_endpoint",
    "ca_cert_b64",
    "namespace",
    "head_service",
    "ray_cluster_name",
    "worker_group",
    "worker_replicas",
)


def _spec(props: dict[str, Any]) -> JobSpec:
    return JobSpec.from_dict({k: props[k] for k in SPEC_KEYS})


READY_TIMEOUT = 1800.0
"""Seconds create/update wait for the dashboard: the first pull of a NeMo-RL image (tens of GB) takes minutes."""
READY_POLL = 10.0
RAY_CLUSTER_TIMEOUT = 3600.0
"""Seconds create/update wait for the RayCluster to be provisioned: spot GPU capacity can take long."""
RAY_CLUSTER_POLL = 10.0
STOP_TIMEOUT_S = 120.0
"""Seconds delete waits for a stopped job to end (Ray sends SIGTERM, then SIGKILL after its own grace)."""
OUTPUT_KEYS = ("status", "gate_result")


def _log(line: str) -> None:
    # The provider's stderr reaches the user as an info line (pulumi/pulumi
    # sdk/go/common/resource/plugin/plugin.go: dynamic provider output is not hidden).
    print(line, file=sys.stderr, flush=True)


def _worker_view(props: dict[str, Any]) -> Any:
    """The RayCluster's GPU worker group through the GKE API server with the operator's Google credentials (a
    `KubeGangView`), or None without a Kubernetes API (an `address` alone) or without workers to ask for."""
    if not (props.get("gke_endpoint") and props.get("ray_cluster_name") and props.get("worker_group")):
        return None
    if not int(props.get("worker_replicas") or 0):
        return None
    from workloads.gang_wait import KubeGangView

    return KubeGangView.on_gke(
        props["gke_endpoint"],
        props["namespace"],
        props["ray_cluster_name"],
        props["worker_group"],
        ca_b64=props.get("ca_cert_b64") or None,
    )


def _ask_for_workers_early(props: dict[str, Any]) -> Any:
    """An `on_found` for the head wait that asks for the workers once the RayCluster exists (create only)."""
    from workloads import worker_group
    from workloads.gang_wait import VIEW_ERRORS

    view, asked = _worker_view(props), []
    if view is None:
        return None

    def on_found() -> None:
        if asked:
            return
        try:
            had = worker_group.ask(view, int(props["worker_replicas"]), time.time())
        except VIEW_ERRORS as err:  # asked again before the submission, where a failure stops it
            _log(f"asking for the Ray workers failed ({err}); trying again before the submission")
            return
        asked.append(True)
        if had is not None:
            _log(f"Ray workers asked for: {had} -> {props['worker_replicas']} (GKE adds the GPU nodes for them)")

    return on_found


def _ensure_workers(client: Any, props: dict[str, Any]) -> Any:
    """`run_owner.submit_gated`'s `ensure_workers` for the deploy: ask through the GKE API, count in Ray."""
    want = int(props.get("worker_replicas") or 0)
    if not want:
        return None
    from workloads import worker_group

    view = _worker_view(props)
    timeout = float(props.get("ray_cluster_timeout") or RAY_CLUSTER_TIMEOUT)
    return lambda: worker_group.ensure_workers(
        view,
        want,
        lambda: worker_group.alive_gpu_nodes(client),
        timeout_s=timeout,
        poll_s=RAY_CLUSTER_POLL,
        on_line=_log,
    )


def _wait_for_ray_cluster(props: dict[str, Any], *, ask_early: bool = False) -> None:
    """Block until the head of the RayCluster `ray_cluster_name` is ready; a no-op without a name. With
    `ask_early`, the workers are asked for as soon as the RayCluster exists."""
    name = props.get("ray_cluster_name")
    if not name:
        return
    if not props.get("gke_endpoint"):
        raise ValueError(f"waiting for RayCluster {name!r} needs gke_endpoint (the Kubernetes API server)")
    from workloads import readiness

    shown: list[str] = []
    on_found = _ask_for_workers_early(props) if ask_early else None

    def report(progress: "readiness.RayClusterProgress") -> None:
        if progress.found and progress.error is None and on_found is not None:
            on_found()
        line = progress.describe()
        if not shown or shown[-1] != line:  # only changes
            shown.append(line)
            _log(f"RayCluster {props['namespace']}/{name} after {progress.elapsed_s:.0f}s: {line}")

    readiness.wait_for_raycluster_on_gke(
        props["gke_endpoint"],
        props["namespace"],
        name,
        ca_cert_b64=props.get("ca_cert_b64") or None,
        timeout_s=float(props.get("ray_cluster_timeout") or RAY_CLUSTER_TIMEOUT),
        poll_s=RAY_CLUSTER_POLL,
        on_status=report,
    )


def _client(props: dict[str, Any], *, wait_ready: bool = False):
    """A connected client; with `wait_ready`, retry an unreachable dashboard until the deadline."""
    from workloads import submit

    read_timeout = float(props["http_timeout"]) if props.get("http_timeout") else None
    target = (
        {"address": props["address"]}
        if props.get("address")
        else {
            "gke_endpoint": props["gke_endpoint"],
            "ca_cert_b64": props.get("ca_cert_b64") or None,
            "namespace": props["namespace"],
            "service": props["head_service"],
        }
    )
    deadline = time.monotonic() + float(props.get("ready_timeout") or READY_TIMEOUT)
    while True:
        try:
            return submit.connect(**target, read_timeout=read_timeout)
        except submit.DashboardUnreachable:
            if not wait_ready or time.monotonic() + READY_POLL > deadline:
                raise
            time.sleep(READY_POLL)


def _outs(props: dict[str, Any], submission_id: str, status: Any, gate: Any) -> dict[str, Any]:
    """The inputs (without Pulumi's own `__` keys and earlier outputs) and this operation's outputs."""
    inputs = {k: v for k, v in props.items() if not k.startswith("__") and k not in OUTPUT_KEYS}
    return {**inputs, "submission_id": submission_id, "status": str(status), "gate_result": gate}


def _submit_gated(client: Any, spec: JobSpec, props: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The job submitted as the run's owner submits it (`run_owner.submit_gated`); returns the result and the
    gate's outputs. Raises `gate.GateFailed` (enforce) before anything is submitted."""
    from workloads import destroy_mark, ledger, run_owner
    from workloads.gate import GatePlan

    # A deploy that submits the job lifts the mark of a destroy that stopped half-way (workloads/destroy_mark.py).
    destroy_mark.clear_destroy_mark(client, spec.submission_id)
    plan = props.get("gate_plan")
    gate = run_owner.GateSetup.of(props.get("gate_policy"), GatePlan.from_dict(plan) if plan else None)
    # The run ledger on the head's Lustre numbers the attempt; a state from before `ledger_path` has none.
    path = props.get("ledger_path")
    reader = (lambda: ledger.read_on_head(client, path, stack=spec.stack)) if path else None
    ensure = _ensure_workers(client, props)
    result, report = run_owner.submit_gated(client, spec, gate, on_line=_log, ledger=reader, ensure_workers=ensure)
    if not gate.on or report is None:
        summary = "gate off" if not gate.on else "job already on the cluster"
        return result, {"ran": False, "policy": gate.policy, "summary": summary}
    for line in report.lines():
        _log(line)
    return result, {"ran": True, "policy": gate.policy, **report.outputs()}


def _stop_every_attempt(client: Any, job_id: str) -> None:
    """Stop the job and every attempt the watcher resubmitted (`<id>-r<N>`) and wait until each has ended: this
    runs before a destroy's Lustre export, while the Ray pods still run (they are `deleted_with` the cluster), so
    a running attempt would write during the export. A second look catches an attempt submitted meanwhile."""
    from workloads import submit

    for _ in range(3):
        running = [
            j.submission_id
            for j in submit.list_jobs(client)
            if (j.submission_id == job_id or j.submission_id.startswith(f"{job_id}-r"))
            and j.status not in submit.TERMINAL
        ]
        if not running:
            return
        for attempt in running:
            with contextlib.suppress(submit.UnknownJob):
                submit.stop(client, attempt)
        for attempt in running:
            submit.wait(client, attempt, timeout=STOP_TIMEOUT_S, poll_interval=2.0)


class JobSubmissionProvider(ResourceProvider):
    """Create = submit, update = resubmit, delete = stop, read = status (see the module doc)."""

    # The pickled provider carries no secret, so it need not be stored as one (keeps the state
    # and previews readable; Pulumi still marks it secret if a secret were ever captured).
    serialize_as_secret_always = False

    def create(self, props: dict[str, Any]) -> CreateResult:
        _wait_for_ray_cluster(props, ask_early=True)
        result, gate = _submit_gated(_client(props, wait_ready=True), _spec(props), props)
        return CreateResult(id_=result.submission_id, outs=_outs(props, result.submission_id, result.status, gate))

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        if olds.get("spec_hash") != news.get("spec_hash"):
            return DiffResult(changes=True, replaces=["spec_hash"], delete_before_replace=True)
        changed = any(olds.get(k) != news.get(k) for k in CONNECTION_KEYS)
        return DiffResult(changes=changed, replaces=[], delete_before_replace=False)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        from workloads import submit

        _wait_for_ray_cluster(news)
        client = _client(news, wait_ready=True)
        spec = _spec(news)
        old_id = olds.get("submission_id")
        if old_id and olds.get("spec_hash") != spec.spec_hash:
            with contextlib.suppress(submit.UnknownJob):
                submit.stop(client, old_id)
        result, gate = _submit_gated(client, spec, news)
        return UpdateResult(outs=_outs(news, result.submission_id, result.status, gate))

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        from workloads import destroy_mark, submit

        job_id = props.get("submission_id") or id_
        with contextlib.suppress(submit.UnknownJob, submit.DashboardUnreachable, submit.WaitTimeout):
            client = _client(props)
            # First the mark: from here no watcher or CLI starts an attempt, or cleans checkpoints/, while
            # the Lustre export that follows copies it (workloads/destroy_mark.py).
            destroy_mark.mark_destroy_begun(client, job_id)
            _stop_every_attempt(client, job_id)

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        from workloads import submit

        try:
            current = submit.status(_client(props), id_)
        except submit.UnknownJob:
            return ReadResult(id_="", outs={})
        except submit.JobError as err:
            recorded = {k: v for k, v in props.items() if not k.startswith("__")}
            _log(f"job {id_}: refresh kept the recorded state (status {recorded.get('status')}), because {err}")
            return ReadResult(id_=id_, outs=recorded)
        return ReadResult(id_=id_, outs=_outs(props, id_, current, props.get("gate_result")))
