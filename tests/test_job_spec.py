"""The job builder: the seed workflows' commands, quoting, secrets and the deterministic id."""

from __future__ import annotations

import json
import os
import posixpath
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import spec_of
from test_checkpoints import make, nemo_rl_latest, write_config

from infra.config import JobConfig
from infra.flavours import FLAVOURS
from infra.stack_context import GpuPoolFacts, NicAttachment
from jobctl.stack import build_spec, load_stack
from workloads import checkpoints
from workloads import job_spec as job_spec_module
from workloads.job_spec import (
    SECRET_ENV_NAMES,
    JobBuildError,
    JobSpec,
    build_job,
    override_key,
)
from workloads.overrides import data_key_problem, reference
from workloads.recipes import IMAGES, RECIPES, ConfigGeneration, Parallelism, TrainingBackend


def pool(flavour: str, nodes: int) -> GpuPoolFacts:
    """Pool facts as the infrastructure publishes them (only the counts matter to the job)."""
    f = FLAVOURS[flavour]
    nics = tuple(NicAttachment(f"eth{i + 2}", f"rdma-{i}", "vpc", "subnet", "RDMA") for i in range(f.rdma_nics))
    return GpuPoolFacts(
        pool_name=f"test-{flavour}",
        node_count=nodes,
        gpus_per_node=f.gpus_per_node,
        accelerator_type=f.accelerator_type,
        machine_type=f.machine_type,
        vcpus=f.vcpus,
        memory_gib=f.memory_gib,
        nccl_tuner_config=f.nccl_tuner_config,
        taints=(f.gpu_taint,),
        nics=nics,
    )


def argv(spec: JobSpec) -> list[str]:
    """The entrypoint after the checkpoint step (`job_spec.prepare_checkpoints`), as the shell will split it:
    `cd <dir> && python <script> ...`."""
    tokens = shlex.split("cd " + spec.entrypoint.rsplit("; cd ", 1)[1])
    assert tokens[2] == "&&", tokens[:4]
    return tokens


def overrides(spec: JobSpec) -> list[str]:
    tokens = argv(spec)
    assert tokens[3] == "python" and tokens[5] == "--config"
    return tokens[7:]


def stack_spec(stack: str) -> JobSpec:
    return build_spec(load_stack(stack))


def test_the_b200_stack_reproduces_the_codelab_command():
    spec = stack_spec("b200")
    tokens = argv(spec)
    assert tokens[:7] == [
        "cd",
        "/opt/nemo-rl",
        "&&",
        "python",
        "examples/run_grpo_math.py",
        "--config",
        "examples/configs/grpo_math_70B_megatron.yaml",
    ]
    codelab = {
        "policy.model_name=Qwen/Qwen2.5-72B-Instruct",
        "policy.megatron_cfg.converter_type=Qwen2ForCausalLM",
        "cluster.num_nodes=8",
        "cluster.gpus_per_node=8",
        "grpo.max_num_steps=20",
        "grpo.num_generations_per_prompt=8",
        "grpo.num_prompts_per_step=32",
        "policy.train_global_batch_size=256",
        "checkpointing.enabled=true",
        # Not the codelab's 2: a save every step keeps a preemption's loss near one 18-min step (job.maxLostMinutes).
        "checkpointing.save_period=1",
        "checkpointing.keep_top_k=2",
        "checkpointing.metric_name=null",
        "checkpointing.checkpoint_dir=/lustre/checkpoints/b200/qwen2.5-72b-deepscaler/Qwen_Qwen2.5-72B-Instruct-seq4096-megatron-tp4-pp4",
        "data.dataset_name=DeepScaler",
        "logger.wandb_enabled=false",
        # The config file's parallelism (vLLM TP 8 in grpo_math_70B_megatron.yaml v0.4.0 ... v0.7.0, which
        # the codelab keeps), now explicit and checked against the pool.
        "policy.megatron_cfg.tensor_model_parallel_size=4",
        "policy.megatron_cfg.pipeline_model_parallel_size=4",
        "policy.generation.vllm_cfg.tensor_parallel_size=8",
    }
    assert codelab <= set(overrides(spec))
    env = spec.runtime_env["env_vars"]
    assert env["HF_HOME"] == "/lustre/hf-cache" and env["RAY_OVERRIDE_JOB_RUNTIME_ENV"] == "1"
    # NeMo-RL waits about 17 min (2**10 - 1 s), not 63 s, for GPUs a replacement spot node brings back.
    assert env["NRL_VIRTUAL_CLUSTER_MAX_RETRIES"] == "10"
    assert RECIPES["qwen2.5-72b-deepscaler"].image.ref == "nvcr.io/nvidia/nemo-rl:v0.4.0"


