"""`job`: the NeMo-RL GRPO job submitted after deploy; and the checks of the job against the pool
(run by `StackConfig`, in its order)."""

from __future__ import annotations

import dataclasses
import re
from typing import Annotated, Any, Literal, Optional

from pydantic import AfterValidator, BeforeValidator, Field, StringConstraints

from infra.config.base import Model
from infra.config.errors import KeyedValueError, shown
from infra.config.patterns import SAFE_TOKEN
from infra.flavours import Flavour
from workloads.cli_args import looks_like_credential
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

MAX_OVERRIDES = 100
"""Overrides a stack may add: the recipes set at most 20, and each one is checked with NeMo-RL's own
parser, so thousands made a plan take a minute; a change that large is a recipe of its own."""
MAX_NUM_STEPS = 100_000
"""The most `job.maxNumSteps` accepted: a GRPO step of the recipes takes 3 (1.5B) to 18 (72B) minutes,
so 100 000 steps run for 7 months to 3 years of GPU time; more is a typo, not a run."""

# The secret rule of job.overrides (docs/input-validation.md, "Secrets in job.overrides"): overrides travel in
# plain text, so a key one of whose parts ends in a secret word (`hf_token`, `wandb.api_key`, but not
# `max_new_tokens`) and a value that `looks_like_credential` are refused.
_SECRET_WORDS = frozenset(
    {"token", "secret", "password", "passwd", "pwd", "credential", "credentials", "apikey", "netrc"}
)
_KEY_QUALIFIERS = frozenset({"api", "access", "secret", "private", "auth", "ssh", "signing"})


def secret_key_part(key: str) -> Optional[str]:
    """The part of a dotted override key that names a secret-ish setting, or None."""
    for part in key.split("."):
        before, last = ["", "", *(p for p in re.split(r"[_\-]", part.lower()) if p)][-2:]
        if (
            last in _SECRET_WORDS
            or (last == "key" and before in _KEY_QUALIFIERS)
            or (last.endswith("key") and last[:-3] in _KEY_QUALIFIERS)
        ):
            return part
    return None


_OVERRIDE_FORMS = "key=value, +key=value, ++key=value or ~key"
_SECRET_ALLOWED = (
    "allowed: no credential in job.overrides (they reach the job's entrypoint, the plan and the watcher's "
    "ConfigMap in plain text); the secrets are the hfToken and wandbApiKey keys (`pulumi config set --secret`), "
    "which reach the pods as files"
)


def check_recipe(v: str) -> str:
    """`job.recipe` is one of workloads/recipes.py's."""
    if v not in RECIPES:
        raise ValueError(f"unknown recipe {v!r}; allowed: {', '.join(RECIPES)}")
    return v


def check_no_credentials(v: Any) -> Any:
    """At most MAX_OVERRIDES overrides, none setting a credential's key or holding a token-like value. Before any
    other check, so that no later message repeats a token; the messages name the override by its index only."""
    if not isinstance(v, (list, tuple)):
        return v
    if len(v) > MAX_OVERRIDES:
        raise ValueError(
            f"{len(v)} overrides; allowed: at most {MAX_OVERRIDES} (a larger change is a recipe of its own)"
        )
    for i, override in enumerate(v):
        if not isinstance(override, str):
            continue
        parsed = parse_override(override)
        part = secret_key_part(parsed.key)
        if part is not None and parsed.value is not None:
            raise KeyedValueError(f"[{i}]", f"sets {part!r}, a name for a credential; {_SECRET_ALLOWED}")
        if looks_like_credential(override):
            raise KeyedValueError(
                f"[{i}]", f"holds a value that looks like a token or key (not shown); {_SECRET_ALLOWED}"
            )
    return v


def check_override_syntax(v: tuple[str, ...]) -> tuple[str, ...]:
    """Each override has a key and either an '=' or a leading '~'; which keys may be set is workloads/job_spec.py's."""
    for i, override in enumerate(v):
        parsed = parse_override(override)
        lacks = "key" if not parsed.key else "'='" if parsed.value is None and not parsed.deletes else None
        if lacks:
            raise KeyedValueError(f"[{i}]", f"{shown(override)} has no {lacks}; allowed: {_OVERRIDE_FORMS}")
    return v


def check_model_is_the_recipes(job: JobConfig) -> None:
    """No override changes or deletes `policy.model_name`: the model decides the sizing, estimates and gated-model
    check before any resource, unknown for an arbitrary name, so it is the recipe's."""
    model = job.recipe_spec.model
    for i, override in enumerate(job.overrides):
        parsed = parse_override(override)
        if parsed.key == "policy.model_name" and (parsed.deletes or parsed.value != model):
            same = [name for name, r in RECIPES.items() if r.model == parsed.value]
            hint = (
                f"job.recipe {same[0]!r}, which trains it"
                if same
                else f"a job.recipe of that model (recipes: {', '.join(RECIPES)})"
            )
            raise KeyedValueError(
                f"overrides[{i}]",
                f"{shown(override)} changes the model of job.recipe {job.recipe!r} ({model}), whose sizing, "
                f"estimates and gated-model check (hfToken) are the recipe's; allowed: {hint}",
            )


def check_data_keys(job: JobConfig) -> None:
    """The overrides' data keys are ones the recipe image's loader reads (`data_key_problem`)."""
    image = RECIPES[job.recipe].image
    problems = [p for o in job.overrides if (p := data_key_problem(image.tag, o))]
    if problems:
        raise KeyedValueError("overrides", f"recipe {job.recipe!r} runs {image.ref}: " + "; ".join(problems))


