"""Resource inputs checked against the INSTALLED provider SDKs (pulumi-gcp, pulumi-kubernetes).

Mocks accept any misspelt key, any wrong type and a missing required input; `check_inputs` does not.
The SDKs are generated 1:1 from their provider's schema, so checking against them follows whatever
version requirements.txt pins; nothing here is kept by hand.

Where each fact comes from (all the SDK's own tables, as the engine-bound serializer uses them):
- type token -> resource class: the resource-module registry each SDK fills at import
  (`_utilities.register` -> `pulumi.runtime.get_resource_module`), e.g. `gcp:compute/router:Router` ->
  `pulumi_gcp.compute.Router`; its inputs are the type of the `args` parameter of its `__init__`
  overload (`RouterArgs`; pulumi-kubernetes names them `<Kind>InitArgs`).
- wire names: each `@pulumi.input_type` getter carries the camelCase name the engine receives
  (`@pulumi.getter(name="nodeConfig")`); `pulumi._types.input_type_py_to_pulumi_names` and
  `input_type_types` are the translation tables (Python name -> wire name, wire name -> type hint).
- types: the getters' return hints (`Input[int]`, `Sequence[Input['XArgs']]`, `Mapping[str, str]`, ...).
- required: a parameter of `<X>Args.__init__` without a default (the constructor demands it). For
  nested types the `<X>ArgsDict` TypedDict's required keys say the same; `sdk_disagreements` checks
  that both faces of the SDK agree for every type a plan reaches.

A Kubernetes kind with no SDK class (a CRD kind, e.g. networking.gke.io/v1 Network) is checked as the
SDK's CustomResource: apiVersion and kind required, metadata as ObjectMeta; its spec is checked
against its CRD by the module that builds it.
"""

from __future__ import annotations

import collections.abc
import difflib
import enum
import functools
import importlib
import inspect
import sys
import typing
from typing import Any

import pulumi
import pulumi_gcp  # noqa: F401  (import fills the resource-module registry)
import pulumi_kubernetes  # noqa: F401
from pulumi import _types
from pulumi.runtime import rpc

# Types we register whose inputs are checked elsewhere (the KubeRay chart values, the dynamic providers).
UNCHECKED_PREFIXES = ("pulumi:providers:", "pulumi-python:dynamic", "nemo-rl-gke:")

# Values the plan writes in place of what it cannot or must not show; any type accepts them.
PLACEHOLDERS = ("[secret]", "[unknown]")


class CustomResourceArgs:
    """Stand-in for a CRD kind's inputs: what pulumi_kubernetes.apiextensions.CustomResource takes."""


def _resource_class(type_token: str) -> type:
    pkg, mod, _ = type_token.split(":")
    module = rpc.get_resource_module(pkg, mod, "")
    if module is None:
        raise LookupError(f"{type_token}: no resource module registered by the installed {pkg} SDK")
    class_name = module.mod_info["classes"].get(type_token)
    if class_name is None:
        raise LookupError(f"{type_token}: the installed {pkg} SDK has no such resource")
    return getattr(importlib.import_module(module.mod_info["fqn"]), class_name)


@functools.cache
def args_class(type_token: str) -> type:
    """The `*Args` input type of a resource type token (CustomResourceArgs for a CRD kind)."""
    try:
        cls = _resource_class(type_token)
    except LookupError:
        if type_token.startswith("kubernetes:"):
            return CustomResourceArgs
        raise
    for overload in typing.get_overloads(cls.__init__):
        param = inspect.signature(overload).parameters.get("args")
        if param is not None:
            hint = param.annotation
            if isinstance(hint, str):
                hint = eval(hint, vars(sys.modules[cls.__module__]))  # noqa: S307 (the SDK's own annotation)
            return _types.unwrap_optional_type(hint)
    raise LookupError(f"{type_token}: {cls.__qualname__}.__init__ declares no `args` input type")


@functools.cache
def properties(cls: type) -> dict[str, Any]:
    """Wire (camelCase) name -> type hint (Input/Output/Optional unwrapped) of an input type."""
    if cls is CustomResourceArgs:
        from pulumi_kubernetes.meta.v1 import ObjectMetaArgs

        return {"apiVersion": str, "kind": str, "metadata": ObjectMetaArgs, "spec": typing.Any}
    return dict(_types.input_type_types(cls))


@functools.cache
def required(cls: type) -> frozenset[str]:
    """Wire names of the inputs `cls.__init__` demands (a keyword parameter with no default)."""
    if cls is CustomResourceArgs:
        return frozenset({"apiVersion", "kind"})
    names = _types.input_type_py_to_pulumi_names(cls)
    params = inspect.signature(cls.__init__).parameters.values()
    demanded = [p.name for p in params if p.kind is p.KEYWORD_ONLY and p.default is inspect.Parameter.empty]
    unknown = [p for p in demanded if p not in names]
    if unknown:  # the SDK changed shape: fail loudly rather than check less
        raise TypeError(f"{cls.__qualname__}: required parameters {unknown} have no wire name")
    return frozenset(names[p] for p in demanded)


def _input_type_of(hint: Any) -> type | None:
    """The `*Args` input type a hint names, else None."""
    return hint if isinstance(hint, type) and _types.is_input_type(hint) else None


def _kind(value: Any) -> str:
    return f"{type(value).__name__} {value!r}" if not isinstance(value, (dict, list)) else type(value).__name__


