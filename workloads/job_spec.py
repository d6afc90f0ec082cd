"""Build the Ray job that runs a recipe on a stack.

`build_job` turns a recipe, the stack's job config, the GPU pool and the Lustre mount into a
`JobSpec`: the exact entrypoint (a shell command, every token quoted with `shlex`), the Ray
runtime env, and a deterministic submission id. Nothing here talks to a cluster or imports Ray,
so the CLI's `--dry-run`, the Pulumi program and the tests all build the identical spec.

Override order on the command line (NeMo-RL applies them left to right):

1. stack-derived: cluster size, generation placement, parallelism, checkpoint and log dirs on
   Lustre, `grpo.max_num_steps`, W&B switch. These are never retyped by hand: they come from the
   pool, the recipe's `Parallelism` (with the user's TP/colocation overrides folded in and checked
   by the stack config, `JobConfig.parallelism`) and the stack config. Any other user override of
   one of these keys is refused, naming the config key to change instead;
2. the recipe's own overrides;
3. the user's `job.overrides`, last; one that sets a recipe key replaces the recipe's value.

All three are then applied, in that order, to the recipe's config at its pinned NeMo-RL version with
NeMo-RL's own override parser (`workloads.overrides`): what NeMo-RL would reject at start, a leading
`-`, and deleting or replacing a section the stack sets are refused here, naming `job.overrides`.

Secrets (HF_TOKEN, WANDB_API_KEY) never appear here: the Ray pods get them as files from a Kubernetes
Secret, and their environment holds only the paths (HF_TOKEN_PATH, NETRC), which is all the job
driver inherits and NeMo-RL forwards (`os.environ`) to its actors. A runtime env naming a secret
variable is rejected.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from typing import Any, Mapping, Protocol, Union

from workloads.job_types import (  # noqa: F401 (re-exported: plan-time callers read them here too)
    CHECKPOINTS_DIR,
    LOGS_DIR,
    META_ATTEMPT,
    META_RECIPE,
    META_RUN_ID,
    META_SPEC_HASH,
    META_STACK,
    SECRET_ENV_NAMES,
    JobBuildError,
    JobSpec,
    checkpoint_dir,
    hf_home,
    legacy_checkpoint_dir,
    log_dir,
    mount_root,
    results_dirs,
    run_checkpoint_subdir,
    run_id_for,
    spec_hash,
    submission_id_for,
)
from workloads.overrides import OverrideChecker, OverrideError, override_key, parse_override
from workloads.recipes import RECIPES, Parallelism, Recipe, TrainingBackend


class JobSettings(Protocol):
    """What the job builder reads of the stack's `job` config (`infra.config.JobConfig` satisfies it);
    a protocol, so this module, shipped to the cluster, imports nothing from `infra`."""

    @property
    def recipe(self) -> str: ...

    @property
    def overrides(self) -> "tuple[str, ...] | list[str]": ...

    @property
    def parallelism(self) -> Parallelism: ...

    @property
    def max_num_steps(self) -> "int | None": ...

    @property
    def wandb_project(self) -> "str | None": ...

    @property
    def max_lost_minutes(self) -> "float | None": ...


class PoolShape(Protocol):
    """What the job needs from the GPU pool (`infra.stack_context.GpuPoolFacts` satisfies it)."""

    @property
    def node_count(self) -> int: ...

    @property
    def gpus_per_node(self) -> int: ...


NRL_VIRTUAL_CLUSTER_MAX_RETRIES = 10
"""NeMo-RL's placement wait (nemo_rl/distributed/virtual_cluster.py, v0.4.0 to v0.7.0): it checks
`ray.cluster_resources()` for the GPUs it needs up to this many times, sleeping 2**i s after try i, then
raises ResourceInsufficientError. The default, 6, gives up after 63 s, well before GKE brings back a
spot node (minutes); 10 waits 2**10 - 1 = 1023 s, about 17 min. The driver reads it from its own
environment, which the job's runtime env sets. The watcher also waits for the GPUs before it
resubmits (`workloads.recovery`), so this covers the first submission and a node lost again in
between; a wait that runs out is a capacity wait, not counted as a restart."""


def checkpoint_key(recipe: Recipe, par: Parallelism, user_overrides: "tuple[str, ...] | list[str]" = ()) -> str:
    """What makes one run's checkpoints unusable by another, as a directory name: the model (its weights'
    shapes), `policy.max_total_sequence_length` (what the run trained for) and the training layout (backend,
    TP, PP: NeMo-RL's DTensor and Megatron checkpoints are saved per parallel rank, and loading them into
    another layout is not what a resubmission should find out at step 1). A spec that changes any of them
    starts in a new directory instead of resuming from an incompatible checkpoint; a change of anything
    else (steps, data, W&B, batch sizes) resumes where the run was."""
    model = _last_value(recipe, user_overrides, "policy.model_name") or recipe.model
    seq = _last_int(recipe, user_overrides, "policy.max_total_sequence_length", recipe.config_max_sequence_length)
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", model).strip("_.")
    return f"{slug}-seq{seq}-{par.backend.value}-tp{par.train_tensor_parallel}-pp{par.train_pipeline_parallel}"


def run_checkpoint_subdir_for(recipe: Recipe, job_cfg: "JobSettings", stack: str) -> str:
    """The run's checkpoints below the checkpoints root (`workloads.job_types.run_checkpoint_subdir`): the job
    joins it to `<mount>/checkpoints`, the watcher's run plan to its own mount of that directory."""
    return run_checkpoint_subdir(
        stack, recipe.name, checkpoint_key(recipe, job_cfg.parallelism, tuple(job_cfg.overrides))
    )


