"""The training job as part of the stack: a dynamic resource (`workloads.hook.JobSubmissionProvider`) that
submits the run plan's `JobSpec` to the Ray dashboard through the GKE API server's service proxy on `pulumi up`,
stops it before the Ray cluster goes, and submits it again when the spec, the release or a pool is replaced.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

import pulumi
import pulumi.dynamic

from infra.config import PROJECT, ConfigError, StackConfig
from infra.options import child_options
from infra.pod_facts import DASHBOARD_PORT
from infra.run_plan import ledger_on_lustre
from workloads import cli_args
from workloads.hook import JobSubmissionProvider
from workloads.job_spec import JobBuildError, JobSpec, PoolShape, build_job, wandb_wanted
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
    ledger_path: Optional[str] = None
    """The run ledger on the head's Lustre mount: the hook numbers the attempt from it after a head restart."""
    worker_group: Optional[str] = None
    """The RayCluster's GPU worker group, which the submission asks for `worker_replicas` of (None: none)."""
    worker_replicas: int = 0

    def props(self) -> dict:
        """The submission's inputs. The endpoint and the CA authorise nothing, so they are unsecreted: a secret
        here would make Pulumi treat the whole job as secret in diffs."""
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
            # The attempts' durable count (workloads/run_owner.py `next_attempt`).
            **({"ledger_path": self.ledger_path} if self.ledger_path else {}),
            # The Helm values install no workers: the submission asks for them (workloads/worker_group.py).
            **(
                {"worker_group": self.worker_group, "worker_replicas": self.worker_replicas}
                if self.worker_group and self.worker_replicas
                else {}
            ),
        }


class TrainingJob(pulumi.ComponentResource):
    """The NeMo-RL job of a stack; `gate_result` is the acceptance gate's numbers (`GateReport.outputs`)."""

    submission_id: pulumi.Output[str]
    status: pulumi.Output[Optional[str]]
    gate_result: pulumi.Output[Optional[dict]]
    dashboard_command: pulumi.Output[str]
    logs_command: pulumi.Output[str]

    def __init__(self, name: str, args: TrainingJobArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(COMPONENT_TYPE, name, None, opts)
        spec, ray_release, props = args.spec, args.ray_release, args.props()
        # `replaceWith` the release and the pools (both deleted first when replaced): the engine replaces a
        # dependent through a data link or `replaceWith`, never `dependsOn` alone (pulumi/pulumi
        # pkg/resource/deploy/step_generator.go calculateDependentReplacements,
        # findDependentCascadeReplacements), so the job stops cleanly first and is submitted again after.
        # No `deleted_with` the cluster: on a destroy the stop must be waited for before the Lustre export.
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
    """The stack's job (the program and `python -m jobctl` agree on it); what only the builder sees is a
    `ConfigError` naming the key, before any resource exists."""
    lost, window = cfg.job.max_lost_minutes, run.save_window_seconds
    if lost is not None and window is not None and window > lost * 60:
        # The save period is at least one step (infra/run_plan.py `derived_save_period`), so a bound below one save
        # cycle could never be kept: a preemption may always lose more than it allows.
        raise ConfigError(
            f"{PROJECT}:job.maxLostMinutes: {lost:g} is below one save cycle of job.recipe {cfg.job.recipe!r} (one "
            f"step and one checkpoint write: {window / 60:.1f} min at the plan's step and write times); allowed: at "
            f"least {math.ceil(window / 6) / 10:g}"
        )
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
    """The stack's `TrainingJob`, or None when `job.submit` is false: `spec` and `run` are the program's one job
    and run plan (the watcher's too); `ca_certificate` is None for the DNS endpoint (system roots verify it);
    the submission waits for the RayCluster `ray_cluster_name` and is replaced with `ray_release` and
    `node_pools`."""
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
        ledger_path=ledger_on_lustre(cfg.ray.mount_path, spec.stack),
        worker_group=run.ray_worker_group,
        worker_replicas=run.node_count,
    )
    return TrainingJob("training-job", args, opts)


def ray_cluster_timeout_s(run: RunPlan) -> Optional[float]:
    """The deploy waits for the gang as long as the watcher does; None without `gpuPool.capacity`."""
    minutes = run.gang_max_wait_minutes
    return float(minutes * 60) if minutes is not None else None