def test_the_h200_stack_reproduces_the_tutorial_command_with_generation_on_its_own_node():
    spec = stack_spec("h200")
    tokens = argv(spec)
    assert tokens[4:7] == [
        "examples/run_grpo.py",
        "--config",
        "examples/configs/recipes/llm/grpo-gemma3-27b-it-8n4g-fsdp2tp4-actckpt-long.yaml",
    ]
    tutorial = {
        # NeMo-RL takes the whole pool here and gives the generation node(s) to vLLM itself.
        "cluster.num_nodes=2",
        "cluster.gpus_per_node=8",
        "policy.generation.colocated.enabled=false",
        "policy.generation.colocated.resources.num_nodes=1",
        "policy.generation.colocated.resources.gpus_per_node=8",
        "policy.generation.vllm_cfg.tensor_parallel_size=8",
        "policy.generation.vllm_cfg.gpu_memory_utilization=0.9",
        "policy.dtensor_cfg.tensor_parallel_size=8",
        "grpo.num_prompts_per_step=16",
        "grpo.num_generations_per_prompt=64",
        # GSM8K (openai/gsm8k, config main) train / test splits, on the v0.6 data layout.
        "data.train.dataset_name=gsm8k",
        "++data.validation.dataset_name=gsm8k",
        "++data.validation.split=test",
        "checkpointing.checkpoint_dir=/lustre/checkpoints/h200/gemma3-27b-gsm8k/google_gemma-3-27b-it-seq16384-dtensor-tp8-pp1",
        "logger.log_dir=/lustre/logs/h200/gemma3-27b-gsm8k",
    }
    assert tutorial <= set(overrides(spec))
    assert RECIPES["gemma3-27b-gsm8k"].image.ref == "nvcr.io/nvidia/nemo-rl:v0.6.0"


@pytest.mark.parametrize("stack", ["dev", "b200", "h200"])
def test_every_key_is_set_once_and_stack_values_come_before_recipe_and_user_values(stack):
    keys = [override_key(o) for o in overrides(stack_spec(stack))]
    assert len(keys) == len(set(keys))
    assert keys[:2] == ["cluster.num_nodes", "cluster.gpus_per_node"]


@pytest.mark.parametrize(("stack", "flavour", "nodes"), [("dev", "b200", 1), ("b200", "b200", 8), ("h200", "h200", 2)])
def test_the_stack_spec_is_the_one_built_from_the_pools_facts(stack, flavour, nodes):
    loaded = load_stack(stack)
    cfg = loaded.config
    from_facts = build_job(cfg.recipe, cfg.job, pool(flavour, nodes), cfg.ray.mount_path, stack, False, save_period=1)
    assert from_facts == spec_of(stack, cfg, wandb_key_set=False) == build_spec(loaded)


def test_hostile_values_stay_single_shell_words(monkeypatch):
    hostile_stack = "x; rm -rf ~ $(reboot)"
    mount = "/mnt/it's `id`"
    user = ("grpo.num_prompts_per_step=$(curl evil)", "++logger.wandb.project=a b'c")
    job = JobConfig.model_construct(
        recipe="qwen2.5-1.5b-gsm8k", overrides=user, submit=True, max_num_steps=None, wandb_project=None
    )
    # NeMo-RL's override parser refuses such values (and the stack config never lets them in); the
    # quoting must hold without that check too.
    with pytest.raises(JobBuildError, match="is not a Hydra override"):
        build_job(RECIPES["qwen2.5-1.5b-gsm8k"], job, pool("b200", 1), mount, hostile_stack, False, save_period=1)
    monkeypatch.setattr(job_spec_module.OverrideChecker, "check", lambda self, overrides: None)
    spec = build_job(RECIPES["qwen2.5-1.5b-gsm8k"], job, pool("b200", 1), mount, hostile_stack, False, save_period=1)
    tokens = argv(spec)
    assert tokens[:2] == ["cd", "/opt/nemo-rl"]
    assert (
        "checkpointing.checkpoint_dir=/mnt/it's "
        f"`id`/checkpoints/{hostile_stack}/qwen2.5-1.5b-gsm8k/Qwen_Qwen2.5-1.5B-Instruct-seq512-dtensor-tp1-pp1"
        in tokens
    )
    assert tokens[-2:] == list(user)  # the user's, last, verbatim
    assert "grpo.num_prompts_per_step=$(curl evil)" in tokens
    assert spec.runtime_env["env_vars"]["HF_HOME"] == "/mnt/it's `id`/hf-cache"
    assert re.fullmatch(r"[A-Za-z0-9_-]+", spec.submission_id)
    assert spec.submission_id.endswith("-" + spec.spec_hash[:8])