def run_id_of(recipe: Recipe, job_cfg: "JobSettings", stack: str) -> str:
    """The run a spec of this stack, recipe and job config is an attempt of (`workloads.job_types.run_id_for`)."""
    return run_id_for(stack, recipe.name, checkpoint_key(recipe, job_cfg.parallelism, tuple(job_cfg.overrides)))


ADOPTED = "nemo-rl-gke: resuming from the checkpoints of an earlier release"
"""The one log line of `adopt_legacy_checkpoints` (it follows with what moved where)."""


def adopt_legacy_checkpoints(legacy: str, current: str) -> str:
    """A POSIX shell command, run by the job's entrypoint before NeMo-RL starts, that moves every complete
    `step_*` checkpoint of `legacy` (where releases up to 5971cc4 saved the run: `checkpoints/<stack>/<recipe>`)
    that `current` does not hold into `current`, and says so in one line. NeMo-RL then resumes from the
    newest `step_*` of `current` (nemo_rl/utils/checkpoint.py `CheckpointManager.get_latest_checkpoint_path`).

    In the entrypoint because it is the one thing that runs before every attempt, the first one after an
    upgrade included, whoever submits it (the deploy's hook, the watcher, `jobctl submit`). A move and not a
    look-up: `current` is a directory inside `legacy` on the same Lustre filesystem, so each move is a
    rename (atomic, no copy), and a run that moved once has one place to look. Idempotent: an attempt
    stopped between two renames leaves the rest for the next one; nothing left, nothing said. `tmp_step_*`
    (a save cut short) stays behind. A rename that fails stops the attempt (exit 1) instead of starting the
    run at step 0 beside its checkpoints."""
    return (
        f'o={shlex.quote(legacy)}; c={shlex.quote(current)}; m=; for d in "$o"/step_*; do '
        '[ -d "$d" ] || continue; s="${d##*/}"; [ -e "$c/$s" ] && continue; mkdir -p "$c" && mv "$d" "$c/$s" '
        '|| { echo "nemo-rl-gke: cannot move $d to $c" >&2; exit 1; }; m="$m $s"; done; '
        f'[ -z "$m" ] || echo "{ADOPTED}: moved$m from $o to $c"'
    )


