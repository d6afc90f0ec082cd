"""Overrides checked against the pinned NeMo-RL config with NeMo-RL's own parser (hydra-core), and the
reference data they are checked against."""

from __future__ import annotations

import pytest
from conftest import merged, run_plan

from infra.config import ConfigError
from tools.nemo_rl_reference import CONFIG_FILES, FLAT_TAGS
from workloads.overrides import DATA_DIR, OverrideChecker, config_keys, parse_override, reference
from workloads.recipes import IMAGES, RECIPES

DEV_CONFIG = ("v0.6.0", "examples/configs/grpo_math_1B.yaml")
OWNED = {"checkpointing.enabled", "checkpointing.checkpoint_dir", "cluster.num_nodes", "logger.log_dir"}


def checker() -> OverrideChecker:
    return OverrideChecker(*DEV_CONFIG, owned=OWNED)


# ---------------------------------------------------------------- the reference data


def test_every_image_has_reference_data_naming_its_upstream_source():
    for tag in IMAGES:
        ref = reference(tag)
        assert ref["source"]["repo"] == "NVIDIA-NeMo/RL" and ref["source"]["tag"] == tag
        assert len(ref["source"]["commit"]) == 40
        assert ref["loader"]["paths"] and ref["loader"]["data_keys"] and ref["loader"]["dataset_names"]
        assert ref["loader"]["layout"] == ("flat" if tag in FLAT_TAGS else "split")
        assert ref["loader"]["layout"] == IMAGES[tag].generation.value
    assert sorted(p.stem for p in DATA_DIR.glob("*.json")) == sorted(IMAGES)


def test_every_recipes_config_file_is_in_its_images_reference():
    for recipe in RECIPES.values():
        assert recipe.config_file in CONFIG_FILES, recipe.name
        keys = config_keys(recipe.image.tag, recipe.config_file)
        # Keys the job builder always sets must be in every recipe's config (plain `key=value`).
        for key in ("cluster.num_nodes", "checkpointing.checkpoint_dir", "logger.log_dir", "grpo.max_num_steps"):
            assert key in keys, (recipe.name, key)


def test_the_reference_knows_the_facts_the_recipes_rest_on():
    # grpo_math_70B_megatron.yaml keeps vLLM TP as a value, the v0.6 loader reads data.train.subset and
    # knows gsm8k, and the v0.5 one has no subset (NVIDIA-NeMo/RL v0.5.0 / v0.6.0, #1893).
    assert "policy.generation.vllm_cfg.tensor_parallel_size" in config_keys(
        "v0.4.0", "examples/configs/grpo_math_70B_megatron.yaml"
    )
    assert config_keys(*DEV_CONFIG)["data.validation"] == "null"
    assert "gsm8k" in reference("v0.6.0")["loader"]["dataset_names"]
    assert "gsm8k" not in reference("v0.5.0")["loader"]["dataset_names"]
    assert "data.train.subset" in reference("v0.6.0")["loader"]["data_keys"]
    assert not any(k.endswith("subset") for k in reference("v0.5.0")["loader"]["data_keys"])


# ---------------------------------------------------------------- what is allowed


@pytest.mark.parametrize(
    "override",
    [
        "grpo.num_prompts_per_step=8",  # an existing key
        "grpo.val_period=null",
        "+grpo.new_knob=1",  # + adds a new key
        "++grpo.num_prompts_per_step=4",  # ++ adds or sets
        "++data.validation.dataset_name=gsm8k",  # ++ below a null section
        "~loss_fn.use_on_policy_kl_approximation",  # ~ deletes a key the stack does not set
        "checkpointing.save_period=5",  # below a section the stack sets keys of
        "policy.generation.stop_strings=[a,b]",
    ],
)
def test_overrides_nemo_rl_accepts_pass(override):
    assert checker().problem(override) is None


def test_overrides_apply_in_order_so_a_later_one_sees_an_earlier_one():
    c = checker()
    assert c.problem("~data.validation.split") is not None  # not there yet
    assert c.problem("++data.validation.split=test") is None
    assert c.problem("~data.validation.split") is None  # now it is


# ---------------------------------------------------------------- what is refused