def job_parallelism(job: JobConfig) -> Parallelism:
    """The recipe's parallelism with the user's overrides of the parallelism keys applied."""
    changes: dict[str, Any] = {}
    for override in job.overrides:
        parsed = parse_override(override)
        field_name = _PARALLELISM_KEYS.get(parsed.key)
        if not parsed.assigns or field_name is None:
            continue
        if field_name == "colocated":
            changes[field_name] = parsed.value.lower() == "true"
        elif re.fullmatch(r"[0-9]+", parsed.value):  # ASCII: str.isdigit() takes '０' and '²' too
            changes[field_name] = int(parsed.value)
            if field_name.endswith("tensor_parallel") and changes[field_name] < 1:
                # A size of 0 divides the pool's GPUs by zero (workloads/job_spec.py) and NeMo-RL refuses it.
                raise ValueError(f"{parsed.key}={parsed.value} is not allowed; allowed: a size of 1 or more")
        elif parsed.value.strip().isdigit():
            raise ValueError(f"{parsed.key}={parsed.value} is not allowed; allowed: a whole number in ASCII digits")
    return dataclasses.replace(job.recipe_spec.parallelism, **changes)


class JobConfig(Model):
    """The NeMo-RL GRPO job submitted after deploy."""

    recipe: Annotated[str, AfterValidator(check_recipe)] = Field(
        "qwen2.5-1.5b-gsm8k", description=f"Recipe name: one of {', '.join(RECIPES)}."
    )
    overrides: Annotated[
        tuple[Override, ...], BeforeValidator(check_no_credentials), AfterValidator(check_override_syntax)
    ] = Field(
        (),
        description="Extra NeMo-RL overrides, applied last: `a.b=v` sets a key of the recipe's config, `+a.b=v` adds "
        "a new one, `++a.b=v` adds or sets, `~a.b` deletes. Checked before any resource with NeMo-RL's own parser "
        "against the recipe's config at its pinned NeMo-RL version; refused: a leading `-`, a key the config lacks "
        "(without `+`), deleting or replacing what the stack sets (e.g. `~checkpointing`), `policy.model_name` (the "
        f"model is the recipe's), a credential (docs/input-validation.md); at most {MAX_OVERRIDES} of at most 512 "
        "characters.",
    )
    submit: bool = True
    """Submit the job on `pulumi up`; false deploys the Ray cluster only."""
    max_num_steps: Optional[int] = Field(None, ge=1, le=MAX_NUM_STEPS)
    """Override the recipe's `grpo.max_num_steps` (at most 100000)."""
    wandb_project: Optional[str] = Field(None, pattern=r"^[A-Za-z0-9._\-]{1,128}$")
    """W&B project; enables W&B logging (needs the `wandbApiKey` secret)."""
    gate: Optional[Literal["enforce", "warn", "off"]] = None
    """The acceptance gate before the job is submitted (GPUs, gIB fabric bandwidth, Lustre throughput;
    docs/acceptance-gate.md): `enforce` does not submit after a failed gate, `warn` reports and submits, `off` skips it.
    Default: `enforce` when `gpuPool.nodeCount` > 1, else `warn`. It holds on every attempt: the preemption watcher
    gates each resubmission onto the nodes that replaced the lost ones."""
    max_lost_minutes: Optional[float] = Field(None, ge=1, le=10080)
    """Bound on the training one preemption may throw away, in minutes: the job's `checkpointing.save_period` is the
    largest whose save cycle plus one checkpoint write stays within it (from the plan's step time and checkpoint write
    time; at least 1 step). Default: the period whose writes take at most 10 % of training time, which keeps the loss
    near a step."""
    budget_usd: Optional[float] = Field(None, gt=0)
    """Spend limit of the run in USD: GPU node-hours of all its attempts x the plan's node-hour price of the pool's
    provisioning (the run ledger, docs/preemption-recovery.md). The watcher warns at 80 %; at 100 % it stops the run
    after its next complete checkpoint (at once when none comes within one save period) and resubmits nothing. Default:
    no limit."""

    checks = (check_model_is_the_recipes, check_data_keys)

    @property
    def recipe_spec(self) -> Recipe:
        return RECIPES[self.recipe]

    @property
    def parallelism(self) -> Parallelism:
        """The recipe's parallelism with the user's overrides of the parallelism keys applied."""
        return job_parallelism(self)


def check_job_fits(job: JobConfig, node_count: int, flavour: Flavour) -> None:
    """The recipe's layout with the parallelism overrides fits the pool: tensor parallel within a node, a node left
    for training, the recipe's minimum."""
    try:
        par = job.parallelism
    except ValueError as err:  # the recipe's layout refuses the overridden values
        raise KeyedValueError("job.overrides", str(err)) from None
    nodes, gpus = node_count, flavour.gpus_per_node
    recipe = job.recipe
    for what, size in (
        ("tensor parallel", par.train_tensor_parallel),
        ("vLLM tensor parallel", par.generation_tensor_parallel),
    ):
        if size > gpus:
            raise KeyedValueError(
                "job.overrides",
                f"recipe {recipe!r} with these overrides uses {what} {size}, more than the {gpus} GPUs per node "
                f"of flavour {flavour.name}; allowed: 1 to {gpus}",
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
