"""Build the Ray job that runs a recipe on a stack: the entrypoint (every token `shlex`-quoted), the runtime
env and a deterministic submission id, with no cluster and no Ray, so the CLI, the program and the tests build
the identical spec.

Overrides, in NeMo-RL's left-to-right order: 1. the stack-derived keys (cluster size, placement, parallelism,
Lustre dirs, steps, W&B), which a user override may only repeat (else it is refused, naming the config key to
change); 2. the recipe's own; 3. the user's `job.overrides`, replacing the recipe's value of a key. All are
then applied to the recipe's pinned config with NeMo-RL's own parser (`workloads.overrides`).

Secrets never appear here: the Ray pods mount them as files and their environment holds only the paths
(HF_TOKEN_PATH, NETRC); a runtime env naming a secret variable is rejected.
"""

from __future__ import annotations

import ast
import base64
import functools
import io
import posixpath
import shlex
import tokenize
from pathlib import Path
from typing import Any, Mapping, Protocol

from workloads import checkpoints
from workloads.job_types import (  # noqa: F401 (re-exported: plan-time callers read them here too)
    CHECKPOINTS_DIR,
    META_ATTEMPT,
    META_STACK,
    SECRET_ENV_NAMES,
    JobBuildError,
    JobSpec,
    hf_home,
    hub_cache,
    legacy_checkpoint_dir,
    log_dir,
    mount_root,
    run_checkpoint_subdir,
    run_id_for,
    startup_caches,
)
from workloads.overrides import OverrideChecker, OverrideError, override_key, parse_override
from workloads.recipes import Parallelism, Recipe, TrainingBackend


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


class PoolShape(Protocol):
    """What the job needs from the GPU pool (`infra.stack_context.GpuPoolFacts` satisfies it)."""

    @property
    def node_count(self) -> int: ...

    @property
    def gpus_per_node(self) -> int: ...


NRL_VIRTUAL_CLUSTER_MAX_RETRIES = 10
"""NeMo-RL's wait for the cluster's GPUs (nemo_rl/distributed/virtual_cluster.py, v0.4.0 to v0.7.0): this many
tries, sleeping 2**i s after try i. The default 6 gives up after 63 s, before GKE brings back a spot node;
10 waits 1023 s. It covers the first submission; the watcher waits for the GPUs before a resubmission."""


def checkpoint_key(recipe: Recipe, par: Parallelism, user_overrides: "tuple[str, ...] | list[str]" = ()) -> str:
    """What makes one run's checkpoints unusable by another, as a directory name: the model, the trained
    `policy.max_total_sequence_length` and the layout (backend, TP, PP: checkpoints are saved per parallel rank).
    A change of any of them starts a new directory; any other change resumes where the run was."""
    model = _last_value(recipe, user_overrides, "policy.model_name") or recipe.model
    seq = _last_int(recipe, user_overrides, "policy.max_total_sequence_length", recipe.config_max_sequence_length)
    # The entrypoint computes the same key from a step's saved config (`checkpoints.recorded_run_key`).
    return checkpoints.run_key(model, seq, par.backend.value, par.train_tensor_parallel, par.train_pipeline_parallel)


def run_checkpoint_subdir_for(recipe: Recipe, job_cfg: "JobSettings", stack: str) -> str:
    """The run's checkpoints below the checkpoints root (`workloads.job_types.run_checkpoint_subdir`)."""
    return run_checkpoint_subdir(stack, recipe.name, checkpoint_key(recipe, job_cfg.parallelism, job_cfg.overrides))


def run_id_of(recipe: Recipe, job_cfg: "JobSettings", stack: str) -> str:
    """The run a spec of this stack, recipe and job config is an attempt of (`workloads.job_types.run_id_for`)."""
    return run_id_for(stack, recipe.name, checkpoint_key(recipe, job_cfg.parallelism, job_cfg.overrides))


def checkpoints_program() -> str:
    """`workloads/checkpoints.py` as one `python -c` program: the module's own code (one implementation of a whole
    step), so that only a change of that code changes the spec. The head runs it with the NeMo-RL image's Python.
    The job's runtime env ships no code: a `py_modules` entry would put a path of the submitter's machine in the
    spec, and NeMo-RL's actors would inherit it (`RAY_OVERRIDE_JOB_RUNTIME_ENV`)."""
    return _code_only(Path(checkpoints.__file__).read_text())