def test_no_secret_reaches_the_runtime_env_or_the_command():
    for stack in ("dev", "b200", "h200"):
        spec = stack_spec(stack)
        assert not SECRET_ENV_NAMES & set(spec.runtime_env["env_vars"])
    with pytest.raises(JobBuildError, match="HF_TOKEN"):
        JobSpec.create(stack="s", recipe="r", entrypoint="true", runtime_env={"env_vars": {"HF_TOKEN": "hf_x"}})
    # A stack with the W&B key configured: logging is switched on, the key itself appears nowhere.
    loaded = load_stack("dev")
    cfg = loaded.config.model_copy(update={"job": loaded.config.job.model_copy(update={"wandb_project": "grpo"})})
    spec = spec_of("dev", cfg, wandb_key_set=True)
    assert {
        "logger.wandb_enabled=true",
        "logger.wandb.project=grpo",
        "logger.wandb.name=dev-qwen2.5-1.5b-gsm8k",
    } <= set(overrides(spec))
    assert not SECRET_ENV_NAMES & set(spec.runtime_env["env_vars"])
    assert not any(name in json.dumps(spec.to_dict()) for name in SECRET_ENV_NAMES)
    assert spec_of("dev", cfg, wandb_key_set=False).entrypoint.count("wandb_enabled=false") == 1


# What each start-up cache setting must be, relative to the Lustre mount: the cache the pinned images read through it
# (workloads/job_types.py `startup_caches`).
STARTUP_CACHES = {
    "VLLM_CACHE_ROOT": "cache/vllm/engine",
    "TRITON_CACHE_DIR": "cache/triton",
    "NRL_MEGATRON_CHECKPOINT_DIR": "hf-cache/nemo_rl",
}


@pytest.mark.parametrize("stack", ["dev", "b200", "h200"])
def test_every_start_up_cache_nemo_rl_reads_lies_under_the_lustre_mount_of_the_ray_pods(stack):
    loaded = load_stack(stack)
    mount = loaded.config.ray.mount_path
    env = build_spec(loaded).runtime_env["env_vars"]
    # Dropping one, or pointing it anywhere else (the pod's home, /tmp), fails here.
    assert {name: env.get(name) for name in STARTUP_CACHES} == {
        name: posixpath.join(mount, leaf) for name, leaf in STARTUP_CACHES.items()
    }
    assert all(env[name].startswith(mount.rstrip("/") + "/") for name in STARTUP_CACHES)


def test_the_start_up_caches_follow_the_mount_path_and_are_the_same_on_every_attempt():
    job = JobConfig.model_construct(
        recipe="qwen2.5-1.5b-gsm8k", overrides=(), submit=True, max_num_steps=None, wandb_project=None
    )

    def env_at(mount: str) -> dict[str, str]:
        spec = build_job(RECIPES["qwen2.5-1.5b-gsm8k"], job, pool("b200", 1), mount, "dev", False, save_period=1)
        return spec.runtime_env["env_vars"]

    env = env_at("/data/")
    assert [env[name] for name in STARTUP_CACHES] == [
        "/data/cache/vllm/engine",
        "/data/cache/triton",
        "/data/hf-cache/nemo_rl",
    ]
    # A resume resubmits the same spec: no per-node or per-attempt part that would start each attempt cold.
    assert env_at("/data/") == env
    # NeMo-RL's fallback when the variable is unset is $HF_HOME/nemo_rl (nemo_rl/models/policy/utils.py
    # get_megatron_checkpoint_dir): setting it there keeps conversions made before this setting.
    assert env["NRL_MEGATRON_CHECKPOINT_DIR"] == posixpath.join(env["HF_HOME"], "nemo_rl")
    # NeMo-RL v0.7.0 gives each vLLM engine VLLM_CACHE_ROOT + "_<seed>" (vllm_worker.py configure_worker): the
    # engines' directories stay inside cache/vllm on Lustre.
    assert (env["VLLM_CACHE_ROOT"] + f"_{1 * 1024 + 1}").startswith("/data/cache/vllm/")
    # Inductor's cache is left on the pod on purpose (its temporary names are unique per host only).
    assert "TORCHINDUCTOR_CACHE_DIR" not in env


def test_the_id_is_deterministic_and_changes_exactly_when_the_spec_does():
    cfg = load_stack("dev").config
    spec = spec_of("dev", cfg, wandb_key_set=False)
    assert spec == spec_of("dev", cfg, wandb_key_set=False)
    assert spec.submission_id == f"dev-qwen2-5-1-5b-gsm8k-{spec.spec_hash[:8]}"
    # Not part of the job: same id.
    unrelated = cfg.model_copy(
        update={
            "job": cfg.job.model_copy(update={"submit": False}),
            "lustre": cfg.lustre.model_copy(update={"capacity_gib": 18000}),
        }
    )
    assert spec_of("dev", unrelated, wandb_key_set=False).submission_id == spec.submission_id
    # Part of the job: new id.
    changes = [
        cfg.model_copy(update={"job": cfg.job.model_copy(update={"max_num_steps": 11})}),
        cfg.model_copy(update={"job": cfg.job.model_copy(update={"overrides": ("grpo.num_prompts_per_step=8",)})}),
        cfg.model_copy(update={"ray": cfg.ray.model_copy(update={"mount_path": "/data"})}),
        cfg.model_copy(update={"gpu_pool": cfg.gpu_pool.model_copy(update={"node_count": 2})}),
    ]
    ids = {spec_of("dev", c, wandb_key_set=False).submission_id for c in changes}
    assert len(ids) == len(changes) and spec.submission_id not in ids
    assert spec_of("other", cfg, wandb_key_set=False).submission_id.startswith("other-")
    assert JobSpec.from_dict(spec.to_dict()) == spec
    with pytest.raises(JobBuildError, match="spec_hash does not match"):
        JobSpec.from_dict({**spec.to_dict(), "entrypoint": spec.entrypoint + " x=1"})


