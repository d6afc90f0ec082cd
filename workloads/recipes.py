"""NeMo-RL GRPO recipes as typed data; the job builder (`workloads.job_spec.build_job`) adds what the stack decides.

Checked against upstream NVIDIA-NeMo/RL:
- examples/configs/grpo_math_70B_megatron.yaml (defaults: grpo_math_1B_megatron.yaml): Megatron TP 4, PP 4,
  vLLM TP 8 (v0.4.0 ... v0.7.0); the codelab overrides only model, converter, data and batch sizes.
- examples/configs/recipes/llm/grpo-gemma3-27b-it-8n4g-fsdp2tp4-actckpt-long.yaml inherits ...-8n8g-fsdp2tp8-...
  (DTensor, colocated); the GKE tutorial (and pmotgi/nemo-rl-on-gke gemma3-27b-gsm8k.sh) sets dtensor TP 8,
  vLLM TP 8, gpu_memory_utilization 0.9 and vLLM on its own node.
- examples/configs/grpo_math_1B.yaml holds every key the job builder sets, so plain `key=value` is used.
- nemo_rl/algorithms/grpo.py `setup()`: train_nodes = cluster.num_nodes - colocated.resources.num_nodes, and
  colocated.resources.gpus_per_node == cluster.gpus_per_node; so `cluster.num_nodes` is the WHOLE pool.
- docker/Dockerfile: WORKDIR /opt/nemo-rl (configs and `data.prompt_file` are relative to it), venv on PATH.
- The script and data keys changed at v0.6 (v0.6.0 examples/run_grpo.py, examples/configs/grpo_math_1B.yaml).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum


class ConfigGeneration(str, Enum):
    """NeMo-RL config layout generation."""

    FLAT = "flat"  # <= v0.5: examples/run_grpo_math.py, flat data.dataset_name
    SPLIT = "split"  # >= v0.6: examples/run_grpo.py, data.train.* / data.validation.*


class TrainingBackend(str, Enum):
    """Which NeMo-RL policy backend a recipe trains with; decides the parallelism keys."""

    DTENSOR = "dtensor"  # policy.dtensor_cfg.* (FSDP2 + tensor parallel)
    MEGATRON = "megatron"  # policy.megatron_cfg.* (tensor + pipeline parallel)


@dataclass(frozen=True)
class NemoRLImage:
    """A NeMo-RL container image and the Ray version inside it (must equal the RayCluster's)."""

    tag: str
    ray_version: str
    generation: ConfigGeneration
    repository: str = "nvcr.io/nvidia/nemo-rl"
    workdir: str = "/opt/nemo-rl"  # the checkout: scripts, configs and prompt files are relative to it

    @property
    def ref(self) -> str:
        return f"{self.repository}:{self.tag}"

    @property
    def grpo_script(self) -> str:
        return "examples/run_grpo_math.py" if self.generation is ConfigGeneration.FLAT else "examples/run_grpo.py"


# The Ray each image ships: NVIDIA-NeMo/RL uv.lock at the tag (`name = "ray"`): v0.4.0 2.46.0,
# v0.5.0 2.49.2, v0.6.0 2.54.0, v0.7.0 2.55.1 (81aa43dd). The RayCluster's rayVersion is taken from here.
# v0.7.0 is in no recipe yet: its matrix row has no gate run (docs/version-matrix.md).
IMAGES: dict[str, NemoRLImage] = {
    "v0.4.0": NemoRLImage("v0.4.0", "2.46.0", ConfigGeneration.FLAT),
    "v0.5.0": NemoRLImage("v0.5.0", "2.49.2", ConfigGeneration.FLAT),
    "v0.6.0": NemoRLImage("v0.6.0", "2.54.0", ConfigGeneration.SPLIT),
    "v0.7.0": NemoRLImage("v0.7.0", "2.55.1", ConfigGeneration.SPLIT),
}


@dataclass(frozen=True)
class Parallelism:
    """How a recipe lays its work over GPUs; checked against the pool before anything is built."""

    train_tensor_parallel: int  # the policy's, DTensor or Megatron
    colocated: bool = True  # generation (vLLM) shares the training GPUs
    generation_nodes: int = 0  # reserved for vLLM when not colocated
    generation_tensor_parallel: int = 1
    min_nodes: int = 1  # the fewest GPU nodes the recipe can run on
    backend: TrainingBackend = TrainingBackend.DTENSOR
    train_pipeline_parallel: int = 1  # Megatron only

    def __post_init__(self) -> None:
        # generation_nodes is ignored while colocated, so a user may switch colocation on and off.
        if not self.colocated and self.generation_nodes < 1:
            raise ValueError(
                "generation not colocated needs at least one generation node "
                "(policy.generation.colocated.resources.num_nodes >= 1)"
            )
        if self.backend is TrainingBackend.DTENSOR and self.train_pipeline_parallel != 1:
            raise ValueError("pipeline parallelism needs the Megatron backend")

    def training_nodes(self, node_count: int) -> int:
        """The nodes of a `node_count` pool left for training (below 1: the config and job builder refuse it)."""
        return node_count if self.colocated else node_count - self.generation_nodes

    @property
    def model_parallel_gpus(self) -> int:
        """GPUs one model replica spans during training (TP x PP)."""
        return self.train_tensor_parallel * self.train_pipeline_parallel


@dataclass(frozen=True)
class Recipe:
    """One GRPO run: model, data, NeMo-RL config file and fixed overrides."""

    name: str
    image: NemoRLImage
    config_file: str
    model: str
    model_params_billion: float
    parallelism: Parallelism
    overrides: tuple[str, ...] = field(default_factory=tuple)  # Hydra syntax; the stack's come from the builder
    max_num_steps: int = 20
    expected_hours: float | None = None  # rough wall-clock on the recipe's reference pool, for cost totals
    # What `config_file` sets at the image's tag: train_global_batch_size 512 in grpo_math_1B.yaml (v0.6.0) and
    # grpo_math_70B_megatron.yaml (v0.4.0), inherited by the gemma files; max_total_sequence_length 512
    # (grpo_math_1B.yaml, v0.6.0), 4096 (grpo_math_70B_megatron.yaml, v0.4.0), 16384
    # (grpo-gemma3-27b-it-8n8g-fsdp2tp8-actckpt-long.yaml, v0.6.0).
    config_train_global_batch_size: int = 512
    config_max_sequence_length: int = 512

    @property
    def step_seconds(self) -> "float | None":
        """The plan's estimate of one training step: `expected_hours` over `max_num_steps`."""
        return self.expected_hours * 3600 / self.max_num_steps if self.expected_hours else None


# GSM8K on the v0.6 data layout, as upstream's own GSM8K configs do (examples/configs/gdpo_math_1B.yaml
# at v0.6.0, grpo_smoke.yaml at v0.7.0): the built-in `gsm8k` dataset (nemo_rl/data/datasets/
# response_datasets/gsm8k.py) loads openai/gsm8k's `main` config and keeps only the number after
# "####" as the answer, which the math environment checks. The v0.5.0 image cannot load GSM8K without
# patching code: its ResponseDataset has no `subset`, and openai/gsm8k needs one (main/socratic).
# grpo_math_1B.yaml has `data.validation: null` and validates every 10 steps (grpo.py setup() asserts
# a validation set), so GSM8K's test split is added there; data.default supplies the prompt file,
# processor and environment (math) to both. Checked with NeMo-RL v0.6.0's own loader and parser.
GSM8K_DATA: tuple[str, ...] = (
    "data.train.dataset_name=gsm8k",
    "++data.validation.dataset_name=gsm8k",
    "++data.validation.split=test",
)


# Models that Hugging Face serves only to accounts that accepted their licence: a recipe using one
# needs the `hfToken` secret, or the job fails at its first download (huggingface.co/google/gemma-3-27b-it
# asks to accept Google's usage licence before the files can be accessed).
GATED_MODELS = frozenset({"google/gemma-3-27b-it"})

RECIPES: dict[str, Recipe] = {
    # The codelab run (GoogleCloudPlatform/devrel-demos ai-ml/rl-gke-managed-lustre): Qwen2.5-72B-Instruct,
    # DeepScaler, Megatron, 8 x B200 nodes, with the config file's own TP 4 x PP 4 (one replica spans 16 GPUs,
    # so two 8-GPU nodes at least) and vLLM TP 8.
    "qwen2.5-72b-deepscaler": Recipe(
        name="qwen2.5-72b-deepscaler",
        image=IMAGES["v0.4.0"],
        config_file="examples/configs/grpo_math_70B_megatron.yaml",
        model="Qwen/Qwen2.5-72B-Instruct",
        model_params_billion=72.7,
        parallelism=Parallelism(
            train_tensor_parallel=4,
            train_pipeline_parallel=4,
            backend=TrainingBackend.MEGATRON,
            colocated=True,
            generation_tensor_parallel=8,
            min_nodes=2,
        ),
        overrides=(
            "policy.model_name=Qwen/Qwen2.5-72B-Instruct",
            "policy.tokenizer.name=Qwen/Qwen2.5-72B-Instruct",
            "policy.megatron_cfg.converter_type=Qwen2ForCausalLM",
            "data.dataset_name=DeepScaler",
            "grpo.num_generations_per_prompt=8",
            "grpo.num_prompts_per_step=32",
            "policy.train_global_batch_size=256",
            "checkpointing.keep_top_k=2",
            "checkpointing.metric_name=null",
        ),
        max_num_steps=20,
        expected_hours=6.0,
        config_max_sequence_length=4096,
    ),
    # The GKE tutorial run (https://cloud.google.com/kubernetes-engine/docs/tutorials/nemo-rl-gke): Gemma3-27B-it
    # on GSM8K, 1 node trains (dtensor TP 8), 1 serves vLLM (TP 8). The tutorial's v0.5.0 image cannot load GSM8K
    # with its ResponseDataset keys; v0.6.0 has the recipe file too and loads GSM8K as it is.
    "gemma3-27b-gsm8k": Recipe(
        name="gemma3-27b-gsm8k",
        image=IMAGES["v0.6.0"],
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
            *GSM8K_DATA,
        ),
        max_num_steps=20,
        expected_hours=4.0,
        config_max_sequence_length=16384,
    ),
    # The cheapest run that still exercises every part: one GPU node, a 1.5B model, GSM8K.
    "qwen2.5-1.5b-gsm8k": Recipe(
        name="qwen2.5-1.5b-gsm8k",
        image=IMAGES["v0.6.0"],
        config_file="examples/configs/grpo_math_1B.yaml",
        model="Qwen/Qwen2.5-1.5B-Instruct",
        model_params_billion=1.5,
        parallelism=Parallelism(train_tensor_parallel=1, colocated=True, generation_tensor_parallel=1),
        overrides=(
            # The config's tokenizer.name is ${policy.model_name}, so it follows.
            "policy.model_name=Qwen/Qwen2.5-1.5B-Instruct",
            *GSM8K_DATA,
        ),
        max_num_steps=10,
        expected_hours=0.5,
    ),
}
