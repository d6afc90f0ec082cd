"""`job`: the NeMo-RL GRPO job submitted after deploy; and the checks of the job against the pool
(run by `StackConfig`, in its order)."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Literal, Optional

from pydantic import Field, StringConstraints, field_validator, model_validator

from infra.config.base import Model
from infra.config.errors import KeyedValueError, shown

from infra.config.patterns import SAFE_TOKEN
from infra.flavours import Flavour
from workloads.overrides import data_key_problem, parse_override
from workloads.recipes import RECIPES, Parallelism, Recipe

# NeMo-RL override keys that change how a job lays out over GPUs (NVIDIA-NeMo/RL examples/configs).
_PARALLELISM_KEYS = {
    "policy.dtensor_cfg.tensor_parallel_size": "train_tensor_parallel",
    "policy.megatron_cfg.tensor_model_parallel_size": "train_tensor_parallel",
    "policy.generation.vllm_cfg.tensor_parallel_size": "generation_tensor_parallel",
    "policy.generation.colocated.enabled": "colocated",
    "policy.generation.colocated.resources.num_nodes": "generation_nodes",
}

Override = Annotated[str, StringConstraints(pattern=SAFE_TOKEN, max_length=512)]


class JobConfig(Model):
    """The NeMo-RL GRPO job submitted after deploy."""

    recipe: str = Field("qwen2.5-1.5b-gsm8k", description=f"Recipe name: one of {', '.join(RECIPES)}.")
    overrides: tuple[Override, ...] = Field(
        (),
        description="Extra NeMo-RL overrides, applied last: `a.b=v` sets a key of the recipe's config, `+a.b=v` adds "
        "a new one, `++a.b=v` adds or sets, `~a.b` deletes. Checked before any resource with NeMo-RL's own parser "
        "against the recipe's config at its pinned NeMo-RL version; refused: a leading `-`, a key the config lacks "
        "(without `+`), deleting or replacing what the stack sets (e.g. `~checkpointing`).",
    )
    submit: bool = Field(True, description="Submit the job on `pulumi up`; false deploys the Ray cluster only.")
    max_num_steps: Optional[int] = Field(None, ge=1, description="Override the recipe's `grpo.max_num_steps`.")
    wandb_project: Optional[str] = Field(None, pattern=r"^[A-Za-z0-9._\-]{1,128}$", description="W&B project; enables W&B logging (needs the `wandbApiKey` secret).")
    gate: Optional[Literal["enforce", "warn", "off"]] = Field(
        None,
        description="The acceptance gate before the job is submitted (GPUs, gIB fabric bandwidth, Lustre throughput; "
        "docs/acceptance-gate.md): `enforce` does not submit after a failed gate, `warn` reports and submits, `off` "
        "skips it. Default: `enforce` when `gpuPool.nodeCount` > 1, else `warn`.",
    )

    @field_validator("recipe")
    @classmethod
    def _recipe(cls, v: str) -> str:
        if v not in RECIPES:
            raise ValueError(f"unknown recipe {v!r}; allowed: {', '.join(RECIPES)}")
        return v

    @field_validator("overrides")
    @classmethod
    def _override_syntax(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        # Only the shape here; which keys may be set is the job builder's (workloads/job_spec.py).
        for i, override in enumerate(v):
            parsed = parse_override(override)
            if not parsed.key:
                raise KeyedValueError(f"[{i}]", f"{shown(override)} has no key; allowed: key=value, +key=value, ++key=value or ~key")
            if parsed.value is None and not parsed.deletes:
                raise KeyedValueError(f"[{i}]", f"{shown(override)} has no '='; allowed: key=value, +key=value, ++key=value or ~key")
        return v

    @model_validator(mode="after")
    def _data_keys_the_images_loader_reads(self) -> "JobConfig":
        image = RECIPES[self.recipe].image
        problems = [p for o in self.overrides if (p := data_key_problem(image.tag, o))]
        if problems:
            raise KeyedValueError("overrides", f"recipe {self.recipe!r} runs {image.ref}: " + "; ".join(problems))
        return self

    @property
    def recipe_spec(self) -> Recipe:
        return RECIPES[self.recipe]

    @property
    def parallelism(self) -> Parallelism:
        """The recipe's parallelism with the user's overrides of the parallelism keys applied."""
        changes: dict[str, Any] = {}
        for override in self.overrides:
            parsed = parse_override(override)
            field_name = _PARALLELISM_KEYS.get(parsed.key)
            if not parsed.assigns or field_name is None:
                continue
            if field_name == "colocated":
                changes[field_name] = parsed.value.lower() == "true"
            elif parsed.value.isdigit():
                changes[field_name] = int(parsed.value)
        return dataclasses.replace(self.recipe_spec.parallelism, **changes)


def check_job_fits(job: JobConfig, node_count: int, flavour: Flavour) -> None:
    """The recipe's layout, with the user's parallelism overrides, fits the pool: tensor parallel
    within a node, a node left for training (`Parallelism.training_nodes`), the recipe's minimum."""
    try:
        par = job.parallelism
    except ValueError as err:  # the recipe's layout refuses the overridden values
        raise KeyedValueError("job.overrides", str(err)) from None
    nodes, gpus = node_count, flavour.gpus_per_node
    recipe = job.recipe
    if par.train_tensor_parallel > gpus:
        raise KeyedValueError(
            "job.overrides",
            f"recipe {recipe!r} with these overrides uses tensor parallel {par.train_tensor_parallel}, "
            f"more than the {gpus} GPUs per node of flavour {flavour.name}; allowed: 1 to {gpus}",
        )
    if par.generation_tensor_parallel > gpus:
        raise KeyedValueError(
            "job.overrides",
            f"recipe {recipe!r} with these overrides uses vLLM tensor parallel "
            f"{par.generation_tensor_parallel}, more than the {gpus} GPUs per node of flavour "
            f"{flavour.name}; allowed: 1 to {gpus}",
        )
    if par.training_nodes(nodes) < 1:
        raise KeyedValueError(
            "gpuPool.nodeCount",
            f"{nodes} leaves no node for training: job.recipe {recipe!r} is not colocated and reserves "
            f"{par.generation_nodes} node(s) for generation; allowed: at least {par.generation_nodes + 1}",
        )
    if nodes < par.min_nodes:
        raise KeyedValueError(
            "gpuPool.nodeCount",
            f"{nodes} is too small for job.recipe {recipe!r}; allowed: at least {par.min_nodes}",
        )
