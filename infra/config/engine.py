"""The engine's config (`PULUMI_CONFIG`, `PULUMI_CONFIG_SECRET_KEYS`, or the values given in process, as under
mocks) reduced to this project's namespace: the one place that touches the SDK's config store
(pulumi/pulumi sdk/python/lib/pulumi/runtime/config.py, v3.272.0), through its public functions only
(`is_config_secret`, never the private `_SECRET_KEYS`)."""

from __future__ import annotations

import difflib
import json
import re
from typing import Any, Iterable

from infra.config.errors import ConfigError
from infra.naming import PROJECT

OTHER_NAMESPACES = ("pulumi", "gcp", "kubernetes")
"""Namespaces a stack file of this project may carry besides its own: the engine's own `pulumi:` (e.g.
`pulumi:disable-default-providers`, pulumi/pulumi#8829; `pulumi:tags`) and the providers' (a provider reads the keys of
its package's name: pulumi-gcp `gcp:project`, pulumi-kubernetes `kubernetes:context`, requirements.txt). Never refused
as a look-alike of the project's."""


def looks_like_project(namespace: str) -> bool:
    """Whether a namespace other than the project's reads as its name in another casing, spelling or part
    (`NeMo-RL-GKE`, `nemo_rl`, `nemo-rl`, `rl-gke`, `nemo-rl-gk`): its letters and digits against the project's."""
    if namespace == PROJECT or namespace.lower() in OTHER_NAMESPACES:
        return False
    letters, ours = re.sub(r"[^a-z0-9]", "", namespace.lower()), re.sub(r"[^a-z0-9]", "", PROJECT)
    parts = {"nemo", "nemorl", "rlgke", "nemogke"}
    return bool(letters) and (
        any(p in letters for p in parts) or difflib.SequenceMatcher(None, letters, ours).ratio() >= 0.6
    )


def namespaced(flat: dict[str, Any]) -> dict[str, Any]:
    """This project's keys of a flat engine config map, without the namespace, JSON values decoded; a namespace that
    looks like the project's (`nemo-rl:flavour`, `NeMo-RL:gpuPool`, `rl-gke:zone`) is refused: the program would
    silently run without the key."""
    out: dict[str, Any] = {}
    prefix = f"{PROJECT}:"
    for key, value in flat.items():
        if not key.startswith(prefix):
            namespace, _, name = key.partition(":")
            if looks_like_project(namespace):
                # Never read by the program, so the key's defaults would plan in silence.
                raise ConfigError(
                    f"{key}: unknown namespace {namespace!r}; allowed: {PROJECT}:<key> (did you mean {PROJECT}:{name}?)"
                )
            continue
        out[key[len(prefix) :]] = _decoded(key, value)
    return out


def _decoded(key: str, value: Any) -> Any:
    """A structured value as the engine passes it (JSON text), decoded; text that is not JSON stays text. A number of
    more than 4300 digits (Python's int limit) or nesting deeper than the parser recurses is `ConfigError`."""
    if not (isinstance(value, str) and value[:1] in "{["):
        return value
    allowed = (
        "allowed: a map or list of at most 32 levels, numbers within 64 bits (as `pulumi config set --path` writes)"
    )
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value
    except ValueError:  # int(): "Exceeds the limit (4300 digits) for integer string conversion"
        raise ConfigError(f"{key}: a number of more than 4300 digits in its value; {allowed}") from None
    except RecursionError:
        raise ConfigError(f"{key}: nested too deeply; {allowed}") from None


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
