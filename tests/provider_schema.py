"""Provider input schemas, and a checker of recorded resource inputs against them.

Two sources, one format (a JSON-schema-like node: type / items / properties / additionalProperties / $ref):
- ../shared/reference/pulumi-schema-subset.json: the pulumi-gcp 10.2.0 and pulumi-kubernetes 4.34
  schema of the resources it covers;
- for any other resource, the installed SDK: the `@pulumi.input_type` Args classes, whose
  `@pulumi.getter(name=...)` names are the wire names and whose return hints are the types (the SDK
  is generated 1:1 from the provider schema).

Mocks accept any misspelt key and any wrong type; `check_inputs` does not.
"""

from __future__ import annotations

import collections.abc
import enum
import functools
import importlib
import json
import typing
from pathlib import Path
from typing import Any

from pulumi import _types

# shared/ sits beside the checkout (on a developer's machine and in CI alike).
SUBSET_PATH = Path(__file__).resolve().parents[2] / "shared" / "reference" / "pulumi-schema-subset.json"
ANY: dict[str, Any] = {"$ref": "pulumi.json#/Any"}

# Types we register whose inputs are checked elsewhere (the KubeRay CRD, the dynamic provider).
UNCHECKED_PREFIXES = ("pulumi:providers:", "pulumi-python:dynamic:", "nemo-rl-gke:")


@functools.cache
def subset() -> dict[str, Any]:
    if not SUBSET_PATH.is_file():
        raise FileNotFoundError(f"{SUBSET_PATH} is missing: shared/ must sit beside the checkout")
    return json.loads(SUBSET_PATH.read_text())


def _sdk_class(type_token: str) -> type:
    """`gcp:compute/router:Router` -> pulumi_gcp.compute.RouterArgs; `kubernetes:apps/v1:DaemonSet` -> ...DaemonSetArgs."""
    pkg, module, name = type_token.split(":")
    if pkg == "gcp":
        mod = importlib.import_module(f"pulumi_gcp.{module.split('/')[0]}")
    elif pkg == "kubernetes":
        group, _, version = module.rpartition("/")
        group = {"": "core"}.get(group, group.split(".")[0])
        mod = importlib.import_module(f"pulumi_kubernetes.{group.replace('-', '_')}.{version}")
    else:
        raise KeyError(type_token)
    return getattr(mod, f"{name}Args")


@functools.cache
def _sdk_node(typ: Any) -> dict[str, Any]:
    typ = _types.unwrap_type(typ)
    origin = typing.get_origin(typ)
    if typ is typing.Any or typ is object:
        return ANY
    if isinstance(typ, type) and issubclass(typ, enum.Enum):
        return {"type": "string"}
    if typ is bool:
        return {"type": "boolean"}
    if typ is int:
        return {"type": "integer"}
    if typ is float:
        return {"type": "number"}
    if typ is str:
        return {"type": "string"}
    if origin in (list, collections.abc.Sequence, typing.Sequence):
        return {"type": "array", "items": _sdk_node(typing.get_args(typ)[0])}
    if origin in (dict, collections.abc.Mapping, typing.Mapping):
        args = typing.get_args(typ)
        return {"type": "object", "additionalProperties": _sdk_node(args[1]) if len(args) == 2 else ANY}
    if isinstance(typ, type) and _types.is_input_type(typ):
        return {"type": "object", "x-sdk": typ}
    if origin is typing.Union:
        members = [a for a in typing.get_args(typ) if a is not type(None)]
        for m in members:  # prefer the input type of Union[Args, ArgsDict]
            if isinstance(m, type) and _types.is_input_type(m):
                return _sdk_node(m)
        return {"anyOf": [_sdk_node(m) for m in members]}
    return ANY


def _sdk_properties(cls: type) -> dict[str, dict[str, Any]]:
    return {name: _sdk_node(t) for name, t in _types.input_type_types(cls).items()}


def resource_schema(type_token: str) -> dict[str, Any]:
    """The object node of a resource's inputs."""
    sub = subset()
    if type_token in sub:
        return {"type": "object", "properties": sub[type_token]["inputProperties"]}
    try:
        return {"type": "object", "x-sdk": _sdk_class(type_token)}
    except (ImportError, AttributeError):
        if not type_token.startswith("kubernetes:"):
            raise
    # A custom resource (CRD kind, no SDK class): apiVersion/kind/metadata checked here, spec by its CRD.
    base = sub["kubernetes:apiextensions.k8s.io:CustomResource"]["inputProperties"]
    return {"type": "object", "properties": {**{k: base[k] for k in ("apiVersion", "kind", "metadata")}, "spec": ANY}}


def _resolve(node: dict[str, Any]) -> dict[str, Any]:
    ref = node.get("$ref", "")
    if ref.startswith("#/types/"):
        return {"type": "object", **subset()["types"][ref[len("#/types/"):]]}
    return node


def check_value(value: Any, node: dict[str, Any], path: str) -> list[str]:
    """Problems with `value` against `node`; empty when it conforms."""
    node = _resolve(node)
    if node.get("$ref", "").startswith("pulumi.json#/"):
        return []
    if value in ("[secret]", "[unknown]"):
        return []
    if "anyOf" in node:
        options = [check_value(value, n, path) for n in node["anyOf"]]
        return [] if any(not o for o in options) else options[0]
    typ = node.get("type")
    if typ == "string":
        return [] if isinstance(value, str) else [f"{path}: expected string, got {type(value).__name__} {value!r}"]
    if typ == "boolean":
        return [] if isinstance(value, bool) else [f"{path}: expected boolean, got {type(value).__name__} {value!r}"]
    if typ == "integer":
        ok = isinstance(value, int) and not isinstance(value, bool)
        return [] if ok else [f"{path}: expected integer, got {type(value).__name__} {value!r}"]
    if typ == "number":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return [] if ok else [f"{path}: expected number, got {type(value).__name__} {value!r}"]
    if typ == "array":
        if not isinstance(value, list):
            return [f"{path}: expected array, got {type(value).__name__}"]
        return [p for i, v in enumerate(value) for p in check_value(v, node.get("items", ANY), f"{path}[{i}]")]
    if typ == "object" or "properties" in node or "x-sdk" in node:
        if not isinstance(value, dict):
            return [f"{path}: expected object, got {type(value).__name__} {value!r}"]
        props = _sdk_properties(node["x-sdk"]) if "x-sdk" in node else node.get("properties")
        problems = []
        for key, v in value.items():
            sub_path = f"{path}.{key}" if path else key
            if props is not None and key in props:
                problems += check_value(v, props[key], sub_path)
            elif "additionalProperties" in node:
                problems += check_value(v, node["additionalProperties"], sub_path)
            elif props is not None:
                problems.append(f"{sub_path}: no such property (known: {', '.join(sorted(props)[:12])}...)")
        return problems
    return []


def check_inputs(type_token: str, inputs: dict[str, Any]) -> list[str]:
    """Problems with a resource's recorded inputs; `__`-prefixed engine keys are ignored."""
    clean = {k: v for k, v in inputs.items() if not k.startswith("__")}
    return check_value(clean, resource_schema(type_token), "")


def is_checked(type_token: str) -> bool:
    return type_token.startswith(("gcp:", "kubernetes:")) and not type_token.startswith(UNCHECKED_PREFIXES)
