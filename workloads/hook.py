"""The Pulumi dynamic provider that submits the training job on `pulumi up`.

Pulumi pickles the provider object into the stack state and unpickles it in a separate provider
process, so the class lives here (an importable module, pickled by reference) and every piece of
logic is in `workloads.submit`; the provider holds no state of its own.

Props (the dynamic resource's inputs, snake_case as given):
    entrypoint, runtime_env, submission_id, metadata, spec_hash   the `JobSpec` (`JobSpec.to_dict`)
    address                                                       explicit dashboard URL, or
    gke_endpoint, ca_cert_b64, namespace, head_service            the API-server service proxy
    ray_cluster_name                                              the RayCluster CR to wait for
                                                                  (the Helm release's fullnameOverride);
                                                                  empty: no readiness wait (local heads)
    ready_timeout                                                 optional, seconds create/update
                                                                  wait for the dashboard (READY_TIMEOUT)
    ray_cluster_timeout                                           optional, seconds create/update wait
                                                                  for the RayCluster (RAY_CLUSTER_TIMEOUT)
    http_timeout                                                  optional, seconds one Job API request
                                                                  may wait for an answer (ray_connection.READ_TIMEOUT)
    gate_policy, gate_plan                                        the acceptance gate (`job.gate`:
                                                                  enforce|warn|off; the `GatePlan` as a
                                                                  dict); absent: no gate

Readiness is enforced here, not by Helm: Helm's wait does not understand the RayCluster custom
resource, so the release reports deployed before the head and the GPU workers run. Create and
update therefore first wait (`workloads.readiness`, through the API server at `gke_endpoint`)
until the RayCluster's `RayClusterProvisioned` and `HeadPodReady` conditions are true, and only
then wait for the dashboard and submit.

The acceptance gate (`workloads.gate`) runs right before a job is actually submitted (not
when the same job is already on the cluster), as the run's owner runs it (`workloads.run_owner`): the
hook waits while any gate of the stack runs (the preemption watcher may have started the same one: it
adopts that verdict), and on `enforce` a failed gate raises `GateFailed`, whose one-line message names
what failed and the numbers, and nothing is submitted; on `warn` its lines are printed and the job is
submitted anyway.

No secret is among them: the provider fetches a Google token itself at run time
(Application Default Credentials, as `kubectl` on GKE does) and the job's secrets come from files
the Ray pods mount. Outputs add `submission_id` (the actual id, `-r<N>` for a retried attempt),
`status` (as seen right after submitting, or at the last refresh) and `gate_result` (the gate's
numbers, `GateReport.outputs`; `{"ran": false, ...}` when it did not run).

Lifecycle:
    create  wait for the RayCluster, then submit (idempotent: an identical job already on the
            cluster is adopted)
    diff    a new spec_hash replaces the resource, old deleted first (its job stopped, GPUs freed);
            a changed connection only updates
    update  wait for the RayCluster (an update means its name or the connection changed), then
            submit again through the new connection; a changed spec stops the old job first
    delete  stop the job and every resubmitted attempt of it, and wait for them to end; a job or
            dashboard that is already gone (the cluster deleted by hand) is not an error: no job can
            outlive its cluster
    read    the job's current status; a job the cluster no longer knows reads as deleted. When the
            dashboard cannot be asked (unreachable, stalled, no or refused credentials) `pulumi refresh`
            keeps the recorded state and says so on one line, instead of failing the whole refresh:
            a refresh must not need the Ray head up (it may be scaled down, or the cluster gone).
"""

from __future__ import annotations

import sys
import time
from typing import Any, Callable, Optional

from pulumi.dynamic import CreateResult, DiffResult, ReadResult, ResourceProvider, UpdateResult

from workloads.job_types import JobSpec

SPEC_KEYS = ("entrypoint", "runtime_env", "submission_id", "metadata", "spec_hash")
CONNECTION_KEYS = ("address", "gke_endpoint", "ca_cert_b64", "namespace", "head_service", "ray_cluster_name")


def _spec(props: dict[str, Any]) -> JobSpec:
    return JobSpec.from_dict({k: props[k] for k in SPEC_KEYS})


