"""The secret policy: `hfToken` and `wandbApiKey` are Pulumi secrets, never model fields. A secret
stored in plaintext is refused, and so is a missing secret the stack's job cannot run without."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Collection, Optional

import pulumi

from infra.config.errors import ConfigError, MissingSecretError
from infra.config.stack_config import StackConfig
from infra.naming import PROJECT
from workloads.recipes import GATED_MODELS

SECRET_KEYS = ("hfToken", "wandbApiKey")
"""Config keys that must be Pulumi secrets (`pulumi config set --secret`)."""


@dataclass(frozen=True)
class StackSecrets:
    """Secret values as Pulumi secret Outputs; None when not configured."""

    hf_token: Optional[pulumi.Output[str]]
    wandb_api_key: Optional[pulumi.Output[str]]


def wandb_key_set(secret_keys: Collection[str]) -> bool:
    """`Settings.wandb_key_set` from the secret key names (`namespace:key`), for the CLI, which cannot decrypt."""
    return f"{PROJECT}:wandbApiKey" in secret_keys


def refuse_plaintext_secrets(
    raw: dict[str, Any], secret_keys: Collection[str], stack: str, source: Optional[Callable[[str], str]] = None
) -> None:
    """Raise `ConfigError` for each secret key in `raw` not marked secret in `secret_keys` (a plaintext token
    would sit in every copy of the repository), and for each other key stored as a secret (the program reads it
    as plain text into names and outputs). `source(key)` names where the value came from; without it, every
    place the Pulumi CLI reads config from."""
    where = source or (
        lambda key: f"Pulumi.{stack}.yaml, the --config-file, Pulumi.yaml or PULUMI_CONFIG, wherever it is set,"
    )
    plaintext = [k for k in SECRET_KEYS if k in raw and f"{PROJECT}:{k}" not in secret_keys]
    misplaced = [k for k in raw if k not in SECRET_KEYS and f"{PROJECT}:{k}" in secret_keys]
    lines = [
        f"{PROJECT}:{k}: stored in plaintext; allowed: a secret (remove it from {where(k)} and run "
        f"`pulumi config set --secret {k}`)"
        for k in plaintext
    ]
    lines += [
        f"{PROJECT}:{k}: stored as a secret, but it is a plain setting; allowed: a plain value (set it again "
        f"without --secret); only {' and '.join(SECRET_KEYS)} are secrets"
        for k in misplaced
    ]
    if lines:
        raise ConfigError("\n".join(lines))


def required_secrets(config: StackConfig) -> dict[str, str]:
    """The secrets the stack's job cannot run without (key without namespace -> why)."""
    needed = {}
    model = config.recipe.model
    if model in GATED_MODELS:
        needed["hfToken"] = (
            f"job.recipe {config.job.recipe!r} downloads {model}, which Hugging Face serves only to accounts that "
            "accepted its licence; allowed: `pulumi config set --secret hfToken <token>` with a token of such an "
            "account"
        )
    if config.job.wandb_project:
        needed["wandbApiKey"] = (
            f"job.wandbProject {config.job.wandb_project!r} asks for W&B logging; allowed: "
            "`pulumi config set --secret wandbApiKey <key>`, or remove job.wandbProject"
        )
    return needed


def refuse_missing_secrets(config: StackConfig, present: Collection[str]) -> None:
    """Raise `ConfigError` when the stack's job needs a secret not in `present`: found now, not hours later."""
    missing = {k: why for k, why in required_secrets(config).items() if k not in present}
    if missing:
        raise MissingSecretError("\n".join(f"{PROJECT}:{k}: not set, and {why}" for k, why in missing.items()))