def test_user_overrides_win_over_the_recipe_but_may_not_touch_what_the_stack_derives():
    cfg = load_stack("h200").config
    job = cfg.job.model_copy(
        update={"overrides": ("grpo.num_prompts_per_step=8", "~loss_fn.use_on_policy_kl_approximation")}
    )
    spec = build_job(cfg.recipe, job, pool("h200", 2), "/lustre", "h200", False, save_period=1)
    ovs = overrides(spec)
    assert ovs[-2:] == ["grpo.num_prompts_per_step=8", "~loss_fn.use_on_policy_kl_approximation"]
    assert "grpo.num_prompts_per_step=16" not in ovs
    for bad, owner in [
        ("cluster.num_nodes=3", "gpuPool.nodeCount"),
        ("++grpo.max_num_steps=5", "job.maxNumSteps"),
        ("checkpointing.checkpoint_dir=/tmp", "ray.mountPath"),
        ("~checkpointing.enabled", "nothing"),
        ("policy.megatron_cfg.pipeline_model_parallel_size=2", "job.recipe"),
    ]:
        job = cfg.job.model_copy(update={"overrides": (bad,)})
        with pytest.raises(JobBuildError, match=re.escape(owner)):
            build_job(cfg.recipe, job, pool("h200", 2), "/lustre", "h200", False, save_period=1)


def test_every_recipe_on_an_async_saving_nemo_rl_saves_synchronously_and_a_user_may_not_undo_it():
    # NeMo-RL v0.6.0's DTensor v2 worker saves with dcp.async_save and grpo.py renames tmp_step_N to
    # step_N before the write ends: a step_N without its files (workloads/checkpoints.py).
    tags = set()
    for stack in ("dev", "b200", "h200"):
        cfg = load_stack(stack).config
        spec = build_job(
            cfg.recipe, cfg.job, pool(cfg.flavour, cfg.gpu_pool.node_count), "/lustre", stack, False, save_period=1
        )
        tag = cfg.recipe.image.tag
        tags.add(tag)
        assert ("++checkpointing.is_async=false" in overrides(spec)) == (tag == "v0.6.0"), f"{stack} at {tag}"
    assert tags == {"v0.4.0", "v0.6.0"}
    cfg = load_stack("dev").config
    job = cfg.job.model_copy(update={"overrides": ("++checkpointing.is_async=true",)})
    with pytest.raises(JobBuildError, match="checkpointing.is_async is derived from the stack"):
        build_job(cfg.recipe, job, pool("h200", 1), "/lustre", "dev", False, save_period=1)


def test_parallelism_overrides_the_config_accepted_shape_the_derived_values_once():
    # The stack config folds TP and colocation overrides into the layout it validates
    # (JobConfig.parallelism); the job then derives every related key from that layout.
    cfg = load_stack("h200").config
    job = cfg.job.model_copy(
        update={"overrides": ("policy.dtensor_cfg.tensor_parallel_size=4", "policy.generation.colocated.enabled=True")}
    )
    ovs = overrides(build_job(cfg.recipe, job, pool("h200", 2), "/lustre", "h200", False, save_period=1))
    assert "policy.dtensor_cfg.tensor_parallel_size=4" in ovs
    assert not any(o.startswith("policy.generation.colocated.") for o in ovs)  # colocated is the default
    keys = [override_key(o) for o in ovs]
    assert len(keys) == len(set(keys))
    assert [override_key(o) for o in ("a.b=1", "+a.b=1", "++a.b=x=y", "~a.b")] == ["a.b"] * 4


def test_layouts_the_pool_cannot_hold_are_refused_before_submission():
    b200 = load_stack("b200").config
    with pytest.raises(JobBuildError, match="not a multiple of TP x PP = 16"):
        build_job(b200.recipe, b200.job, pool("b200", 3), "/lustre", "b200", False, save_period=1)
    h200 = load_stack("h200").config
    with pytest.raises(JobBuildError, match="none is left for training"):
        build_job(h200.recipe, h200.job, pool("h200", 1), "/lustre", "h200", False, save_period=1)
    with pytest.raises(JobBuildError, match="is not the one job.recipe names"):
        build_job(RECIPES["gemma3-27b-gsm8k"], b200.job, pool("b200", 8), "/lustre", "b200", False, save_period=1)


