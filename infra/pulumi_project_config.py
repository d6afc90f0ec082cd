"""`Pulumi.yaml` project config merged into a stack file's values, and those values encoded as the flat map
the Pulumi engine hands the program, as the CLI does (pulumi/pulumi pkg/workspace/config.go `mergeConfig`,
sdk/go/common/workspace/project.go `RewriteShorthandConfigValues`, `Project.Validate`, `ValidateConfigValue`
and project.json, resource/config map.go and object.go, loaders.go; tag v3.259.0, the pinned CLI is 3.272.0).

- `key: value` is shorthand for `{default: value}` (this project) or `{value: value}` (another namespace);
  the long form is `{type, items, description, secret, default, value}`. The stack file's value wins whole;
  a dotted key is a path set only where it is missing, its `"true"`/`"false"` and integers typed again.
- A typed key of this project with no default, value or stack value is "missing"; `secret: true` must be
  `secure:`. A key without a namespace is the project's; `<ns>:config:<name>` is the old spelling of `<ns>:<name>`.
- Scalars reach the program as JSON text (`true`, `5`), structured values as JSON, an empty value as "";
  a `secure:` value becomes `OFFLINE_SECRET`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.config import PROJECT
from infra.pulumi_yaml import StackFileError, is_missing, load_yaml, read_text

OFFLINE_SECRET = "offline-plan-secret-placeholder"
"""What a `secure:` value becomes offline: it cannot be decrypted without the stack's key."""


_DECLARATION = ("type", "items", "description", "secret", "default", "value")
_TYPES = ("string", "integer", "boolean", "array", "object")
_PATH_SEGMENT = re.compile(r"^[A-Za-z_$][A-Za-z0-9_$-]*$")


@dataclass(frozen=True)
class ProjectKey:
    """One `Pulumi.yaml` `config:` entry, as the CLI holds it after its shorthand rewrite."""

    written: str
    key: str
    """`namespace:name`; a dotted name is a path into a map."""
    declaration: dict[str, Any]


def read_project_config(path: Path, project: str = PROJECT) -> list[ProjectKey]:
    """The project file's `config:` entries, validated as the CLI does (a missing file: none)."""
    if is_missing(path):
        return []
    name = path.name
    doc = load_yaml(name, read_text(path, name))
    if not isinstance(doc, dict):
        return []
    if "stackConfigDir" in doc or isinstance(doc.get("config"), str):
        # The stack files would live elsewhere (project.go RewriteConfigPathIntoStackConfigDir).
        raise StackFileError(
            f"{name}: stackConfigDir moves the stack files; allowed: Pulumi.<stack>.yaml beside {name}"
        )
    raw = doc.get("config") or {}
    if not isinstance(raw, dict):
        raise StackFileError(f"{name}: 'config' is not a map; allowed: a map of project config keys")
    keys = []
    for written, value in raw.items():
        where = f"{name}: config.{written}"
        ours = ":" not in written or written.startswith(f"{project}:")
        if isinstance(value, (str, bool, int, list)) and not isinstance(value, float):
            declaration = {"default" if ours else "value": value}  # RewriteShorthandConfigValues
        elif isinstance(value, dict):
            unknown = sorted(set(value) - set(_DECLARATION))
            if unknown:
                raise StackFileError(f"{where}: {unknown[0]!r} is not allowed; allowed: {', '.join(_DECLARATION)}")
            declaration = dict(value)
        else:
            raise StackFileError(
                f"{where}: {'an empty value' if value is None else repr(value)} is not allowed; allowed: a string, "
                "integer, boolean or list (the default), or a map of type/default/value (write a number with a "
                "fraction as {default: 1.5})"
            )
        _validate_declaration(declaration, where, ours)
        key = config_key(written, project, name)
        _path_of(key, where)
        keys.append(ProjectKey(written, key, declaration))
    return sorted(keys, key=lambda k: k.written)  # mergeConfig walks the keys sorted


def _validate_declaration(declaration: dict[str, Any], where: str, ours: bool) -> None:
    """project.go `Project.Validate` and the project.json schema of a config type declaration."""
    typ = declaration.get("type")
    has_default, has_value = declaration.get("default") is not None, declaration.get("value") is not None
    if has_default and has_value:
        raise StackFileError(f"{where}: has both 'default' and 'value'; allowed: one of them")
    if typ is not None and typ not in _TYPES:
        raise StackFileError(f"{where}: type {typ!r} is not allowed; allowed: {', '.join(_TYPES)}")
    if ours:
        if typ == "array" and not isinstance(declaration.get("items"), dict):
            raise StackFileError(f"{where}: type array without 'items'; allowed: items: {{type: <the items' type>}}")
        if typ is not None and has_default and not _of_type(typ, declaration.get("items"), declaration["default"]):
            raise StackFileError(f"{where}: the default is not of type {typ}; allowed: a default of type {typ}")
        return
    if typ is not None:
        raise StackFileError(f"{where}: a key of another namespace declares a type; allowed: only 'value'")
    if has_default:
        raise StackFileError(f"{where}: a key of another namespace has a 'default'; allowed: 'value' instead")
    if not has_value:
        raise StackFileError(f"{where}: a key of another namespace without 'value'; allowed: value: <its value>")


def _of_type(typ: str, items: Any, value: Any) -> bool:
    """project.go `ValidateConfigValue`: integers may be whole floats or integer text, booleans "true"/"false"."""
    if typ == "string":
        return isinstance(value, str)
    if typ == "integer":
        if isinstance(value, bool):
            return False
        if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
            return True
        return isinstance(value, str) and re.fullmatch(r"[+-]?\d+", value) is not None
    if typ == "boolean":
        return isinstance(value, bool) or value in ("true", "false")
    if typ == "object":
        return isinstance(value, dict)
    if not isinstance(value, list) or not isinstance(items, dict):
        return False
    return all(_of_type(str(items.get("type")), items.get("items"), item) for item in value)