READY_TIMEOUT = 1800.0
"""How long create/update wait for the dashboard: the RayCluster is applied before its head pod
runs, and the first pull of a NeMo-RL image (tens of GB) takes minutes."""
READY_POLL = 10.0
RAY_CLUSTER_TIMEOUT = 3600.0
"""How long create/update wait for the RayCluster to be provisioned: spot GPU capacity can take long."""
RAY_CLUSTER_POLL = 10.0
STOP_TIMEOUT_S = 120.0
"""How long delete waits for a stopped job to end (Ray sends SIGTERM, then SIGKILL after its own grace)."""


def _wait_for_ray_cluster(props: dict[str, Any]) -> None:
    """Block until the RayCluster `ray_cluster_name` is provisioned; a no-op without a name.

    Raises `readiness.RayClusterNotReady` (timeout) or `readiness.RayClusterAuthError`."""
    name = props.get("ray_cluster_name")
    if not name:
        return
    if not props.get("gke_endpoint"):
        raise ValueError(f"waiting for RayCluster {name!r} needs gke_endpoint (the Kubernetes API server)")
    from workloads import readiness

    shown: list[str] = []

    def report(progress: "readiness.RayClusterProgress") -> None:
        line = progress.describe()
        if not shown or shown[-1] != line:  # only changes: the provider's stderr goes to Pulumi's log
            shown.append(line)
            print(
                f"RayCluster {props['namespace']}/{name} after {progress.elapsed_s:.0f}s: {line}",
                file=sys.stderr,
                flush=True,
            )

    readiness.wait_for_raycluster_on_gke(
        props["gke_endpoint"],
        props["namespace"],
        name,
        ca_cert_b64=props.get("ca_cert_b64") or None,
        timeout_s=float(props.get("ray_cluster_timeout") or RAY_CLUSTER_TIMEOUT),
        poll_s=RAY_CLUSTER_POLL,
        on_status=report,
    )


def _connect_once(props: dict[str, Any]):
    from workloads import submit

    read_timeout = float(props["http_timeout"]) if props.get("http_timeout") else None
    if props.get("address"):
        return submit.connect(props["address"], read_timeout=read_timeout)
    return submit.connect(
        gke_endpoint=props["gke_endpoint"],
        ca_cert_b64=props.get("ca_cert_b64") or None,
        namespace=props["namespace"],
        service=props["head_service"],
        read_timeout=read_timeout,
    )


def _client(props: dict[str, Any], *, wait_ready: bool = False):
    """A connected client; with `wait_ready`, retry an unreachable dashboard until the deadline."""
    from workloads import submit

    deadline = time.monotonic() + float(props.get("ready_timeout") or READY_TIMEOUT)
    while True:
        try:
            return _connect_once(props)
        except submit.DashboardUnreachable:
            if not wait_ready or time.monotonic() + READY_POLL > deadline:
                raise
            time.sleep(READY_POLL)


def _inputs(props: dict[str, Any]) -> dict[str, Any]:
    """The props without Pulumi's own keys (`__provider`) and without earlier outputs."""
    return {k: v for k, v in props.items() if not k.startswith("__") and k not in OUTPUT_KEYS}


OUTPUT_KEYS = ("status", "gate_result")


def _log(line: str) -> None:
    # The provider's stderr goes to Pulumi's log of this resource.
    print(line, file=sys.stderr, flush=True)