def test_recipes_pin_their_image_and_know_their_config_generation():
    for recipe in RECIPES.values():
        assert recipe.image in IMAGES.values()
        assert recipe.image.grpo_script == (
            "examples/run_grpo_math.py" if recipe.image.generation is ConfigGeneration.FLAT else "examples/run_grpo.py"
        )
        assert recipe.config_file.startswith("examples/configs/")
        for o in recipe.overrides:
            assert shlex.quote(o) == o, o  # plain tokens: nothing for a shell to interpret
    # uv.lock of NVIDIA-NeMo/RL at each tag.
    assert [IMAGES[t].ray_version for t in ("v0.4.0", "v0.5.0", "v0.6.0")] == ["2.46.0", "2.49.2", "2.54.0"]
    assert RECIPES["qwen2.5-72b-deepscaler"].parallelism.backend is TrainingBackend.MEGATRON
    with pytest.raises(ValueError, match="colocated.resources.num_nodes >= 1"):
        Parallelism(train_tensor_parallel=1, colocated=False)
    assert Parallelism(train_tensor_parallel=1, colocated=True, generation_nodes=1).colocated  # ignored while colocated
    assert Parallelism(train_tensor_parallel=1, colocated=False, generation_nodes=1).training_nodes(3) == 2
    assert Parallelism(train_tensor_parallel=1, colocated=True, generation_nodes=1).training_nodes(3) == 3
    with pytest.raises(ValueError):
        Parallelism(train_tensor_parallel=1, train_pipeline_parallel=2)


# ---------------------------------------------------------------- a job that cannot be built is a config error


def _plan_error(stack: str, **job_patch) -> str:
    from conftest import merged, run_plan

    from infra.config import ConfigError

    with pytest.raises(ConfigError) as info:
        run_plan(stack, job=merged(stack, "job", job_patch))
    return str(info.value)


@pytest.mark.parametrize(
    ("stack", "overrides", "key", "says"),
    [
        ("h200", ["policy.generation.vllm_cfg.tensor_parallel_size=3"], "job.overrides", "not a multiple of vLLM TP 3"),
        ("dev", ["policy.dtensor_cfg.tensor_parallel_size=3"], "job.overrides", "not a multiple of TP x PP = 3"),
        ("h200", ["cluster.num_nodes=4"], "job.overrides", "cluster.num_nodes is derived from the stack"),
        (
            "h200",
            ["++checkpointing.checkpoint_dir=/tmp/x"],
            "job.overrides",
            "checkpoint_dir is derived from the stack",
        ),
    ],
)
def test_an_override_the_job_cannot_run_with_is_refused_in_one_keyed_line_before_any_resource(
    stack, overrides, key, says
):
    message = _plan_error(stack, overrides=overrides)
    assert message.startswith(f"nemo-rl-gke:{key}: "), message
    assert says in message and "\n" not in message, message


def test_switching_colocation_off_without_generation_nodes_names_the_overrides_key():
    message = _plan_error("dev", overrides=["policy.generation.colocated.enabled=false"])
    assert message.startswith("nemo-rl-gke:job.overrides: generation not colocated"), message


# ---------------------------------------------------------------- data keys the image's loader reads


@pytest.mark.parametrize("name", list(RECIPES))
def test_each_recipes_data_keys_are_ones_its_images_data_loader_reads(name):
    recipe = RECIPES[name]
    loader = reference(recipe.image.tag)["loader"]
    data = [o for o in recipe.overrides if override_key(o).startswith("data.")]
    assert data, f"recipe {name} names no dataset"
    for o in data:
        assert override_key(o) in loader["data_keys"], f"recipe {name}: {o} is not read by NeMo-RL {recipe.image.tag}"
        if override_key(o).endswith("dataset_name"):
            assert o.split("=", 1)[1] in loader["dataset_names"], (
                f"recipe {name}: {o} names no dataset of {recipe.image.tag}"
            )


def test_the_tutorials_gsm8k_keys_are_not_read_by_the_v0_5_image_and_the_check_says_so():
    # What the GKE tutorial passed on nemo-rl:v0.5.0: that image's loader has no subset, so openai/gsm8k
    # (configs main/socratic) cannot load without patching the code in the pod.
    assert data_key_problem("v0.5.0", "++data.subset=main") == (
        "'++data.subset=main': NeMo-RL v0.5.0's data loader does not read data.subset; allowed: the flat data.* "
        "keys it reads (data.train/validation/default came with v0.6)"
    )
    assert data_key_problem("v0.5.0", "++data.train_data_path=openai/gsm8k") is None
    assert data_key_problem("v0.6.0", "data.train.subset=main") is None
    assert "data.dataset_name" in data_key_problem("v0.6.0", "data.dataset_name=ResponseDataset")


def test_a_user_override_of_a_data_key_the_recipes_image_does_not_read_names_the_key():
    from conftest import merged, run_plan

    from infra.config import ConfigError

    with pytest.raises(ConfigError) as info:
        run_plan("h200", job=merged("h200", "job", {"overrides": ["++data.train_data_path=openai/gsm8k"]}))
    assert str(info.value) == (
        "nemo-rl-gke:job.overrides: recipe 'gemma3-27b-gsm8k' runs nvcr.io/nvidia/nemo-rl:v0.6.0: "
        "'++data.train_data_path=openai/gsm8k': NeMo-RL v0.6.0's data loader does not read data.train_data_path; "
        "allowed: data.train.*, data.validation.*, data.default.* and the other keys it reads (the flat ones went "
        "with v0.6)"
    )