def _last_value(recipe: Recipe, user_overrides: "tuple[str, ...] | list[str]", key: str) -> "str | None":
    """The value the last of the recipe's then the user's overrides gives `key`, or None."""
    value = None
    for override in (*recipe.overrides, *user_overrides):
        name, sep, text = override.lstrip("+").partition("=")
        if sep and name == key:
            value = text.strip()
    return value


def _last_int(recipe: Recipe, user_overrides: "tuple[str, ...] | list[str]", key: str, default: int) -> int:
    value = _last_value(recipe, user_overrides, key)
    return int(value) if value is not None and value.isdigit() else default


def train_global_batch_size(recipe: Recipe, user_overrides: "tuple[str, ...] | list[str]" = ()) -> int:
    return _last_int(recipe, user_overrides, "policy.train_global_batch_size", recipe.config_train_global_batch_size)


def _fmt(value: Any) -> str:
    """OmegaConf literals: booleans lowercase, everything else as str()."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# Stack-owned keys -> the config key a user changes instead (for the refusal message).
_OWNER = {
    "cluster.num_nodes": "gpuPool.nodeCount",
    "cluster.gpus_per_node": "flavour",
    "policy.generation.colocated.enabled": "job.recipe (its parallelism)",
    "policy.generation.colocated.resources.num_nodes": "job.recipe (its parallelism)",
    "policy.generation.colocated.resources.gpus_per_node": "flavour",
    "policy.generation.vllm_cfg.tensor_parallel_size": "job.recipe (its parallelism)",
    "policy.dtensor_cfg.tensor_parallel_size": "job.recipe (its parallelism)",
    "policy.megatron_cfg.tensor_model_parallel_size": "job.recipe (its parallelism)",
    "policy.megatron_cfg.pipeline_model_parallel_size": "job.recipe (its parallelism)",
    "checkpointing.enabled": "nothing (checkpoints are how a preempted run resumes)",
    "checkpointing.save_period": "job.maxLostMinutes (the training one preemption may lose)",
    "checkpointing.checkpoint_dir": "ray.mountPath",
    "checkpointing.is_async": "nothing (a checkpoint must be whole before its step_N appears)",
    "logger.log_dir": "ray.mountPath",
    "grpo.max_num_steps": "job.maxNumSteps",
    "logger.wandb_enabled": "job.wandbProject (and the wandbApiKey secret)",
    "logger.wandb.project": "job.wandbProject",
    "logger.wandb.name": "nothing (it is <stack>-<recipe>)",
}


def _check_fit(
    recipe: Recipe, par: Parallelism, pool: PoolShape, user_overrides: "tuple[str, ...] | list[str]" = ()
) -> None:
    """Refuse layouts NeMo-RL would only reject (or hang on) after the job started.

    The stack config already refuses a TP wider than a node and a pool too small for the recipe
    (`StackConfig._check_job_fits`); what it cannot see is whether the GPUs divide evenly.
    """
    nodes, gpus = pool.node_count, pool.gpus_per_node
    where = f"recipe {recipe.name!r} on {nodes} node(s) x {gpus} GPU(s)"
    train_nodes = par.training_nodes(nodes)
    if train_nodes < 1:
        raise JobBuildError(
            f"{where}: generation takes {par.generation_nodes} node(s), none is left for training; "
            "raise gpuPool.nodeCount",
            key="gpuPool.nodeCount",
        )
    train_gpus = train_nodes * gpus
    if train_gpus % par.model_parallel_gpus:
        raise JobBuildError(
            f"{where}: {train_gpus} training GPUs are not a multiple of TP x PP = {par.model_parallel_gpus}; "
            "pick a gpuPool.nodeCount (or tensor/pipeline parallel sizes in job.overrides) that is"
        )
    # NeMo-RL splits each training batch over the data-parallel ranks and asserts it splits evenly
    # (nemo_rl/models/policy/lm_policy.py `Policy.train` -> `shard_by_batch_size(dp_size, batch_size=
    # train_global_batch_size)`, nemo_rl/distributed/batched_data_dict.py "Batch size ... is not a
    # multiple of shards", v0.4.0 ... v0.6.0): a pool that does not fit fails at the first step.
    dp = train_gpus // par.model_parallel_gpus
    batch = train_global_batch_size(recipe, user_overrides)
    if batch % dp:
        fits = [
            n
            for n in range(max(par.min_nodes, 1), 65)
            if (t := (n if par.colocated else n - par.generation_nodes) * gpus) > 0
            and t % par.model_parallel_gpus == 0
            and batch % (t // par.model_parallel_gpus) == 0
        ][:6]
        raise JobBuildError(
            f"{where}: {train_gpus} training GPUs / (TP {par.train_tensor_parallel} x PP "
            f"{par.train_pipeline_parallel}) = "
            f"data parallel {dp}, which does not divide policy.train_global_batch_size {batch} (NeMo-RL splits each "
            "batch "
            "evenly over the data-parallel ranks); allowed: gpuPool.nodeCount "
            f"{', '.join(map(str, fits)) or 'none up to 64'}",
            key="gpuPool.nodeCount",
        )
    gen_gpus = train_gpus if par.colocated else par.generation_nodes * gpus
    if gen_gpus % par.generation_tensor_parallel:
        raise JobBuildError(
            f"{where}: {gen_gpus} generation GPUs are not a multiple of vLLM TP {par.generation_tensor_parallel}"
        )


_COLOCATED = "policy.generation.colocated.enabled"


def _derived(
    recipe: Recipe,
    par: Parallelism,
    job_cfg: JobSettings,
    pool: PoolShape,
    mount_path: str,
    stack: str,
    wandb_enabled: bool,
    save_period: int,
) -> dict[str, Any]:
    """Every stack-owned key with the value this run gives it."""
    out: dict[str, Any] = {
        # NeMo-RL takes the whole cluster here and subtracts the generation nodes itself.
        "cluster.num_nodes": pool.node_count,
        "cluster.gpus_per_node": pool.gpus_per_node,
        _COLOCATED: par.colocated,
    }
    if not par.colocated:
        out["policy.generation.colocated.resources.num_nodes"] = par.generation_nodes
        # Required to equal cluster.gpus_per_node when cluster.num_nodes > 1 (grpo.py setup()).
        out["policy.generation.colocated.resources.gpus_per_node"] = pool.gpus_per_node
    out["policy.generation.vllm_cfg.tensor_parallel_size"] = par.generation_tensor_parallel
    if par.backend is TrainingBackend.MEGATRON:
        out["policy.megatron_cfg.tensor_model_parallel_size"] = par.train_tensor_parallel
        out["policy.megatron_cfg.pipeline_model_parallel_size"] = par.train_pipeline_parallel
    else:
        out["policy.dtensor_cfg.tensor_parallel_size"] = par.train_tensor_parallel
    out["checkpointing.enabled"] = True
    out["checkpointing.checkpoint_dir"] = posixpath.join(
        mount_root(mount_path), CHECKPOINTS_DIR, run_checkpoint_subdir_for(recipe, job_cfg, stack)
    )
    out["checkpointing.save_period"] = save_period
    if _saves_async(recipe.image.tag):
        out[SYNC_SAVE] = False
    out["logger.log_dir"] = log_dir(mount_path, stack, recipe.name)
    out["grpo.max_num_steps"] = job_cfg.max_num_steps or recipe.max_num_steps
    out["logger.wandb_enabled"] = wandb_enabled
    if wandb_enabled:
        if not job_cfg.wandb_project:
            raise JobBuildError("W&B logging is enabled but job.wandbProject is not set", key="job.wandbProject")
        out["logger.wandb.project"] = job_cfg.wandb_project
        out["logger.wandb.name"] = f"{stack}-{recipe.name}"
    return out


SYNC_SAVE = "checkpointing.is_async"
"""Off: NeMo-RL v0.6.0's DTensor v2 worker saves with `dcp.async_save` ("is_async": True in
nemo_rl/models/policy/workers/dtensor_policy_worker_v2.py) and grpo.py renames tmp_step_N to step_N as
soon as `save_checkpoint` returns, before the write ends (fixed upstream only in unreleased commit
c95bec5a6). `save_checkpoint` copies `checkpointing.is_async` over the worker's setting
(nemo_rl/models/automodel/checkpoint.py, the keys it passes to `update_checkpointer_config`), so `false`
makes the save synchronous. No config file carries the key, hence `++`. v0.5.0's worker saves
synchronously (is_async defaults to False there, nemo_rl/utils/automodel_checkpoint.py) and v0.4.0 has no
async save; Megatron saves with `async_save=False` at every pinned tag."""


def _saves_async(tag: str) -> bool:
    """The pinned NeMo-RL tag's DTensor v2 worker saves asynchronously unless told not to (v0.6.0 on)."""
    try:
        version = tuple(int(part) for part in tag.lstrip("v").split(".")[:3])
    except ValueError:
        return True  # an unknown tag: say it, the override checker then verifies the key
    return version >= (0, 6, 0)


