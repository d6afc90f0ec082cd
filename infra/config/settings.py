"""From a raw config map to the validated `StackConfig` (`parse`), and from the engine to the
program's `Settings` (`load`): the one route every reader of a stack's config takes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
from pydantic import ValidationError

from infra.config.engine import engine_config, engine_secret_keys
from infra.config.errors import ConfigError, format_validation_error
from infra.config.secret_policy import SECRET_KEYS, StackSecrets, refuse_missing_secrets, refuse_plaintext_secrets
from infra.config.stack_config import StackConfig, prefix_for_stack
from infra.naming import PROJECT


@dataclass(frozen=True)
class Settings:
    """What `load()` returns: the validated config, the stack name and the secrets."""

    stack: str
    config: StackConfig
    secrets: StackSecrets

    @property
    def wandb_key_set(self) -> bool:
        return self.secrets.wandb_api_key is not None


def parse(raw: dict[str, Any], stack: str) -> StackConfig:
    """Validate a raw config mapping (camelCase keys, no namespace) into a `StackConfig`."""
    data = {k: v for k, v in raw.items() if k not in SECRET_KEYS}
    if data.get("namePrefix") in (None, ""):
        data["namePrefix"] = prefix_for_stack(stack)
    try:
        return StackConfig.model_validate(data)
    except ValidationError as err:
        raise ConfigError(format_validation_error(err, StackConfig)) from None


def load() -> Settings:
    """Read and validate the stack config once; call before creating any resource."""
    stack = pulumi.get_stack()
    raw = engine_config()
    secret_keys = engine_secret_keys({*SECRET_KEYS, *raw})
    refuse_plaintext_secrets(raw, secret_keys, stack)
    config = parse(raw, stack)
    refuse_missing_secrets(config, {k for k in SECRET_KEYS if f"{PROJECT}:{k}" in secret_keys})
    cfg = pulumi.Config(PROJECT)
    secrets = StackSecrets(hf_token=cfg.get_secret("hfToken"), wandb_api_key=cfg.get_secret("wandbApiKey"))
    return Settings(stack=stack, config=config, secrets=secrets)