def _submit_gated(client: Any, spec: JobSpec, props: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The job submitted the way the run's owner does it (`run_owner.submit_gated`: never while a gate
    runs, and only after this attempt's own gate under enforce/warn); returns the result and the gate's
    outputs. Raises `gate.GateFailed` (enforce) before anything is submitted."""
    from workloads import destroy_mark, run_owner
    from workloads.gate import GatePlan

    # A deploy that submits the job lifts the mark of a destroy that stopped half-way (workloads/destroy_mark.py).
    destroy_mark.clear_destroy_mark(client, spec.submission_id)
    plan = props.get("gate_plan")
    gate = run_owner.GateSetup.of(props.get("gate_policy"), GatePlan.from_dict(plan) if plan else None)
    policy = gate.policy
    reader = _ledger_reader(client, spec, props)
    result, report = run_owner.submit_gated(client, spec, gate, on_line=_log, ledger=reader)
    if not gate.on:
        return result, {"ran": False, "policy": policy, "summary": "gate off"}
    if report is None:
        return result, {"ran": False, "policy": policy, "summary": "job already on the cluster"}
    for line in report.lines():
        _log(line)
    return result, {"ran": True, "policy": policy, **report.outputs()}


def _ledger_reader(client: Any, spec: JobSpec, props: dict[str, Any]) -> Optional[Callable[[], Any]]:
    """What reads the run ledger on the head's Lustre (`props["ledger_path"]`) for `run_owner.next_attempt`;
    None for a state from before the prop (the job table alone numbers the attempt then)."""
    from workloads import ledger

    path = props.get("ledger_path")
    return (lambda: ledger.read_on_head(client, path, stack=spec.stack)) if path else None


def _stop_every_attempt(client: Any, job_id: str) -> None:
    """Stop the job and every attempt the preemption watcher resubmitted (`<id>-r<N>`,
    `submit.attempt_id`), and wait until each has ended: this runs before the Lustre export of a
    destroy, and the Ray pods keep running until their node pool goes (the in-cluster objects are
    `deleted_with` the cluster, __main__.py), so a still-running attempt would write during the
    export. The driver gets to finish writing (NeMo-RL saves to tmp_step_N and renames it whole).
    A second look catches an attempt the watcher submitted meanwhile; it resubmits no STOPPED job."""
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
            try:
                submit.stop(client, attempt)
            except submit.UnknownJob:
                pass
        for attempt in running:
            submit.wait(client, attempt, timeout=STOP_TIMEOUT_S, poll_interval=2.0)


class JobSubmissionProvider(ResourceProvider):
    """Create = submit, update = resubmit, delete = stop, read = status (see the module doc)."""

    # The pickled provider carries no secret, so it need not be stored as one (keeps the state
    # and previews readable; Pulumi still marks it secret if a secret were ever captured).
    serialize_as_secret_always = False

    def create(self, props: dict[str, Any]) -> CreateResult:
        _wait_for_ray_cluster(props)
        result, gate = _submit_gated(_client(props, wait_ready=True), _spec(props), props)
        outs = {
            **_inputs(props),
            "submission_id": result.submission_id,
            "status": str(result.status),
            "gate_result": gate,
        }
        return CreateResult(id_=result.submission_id, outs=outs)

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
            try:
                submit.stop(client, old_id)
            except submit.UnknownJob:
                pass
        result, gate = _submit_gated(client, spec, news)
        outs = {
            **_inputs(news),
            "submission_id": result.submission_id,
            "status": str(result.status),
            "gate_result": gate,
        }
        return UpdateResult(outs=outs)

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        from workloads import destroy_mark, submit

        job_id = props.get("submission_id") or id_
        try:
            client = _client(props)
            # First the mark: from here no watcher or CLI starts an attempt, or cleans checkpoints/, while
            # the Lustre export that follows copies it (workloads/destroy_mark.py).
            destroy_mark.mark_destroy_begun(client, job_id)
            _stop_every_attempt(client, job_id)
        except (submit.UnknownJob, submit.DashboardUnreachable, submit.WaitTimeout):
            pass

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        from workloads import submit

        try:
            current = submit.status(_client(props), id_)
        except submit.UnknownJob:
            return ReadResult(id_="", outs={})
        except submit.JobError as err:
            # The provider's stderr reaches the user as an info line (pulumi/pulumi
            # sdk/go/common/resource/plugin/plugin.go: dynamic provider output is not hidden).
            recorded = {k: v for k, v in props.items() if not k.startswith("__")}
            print(
                f"job {id_}: refresh kept the recorded state (status {recorded.get('status')}), because {err}",
                file=sys.stderr,
                flush=True,
            )
            return ReadResult(id_=id_, outs=recorded)
        outs = {**_inputs(props), "submission_id": id_, "status": str(current), "gate_result": props.get("gate_result")}
        return ReadResult(id_=id_, outs=outs)
