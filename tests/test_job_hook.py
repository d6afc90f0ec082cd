"""The Pulumi hook: the dynamic provider against a real local head, the component under mocks."""

from __future__ import annotations

import json
import pickle
import shlex
import socket
import sys
import textwrap
import time
import uuid

import dill
import pytest
from conftest import merged, spec_of, stack_config, stack_plan
from gate_support import cluster_plan
from pulumi.dynamic import DiffResult
from ray.job_submission import JobStatus
from ray_head import JOB_TIMEOUT, STALL_BOUND
from stalled_http import StalledServer

from infra.config import namespaced, parse
from infra.stack_file import read_stack_file
from infra.training_job import COMPONENT_TYPE
from tools import offline_plan as plan_mod
from tools.mocks import SIG_KEY
from workloads import submit as jobs
from workloads.hook import JobSubmissionProvider
from workloads.job_spec import JobSpec

DYNAMIC_TYPE = "pulumi-python:dynamic/nemo-rl-gke:JobSubmission"


def props(head, code: str, stack: str = "t-hook") -> dict:
    spec = JobSpec.create(
        stack=stack,
        recipe="r",
        entrypoint=f"{shlex.quote(sys.executable)} -c {shlex.quote(code)}",
        runtime_env={"env_vars": {"RAY_OVERRIDE_JOB_RUNTIME_ENV": "1", "RUN": uuid.uuid4().hex[:8]}},
    )
    return {**spec.to_dict(), "address": head.address, "__provider": "serialized"}


def test_create_update_read_delete_drive_the_job_on_the_cluster(head):
    provider = JobSubmissionProvider()
    client = jobs.connect(head.address)
    first = props(head, "import time; time.sleep(120)")
    created = provider.create(first)
    assert created.id == first["submission_id"] == created.outs["submission_id"]
    assert created.outs["status"] in ("PENDING", "RUNNING") and "__provider" not in created.outs
    jobs.wait(client, created.id, until={JobStatus.RUNNING}, timeout=JOB_TIMEOUT, poll_interval=0.2)
    # Creating again (e.g. after a lost state file) adopts the job instead of duplicating it.
    assert provider.create(first).id == created.id and len(jobs.list_jobs(client, "t-hook")) == 1

    olds = {**created.outs, "__provider": "serialized"}
    assert provider.diff(created.id, olds, first).changes is False
    second = props(head, "import time; time.sleep(120)  # v2")
    diff = provider.diff(created.id, olds, second)
    assert (diff.changes, diff.replaces, diff.delete_before_replace) == (True, ["spec_hash"], True)
    moved = {**first, "address": head.address + "/"}
    assert (
        provider.diff(created.id, olds, moved).changes is True and not provider.diff(created.id, olds, moved).replaces
    )

    updated = provider.update(created.id, olds, second)
    assert updated.outs["submission_id"] == second["submission_id"] != created.id
    assert jobs.wait(client, created.id, timeout=JOB_TIMEOUT, poll_interval=0.2) == JobStatus.STOPPED

    read = provider.read(second["submission_id"], {**updated.outs, "status": "PENDING"})
    assert read.id == second["submission_id"] and read.outs["status"] in ("PENDING", "RUNNING")
    assert provider.read("no-such-job", updated.outs).id == ""  # gone from the cluster: gone from the state

    provider.delete(second["submission_id"], updated.outs)
    # Delete returns once the job has ended, so what runs after it (the release, the Lustre export)
    # never overlaps the driver.
    assert jobs.status(client, second["submission_id"]) == JobStatus.STOPPED
    provider.delete("no-such-job", {**updated.outs, "submission_id": "no-such-job"})  # not an error


RECORDED = {
    "status": "RUNNING",
    "submission_id": "dev-job-1",
    "namespace": "nemo-rl",
    "head_service": "nemo-rl-head-svc",
}


def _refresh_kept(provider, props, capsys, reason):
    read = provider.read("dev-job-1", {**props, "__provider": "serialized"})
    assert read.id == "dev-job-1", "the resource must stay in the state"
    assert read.outs == {k: v for k, v in props.items()}, "the recorded outputs must be kept as they were"
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 1 and said[0].startswith("job dev-job-1: refresh kept the recorded state (status RUNNING)"), (
        said
    )
    assert reason in said[0], said


def test_refresh_keeps_the_recorded_state_when_the_dashboard_is_unreachable(capsys):
    with socket.socket() as closed:  # bound, never listening: connections are refused
        closed.bind(("127.0.0.1", 0))
        props = {**RECORDED, "address": f"http://127.0.0.1:{closed.getsockname()[1]}"}
        _refresh_kept(JobSubmissionProvider(), props, capsys, "Ray dashboard unreachable")