def _stack_part(derived: Mapping[str, Any]) -> list[str]:
    """The stack-derived overrides (step 1 of the module docstring), as `key=value`.

    Every key written exists in the recipes' config files (see workloads/recipes.py for what was
    checked), so the strict `key=value` form is used (but `++` for `checkpointing.is_async`, which no config
    file carries: `SYNC_SAVE`): a key NeMo-RL renamed fails loudly at start
    instead of being silently added. `colocated.enabled` is written only when it leaves the
    default (true), as the GKE tutorial does on v0.5.0: older Megatron configs did not all carry
    the colocated block.
    """
    return [
        f"{'++' if key == SYNC_SAVE else ''}{key}={_fmt(value)}"
        for key, value in derived.items()
        if not (key == _COLOCATED and value is True)
    ]


def _merge(
    derived: Mapping[str, Any], recipe_part: tuple[str, ...], user_part: tuple[str, ...], recipe: Recipe
) -> list[str]:
    stack_part = _stack_part(derived)
    owned = set(derived) | (set(_OWNER) - {"logger.wandb.project", "logger.wandb.name"})
    for o in recipe_part:
        if override_key(o) in owned:
            raise JobBuildError(f"recipe {recipe.name!r} override {o!r} sets a key the stack derives")
    users = []
    for o in user_part:
        parsed = parse_override(o)
        key = parsed.key
        if key not in owned:
            users.append(o)
            continue
        # The stack config folds the user's parallelism overrides (TP sizes, colocation) into the
        # recipe's layout and checks it against the pool; the derived value is then the user's.
        value = None if parsed.deletes else parsed.value
        if key in derived and value is not None and value.lower() == _fmt(derived[key]).lower():
            continue
        raise JobBuildError(
            f"job.overrides {o!r}: {key} is derived from the stack; change {_OWNER.get(key, 'the stack config')} "
            "instead"
        )
    # One value per key: a user override replaces the recipe's (Hydra would reject a duplicate).
    user_keys = {override_key(o) for o in users}
    recipe_kept = [o for o in recipe_part if override_key(o) not in user_keys]
    _check_against_the_pinned_config(recipe, owned, [*stack_part, *recipe_kept], users)
    return [*stack_part, *recipe_kept, *users]


