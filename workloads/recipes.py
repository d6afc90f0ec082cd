"""NeMo-RL GRPO recipes as typed data.

A recipe pins its NeMo-RL image and knows which generation of the NeMo-RL config layout the
image uses (the GRPO script name and the data keys changed at v0.6, FACTS.md "NeMo-RL").
Stack-dependent values (node counts, checkpoint paths, logger names) are NOT here: the job
builder derives them from the stack and the infra facts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class ConfigGeneration(str, Enum):
    """NeMo-RL config layout generation."""

    FLAT = "flat"
    """<= v0.5: examples/run_grpo_math.py, flat data.dataset_name."""
    SPLIT = "split"
    """>= v0.6: examples/run_grpo.py, data.train.* / data.validation.*."""


@dataclass(frozen=True)
class NemoRLImage:
    """A NeMo-RL container image and the Ray version inside it (must equal the RayCluster's)."""

    tag: str
    ray_version: str
    generation: ConfigGeneration
    repository: str = "nvcr.io/nvidia/nemo-rl"

    @property
    def ref(self) -> str:
        return f"{self.repository}:{self.tag}"

    @property
    def grpo_script(self) -> str:
        if self.generation is ConfigGeneration.FLAT:
            return "examples/run_grpo_math.py"
        return "examples/run_grpo.py"


# FACTS.md "NeMo-RL" table: the Ray version each image ships.
IMAGES: dict[str, NemoRLImage] = {
    "v0.4.0": NemoRLImage("v0.4.0", "2.46.0", ConfigGeneration.FLAT),
    "v0.5.0": NemoRLImage("v0.5.0", "2.49.2", ConfigGeneration.FLAT),
    "v0.6.0": NemoRLImage("v0.6.0", "2.54.0", ConfigGeneration.SPLIT),
}


@dataclass(frozen=True)
class Parallelism:
    """How a recipe lays its work over GPUs; checked against the pool before anything is built."""

    train_tensor_parallel: int
    """dtensor or megatron tensor-parallel size of the policy."""
    colocated: bool = True
    """Generation (vLLM) shares the training GPUs."""
    generation_nodes: int = 0
    """Nodes reserved for vLLM when not colocated."""
    generation_tensor_parallel: int = 1
    """vLLM tensor-parallel size."""
    min_nodes: int = 1
    """The fewest GPU nodes the recipe can run on."""


@dataclass(frozen=True)
class Recipe:
    """One GRPO run: model, data, NeMo-RL config file and fixed overrides."""

    name: str
    description: str
    image: NemoRLImage
    config_file: str
    model: str
    model_params_billion: float
    parallelism: Parallelism
    overrides: tuple[str, ...] = field(default_factory=tuple)
    """Recipe-specific NeMo-RL overrides (Hydra syntax); stack-derived ones are added by the job builder."""
    max_num_steps: int = 20
    expected_hours: float | None = None
    """Rough wall-clock duration on the recipe's reference pool; used for cost totals."""

    @property
    def script(self) -> str:
        return self.image.grpo_script


RECIPES: dict[str, Recipe] = {
    # The codelab run (FACTS.md): Qwen2.5-72B-Instruct, DeepScaler, Megatron, 8 x B200 nodes.
    "qwen2.5-72b-deepscaler": Recipe(
        name="qwen2.5-72b-deepscaler",
        description="Codelab: Qwen2.5-72B-Instruct GRPO on DeepScaler with Megatron (8 nodes)",
        image=IMAGES["v0.4.0"],
        config_file="examples/configs/grpo_math_70B_megatron.yaml",
        model="Qwen/Qwen2.5-72B-Instruct",
        model_params_billion=72.7,
        parallelism=Parallelism(
            train_tensor_parallel=8, colocated=True, generation_tensor_parallel=8, min_nodes=2
        ),
        overrides=(
            "policy.model_name=Qwen/Qwen2.5-72B-Instruct",
            "policy.tokenizer.name=Qwen/Qwen2.5-72B-Instruct",
            "policy.megatron_cfg.converter_type=Qwen2ForCausalLM",
            "data.dataset_name=DeepScaler",
            "grpo.num_generations_per_prompt=8",
            "grpo.num_prompts_per_step=32",
            "policy.train_global_batch_size=256",
            "checkpointing.save_period=2",
            "checkpointing.keep_top_k=2",
            "checkpointing.metric_name=null",
        ),
        max_num_steps=20,
        expected_hours=6.0,
    ),
    # The GKE tutorial run (FACTS.md): Gemma3-27B-it on GSM8K, generation on its own node.
    "gemma3-27b-gsm8k": Recipe(
        name="gemma3-27b-gsm8k",
        description="GKE tutorial: Gemma3-27B-it GRPO on GSM8K, vLLM on a dedicated node (2 nodes)",
        image=IMAGES["v0.5.0"],
        config_file="examples/configs/recipes/llm/grpo-gemma3-27b-it-8n4g-fsdp2tp4-actckpt-long.yaml",
        model="google/gemma-3-27b-it",
        model_params_billion=27.4,
        parallelism=Parallelism(
            train_tensor_parallel=8,
            colocated=False,
            generation_nodes=1,
            generation_tensor_parallel=8,
            min_nodes=2,
        ),
        overrides=(
            "grpo.num_prompts_per_step=16",
            "grpo.num_generations_per_prompt=64",
            "policy.generation.vllm_cfg.gpu_memory_utilization=0.9",
            "data.dataset_name=ResponseDataset",
            "++data.train_data_path=openai/gsm8k",
            "++data.val_data_path=openai/gsm8k",
            "++data.subset=main",
            "++data.input_key=question",
            "++data.output_key=answer",
            "++data.train_split=train",
            "++data.val_split=test",
        ),
        max_num_steps=20,
        expected_hours=4.0,
    ),
    # The cheapest run that still exercises every part: one GPU node, a 1.5B model.
    "qwen2.5-1.5b-gsm8k": Recipe(
        name="qwen2.5-1.5b-gsm8k",
        description="Dev: Qwen2.5-1.5B-Instruct GRPO on math, one node, colocated",
        image=IMAGES["v0.5.0"],
        config_file="examples/configs/grpo_math_1B.yaml",
        model="Qwen/Qwen2.5-1.5B-Instruct",
        model_params_billion=1.5,
        parallelism=Parallelism(train_tensor_parallel=1, colocated=True, generation_tensor_parallel=1),
        overrides=("policy.model_name=Qwen/Qwen2.5-1.5B-Instruct",),
        max_num_steps=10,
        expected_hours=0.5,
    ),
}