def test_refresh_keeps_the_recorded_state_when_the_dashboard_stalls(capsys):
    with StalledServer(answer_version=False) as address:
        props = {**RECORDED, "address": address, "http_timeout": 0.5}
        _refresh_kept(JobSubmissionProvider(), props, capsys, "ReadTimeout")


def test_refresh_keeps_the_recorded_state_without_google_credentials(capsys, monkeypatch, tmp_path):
    # The credentials boundary is faked, nothing else: no ADC file, no key file, no metadata server.
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path))
    with StalledServer(answer_version=True) as endpoint:  # an API server that is up
        props = {**RECORDED, "gke_endpoint": endpoint, "ca_cert_b64": "", "ray_cluster_name": "nemo-rl"}
        _refresh_kept(JobSubmissionProvider(), props, capsys, "no Google credentials")


def test_delete_of_a_job_behind_a_stalled_dashboard_returns_instead_of_hanging():
    with StalledServer(answer_version=True) as address:
        started = time.monotonic()
        JobSubmissionProvider().delete("dev-job-1", {**RECORDED, "address": address, "http_timeout": 0.5})
        assert time.monotonic() - started < STALL_BOUND


@pytest.mark.parametrize("endpoint", ["gke-0000.europe-west1.gke.goog.invalid", "127.0.0.1:{closed}"])
def test_delete_after_the_cluster_was_deleted_by_hand_returns_so_destroy_goes_on_to_the_lustre_export(endpoint):
    # The cluster is gone: its DNS endpoint no longer resolves (.invalid never does, RFC 6761), or
    # its IP refuses connections. No job can still run, so nothing is left to stop.
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        where = endpoint.format(closed=closed.getsockname()[1])
        props = {**RECORDED, "gke_endpoint": where, "ca_cert_b64": "", "ray_cluster_name": "nemo-rl"}
        started = time.monotonic()
        JobSubmissionProvider().delete("dev-job-1", props)
        assert time.monotonic() - started < 30


def test_delete_also_stops_an_attempt_the_watcher_resubmitted_before_the_export_can_start(monkeypatch):
    from types import SimpleNamespace

    from workloads import hook

    jobs_now = {"dev-job-1": JobStatus.FAILED, "dev-job-1-r2": JobStatus.RUNNING, "other-stack-job": JobStatus.RUNNING}
    stopped = []

    def stop(_client, job_id):
        stopped.append(job_id)
        jobs_now[job_id] = JobStatus.STOPPED
        return True

    class Head:
        """The Job API as the destroy mark uses it: submit a job, list every job."""

        def get_address(self):
            return "http://fake"

        def submit_job(self, submission_id, **_):
            assert not stopped, "the mark is set before any attempt is stopped"
            jobs_now[submission_id] = JobStatus.SUCCEEDED

        def list_jobs(self):
            return [SimpleNamespace(submission_id=k, status=v) for k, v in jobs_now.items()]

    monkeypatch.setattr(hook, "_client", lambda props, **_: Head())
    monkeypatch.setattr(
        jobs, "list_jobs", lambda _c: [SimpleNamespace(submission_id=k, status=v) for k, v in jobs_now.items()]
    )
    monkeypatch.setattr(jobs, "stop", stop)
    monkeypatch.setattr(jobs, "wait", lambda _c, job_id, **_: jobs_now[job_id])
    JobSubmissionProvider().delete("dev-job-1", dict(RECORDED))
    assert stopped == ["dev-job-1-r2"], "a resubmitted attempt would still write to Lustre during the export"
    # The destroy mark (workloads/destroy_mark.py): from now on nothing starts an attempt of dev-job-1.
    assert "dev-job-1-destroying" in jobs_now
    assert jobs_now["other-stack-job"] is JobStatus.RUNNING


def test_the_provider_pickles_by_reference_and_carries_no_state():
    blob = dill.dumps(JobSubmissionProvider(), protocol=pickle.DEFAULT_PROTOCOL, recurse=True)
    assert b"workloads.hook" in blob and b"JobSubmissionProvider" in blob
    assert len(blob) < 200  # the class by name, not its code or any captured value
    assert isinstance(dill.loads(blob), JobSubmissionProvider)
    assert JobSubmissionProvider.serialize_as_secret_always is False
    assert isinstance(JobSubmissionProvider().diff("x", {"spec_hash": "a"}, {"spec_hash": "a"}), DiffResult)