@pytest.mark.parametrize(
    ("override", "says"),
    [
        (
            "--config=examples/configs/grpo_math_70B_megatron.yaml",
            "starts with '-', which NeMo-RL's script reads as its own flag",
        ),
        ("-x=1", "starts with '-'"),
        ("~checkpointing", "deletes checkpointing, which holds checkpointing.checkpoint_dir that the stack sets"),
        ("~cluster", "deletes cluster, which holds cluster.num_nodes that the stack sets"),
        ("~checkpointing.enabled", "deletes checkpointing.enabled that the stack sets"),
        ("checkpointing=null", "replaces checkpointing, which holds checkpointing.checkpoint_dir that the stack sets"),
        ("++logger=null", "replaces logger, which holds logger.log_dir"),
        (
            "grpo.num_prompt_per_step=8",
            "grpo.num_prompt_per_step is not a key of examples/configs/grpo_math_1B.yaml of NeMo-RL v0.6.0",
        ),
        ("data.dataset_name=gsm8k", "data.dataset_name is not a key of"),
        ("data.validation.split=test", "data.validation.split is not a key of"),  # below a null section: ++ only
        ("+grpo.num_prompts_per_step=8", "grpo.num_prompts_per_step already exists"),
        ("~loss_fn.ratio_clip_c", "has no loss_fn.ratio_clip_c to delete (or it is null)"),  # null in the config
        ("~no.such.key", "has no no.such.key to delete"),
        ("grpo.num_prompts_per_step", "is not a Hydra override"),
        ("a@b=1", "@package selects a config group"),
    ],
)
def test_overrides_nemo_rl_would_refuse_or_that_undo_the_stack_are_refused_in_one_line(override, says):
    problem = checker().problem(override)
    assert problem is not None and says in problem, problem
    assert "\n" not in problem and "allowed:" in problem, problem


@pytest.mark.parametrize(
    ("overrides", "says"),
    [
        (
            ["~checkpointing"],
            "'~checkpointing' deletes checkpointing, which holds checkpointing.checkpoint_dir that the stack sets",
        ),
        (["--config=x.yaml"], "'--config=x.yaml' starts with '-'"),
        (
            ["grpo.no_such_key=1"],
            "'grpo.no_such_key=1': grpo.no_such_key is not a key of examples/configs/grpo_math_1B.yaml of NeMo-RL "
            "v0.6.0",
        ),
    ],
)
def test_a_refused_override_is_a_config_error_naming_job_overrides_before_any_resource(overrides, says):
    with pytest.raises(ConfigError) as info:
        run_plan("dev", job=merged("dev", "job", {"overrides": overrides}))
    message = str(info.value)
    assert message.startswith("nemo-rl-gke:job.overrides: job.overrides "), message
    assert says in message and "allowed:" in message and "\n" not in message, message


def test_new_keys_added_with_plus_reach_the_job_last_and_verbatim():
    from conftest import spec_of

    from jobctl.stack import load_stack

    cfg = load_stack("dev").config
    cfg = cfg.model_copy(
        update={"job": cfg.job.model_copy(update={"overrides": ("+policy.new_knob=1", "++grpo.seed=7")})}
    )
    assert spec_of("dev", cfg, wandb_key_set=False).entrypoint.endswith(" +policy.new_knob=1 ++grpo.seed=7")


# ---------------------------------------------------------------- the one override parser


@pytest.mark.parametrize(
    ("override", "prefix", "key", "value", "deletes", "assigns"),
    [
        ("a.b=1", "", "a.b", "1", False, True),
        ("+a.b=1", "+", "a.b", "1", False, True),
        ("++a.b=x=y", "++", "a.b", "x=y", False, True),
        ("~a.b", "~", "a.b", None, True, False),
        ("~a.b=1", "~", "a.b", "1", True, False),
        ("a.b", "", "a.b", None, False, False),
        ("=1", "", "", "1", False, True),
        ("+~a.b=1", "+~", "a.b", "1", False, False),
    ],
)
def test_one_parser_splits_an_override_into_its_marks_key_and_value(override, prefix, key, value, deletes, assigns):
    parsed = parse_override(override)
    assert (parsed.prefix, parsed.key, parsed.value) == (prefix, key, value)
    assert (parsed.deletes, parsed.assigns) == (deletes, assigns)


def test_the_stack_config_folds_only_assignments_of_a_parallelism_key_into_the_layout():
    from infra.config import JobConfig

    tp = "policy.dtensor_cfg.tensor_parallel_size"
    assert JobConfig(overrides=(f"++{tp}=2",)).parallelism.train_tensor_parallel == 2
    assert JobConfig(overrides=(f"{tp}=2", f"~{tp}=4")).parallelism.train_tensor_parallel == 2
