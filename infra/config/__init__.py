"""The stack configuration: one validated pydantic model of the `nemo-rl-gke:` keys, read once before any resource
(secrets never enter it). One module per section or concern (docs/architecture.md); `from infra.config import X`
is the one way in, so every import here is a re-export."""
# ruff: noqa: F401

from infra.config.base import Model
from infra.config.cluster_config import ClusterConfig
from infra.config.engine import namespaced
from infra.config.errors import ConfigError, KeyedValueError, MissingSecretError, format_validation_error
from infra.config.gpu_pool import GpuPoolConfig, Provisioning, Rung
from infra.config.job import JobConfig
from infra.config.lustre import LustreConfig
from infra.config.network_config import NetworkConfig
from infra.config.ray import RayConfig
from infra.config.secret_policy import (
    SECRET_KEYS,
    refuse_missing_secrets,
    refuse_plaintext_secrets,
    required_secrets,
    wandb_key_set,
)
from infra.config.settings import Settings, load, parse
from infra.config.stack_config import StackConfig, prefix_for_stack
from infra.lustre_catalogue import LUSTRE_CSI_MIN_GKE, LUSTRE_PORT_988_MIN_GKE, LUSTRE_TIERS, lustre_aggregate_mb_s
from infra.naming import PROJECT, RESERVED_LABEL_KEYS