def _path_of(key: str, where: str) -> tuple[str, list[str]]:
    """(top-level key, path inside it) (map.go parseKeyPath); an index or quoted segment is refused, not misread."""
    namespace, _, name = key.partition(":")
    segments = name.split(".")
    if not all(_PATH_SEGMENT.match(s) for s in segments):
        raise StackFileError(f"{where}: {name!r} is not a key or dotted path of names; allowed: e.g. job.maxNumSteps")
    return f"{namespace}:{segments[0]}", segments[1:]


def _coerce(value: Any) -> Any:
    """A project default inside a map (object.go `coerce`; config.go createConfigValue): text first, then
    "true"/"false" and integers without a leading zero typed again."""
    if isinstance(value, (dict, list)) or isinstance(value, float):
        return value
    text = _json_scalar(value) if isinstance(value, (bool, int)) else value
    if text in ("true", "false"):
        return text == "true"
    if re.fullmatch(r"-?[1-9]\d*|0", text):
        return int(text)
    return text


def merge_project_config(values: dict[str, Any], keys: list[ProjectKey], name: str, project: str) -> None:
    """pkg/workspace/config.go `mergeConfig` (validate: true) onto the stack file's values, in place."""
    stack = name[len("Pulumi.") : -len(".yaml")] if name.startswith("Pulumi.") and name.endswith(".yaml") else name
    missing = []
    for entry in keys:
        top, path = _path_of(entry.key, f"Pulumi.yaml: config.{entry.written}")
        found, _ = _get(values, top, path, name)
        declaration = entry.declaration
        fallback = declaration.get("default", declaration.get("value"))
        if not found and fallback is None:
            if entry.key.startswith(f"{project}:"):
                missing.append(entry.written)
            continue
        if not found:
            if path:
                _set(values, top, path, _coerce(fallback), name)
            else:
                values[top] = fallback
    if missing:
        raise StackFileError(
            f"{name}: stack {stack!r} is missing configuration value(s) {', '.join(repr(m) for m in missing)}, which "
            "Pulumi.yaml declares without a default; allowed: set them in the stack file (pulumi config set)"
        )
    for entry in keys:
        declaration = entry.declaration
        if declaration.get("type") is None:
            continue
        top, path = _path_of(entry.key, f"Pulumi.yaml: config.{entry.written}")
        found, value = _get(values, top, path, name)
        if not found:
            continue
        if declaration.get("secret") and not _is_secure(value):
            raise StackFileError(
                f"{name}: {entry.key} must be a secret (Pulumi.yaml: secret: true); allowed: "
                f"pulumi config set --secret {entry.key.partition(':')[2]} ..."
            )
        if _has_secure(value):  # offline the value cannot be decrypted; the CLI checks its type
            continue
        content = value if isinstance(value, (dict, list)) else engine_value(value)[0]
        if not _of_type(declaration["type"], declaration.get("items"), content):
            raise StackFileError(
                f"{name}: {entry.key} is not of type {declaration['type']} (Pulumi.yaml declares it); "
                f"allowed: a value of type {declaration['type']}"
            )


def _get(values: dict[str, Any], top: str, path: list[str], name: str) -> tuple[bool, Any]:
    if top not in values:
        return False, None
    node = values[top]
    for i, segment in enumerate(path):
        if not isinstance(node, dict):
            raise StackFileError(
                f"{name}: {top} is not a map, so Pulumi.yaml's {top}.{'.'.join(path[: i + 1])} cannot "
                "apply; allowed: a map there"
            )
        if segment not in node:
            return False, None
        node = node[segment]
    return True, node


def _set(values: dict[str, Any], top: str, path: list[str], value: Any, name: str) -> None:
    node = values.setdefault(top, {})
    for segment in path[:-1]:
        node = node.setdefault(segment, {}) if isinstance(node, dict) else None
    if not isinstance(node, dict):
        raise StackFileError(f"{name}: {top} is not a map; allowed: a map there")
    node[path[-1]] = value


def config_key(written: str, project: str, name: str) -> str:
    """pulumi resource/config key.go ParseKey, after loaders.go has namespaced bare keys."""
    parts = written.split(":")
    if len(parts) == 1:
        return f"{project}:{written}"
    if len(parts) == 2:
        return written
    if len(parts) == 3 and parts[1] == "config":
        return f"{parts[0]}:{parts[2]}"
    raise StackFileError(
        f"{name}: {written!r} is not a configuration key; allowed: `<namespace>:<name>` such as {project}:zone"
    )


def engine_value(value: Any) -> tuple[str, bool]:
    """The string the engine hands the program, and whether it is secret."""
    if _is_secure(value):
        return OFFLINE_SECRET, True
    if value is None:  # the CLI warns and passes "" (loaders.go checkForEmptyConfig)
        return "", False
    if isinstance(value, str):
        return value, False
    secret = _has_secure(value)
    plain = _strip_secure(value)
    if isinstance(plain, (dict, list)):
        return json.dumps(plain, sort_keys=True, separators=(",", ":"), ensure_ascii=False), secret
    return _json_scalar(plain), secret


def _is_secure(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"secure"} and isinstance(value["secure"], str)


def _has_secure(value: Any) -> bool:
    return _strip_secure(value) != value


def _strip_secure(value: Any) -> Any:
    if _is_secure(value):
        return OFFLINE_SECRET
    if isinstance(value, dict):
        return {k: _strip_secure(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_strip_secure(v) for v in value]
    return value


def _json_scalar(value: Any) -> str:
    """Go's json.Marshal of a bool, int or float64 (integral floats without a fraction)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    return json.dumps(value)