def _check_against_the_pinned_config(recipe: Recipe, owned: set[str], ours: list[str], users: list[str]) -> None:
    """Apply every override, in NeMo-RL's order, to the pinned config with NeMo-RL's own parser
    (`workloads.overrides`): the stack's and the recipe's must pass (a failure is this program's
    bug, named as such), then the user's; a refusal names `job.overrides` and what is allowed."""
    checker = OverrideChecker(recipe.image.tag, recipe.config_file, owned)
    try:
        checker.check(ours)
    except OverrideError as err:
        raise JobBuildError(
            f"recipe {recipe.name!r} does not fit {recipe.config_file} of NeMo-RL {recipe.image.tag}: {err}",
            key="job.recipe",
        ) from None
    try:
        checker.check(users)
    except OverrideError as err:
        raise JobBuildError(f"job.overrides {err}") from None


def build_job(
    recipe: Union[Recipe, str],
    job_cfg: JobSettings,
    pool: PoolShape,
    mount_path: str,
    stack: str,
    wandb_enabled: bool,
    save_period: int,
) -> JobSpec:
    """The job that runs `recipe` on this stack.

    Args:
        recipe: the `Recipe` (or its name); must be the one `job_cfg.recipe` names.
        job_cfg: the stack's `job` config (overrides, max_num_steps, wandb_project).
        pool: the GPU pool (`GpuPoolFacts`); `node_count` and `gpus_per_node` are used.
        mount_path: where Lustre is mounted in the Ray pods (`ray.mountPath`).
        stack: the Pulumi stack name; part of paths, W&B run name and submission id.
        wandb_enabled: log to W&B (the caller knows whether the wandbApiKey secret is set).
        save_period: `checkpointing.save_period`, the run plan's (`infra.run_plan.save_period_for`, its one
            source: from `job.maxLostMinutes`, the recipe's step time and the checkpoint write time).

    Raises:
        JobBuildError: the layout does not fit the pool, or an override fights the stack.
    """
    if isinstance(recipe, str):
        if recipe not in RECIPES:
            raise JobBuildError(f"unknown recipe {recipe!r}; known: {', '.join(RECIPES)}", key="job.recipe")
        recipe = RECIPES[recipe]
    if recipe.name != job_cfg.recipe:
        raise JobBuildError(f"recipe {recipe.name!r} is not the one job.recipe names ({job_cfg.recipe!r})")
    # The recipe's layout with the user's parallelism overrides applied (validated by the config).
    par = job_cfg.parallelism
    _check_fit(recipe, par, pool, tuple(job_cfg.overrides))
    derived = _derived(recipe, par, job_cfg, pool, mount_path, stack, wandb_enabled, save_period)
    overrides = _merge(derived, recipe.overrides, tuple(job_cfg.overrides), recipe)
    argv = ["python", recipe.script, "--config", recipe.config_file, *overrides]
    # The image's scripts, configs and data.prompt_file are relative to its checkout; a Ray job
    # starts wherever the raylet runs, so change there first (as the codelab's script does).
    adopt = adopt_legacy_checkpoints(
        legacy_checkpoint_dir(mount_path, stack, recipe.name), derived["checkpointing.checkpoint_dir"]
    )
    entrypoint = f"{adopt}; cd {shlex.quote(recipe.image.workdir)} && {shlex.join(argv)}"
    home = hf_home(mount_path)
    runtime_env = {
        "env_vars": {
            "HF_HOME": home,
            "HF_DATASETS_CACHE": posixpath.join(home, "datasets"),
            # NeMo-RL calls ray.init(runtime_env={"env_vars": dict(os.environ)}); without this the
            # job's runtime env and that one conflict on these very keys and ray.init fails.
            "RAY_OVERRIDE_JOB_RUNTIME_ENV": "1",
            # How long NeMo-RL itself waits for the cluster's GPUs before it gives up (see below).
            "NRL_VIRTUAL_CLUSTER_MAX_RETRIES": str(NRL_VIRTUAL_CLUSTER_MAX_RETRIES),
        }
    }
    return JobSpec.create(
        stack=stack,
        recipe=recipe.name,
        entrypoint=entrypoint,
        runtime_env=runtime_env,
        run_id=run_id_of(recipe, job_cfg, stack),
    )


def wandb_wanted(job_cfg: JobSettings, wandb_key_set: bool) -> bool:
    """W&B logs only when a project is configured AND the wandbApiKey secret exists."""
    return bool(job_cfg.wandb_project) and wandb_key_set
