"""The reference-data generator's readers, on small sources shaped like NeMo-RL's (the real run needs an
NVIDIA-NeMo/RL clone; its output is workloads/data/nemo_rl/*.json, checked in tests/test_overrides.py)."""

from __future__ import annotations

from omegaconf import OmegaConf

from tools.nemo_rl_reference import _flatten, _init_args, _keys_read, _registry, _typeddict_keys

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