def test_a_pool_whose_data_parallel_size_does_not_divide_the_batch_is_refused_with_the_key_and_the_counts_that_fit():
    # b200 at 6 nodes: 48 GPUs / (TP 4 x PP 4) = DP 3, and the recipe's batch of 256 does not split in 3.
    from conftest import run_plan

    from infra.config import ConfigError

    with pytest.raises(ConfigError) as info:
        run_plan("b200", gpuPool={"nodeCount": 6, "provisioning": "spot"})
    message = str(info.value)
    assert message.startswith("nemo-rl-gke:gpuPool.nodeCount: recipe 'qwen2.5-72b-deepscaler' on 6 node(s)"), message
    assert (
        "data parallel 3, which does not divide policy.train_global_batch_size 256" in message and "\n" not in message
    )
    assert message.endswith("allowed: gpuPool.nodeCount 2, 4, 8, 16, 32, 64"), message
    # 8 nodes (DP 4) fit the recipe as it is; the batch the check reads is the last override's.
    b200 = load_stack("b200").config
    build_job(b200.recipe, b200.job, pool("b200", 8), "/lustre", "b200", False, save_period=1)
    with pytest.raises(JobBuildError, match="does not divide policy.train_global_batch_size 250"):
        build_job(
            b200.recipe,
            b200.job.model_copy(update={"overrides": ("policy.train_global_batch_size=250",)}),
            pool("b200", 8),
            "/lustre",
            "b200",
            False,
            save_period=1,
        )


def test_the_checkpoint_directory_changes_with_what_makes_checkpoints_incompatible_and_only_with_that():
    import re

    def ckpt_dir(stack: str, overrides=()) -> str:
        cfg = load_stack(stack).config
        job = cfg.job.model_copy(update={"overrides": tuple(overrides)}) if overrides else cfg.job
        spec = build_job(
            cfg.recipe, job, pool(cfg.flavour, cfg.gpu_pool.node_count), "/lustre", stack, False, save_period=1
        )
        return re.search(r"checkpointing\.checkpoint_dir=(\S+)", spec.entrypoint).group(1)

    base = ckpt_dir("h200")
    assert base == "/lustre/checkpoints/h200/gemma3-27b-gsm8k/google_gemma-3-27b-it-seq16384-dtensor-tp8-pp1"
    assert (
        ckpt_dir("b200")
        == "/lustre/checkpoints/b200/qwen2.5-72b-deepscaler/Qwen_Qwen2.5-72B-Instruct-seq4096-megatron-tp4-pp4"
    )
    # Another sequence length or model: a new directory, never a resume from the old checkpoints.
    assert ckpt_dir("h200", ["policy.max_total_sequence_length=8192"]).endswith("-seq8192-dtensor-tp8-pp1")
    assert "/Qwen_Qwen2.5-7B-Instruct-seq512-" in ckpt_dir("dev", ["policy.model_name=Qwen/Qwen2.5-7B-Instruct"])
    # What does not change the checkpoint's shape resumes where the run was.
    assert ckpt_dir("h200", ["grpo.num_prompts_per_step=8"]) == base


def test_the_save_period_comes_from_the_bound_on_lost_work_and_the_plans_step_and_write_times():
    from infra.run_plan import derived_save_period, save_period_for

    # gemma3-27b (h200): ~12 min a step, a checkpoint written in ~50 s.
    assert derived_save_period(720, 50, None) == 1  # writes take 7 % of training at one save a step
    assert derived_save_period(60, 50, None) == 9  # short steps: as often as 10 % write time allows
    assert derived_save_period(720, 50, 30) == 2  # 2 x 12 min + 50 s fits in 30 min, 3 x 12 min does not
    assert derived_save_period(720, 50, 5) == 1  # a step cannot be split
    assert derived_save_period(None, 50, 30) == 10  # no step-time estimate: NeMo-RL's default
    h200 = load_stack("h200").config
    assert save_period_for(h200) == 1
    assert save_period_for(h200.model_copy(update={"job": h200.job.model_copy(update={"max_lost_minutes": 30.0})})) == 2
    assert "checkpointing.save_period=1" in build_spec(load_stack("h200")).entrypoint
    # It is the stack's: an override of it is refused, naming the key to change.
    with pytest.raises(
        JobBuildError, match=r"checkpointing.save_period is derived from the stack; change job.maxLostMinutes"
    ):
        build_job(
            h200.recipe,
            h200.job.model_copy(update={"overrides": ("checkpointing.save_period=10",)}),
            pool("h200", 2),
            "/lustre",
            "h200",
            False,
            save_period=1,
        )


def _prelude(spec: JobSpec) -> str:
    """The entrypoint up to NeMo-RL's start: what runs on the Ray head before every attempt."""
    return spec.entrypoint.rsplit("; cd ", 1)[0]