@functools.lru_cache(maxsize=2)
def _code_only(source: str) -> str:
    """`source` without its docstrings, comments and blank lines, cut out of the text where `ast` and `tokenize` place
    them: the same text on every Python that parses it. (`ast.unparse` is not: its output differs from 3.10 to 3.12,
    and 3.12's f-strings do not parse on an older Python.)"""
    lines = source.splitlines()
    cut: dict[int, int] = {}  # line index -> the column its comment starts at
    inside: set[int] = set()  # lines a multi-line token continues on: kept as they are, blank or not
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            cut[token.start[0] - 1] = token.start[1]
        elif token.end[0] > token.start[0]:
            inside.update(range(token.start[0], token.end[0]))
    dropped: set[int] = set()
    replaced: dict[int, str] = {}
    for node in ast.walk(ast.parse(source)):
        for field in ("body", "orelse", "finalbody"):
            body = getattr(node, field, None)
            if not isinstance(body, list):  # a lambda's or conditional expression's body is one expression
                continue
            strings = [s for s in body if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)]
            for doc in strings:
                first, last = doc.lineno - 1, (doc.end_lineno or doc.lineno) - 1
                # `ast` counts columns in UTF-8 bytes.
                before, after = lines[first].encode()[: doc.col_offset], lines[last].encode()[doc.end_col_offset or 0 :]
                if before.strip() or after.strip():
                    raise ValueError(f"line {doc.lineno}: a docstring shares its lines with code")
                dropped.update(range(first, last + 1))
            if strings and len(strings) == len(body):  # a body of docstrings only: `pass` keeps it a body
                replaced[strings[0].lineno - 1] = " " * strings[0].col_offset + "pass"
    kept = []
    for i, line in enumerate(lines):
        if i in replaced or i in dropped:
            kept.extend([replaced[i]] if i in replaced else [])
            continue
        line = line[: cut[i]].rstrip() if i in cut else line
        if line.strip() or i in inside:
            kept.append(line)
    return "\n".join(kept) + "\n"


def prepare_checkpoints(current: str, legacy: str) -> str:
    """The shell step the entrypoint runs before NeMo-RL on every attempt, whoever submits it (the deploy, `jobctl`,
    the owner): `workloads.checkpoints.prepare` on the Ray head, which mounts Lustre. It renames `current`'s
    incomplete `step_N` aside, since NeMo-RL resumes from the highest `step_N` unchecked (nemo_rl/utils/checkpoint.py
    `get_latest_checkpoint_path`), moves `legacy`'s whole steps of this run into `current` and removes dead partial
    saves; a failed rename ends the attempt (`|| exit`) rather than start it at the wrong step."""
    # Base64 keeps the entrypoint one line (the dry run, Ray's "Running entrypoint" log line, the dashboard); plain
    # base64, not compressed: zlib's bytes may differ between the submitters' builds, and the spec hash with them.
    encoded = base64.b64encode(checkpoints_program().encode()).decode()
    program = f"import base64; exec(base64.b64decode('{encoded}').decode())"
    return f"python -c {shlex.quote(program)} {shlex.quote(current)} {shlex.quote(legacy)} || exit $?"


def _last_value(recipe: Recipe, user_overrides: "tuple[str, ...] | list[str]", key: str) -> "str | None":
    """The value the last of the recipe's then the user's overrides gives `key`, or None."""
    values = [o.value for o in map(parse_override, (*recipe.overrides, *user_overrides)) if o.assigns and o.key == key]
    return values[-1] if values else None


def _last_int(recipe: Recipe, user_overrides: "tuple[str, ...] | list[str]", key: str, default: int) -> int:
    value = _last_value(recipe, user_overrides, key)
    return int(value) if value is not None and value.isdigit() else default


def train_global_batch_size(recipe: Recipe, user_overrides: "tuple[str, ...] | list[str]" = ()) -> int:
    return _last_int(recipe, user_overrides, "policy.train_global_batch_size", recipe.config_train_global_batch_size)


