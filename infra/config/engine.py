"""The engine's config (`PULUMI_CONFIG`, `PULUMI_CONFIG_SECRET_KEYS`, or the values given in process, as under
mocks) reduced to this project's namespace: the one place that touches the SDK's config store
(pulumi/pulumi sdk/python/lib/pulumi/runtime/config.py, v3.272.0), through its public functions only
(`is_config_secret`, never the private `_SECRET_KEYS`)."""

from __future__ import annotations

import contextlib
import difflib
import json
from typing import Any, Iterable

from infra.config.errors import ConfigError
from infra.naming import PROJECT


def namespaced(flat: dict[str, Any]) -> dict[str, Any]:
    """This project's keys of a flat engine config map, without the namespace, JSON values decoded; a near miss of
    the namespace (`nemo-rl-gk:flavour`) is refused: the program would silently run without it."""
    out: dict[str, Any] = {}
    prefix = f"{PROJECT}:"
    for key, value in flat.items():
        if not key.startswith(prefix):
            namespace, _, name = key.partition(":")
            if namespace.lower() == PROJECT or difflib.get_close_matches(namespace.lower(), [PROJECT], cutoff=0.8):
                raise ConfigError(
                    f"{key}: unknown namespace {namespace!r}; allowed: {PROJECT}:<key> (did you mean {PROJECT}:{name}?)"
                )
            continue
        if isinstance(value, str) and value[:1] in "{[":
            with contextlib.suppress(json.JSONDecodeError):
                value = json.loads(value)
        out[key[len(prefix) :]] = value
    return out


_ENVIRONMENT = {
    "PULUMI_CONFIG": (dict, "a JSON map of `namespace:key` to value, as the Pulumi CLI sets it, or unset"),
    "PULUMI_CONFIG_SECRET_KEYS": (list, "a JSON list of `namespace:key` names, as the Pulumi CLI sets it, or unset"),
}


def _environment(variable: str, read: Any) -> Any:
    """The SDK's reading of a config environment variable (a bare `json.loads`), or `ConfigError` naming it."""
    kind, allowed = _ENVIRONMENT[variable]
    try:
        value = read()
    except ValueError as err:  # json.JSONDecodeError
        raise ConfigError(
            f"{variable}: not valid JSON ({err.msg} at character {err.pos}); allowed: {allowed}"
        ) from None
    except RecursionError:  # thousands of nested brackets: json.loads recurses per level
        raise ConfigError(f"{variable}: nested too deeply; allowed: {allowed}") from None
    if not isinstance(value, kind) or (kind is list and not all(isinstance(k, str) for k in value)):
        raise ConfigError(f"{variable}: {_json_kind(value)}; allowed: {allowed}")
    return value


def _json_kind(value: Any) -> str:
    """What a JSON value is, in JSON's words (never a Python class name such as NoneType); bool before int."""
    kinds = (
        (list, "a JSON list"),
        (type(None), "JSON null"),
        (bool, "a JSON boolean"),
        ((int, float), "a JSON number"),
        (str, "a JSON string"),
    )
    return next((words for kind, words in kinds if isinstance(value, kind)), "a JSON object")


def engine_config() -> dict[str, Any]:
    """All config values of this project's namespace, as the engine passed them to the program."""
    from pulumi.runtime import config as runtime_config

    return namespaced({**_environment("PULUMI_CONFIG", runtime_config.get_config_env), **runtime_config.CONFIG.get()})


def engine_secret_keys(keys: Iterable[str]) -> set[str]:
    """Which of this project's `keys` (without namespace) the engine marked secret, as `namespace:key`."""
    from pulumi.runtime import config as runtime_config

    from_env = set(_environment("PULUMI_CONFIG_SECRET_KEYS", runtime_config.get_config_secret_keys_env))
    names = (f"{PROJECT}:{k}" for k in keys)
    return {n for n in names if n in from_env or runtime_config.is_config_secret(n)}