def _run_shell(command: str) -> subprocess.CompletedProcess:
    """`command` as Ray's job supervisor runs an entrypoint (`sh -c`), `python` being an interpreter with only the
    standard library and PyYAML (as the NeMo-RL image has them): the project is not on its path."""
    env = {"PATH": f"{os.path.dirname(sys.executable)}:/usr/bin:/bin", "PYTHONNOUSERSITE": "1"}
    return subprocess.run(["sh", "-c", command], capture_output=True, text=True, timeout=30, env=env, cwd="/")


def _old(path) -> None:
    """Last written before `checkpoints.QUIET_SECONDS`: nothing writes it any more."""
    old = time.time() - checkpoints.QUIET_SECONDS - 5
    for p in [path, *path.rglob("*")]:
        os.utime(p, (old, old))


def test_before_every_attempt_nemo_rl_finds_only_whole_steps_of_its_own_run_moved_once_never_nested(tmp_path):
    # 5971cc4 saved dev's run in checkpoints/<stack>/<recipe> (`git show 5971cc4:workloads/job_spec.py`); 1.0.0
    # saved asynchronously into the run's directory, so a step_N there may be cut short.
    cfg = load_stack("dev").config
    spec = build_job(cfg.recipe, cfg.job, pool("b200", 1), str(tmp_path), "dev", False, save_period=1)
    legacy = tmp_path / "checkpoints" / "dev" / "qwen2.5-1.5b-gsm8k"
    current = legacy / "Qwen_Qwen2.5-1.5B-Instruct-seq512-dtensor-tp1-pp1"
    assert f"checkpointing.checkpoint_dir={current}" in overrides(spec)
    make(current, "step_10", "step_20", "tmp_step_25")
    (current / "step_20" / "policy" / "optimizer" / ".metadata").unlink()  # its optimizer's write never finished
    (current / "step_10" / "mine").write_text("kept")
    make(legacy, "step_3", "step_5", "step_7", "step_10", "tmp_step_15")
    for step in ("step_3", "step_7", "step_10"):
        write_config(legacy / step, "Qwen/Qwen2.5-1.5B-Instruct", 512, 1)
    write_config(legacy / "step_5", "Qwen/Qwen2.5-1.5B-Instruct", 512, 2)  # another run: TP 2
    (legacy / "step_7" / "policy" / "weights" / ".metadata").unlink()  # cut short
    _old(legacy / "tmp_step_15")
    _old(current / "tmp_step_25")
    assert nemo_rl_latest(current).name == "step_20"  # what NeMo-RL loads without the step: a partial save

    first = _run_shell(_prelude(spec))
    assert first.returncode == 0, first.stderr
    assert nemo_rl_latest(current) == current / "step_10" and checkpoints.is_whole(current / "step_10"), first.stdout
    assert first.stdout.splitlines() == [
        f"nemo-rl-gke: step_20 in {current} is not a whole save (no finish marker): renamed incomplete_step_20, kept",
        f"nemo-rl-gke: resuming from the checkpoints of an earlier release: moved step_3 from {legacy} to {current}",
        f"nemo-rl-gke: left in {legacy}, not whole checkpoints of run {current.name}: step_5 (run "
        "Qwen_Qwen2.5-1.5B-Instruct-seq512-dtensor-tp2-pp1), step_7 (not whole)",
        f"nemo-rl-gke: removed the earlier release's partial save(s) tmp_step_15 from {legacy}",
        f"nemo-rl-gke: removed the dead partial save(s) tmp_step_25 from {current}",
        "nemo-rl-gke: NeMo-RL resumes from step_10",
    ]
    assert sorted(p.name for p in current.iterdir()) == ["incomplete_step_20", "step_10", "step_3"]
    assert (current / "step_10" / "mine").read_text() == "kept" and not (current / "step_10" / "step_10").exists()
    assert (current / "step_3" / "config.yaml").is_file()  # moved, not recreated
    assert sorted(p.name for p in legacy.iterdir()) == [current.name, "step_10", "step_5", "step_7"]

    (current / "step_20").mkdir()  # the next save cut short again: set aside beside the first, never into it
    again = _run_shell(_prelude(spec))
    assert again.returncode == 0 and again.stderr == "", again.stderr
    assert again.stdout.splitlines()[0].endswith("renamed incomplete_step_20.2, kept")
    assert again.stdout.splitlines()[-1] == "nemo-rl-gke: NeMo-RL resumes from step_10" and "moved" not in again.stdout
    assert nemo_rl_latest(current) == current / "step_10"