def _fmt(value: Any) -> str:
    """OmegaConf literals: booleans lowercase, everything else as str()."""
    return str(value).lower() if isinstance(value, bool) else str(value)


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
    """Refuse layouts NeMo-RL would only reject (or hang on) after the job started: the GPUs that do not divide
    evenly (the stack config, `StackConfig._check_job_fits`, refuses the rest)."""
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
            if (t := par.training_nodes(n) * gpus) > 0
            and t % par.model_parallel_gpus == 0
            and batch % (t // par.model_parallel_gpus) == 0
        ][:6]
        allowed = ", ".join(map(str, fits)) or "none up to 64"
        raise JobBuildError(
            f"{where}: {train_gpus} training GPUs / (TP {par.train_tensor_parallel} x PP {par.train_pipeline_parallel})"
            f" = data parallel {dp}, which does not divide policy.train_global_batch_size {batch} (NeMo-RL splits each"
            f" batch evenly over the data-parallel ranks); allowed: gpuPool.nodeCount {allowed}",
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
"""Off from v0.6.0: its DTensor v2 worker saves with `dcp.async_save` (nemo_rl/models/policy/workers/
dtensor_policy_worker_v2.py) and grpo.py renames tmp_step_N to step_N before the write ends; `save_checkpoint`
copies this key over the worker's (nemo_rl/models/automodel/checkpoint.py `update_checkpointer_config`). Set with
`++`: no config file carries it. v0.5.0 saves synchronously (nemo_rl/utils/automodel_checkpoint.py), v0.4.0 and
Megatron (`async_save=False`) too. The fix, NVIDIA-NeMo/RL c95bec5a6 ("wait for async writes before promoting
tmp_step_N", 2026-08-09), is an ancestor of no tag read here (`git merge-base --is-ancestor`: not v0.7.0, not main
at 7ea279abf of 2026-08-22; only branch muse-glimmer-support / PR 3643 hold it). Tag v0.8.0 is not in the mirror,
and its rendered docs leave the question open: of
https://docs.nvidia.com/nemo/rl/0.8.0/apidocs/nemo_rl/nemo_rl.models.automodel.checkpoint.html only the module
summary could be read (AutomodelCheckpointManager listed, its methods not), and dtensor_policy_worker_v2 is gone
from 0.8.0's module list (https://docs.nvidia.com/nemo/rl/0.8.0/apidocs/nemo_rl/nemo_rl.models.html, beside
automodel_policy_worker), so neither a waiting finalize_async_save nor its absence is shown
(data/version_matrix.yaml notAdded v0.8.0). The override stays on for every async-saving tag, v0.8.0 included,
until a tag's source shows the fix (`ASYNC_SAVE_FIXED`)."""

ASYNC_SAVE_FIXED: frozenset[str] = frozenset()
"""Image tags whose source has c95bec5a6 (`git merge-base --is-ancestor c95bec5a6 <tag>`, or the tag's rendered
source showing AutomodelCheckpointManager.finalize_async_save waiting on the checkpointer and the DTensor/Automodel
worker overriding the base no-op): none yet; v0.8.0 is undecided (its docs pages were not readable that far)."""


def _saves_async(tag: str) -> bool:
    """Whether the image's DTensor worker saves asynchronously without the fix: the override is needed."""
    if tag in ASYNC_SAVE_FIXED:
        return False
    try:
        version = tuple(int(part) for part in tag.lstrip("v").split(".")[:3])
    except ValueError:
        return True  # an unknown tag: say it, the override checker then verifies the key
    return version >= (0, 6, 0)


def _stack_part(derived: Mapping[str, Any]) -> list[str]:
    """The stack-derived overrides as strict `key=value` (`++` only for `SYNC_SAVE`), so a key NeMo-RL renamed
    fails loudly; `colocated.enabled` only when not true (older Megatron configs lack the colocated block)."""
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
    """Apply every override in NeMo-RL's order to the pinned config (`workloads.overrides`): the stack's and the
    recipe's (a failure is this program's bug), then the user's (a refusal names `job.overrides`)."""
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
    recipe: Recipe,
    job_cfg: JobSettings,
    pool: PoolShape,
    mount_path: str,
    stack: str,
    wandb_enabled: bool,
    save_period: int,
) -> JobSpec:
    """The job that runs `recipe` (the one `job_cfg.recipe` names) on this stack, with Lustre at `mount_path`
    in the Ray pods and the run plan's `save_period` (`infra.run_plan.save_period_for`). Raises
    `JobBuildError` when the layout does not fit the pool or an override fights the stack."""
    if recipe.name != job_cfg.recipe:
        raise JobBuildError(f"recipe {recipe.name!r} is not the one job.recipe names ({job_cfg.recipe!r})")
    # The recipe's layout with the user's parallelism overrides applied (validated by the config).
    par = job_cfg.parallelism
    _check_fit(recipe, par, pool, tuple(job_cfg.overrides))
    derived = _derived(recipe, par, job_cfg, pool, mount_path, stack, wandb_enabled, save_period)
    overrides = _merge(derived, recipe.overrides, tuple(job_cfg.overrides), recipe)
    argv = ["python", recipe.image.grpo_script, "--config", recipe.config_file, *overrides]
    # The image's scripts, configs and data.prompt_file are relative to its checkout; a Ray job
    # starts wherever the raylet runs, so change there first (as the codelab's script does).
    prepare = prepare_checkpoints(
        derived["checkpointing.checkpoint_dir"], legacy_checkpoint_dir(mount_path, stack, recipe.name)
    )
    entrypoint = f"{prepare}; cd {shlex.quote(recipe.image.workdir)} && {shlex.join(argv)}"
    home = hf_home(mount_path)
    runtime_env = {
        "env_vars": {
            "HF_HOME": home,
            "HF_HUB_CACHE": hub_cache(mount_path),
            "HF_DATASETS_CACHE": posixpath.join(home, "datasets"),
            # vLLM's compile cache, Triton's kernels and the Megatron conversion on Lustre, so a resume on new pods
            # reuses them; NeMo-RL copies this env into every worker (nemo_rl/distributed/worker_groups.py).
            **startup_caches(mount_path),
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