PROGRAM = textwrap.dedent(
    """
    import pulumi
    from infra import config as stack_config
    from infra.gate_plan import gate_plan_for_stack
    from infra.placement import gpu_pool_facts
    from infra.run_plan import run_plan_for_stack
    from infra.stack_context import StackContext
    from infra.training_job import build_training_job, job_spec_for_stack

    settings = stack_config.load()
    cfg = settings.config
    pool = gpu_pool_facts(StackContext.from_config(settings.stack, cfg), cfg)
    run = run_plan_for_stack(settings.stack, cfg, pool, gate_plan_for_stack(cfg, pool))
    job = build_training_job(
        job_spec_for_stack(settings.stack, cfg, wandb_key_set=settings.wandb_key_set, pool=pool, run=run),
        run,
        cfg,
        # GKE's endpoint and CA arrive as secrets from the provider; the job must not carry them so.
        endpoint=pulumi.Output.secret("203.0.113.10"),
        ca_certificate=pulumi.Output.secret("Q0EK"),
        head_service="dev-ray-head-svc",
        ray_cluster_name="dev-ray",
        ray_release=pulumi.CustomResource("kubernetes:helm.sh/v3:Release", "ray-release", {}),
    )
    if job is not None:
        pulumi.export("jobId", job.submission_id)
        pulumi.export("logsCommand", job.logs_command)
        pulumi.export("dashboardCommand", job.dashboard_command)
    """
)


def _secret_markers(value) -> list:
    if isinstance(value, dict):
        return ([value] if SIG_KEY in value else []) + [m for v in value.values() for m in _secret_markers(v)]
    if isinstance(value, list):
        return [m for v in value for m in _secret_markers(v)]
    return []


def test_the_component_registers_the_submission_without_any_secret_input(tmp_path):
    program = tmp_path / "__main__.py"
    program.write_text(PROGRAM)
    token = "hf_offline_test_token_value"
    config, secret_keys = stack_config("dev", hfToken=token)
    plan = plan_mod.run_program("dev", config, secret_keys + ["nemo-rl-gke:hfToken"], program=program)

    component = plan.one(COMPONENT_TYPE)
    submission = plan.one(DYNAMIC_TYPE)
    assert submission.parent == component.urn and submission.custom
    from jobctl.stack import build_spec, load_stack

    spec = build_spec(load_stack("dev"))
    inputs = submission.inputs
    assert {
        k: inputs[k] for k in ("entrypoint", "runtime_env", "submission_id", "metadata", "spec_hash")
    } == spec.to_dict()
    assert (inputs["gke_endpoint"], inputs["ca_cert_b64"], inputs["namespace"], inputs["head_service"]) == (
        "203.0.113.10",
        "Q0EK",
        "nemo-rl",
        "dev-ray-head-svc",
    )
    assert inputs["ray_cluster_name"] == "dev-ray"  # the provider waits for this RayCluster
    assert _secret_markers(submission.raw_inputs) == []  # not even the pickled provider
    assert token not in json.dumps(submission.raw_inputs)
    assert plan.outputs["jobId"] == spec.submission_id
    assert (
        plan.outputs["logsCommand"]
        == f".venv/bin/python -m jobctl logs --stack dev --job {spec.submission_id} --follow"
    )
    assert plan.outputs["dashboardCommand"].startswith(
        ".venv/bin/python -m jobctl dashboard --stack dev  # then open http://127.0.0.1:8265/"
    )


def test_job_submit_false_builds_no_training_job(tmp_path):
    program = tmp_path / "__main__.py"
    program.write_text(PROGRAM)
    config, secret_keys = stack_config("dev", job={"recipe": "qwen2.5-1.5b-gsm8k", "submit": False})
    plan = plan_mod.run_program("dev", config, secret_keys, program=program)
    assert plan.by_type(COMPONENT_TYPE) == [] and plan.by_type(DYNAMIC_TYPE) == []