def test_a_move_that_fails_stops_the_attempt_in_one_line_instead_of_starting_the_run_at_step_0(tmp_path):
    legacy, current = tmp_path / "old", tmp_path / "old" / "Qwen_Qwen2.5-1.5B-Instruct-seq512-dtensor-tp1-pp1"
    make(legacy, "step_7")
    write_config(legacy / "step_7", "Qwen/Qwen2.5-1.5B-Instruct", 512, 1)
    current.write_text("not a directory")
    failed = _run_shell(job_spec_module.prepare_checkpoints(str(current), str(legacy)) + "; echo NeMo-RL started")
    assert failed.returncode == 1 and "NeMo-RL started" not in failed.stdout
    assert failed.stderr.splitlines() == [
        f"nemo-rl-gke: cannot move {legacy}/step_7 to {current}/step_7: File exists: the attempt stops here rather "
        "than resume from the wrong step"
    ]
    assert (legacy / "step_7" / "config.yaml").is_file()


def test_the_run_key_a_step_recorded_is_the_one_its_checkpoint_directory_is_named_by():
    for name, recipe in RECIPES.items():
        key = job_spec_module.checkpoint_key(recipe, recipe.parallelism)
        par, model = recipe.parallelism, recipe.model
        megatron = par.backend is TrainingBackend.MEGATRON
        saved = {"policy": {"model_name": model, "max_total_sequence_length": recipe.config_max_sequence_length}}
        saved["policy"]["megatron_cfg"] = {
            "enabled": megatron,
            "tensor_model_parallel_size": par.train_tensor_parallel,
            "pipeline_model_parallel_size": par.train_pipeline_parallel,
        }
        saved["policy"]["dtensor_cfg"] = {"enabled": not megatron, "tensor_parallel_size": par.train_tensor_parallel}
        assert checkpoints.run_key_of_config(saved) == key, name


def test_the_program_the_head_runs_is_the_checkpoint_modules_own_code_and_only_its_code_changes_the_spec():
    program = job_spec_module.checkpoints_program()
    source = Path(checkpoints.__file__).read_text()
    assert program == job_spec_module._code_only(source.replace("    return sorted(", "    # why\n    return sorted("))
    assert "def is_whole(" in program and '"""' not in program and "NVIDIA-NeMo/RL" not in program
    edited = source.replace('ASIDE_PREFIX = "incomplete_"', 'ASIDE_PREFIX = "aside_"')
    assert edited != source and job_spec_module._code_only(edited) != program


def test_a_spec_edit_that_keeps_the_checkpoint_key_is_the_same_run_and_a_recipe_change_is_a_new_one():
    dev = load_stack("dev").config
    base = build_spec(load_stack("dev"))
    assert base.run_id == "dev-qwen2-5-1-5b-gsm8k-ed6341a2" and base.run_id != base.submission_id

    def spec_with(**job: object) -> JobSpec:
        cfg = dev.model_copy(update={"job": dev.job.model_copy(update=job)})
        return build_job(cfg.recipe, cfg.job, pool("b200", 1), "/lustre", "dev", False, save_period=1)

    for edit in ({"gate": "off"}, {"max_lost_minutes": 5.0}, {"max_num_steps": 99}):
        same = spec_with(**edit)
        assert same.run_id == base.run_id, edit
    assert spec_with(max_num_steps=99).submission_id != base.submission_id  # a new attempt is submitted anew
    other = spec_with(overrides=("policy.max_total_sequence_length=1024",))
    assert other.run_id != base.run_id and other.run_id.startswith("dev-qwen2-5-1-5b-gsm8k-")


def test_a_spec_pickled_before_run_ids_is_a_run_of_its_own():
    new = JobSpec.create(stack="s", recipe="r", entrypoint="true", runtime_env={}, run_id="s-r-0badc0de")
    old = new.to_dict()
    old["metadata"] = {k: v for k, v in old["metadata"].items() if k != "nemo-rl-gke/run-id"}
    assert new.run_id == "s-r-0badc0de" and JobSpec.from_dict(old).run_id == new.submission_id


def test_the_sync_save_override_stays_on_for_tags_after_v0_7_0_until_a_tags_source_shows_the_fix(monkeypatch):
    # c95bec5a6 (the wait before promoting tmp_step_N) is on no NeMo-RL tag read here; v0.8.0 is not in the mirror
    # and its rendered docs did not show the checkpoint manager's methods (data/version_matrix.yaml notAdded): a later
    # image keeps the override; only a tag listed as carrying the fix drops it.
    from infra.version_matrix import load
    from workloads import job_spec

    assert job_spec.ASYNC_SAVE_FIXED == frozenset()
    v080 = next(e for e in load()["notAdded"] if e["nemoRl"] == "v0.8.0")["asyncSaveFix"]
    assert v080["inV080"] is None and "v0.8.0" not in job_spec.ASYNC_SAVE_FIXED  # the matrix and the override agree
    assert [job_spec._saves_async(t) for t in ("v0.4.0", "v0.5.0", "v0.6.0", "v0.7.0", "v0.8.0")] == [
        False,
        False,
        True,
        True,
        True,
    ]
    monkeypatch.setattr(job_spec, "ASYNC_SAVE_FIXED", frozenset({"v0.8.0"}))
    assert not job_spec._saves_async("v0.8.0") and job_spec._saves_async("v0.7.0")
