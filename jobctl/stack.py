"""The stack as the CLI sees it: its file read and validated, and the run plan, job and gate built from it with
the infra functions `__main__.py` calls, in its order (the run plan first, the job from it), so both agree."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from infra.config import ConfigError, StackConfig, wandb_key_set
from infra.gate_plan import gate_plan_for_stack
from infra.placement import gpu_pool_facts
from infra.run_plan import run_plan_for_stack
from infra.stack_context import GpuPoolFacts, StackContext
from infra.stack_file import ROOT, StackFileError
from infra.stack_file import load_stack as load_stack_file
from infra.training_job import job_spec_for_stack
from workloads.exit_codes import CommandError
from workloads.gate import GatePlan
from workloads.job_types import JobSpec
from workloads.run_owner import RunPlan


@dataclass(frozen=True)
class Stack:
    name: str
    config: StackConfig
    secret_keys: frozenset[str]


def load_stack(name: str, config_file: Optional[str] = None) -> Stack:
    """Read and validate `Pulumi.<name>.yaml` (or `config_file`) the way the Pulumi program does."""
    try:
        # `pulumi up` would stop here (infra.config.load), so the job must not run either.
        loaded = load_stack_file(name, ROOT, Path(config_file) if config_file else None)
    except (StackFileError, ConfigError) as err:
        raise CommandError(str(err).replace("\n", "; ")) from None
    return Stack(name, loaded.config, loaded.secret_keys)


def pool_facts(stack: Stack) -> GpuPoolFacts:
    """The stack's GPU pool facts, as `pulumi up` decides them."""
    return gpu_pool_facts(StackContext.from_config(stack.name, stack.config), stack.config)


def build_spec(stack: Stack) -> JobSpec:
    """The stack's job exactly as `pulumi up` builds it (same pool facts, same run plan, same spec, same id)."""
    wandb = wandb_key_set(stack.secret_keys)
    try:
        return job_spec_for_stack(
            stack.name, stack.config, wandb_key_set=wandb, pool=pool_facts(stack), run=run_plan(stack)
        )
    except ConfigError as err:
        raise CommandError(str(err)) from None


def gate_plan(stack: Stack) -> GatePlan:
    """The stack's acceptance gate exactly as `pulumi up` hands it to the job submission."""
    return gate_plan_for_stack(stack.config, pool_facts(stack))


def run_plan(stack: Stack) -> RunPlan:
    """The stack's `RunPlan` as `pulumi up` ships it to the watcher, without the checkpoint directory (on Lustre, not
    visible from here); it names no RayCluster: the gang wait needs the in-cluster API (`watcher.gang_view`)."""
    plan = run_plan_for_stack(stack.name, stack.config, pool_facts(stack), gate_plan(stack))
    return dataclasses.replace(plan, checkpoint_dir=None)
