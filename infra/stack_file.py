"""The one reader of `Pulumi.<stack>.yaml`, for the offline plan and the day-2 CLI.

`pulumi up` never reads the file itself: the Pulumi CLI does, and hands the program a flat config
map (structured values as JSON strings). `read_stack_file` produces that same map offline, so the
plan runs the program on exactly what the engine would pass; `load_stack` adds the validation the
program does at start (`infra.config.load`), so the CLI refuses what `pulumi up` would refuse.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import yaml

from infra.config import ConfigError, StackConfig, namespaced, parse, refuse_plaintext_secrets

ROOT = Path(__file__).resolve().parent.parent
MAX_STACK_FILE_BYTES = 1 << 20
OFFLINE_SECRET = "offline-plan-secret-placeholder"
"""What a `secure:` value of a stack file becomes offline: it cannot be decrypted without the stack's key."""


class StackFileError(Exception):
    """The stack file cannot be read; the message is one line for the user."""


def stack_path(stack: str, root: Path = ROOT) -> Path:
    return root / f"Pulumi.{stack}.yaml"


def available_stacks(root: Path = ROOT) -> list[str]:
    return sorted(p.name[len("Pulumi."):-len(".yaml")] for p in root.glob("Pulumi.*.yaml"))


def read_stack_file(path: Path) -> tuple[dict[str, str], list[str]]:
    """Read `Pulumi.<stack>.yaml` into the flat config map the Pulumi engine hands a program.

    Structured values become JSON strings and scalars strings, as the engine passes them;
    `secure:` values become an offline placeholder and are listed as secret keys.
    """
    if not path.is_file():
        raise StackFileError(
            f"stack file {path.name} not found (stacks here: {', '.join(available_stacks(path.parent))})"
        )
    data = path.read_bytes()
    if len(data) > MAX_STACK_FILE_BYTES:
        raise StackFileError(f"{path.name}: {len(data)} bytes; a stack file may be at most {MAX_STACK_FILE_BYTES} bytes")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise StackFileError(f"{path.name}: not valid UTF-8 (byte {err.start})") from None
    try:
        doc = yaml.safe_load(text) or {}
    except yaml.YAMLError as err:
        raise StackFileError(f"{path.name}: not valid YAML: {str(err).splitlines()[0]}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("config", {}), dict):
        raise StackFileError(f"{path.name}: expected a map with a 'config' map")
    config: dict[str, str] = {}
    secret_keys: list[str] = []
    for key, value in (doc.get("config") or {}).items():
        key = str(key)
        if isinstance(value, dict) and set(value) == {"secure"}:
            config[key] = OFFLINE_SECRET
            secret_keys.append(key)
        elif isinstance(value, str):
            config[key] = value
        else:
            config[key] = json.dumps(value)
    return config, secret_keys


@dataclass(frozen=True)
class StackFile:
    """A stack file, validated as the program validates its config."""

    name: str
    config: StackConfig
    secret_keys: frozenset[str]
    """`namespace:key` names of the `secure:` values."""


def load_stack(name: str, root: Path = ROOT) -> StackFile:
    """Read and validate `Pulumi.<name>.yaml` the way `pulumi up` would (`infra.config.load`).

    Raises `StackFileError` for an unreadable file and `ConfigError` for a config the program refuses.
    """
    flat, secret_keys = read_stack_file(stack_path(name, root))
    raw = namespaced(flat)
    refuse_plaintext_secrets(raw, set(secret_keys), name)
    return StackFile(name, parse(raw, name), frozenset(secret_keys))


__all__ = ["ConfigError", "StackFile", "StackFileError", "available_stacks", "load_stack", "read_stack_file"]