@pytest.mark.parametrize("stack", ["dev", "b200", "h200"])
def test_the_submission_in_the_stack_waits_for_the_ray_release_and_carries_its_spec(stack):
    plan = stack_plan(stack)
    (release,) = plan.by_type("kubernetes:helm.sh/v3:Release")
    submission = plan.one("pulumi-python:dynamic/nemo-rl-gke:JobSubmission", "training-job-submission")
    assert release.urn in submission.dependencies, f"{submission.name} must be created after {release.name}"
    cfg = parse(namespaced(read_stack_file(plan_mod.ROOT / f"Pulumi.{stack}.yaml")[0]), stack)
    spec = spec_of(stack, cfg, wandb_key_set=False)
    assert submission.inputs["submission_id"] == spec.submission_id, submission.name
    assert submission.inputs["entrypoint"] == spec.entrypoint, submission.name
    # The job's layout is the plan's GPU pool and Ray worker group, not a number typed twice.
    pool = plan.one("gcp:container/nodePool:NodePool", "gpu-pool")
    (accelerator,) = pool.inputs["nodeConfig"]["guestAccelerators"]
    words = shlex.split(submission.inputs["entrypoint"])
    # Every GPU pool scales from 0 to its nodeCount (infra/cluster.py): the job takes the top of the range.
    nodes = pool.inputs["autoscaling"]["totalMaxNodeCount"]
    assert f"cluster.num_nodes={nodes}" in words, f"{submission.name} vs {pool.name}"
    assert f"cluster.gpus_per_node={accelerator['count']}" in words, f"{submission.name} vs {pool.name}"
    worker = release.inputs["values"]["worker"]
    # Installed with no worker, up to the pool: the submission asks for them (workloads/worker_group.py).
    assert (worker["replicas"], worker["minReplicas"], worker["maxReplicas"]) == (0, 0, nodes), release.name
    assert (submission.inputs["worker_group"], submission.inputs["worker_replicas"]) == (worker["groupName"], nodes)


@pytest.mark.parametrize("stack", ["dev", "b200", "h200"])
def test_the_submission_is_replaced_whenever_the_ray_release_is_replaced(stack):
    # The release is replaced (delete first) on any Ray value change, and the job dies with its
    # RayCluster. The submission takes no input from the release, and the engine replaces a dependent
    # only through such a data link or `replaceWith` (pulumi/pulumi step_generator.go), so the
    # submission must name the release in `replaceWith` to be stopped and submitted again.
    plan = stack_plan(stack)
    (release,) = plan.by_type("kubernetes:helm.sh/v3:Release")
    assert release.options.get("deleteBeforeReplace") and "values" in release.options["replaceOnChanges"]
    submission = plan.one(DYNAMIC_TYPE, "training-job-submission")
    assert release.urn in submission.options.get("replaceWith", []), submission.name


def test_a_replaced_release_stops_the_job_then_submits_it_to_the_new_ray_cluster(head):
    # What the engine runs for a `replaceWith` cascade of a delete-before-replace release: the
    # submission's delete before the release goes, its create after the new release is up. Both are
    # the real provider against a real head (standing in for the old and the new Ray cluster).
    provider = JobSubmissionProvider()
    client = jobs.connect(head.address)
    job = props(head, "import time; time.sleep(120)", stack="t-replace")
    created = provider.create(job)
    jobs.wait(client, created.id, until={JobStatus.RUNNING}, timeout=JOB_TIMEOUT, poll_interval=0.2)

    provider.delete(created.id, {**created.outs, "__provider": "serialized"})
    assert jobs.status(client, created.id) == JobStatus.STOPPED  # ended before the release goes
    recreated = provider.create(job)
    assert recreated.outs["status"] in ("PENDING", "RUNNING"), recreated.outs
    # The same spec, running again (a new attempt on this head; attempt 1 on a fresh RayCluster).
    assert recreated.id == jobs.attempt_id(job["submission_id"], 2)
    assert (
        jobs.wait(client, recreated.id, until={JobStatus.RUNNING}, timeout=JOB_TIMEOUT, poll_interval=0.2)
        == JobStatus.RUNNING
    )
    provider.delete(recreated.id, recreated.outs)


@pytest.mark.parametrize("stack", ["dev", "b200", "h200"])
def test_the_stack_submission_waits_for_the_raycluster_the_helm_release_names(stack):
    """The hook skips its readiness wait when `ray_cluster_name` is empty (local test heads): the
    stack must always pass it, equal to the RayCluster's name (the release's fullnameOverride)."""
    plan = stack_plan(stack)
    (release,) = plan.by_type("kubernetes:helm.sh/v3:Release")
    submission = plan.one(DYNAMIC_TYPE, "training-job-submission")
    name = release.inputs["values"]["fullnameOverride"]
    assert name and submission.inputs["ray_cluster_name"] == name, submission.name
    assert submission.inputs["namespace"] == release.inputs["namespace"]
    assert submission.inputs["head_service"] == f"{name}-head-svc"
    # The DNS endpoint, verified with the system roots: no cluster CA travels with the submission.
    assert submission.inputs["gke_endpoint"] == plan.outputs["clusterEndpoint"] and "address" not in submission.inputs
    assert submission.inputs["ca_cert_b64"] == "", submission.name


# ------------------------------------------------------------------------------------ the acceptance gate


