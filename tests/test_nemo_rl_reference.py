"""The reference-data generator's readers, on small sources shaped like NeMo-RL's (the real run needs an
NVIDIA-NeMo/RL clone; its output is workloads/data/nemo_rl/*.json, checked in tests/test_overrides.py), and
what its output at NeMo-RL v0.7.0 says about the committed stacks' overrides."""

from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from tools.nemo_rl_reference import CONFIG_FILES, _flatten, _init_args, _keys_read, _registry, _typeddict_keys

FLAT_LOADER = """
def load_response_dataset(data_config, seed=42):
    dataset_name = data_config["dataset_name"]
    if dataset_name == "squad":
        base = Squad(split=data_config.get("split"))
    elif dataset_name == "ResponseDataset":
        if "train_data_path" not in data_config:
            raise ValueError()
        extra = get_extra_kwargs(data_config, ["val_data_path", "input_key"])
"""

SPLIT_REGISTRY = """
from functools import partial
DATASET_REGISTRY = {"gsm8k": GSM8KDataset, "AIME2025": partial(AIMEDataset, variant="2025")}
class GSM8KDataset(RawDataset):
    def __init__(self, split: str = "train", extract_answer: bool = True, **kwargs): ...
class DataConfig(TypedDict):
    max_input_seq_length: int
    train: dict
"""


def test_the_flat_loader_keys_are_every_key_it_reads_and_every_name_it_compares():
    keys, names = _keys_read(FLAT_LOADER)
    assert keys == {"dataset_name", "split", "train_data_path", "val_data_path", "input_key"}
    assert names == {"squad", "ResponseDataset"}


def test_the_split_loader_reads_its_registry_constructor_arguments_and_typed_dict():
    assert _registry(SPLIT_REGISTRY) == {"gsm8k": "GSM8KDataset", "AIME2025": "AIMEDataset"}
    assert _init_args(SPLIT_REGISTRY, "GSM8KDataset") == ["split", "extract_answer"]
    assert _typeddict_keys(SPLIT_REGISTRY, "DataConfig") == ["max_input_seq_length", "train"]


def test_a_config_flattens_to_its_keys_with_their_kinds():
    cfg = OmegaConf.create({"a": {"b": 1, "c": None, "d": {}, "e": [1, 2]}, "f": "${a.b}"})
    out: dict[str, str] = {}
    _flatten(cfg, "", out)
    assert out == {"a.b": "value", "a.c": "null", "a.d": "{}", "a.e": "[2]", "f": "value"}


# ---------------------------------------------------------------- the generated data at v0.7.0


def stack_overrides(stack: str) -> tuple[str, list[str]]:
    """The config file and every override (stack-derived, recipe, the stack file's own) of a committed stack."""
    import shlex

    from jobctl.stack import build_spec, load_stack

    # `...; cd /opt/nemo-rl && python <script> --config <file> <overrides...>`
    tokens = shlex.split(build_spec(load_stack(stack)).entrypoint.rsplit("; cd ", 1)[1])
    assert tokens[1:3] == ["&&", "python"] and tokens[4] == "--config", tokens[:6]
    return tokens[5], tokens[6:]


def test_the_v0_7_0_reference_is_the_tags_recipe_files_loaded_with_its_own_loader():
    from workloads.overrides import reference

    ref = reference("v0.7.0")
    assert ref["source"]["commit"] == "81aa43dda4765b0429cf31dab44441e4e4383911"
    assert sorted(ref["configs"]) == sorted(CONFIG_FILES) and ref["loader"]["layout"] == "split"
    # What changed from v0.6.0 that a recipe meets: Megatron's converter_type is gone.
    assert "policy.megatron_cfg.converter_type" in reference("v0.6.0")["configs"][CONFIG_FILES[1]]
    assert "policy.megatron_cfg.converter_type" not in ref["configs"][CONFIG_FILES[1]]


@pytest.mark.parametrize("stack", ["dev", "h200", "autopilot"])
def test_every_key_the_split_layout_stacks_set_exists_at_nemo_rl_v0_7_0(stack):
    from workloads.overrides import OverrideChecker, data_key_problem

    config_file, overrides = stack_overrides(stack)
    checker = OverrideChecker("v0.7.0", config_file)
    problems = [p for o in overrides if (p := checker.problem(o) or data_key_problem("v0.7.0", o))]
    assert problems == [], stack


def test_the_megatron_recipe_does_not_fit_nemo_rl_v0_7_0_so_it_stays_on_its_image():
    from workloads.overrides import OverrideChecker

    config_file, overrides = stack_overrides("b200")
    checker = OverrideChecker("v0.7.0", config_file)
    refused = sorted(o for o in overrides if checker.problem(o))
    assert refused == ["data.dataset_name=DeepScaler", "policy.megatron_cfg.converter_type=Qwen2ForCausalLM"]
