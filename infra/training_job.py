"""The training job as part of the stack: submitted to the Ray cluster on `pulumi up`.

`TrainingJob` wraps a dynamic resource whose provider (`workloads.hook.JobSubmissionProvider`)
talks to the Ray dashboard through the GKE API server's service proxy. Replacing the spec stops
the old job and submits the new one; `pulumi destroy` stops the job before the Ray cluster goes.

`__main__.py` builds the stack's `RunPlan` (`infra.run_plan.run_plan_for_stack`) and `JobSpec` once
(`job_spec_for_stack`, before any resource, so a job that cannot be built is a config error) and hands
the same two to this component and to the preemption watcher; the job takes its save period, gate and
gang wait from the run plan, never from the config:

    job = build_training_job(spec, run, cfg, endpoint=cluster.endpoint,
                             ca_certificate=cluster.ca_certificate,
                             head_service=ray.head_service, ray_cluster_name=ray.cluster_name,
                             ray_release=ray.release)

`build_training_job` returns None when `job.submit` is false. The release orders the submission after
the Helm release, which Helm reports deployed before the RayCluster's pods run (the provider itself
waits for the RayCluster named `ray_cluster_name` to be provisioned), and replaces the submission
whenever the release is replaced.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi.dynamic

from infra.config import PROJECT, ConfigError, StackConfig
from infra.options import child_options
from infra.pod_facts import DASHBOARD_PORT
from workloads import cli_args
from workloads.hook import JobSubmissionProvider
from workloads.job_spec import (
    JobBuildError,
    JobSpec,
    PoolShape,
    build_job,
    wandb_wanted,
)
from workloads.run_owner import GateSetup, RunPlan

COMPONENT_TYPE = "nemo-rl-gke:infra:TrainingJob"


class JobSubmission(pulumi.dynamic.Resource, module="nemo-rl-gke", name="JobSubmission"):
    """One Ray job submission (type `pulumi-python:dynamic/nemo-rl-gke:JobSubmission`)."""

    submission_id: pulumi.Output[str]
    status: pulumi.Output[Optional[str]]
    gate_result: pulumi.Output[Optional[dict]]

    def __init__(self, name: str, props: dict, opts: Optional[pulumi.ResourceOptions] = None):
        # `status` and `gate_result` are outputs only; declaring them as None makes Pulumi expose them.
        super().__init__(JobSubmissionProvider(), name, {**props, "status": None, "gate_result": None}, opts)


@dataclass(frozen=True)
class TrainingJobArgs:
    """What `TrainingJob` needs (see `build_training_job` for each value's source)."""

    spec: JobSpec
    endpoint: pulumi.Input[str]
    ca_certificate: Optional[pulumi.Input[str]]
    namespace: str
    head_service: pulumi.Input[str]
    ray_cluster_name: pulumi.Input[str]
    ray_release: pulumi.Resource
    node_pools: Sequence[pulumi.Resource] = ()
    gate: GateSetup = GateSetup()
    """The run plan's gate (`RunPlan.gate`): run right before the submission."""
    ray_cluster_timeout_s: Optional[float] = None
    """How long the submission waits for the RayCluster's workers; None: the hook's own default (an hour)."""

    def props(self) -> dict:
        """The submission's inputs.

        The endpoint and the CA are what every client of the API server is shown; the provider may mark
        them secret (GKE's masterAuth), but they authorise nothing, and keeping them plain keeps the
        submission's inputs free of secrets (a secret here would also make Pulumi treat the whole job as
        secret in diffs)."""
        gate = self.gate
        return {
            **self.spec.to_dict(),
            "gke_endpoint": pulumi.Output.unsecret(pulumi.Output.from_input(self.endpoint)),
            # Empty for the DNS endpoint: its certificate is publicly trusted (system roots).
            "ca_cert_b64": pulumi.Output.unsecret(pulumi.Output.from_input(self.ca_certificate or "")),
            "namespace": self.namespace,
            "head_service": self.head_service,
            # The provider waits for this RayCluster to be provisioned before submitting.
            "ray_cluster_name": self.ray_cluster_name,
            # ... and runs the acceptance gate right before it submits (workloads/gate/).
            "gate_policy": gate.policy,
            "gate_plan": gate.plan.to_dict() if gate.plan is not None else None,
            # With a capacity ladder, no longer than the run's owner waits for the gang: after
            # `maxWaitMinutes` the watcher releases the partial workers (workloads/gang_wait.py), and a
            # RayCluster scaled to no workers would otherwise read as provisioned to this wait.
            **({"ray_cluster_timeout": self.ray_cluster_timeout_s} if self.ray_cluster_timeout_s else {}),
        }


class TrainingJob(pulumi.ComponentResource):
    """The NeMo-RL job of a stack.

    Outputs: `submission_id` (the Ray submission id), `status` (at submit time / last refresh),
    `gate_result` (the acceptance gate's numbers, `GateReport.outputs`), `dashboard_command` (how to
    open the Ray dashboard) and `logs_command` (how to follow the log with `python -m jobctl`).
    """

    submission_id: pulumi.Output[str]
    status: pulumi.Output[Optional[str]]
    gate_result: pulumi.Output[Optional[dict]]
    dashboard_command: pulumi.Output[str]
    logs_command: pulumi.Output[str]

    def __init__(self, name: str, args: TrainingJobArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(COMPONENT_TYPE, name, None, opts)
        spec, ray_release, props = args.spec, args.ray_release, args.props()
        # Submitted after the Ray release, stopped before it goes, and replaced with it: a changed Ray
        # value replaces the release (delete first, infra/ray_cluster.py), which takes the RayCluster and
        # the running job with it. The submission's inputs do not come from the release, and the engine
        # replaces a dependent only through such a data link or `replaceWith`, never through
        # `dependsOn` alone (pulumi/pulumi pkg/resource/deploy/step_generator.go:
        # calculateDependentReplacements, findDependentCascadeReplacements). With `replaceWith` the
        # engine stops the job before uninstalling the release and submits it again to the new one.
        # The node pools likewise: a replaced pool is deleted first (infra/cluster.py), and the engine
        # deletes what is `replaceWith` it before (pulumi/pulumi step_generator.go
        # findDependentCascadeReplacements), so the job ends cleanly, not with its nodes, and is
        # submitted again once the new pool's workers are up.
        # No `deleted_with` the cluster, unlike the other in-cluster objects: on a destroy the stop
        # must really happen (and be waited for) before the Lustre export starts; with the cluster
        # already gone the delete finds no dashboard and returns (workloads/hook.py).
        self.submission = JobSubmission(
            f"{name}-submission",
            props,
            child_options(self, opts, depends_on=[ray_release], replace_with=[ray_release, *args.node_pools]),
        )
        stack = shlex.quote(spec.stack)
        self.submission_id = self.submission.submission_id
        self.status = self.submission.status
        self.gate_result = self.submission.gate_result
        # The local proxy of `workloads/dashboard.py`: no kubectl, works through the DNS endpoint.
        self.dashboard_command = pulumi.Output.from_input(
            f"{cli_args.RUN} jobctl dashboard --stack {stack}  # then open http://127.0.0.1:{DASHBOARD_PORT}/"
        )
        self.logs_command = self.submission_id.apply(
            lambda sid: f"{cli_args.RUN} jobctl logs --stack {stack} --job {shlex.quote(sid)} --follow"
        )
        self.register_outputs(
            {
                "submissionId": self.submission_id,
                "status": self.status,
                "gateResult": self.gate_result,
                "dashboardCommand": self.dashboard_command,
                "logsCommand": self.logs_command,
            }
        )


def job_spec_for_stack(stack: str, cfg: StackConfig, *, wandb_key_set: bool, pool: PoolShape, run: RunPlan) -> JobSpec:
    """The stack's job, built from the validated config, the GPU pool facts and the run plan (its save period).

    The Pulumi program and `python -m jobctl` both call this, so they agree on the spec (and
    therefore on the submission id) for the same stack file. What only the job builder sees (GPUs
    that do not divide by the parallel sizes, an override of a key the stack derives, W&B without a
    project) becomes a `ConfigError` naming the key, raised before any resource exists.
    """
    try:
        return build_job(
            cfg.recipe,
            cfg.job,
            pool,
            cfg.ray.mount_path,
            stack,
            wandb_wanted(cfg.job, wandb_key_set),
            run.save_period,
        )
    except JobBuildError as err:
        raise ConfigError(f"{PROJECT}:{err.key}: {err}") from None


def build_training_job(
    spec: JobSpec,
    run: RunPlan,
    cfg: StackConfig,
    *,
    endpoint: pulumi.Input[str],
    ca_certificate: Optional[pulumi.Input[str]],
    head_service: pulumi.Input[str],
    ray_cluster_name: pulumi.Input[str],
    ray_release: pulumi.Resource,
    node_pools: Sequence[pulumi.Resource] = (),
    opts: Optional[pulumi.ResourceOptions] = None,
) -> Optional[TrainingJob]:
    """The stack's `TrainingJob`, or None when `job.submit` is false.

    Args:
        spec: the stack's job (`job_spec_for_stack`), the same one the preemption watcher resubmits.
        run: the run plan (`infra.run_plan.run_plan_for_stack`), the one the watcher ships: its gate runs
            right before the submission, and its gang wait (`gpuPool.capacity.maxWaitMinutes`) bounds the
            wait for the RayCluster's workers.
        cfg: the validated stack config (`job.submit`, `ray.namespace`).
        endpoint: the GKE cluster endpoint (`Cluster.endpoint`).
        ca_certificate: base64 CA of the endpoint's certificate (`GkeCluster.ca_certificate`); None for
            the DNS endpoint, whose certificate the system roots verify.
        head_service: the KubeRay head service name (`<raycluster>-head-svc`).
        ray_cluster_name: the RayCluster's name (`RayCluster.cluster_name`, the release's
            fullnameOverride); the job is submitted only once it is provisioned.
        ray_release: the Ray Helm release (`RayCluster.release`): the job is submitted after it,
            stopped before it is destroyed, and replaced whenever it is replaced.
        node_pools: the GKE node pools: the job is stopped before either is replaced, and resubmitted after.
        opts: further resource options of the component.
    """
    if not cfg.job.submit:
        return None
    args = TrainingJobArgs(
        spec,
        endpoint=endpoint,
        ca_certificate=ca_certificate,
        namespace=cfg.ray.namespace,
        head_service=head_service,
        ray_cluster_name=ray_cluster_name,
        ray_release=ray_release,
        node_pools=node_pools,
        gate=run.gate,
        ray_cluster_timeout_s=ray_cluster_timeout_s(run),
    )
    return TrainingJob("training-job", args, opts)


def ray_cluster_timeout_s(run: RunPlan) -> Optional[float]:
    """The run plan's gang wait in seconds: the deploy waits for the gang as long as the watcher does; None
    without `gpuPool.capacity`."""
    minutes = run.gang_max_wait_minutes
    return float(minutes * 60) if minutes is not None else None