def quick_failing_gate(**changes) -> dict:
    """A real gate plan that the local head fails at once: it has no GPU node (2 expected)."""
    return cluster_plan(
        gpu_name="H200",
        storage_expected_gbps=8.8,
        storage_floor_gbps=4.4,
        timeout_s=60,
        python=sys.executable,
        **changes,
    ).to_dict()


def test_a_failed_gate_under_enforce_stops_the_hook_before_anything_is_submitted(head):
    from workloads.gate import GateFailed

    client = jobs.connect(head.address)
    gated = {
        **props(head, "print('never')", stack="t-hook-gate"),
        "gate_policy": "enforce",
        "gate_plan": quick_failing_gate(),
    }
    with pytest.raises(GateFailed, match=r"^acceptance gate FAILED: gpus: 0 of 2 worker nodes in the Ray cluster$"):
        JobSubmissionProvider().create(gated)
    assert jobs.list_jobs(client, "t-hook-gate") == []


def test_under_warn_a_failed_gate_is_reported_and_the_job_submitted_and_a_running_job_is_not_gated_again(head):
    client = jobs.connect(head.address)
    gated = {
        **props(head, "import time; time.sleep(120)", stack="t-hook-warn"),
        "gate_policy": "warn",
        "gate_plan": quick_failing_gate(),
    }
    created = JobSubmissionProvider().create(gated)
    gate = created.outs["gate_result"]
    assert gate["ran"] is True and gate["passed"] is False and gate["policy"] == "warn"
    assert gate["summary"] == "acceptance gate FAILED: gpus: 0 of 2 worker nodes in the Ray cluster"
    assert gate["healthyGpus"] == 0 and gate["seconds"] >= 0 and "__provider" not in created.outs
    assert [j.submission_id for j in jobs.list_jobs(client, "t-hook-warn")] == [created.id]
    # The same job already runs: no gate (it would wait for the job's GPUs), nothing resubmitted.
    again = JobSubmissionProvider().create({**gated, "gate_policy": "enforce"})
    assert again.id == created.id and again.outs["gate_result"]["ran"] is False
    assert again.outs["gate_result"]["summary"] == "job already on the cluster"
    read = JobSubmissionProvider().read(created.id, created.outs)
    assert read.outs["gate_result"] == gate  # refresh keeps the numbers of the gate that ran
    jobs.stop(client, created.id)


@pytest.mark.parametrize(
    ("stack", "policy", "nodes", "floor"), [("dev", "warn", 1, 0.0), ("h200", "enforce", 2, 162.06)]
)
def test_the_stack_submission_carries_the_stacks_gate_policy_and_plan(stack, policy, nodes, floor):
    submission = stack_plan(stack).one(DYNAMIC_TYPE, "training-job-submission")
    plan = submission.inputs["gate_plan"]
    assert submission.inputs["gate_policy"] == policy, submission.name
    assert (plan["node_count"], plan["gpus_per_node"], plan["busbw_floor_gbps"], plan["expect_net"]) == (
        nodes,
        8,
        floor,
        "gIB",
    )
    assert plan["backend"] == "nccl" and plan["device"] == "cuda" and plan["mount_path"] == "/lustre"


def test_job_gate_off_registers_no_gate_plan():
    config, secret_keys = stack_config("h200", job=merged("h200", "job", {"gate": "off"}))
    plan = plan_mod.run_program("h200", config, secret_keys)
    submission = plan.one(DYNAMIC_TYPE, "training-job-submission")
    assert submission.inputs["gate_policy"] == "off" and submission.inputs.get("gate_plan") is None  # None is not sent


@pytest.mark.parametrize("stack", ["b200-ladder", "dev"])
def test_with_a_capacity_ladder_the_deploy_waits_for_the_workers_no_longer_than_the_watcher_waits_for_the_gang(
    stack,
):
    # After maxWaitMinutes the watcher scales an incomplete gang to no workers; a RayCluster with no
    # workers reads as provisioned, so the deploy's own wait must end by then (the hook's default: an hour).
    plan = stack_plan(stack)
    submission = plan.one(DYNAMIC_TYPE, "training-job-submission")
    capacity = json.loads(read_stack_file(plan_mod.ROOT / f"Pulumi.{stack}.yaml")[0]["nemo-rl-gke:gpuPool"]).get(
        "capacity"
    )
    if capacity is None:
        assert "ray_cluster_timeout" not in submission.inputs, submission.name
    else:
        assert capacity["maxWaitMinutes"] == 90
        assert submission.inputs["ray_cluster_timeout"] == 90 * 60, submission.name