def check_value(value: Any, hint: Any, path: str) -> list[str]:
    """Problems with `value` (as the engine receives it) against an SDK type hint; empty when it conforms."""
    if isinstance(value, str) and value in PLACEHOLDERS:
        return []
    hint = _types.unwrap_type(hint)
    if hint is typing.Any or hint is object:
        return []
    input_type = _input_type_of(hint)
    if input_type is not None:
        return _check_object(value, input_type, path)
    origin = typing.get_origin(hint)
    if origin is typing.Union:
        # An Input of a union (Kubernetes IntOrString) stays Union[int, str, None, Awaitable[...], Output[...]]
        # after unwrapping: the Awaitable/Output members are the Input wrapper, not types of the value.
        wrappers = (collections.abc.Awaitable, pulumi.Output)
        members = [m for m in typing.get_args(hint) if m is not type(None) and typing.get_origin(m) not in wrappers]
        options = [check_value(value, m, path) for m in members]
        return [] if any(not o for o in options) else options[0]
    if origin is typing.Literal:  # Kubernetes apiVersion/kind: the one value the SDK class is for
        allowed = typing.get_args(hint)
        return [] if value in allowed else [f"{path}: expected one of {list(allowed)}, got {_kind(value)}"]
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        hint = str
    if hint is bool:
        return [] if isinstance(value, bool) else [f"{path}: expected boolean, got {_kind(value)}"]
    if hint is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
        return [] if ok else [f"{path}: expected integer, got {_kind(value)}"]
    if hint is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        return [] if ok else [f"{path}: expected number, got {_kind(value)}"]
    if hint is str:
        return [] if isinstance(value, str) else [f"{path}: expected string, got {_kind(value)}"]
    if origin in (list, collections.abc.Sequence):
        if not isinstance(value, list):
            return [f"{path}: expected array, got {_kind(value)}"]
        (item,) = typing.get_args(hint) or (typing.Any,)
        return [p for i, v in enumerate(value) for p in check_value(v, item, f"{path}[{i}]")]
    if origin in (dict, collections.abc.Mapping):
        if not isinstance(value, dict):
            return [f"{path}: expected object, got {_kind(value)}"]
        args = typing.get_args(hint)
        item = args[1] if len(args) == 2 else typing.Any
        return [p for k, v in value.items() for p in check_value(v, item, f"{path}.{k}" if path else k)]
    if isinstance(hint, type) and issubclass(hint, (pulumi.Asset, pulumi.Archive)):
        return []
    raise TypeError(f"{path}: no rule for the SDK type hint {hint!r}")  # a new hint form: teach the checker


def _check_object(value: Any, cls: type, path: str) -> list[str]:
    if not isinstance(value, dict):
        return [f"{path}: expected object ({cls.__name__}), got {_kind(value)}"]
    props = properties(cls)
    problems = []
    for key, v in value.items():
        sub = f"{path}.{key}" if path else key
        if key in props:
            problems += check_value(v, props[key], sub)
        else:
            close = difflib.get_close_matches(key, props, n=3)
            hint = f"did you mean {' or '.join(close)}?" if close else f"it has {', '.join(sorted(props))}"
            problems.append(f"{sub}: no such input in {cls.__name__} ({hint})")
    for key in sorted(required(cls) - value.keys()):
        problems.append(f"{path + '.' if path else ''}{key}: required input missing ({cls.__name__})")
    return problems


def check_inputs(type_token: str, inputs: dict[str, Any]) -> list[str]:
    """Problems with a resource's recorded inputs, each starting with its path; `__` engine keys ignored."""
    clean = {k: v for k, v in inputs.items() if not k.startswith("__")}
    return _check_object(clean, args_class(type_token), "")


def resource_problems(resource: Any) -> list[str]:
    """`check_inputs` of a plan resource, each problem naming the resource: `name (type): path: ...`."""
    return [f"{resource.name} ({resource.type}): {p}" for p in check_inputs(resource.type, resource.inputs)]


def is_checked(type_token: str) -> bool:
    return type_token.startswith(("gcp:", "kubernetes:")) and not type_token.startswith(UNCHECKED_PREFIXES)


# ---------------------------------------------------------------- the SDK's two faces agree


def reachable_input_types(root: type) -> set[type]:
    """Every `*Args` input type reachable from `root` through its properties' hints."""
    seen: set[type] = set()
    todo = [root]
    while todo:
        cls = todo.pop()
        if cls in seen or cls is CustomResourceArgs:
            continue
        seen.add(cls)
        for hint in properties(cls).values():
            todo += _input_types_in(hint)
    return seen


def _input_types_in(hint: Any) -> list[type]:
    hint = _types.unwrap_type(hint)
    found = _input_type_of(hint)
    if found is not None:
        return [found]
    return [t for arg in typing.get_args(hint) for t in _input_types_in(arg)]


def sdk_disagreements(cls: type) -> list[str]:
    """Where `<X>Args` and its `<X>ArgsDict` TypedDict disagree on names or required inputs."""
    typed_dict = getattr(sys.modules[cls.__module__], f"{cls.__name__}Dict", None)
    if typed_dict is None:  # resource-level Args have no TypedDict twin
        return []
    names = _types.input_type_py_to_pulumi_names(cls)
    dict_keys = {names.get(k, f"?{k}") for k in typed_dict.__annotations__}
    dict_required = {names.get(k, f"?{k}") for k in typed_dict.__required_keys__}
    problems = []
    if dict_keys != set(properties(cls)):
        problems.append(f"{cls.__name__}: names differ: {sorted(dict_keys ^ set(properties(cls)))}")
    if dict_required != required(cls):
        problems.append(f"{cls.__name__}: required differ: {sorted(dict_required ^ required(cls))}")
    return problems
