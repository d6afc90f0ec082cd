"""The stack configuration: one validated pydantic model, read once from the Pulumi config.

Every key lives under the project namespace (`nemo-rl-gke:<key>`) in `Pulumi.<stack>.yaml`, in
camelCase, structured keys as YAML maps. Secrets (`hfToken`, `wandbApiKey`) never enter the model:
they are read as Pulumi secret Outputs by `load()` and refused when stored in plaintext.

Validation runs before any resource is registered; `ConfigError` carries one line per problem,
each naming the key and what is allowed.

One module per section or concern; this package re-exports the names the program, the tools and
the tests use, so `from infra.config import X` is the one way in:

- `stack`: the root model `StackConfig` (top-level keys, and the order of the checks across sections);
- `gpu_pool`, `cluster`, `network`, `lustre`, `storage`, `ray`, `job`, `recovery`, `cost`: one section
  each, its fields with their checks, and the cross-section checks of its keys;
- `base`: the strict base model; `patterns`: the string patterns and their words;
- `errors`: the error types and pydantic's errors in stack-file words;
- `engine`: reading the engine's config (Pulumi's config store);
- `secret_policy`: which keys are secrets, refused in plaintext or when missing;
- `settings`: `parse` (raw map -> `StackConfig`) and `load` (engine -> `Settings`).

Facts about the cloud that the model checks against are catalogues beside it, not config:
infra/flavours.py, infra/machines.py, infra/zones.py, infra/lustre_catalogue.py and infra/version_matrix.py
(data/version_matrix.yaml: which versions go together).
"""

from infra.config.base import Model
from infra.config.cluster_config import AuthorizedNetwork, ClusterConfig
from infra.config.cost_config import CostConfig
from infra.config.engine import namespaced
from infra.config.errors import ConfigError, KeyedValueError, MissingSecretError, format_validation_error
from infra.config.gpu_pool import CapacityConfig, GpuPoolConfig, Provisioning, Rung
from infra.config.job import JobConfig, Override
from infra.config.lustre import LustreConfig
from infra.config.network_config import NetworkConfig
from infra.config.patterns import LOWER_NAME, PATTERN_HELP
from infra.config.ray import RayConfig
from infra.config.recovery import RecoveryConfig
from infra.config.secret_policy import (
    SECRET_KEYS,
    StackSecrets,
    refuse_missing_secrets,
    refuse_plaintext_secrets,
    required_secrets,
    wandb_key_set,
)
from infra.config.settings import Settings, load, parse
from infra.config.stack_config import GCP_MAX_LABELS, StackConfig, prefix_for_stack
from infra.config.storage_config import StorageConfig
from infra.lustre_catalogue import (
    LUSTRE_CSI_MIN_GKE,
    LUSTRE_PORT_988_MIN_GKE,
    LUSTRE_TIERS,
    LustreTier,
    lustre_aggregate_mb_s,
)
from infra.naming import PROJECT, RESERVED_LABEL_KEYS

__all__ = [
    "GCP_MAX_LABELS",
    "LOWER_NAME",
    "LUSTRE_CSI_MIN_GKE",
    "LUSTRE_PORT_988_MIN_GKE",
    "LUSTRE_TIERS",
    "PATTERN_HELP",
    "PROJECT",
    "RESERVED_LABEL_KEYS",
    "SECRET_KEYS",
    "AuthorizedNetwork",
    "CapacityConfig",
    "ClusterConfig",
    "ConfigError",
    "CostConfig",
    "GpuPoolConfig",
    "JobConfig",
    "KeyedValueError",
    "LustreConfig",
    "LustreTier",
    "MissingSecretError",
    "Model",
    "NetworkConfig",
    "Override",
    "Provisioning",
    "RayConfig",
    "Rung",
    "RecoveryConfig",
    "Settings",
    "StackConfig",
    "StackSecrets",
    "StorageConfig",
    "format_validation_error",
    "load",
    "lustre_aggregate_mb_s",
    "namespaced",
    "parse",
    "prefix_for_stack",
    "refuse_missing_secrets",
    "refuse_plaintext_secrets",
    "required_secrets",
    "wandb_key_set",
]
