"""What a bad stack configuration raises, and pydantic's errors said in the words of a stack file: one line
per problem, naming the key (`nemo-rl-gke:<key.path>`) and what is allowed, never a pydantic internal."""

from __future__ import annotations

import contextlib
import difflib
import json
import types
from typing import Any, Union, get_args, get_origin

import pulumi
from pydantic import BaseModel, ValidationError

from infra.config.patterns import PATTERN_HELP
from infra.naming import PROJECT
from workloads.cli_args import CREDENTIAL_SHOWN, looks_like_credential, without_credentials


class ConfigError(pulumi.RunError):
    """Bad stack configuration, printed by the Pulumi CLI without a traceback (`RunError`); whichever check wrote
    it, a value that looks like a credential is replaced (`without_credentials`)."""

    def __init__(self, message: str = "", *args: Any):
        super().__init__(without_credentials(str(message)), *args)


class MissingSecretError(ConfigError):
    """A secret the stack's job needs is not set (`refuse_missing_secrets`)."""


class KeyedValueError(ValueError):
    """A cross-field problem that belongs to a specific key (camelCase path below the namespace)."""

    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key


def shown(value: Any, limit: int = 60) -> str:
    """A value in a one-line message, in a stack file's words (YAML's `null`, `true`, never Python's `None`,
    `True`): its repr cut to `limit` characters, never a credential."""
    if value is None or isinstance(value, bool):
        return "null (an empty value)" if value is None else str(value).lower()
    text = repr(value)
    if isinstance(value, (list, tuple, dict)):  # as YAML's flow style writes it: [null, true], never [None, True]
        with contextlib.suppress(TypeError, ValueError, RecursionError):
            text = json.dumps(value, ensure_ascii=False, default=str)
    if looks_like_credential(text):
        return CREDENTIAL_SHOWN
    return text if len(text) <= limit else text[: limit - 3] + "..."


# pydantic error types -> what is allowed, in the words of a stack file (never a class name).
_ALLOWED_BY_TYPE = {
    **dict.fromkeys(("model_type", "model_attributes_type"), "a map of keys (key: value lines)"),
    "dict_type": "a map (key: value lines)",
    **dict.fromkeys(("tuple_type", "list_type"), "a list"),
    **dict.fromkeys(("int_type", "int_parsing", "int_from_float"), "a whole number"),
    **dict.fromkeys(("float_type", "float_parsing"), "a number"),
    "finite_number": "a finite number",
    **dict.fromkeys(("bool_type", "bool_parsing"), "true or false"),
    "string_type": "a string",
}
_REFERENCE_KEYS = "the keys of the config reference in docs/configuration.md"
_BOUNDS = {"ge": "at least", "gt": "more than", "le": "at most", "lt": "less than"}


def format_validation_error(err: ValidationError, root: type[BaseModel]) -> str:
    """One line per problem of validating `root`: `nemo-rl-gke:<key.path>: <message>`, in stack-file words."""
    lines = []
    for e in err.errors(include_url=False):
        loc = tuple(e["loc"])
        path = ".".join(str(p) if not isinstance(p, int) else f"[{p}]" for p in loc)
        error = (e.get("ctx") or {}).get("error")
        if isinstance(error, KeyedValueError):
            path = f"{path}.{error.key}" if path else error.key
        path = path.replace(".[", "[")
        key = f"{PROJECT}:{path}" if path else PROJECT
        lines.append(f"{key}: {_message(e, loc, root)}".replace("\n", " "))
    return "\n".join(lines)


def _message(e: Any, loc: tuple[Any, ...], root: type[BaseModel]) -> str:
    """What one pydantic error says, rewritten by its type into what the key allows."""
    kind, ctx = e["type"], e.get("ctx") or {}
    bound = next((k for k in _BOUNDS if k in ctx), None)
    if kind == "extra_forbidden":
        return _unknown_key_message(loc, root)
    if kind == "invalid_key":  # a map key that is not text (a number, from a map given in process)
        return f"the key {shown(e['input'])} is not allowed; allowed: {_REFERENCE_KEYS}"
    if kind == "missing":
        names = [part for part in loc if not isinstance(part, int)]
        field = _named_field(_model_at(tuple(names[:-1]), root), names[-1]) if names else None
        return "required key is not set" + (f"; allowed: {field.description.rstrip('.')}" if field else "")
    if kind == "string_too_long":
        return f"{len(e['input'])} characters; allowed: at most {ctx['max_length']}"
    if kind == "string_pattern_mismatch":
        # A pattern without words is named by the reference, never shown as a regular expression.
        allowed = PATTERN_HELP.get(ctx["pattern"], "the form the config reference (docs/configuration.md) gives")
    elif kind in ("literal_error", "enum"):
        allowed = ctx.get("expected", "")
    elif bound:
        limit = ctx[bound]  # a float field's bound as pydantic gives it (1048576.0), written as a stack file would
        allowed = f"{_BOUNDS[bound]} {int(limit) if isinstance(limit, float) and limit.is_integer() else limit}"
    else:
        allowed = _ALLOWED_BY_TYPE.get(kind)
    if allowed is None:
        return e["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
    return f"{shown(e['input'])} is not allowed; allowed: {allowed}"


def _model_of(annotation: Any) -> "type[BaseModel] | None":
    """The section model a field holds (`Section`, `Optional[Section]` or a tuple of them), else None."""
    args = [arg for arg in get_args(annotation) if arg not in (type(None), Ellipsis)]
    if get_origin(annotation) in (Union, types.UnionType, list, tuple):
        return _model_of(args[0]) if len(args) == 1 else None
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def _named_field(model: "type[BaseModel] | None", part: Any) -> Any:
    """`model`'s field called `part` (by name or camelCase alias), or None."""
    return next((f for n, f in model.model_fields.items() if part in (n, f.alias)), None) if model else None


def _model_at(loc: tuple[Any, ...], root: type[BaseModel]) -> "type[BaseModel] | None":
    """The section model a `loc` of `root` reaches (an entry's index keeps the entry's model), or None."""
    model: Any = root
    for part in (p for p in loc if not isinstance(p, int)):
        field = _named_field(model, part)
        model = _model_of(field.annotation) if field else None
    return model


def _unknown_key_message(loc: tuple[Any, ...], root: type[BaseModel]) -> str:
    name = str(loc[-1])
    model = _model_at(loc[:-1], root)
    if len(loc) == 1 and "." in name:
        return (
            f"unknown key (`pulumi config set {name}` writes a flat key with a dot); allowed: the nested key, "
            f"set with `pulumi config rm {name}` and `pulumi config set --path {name} <value>`"
        )
    known = [f.alias or n for n, f in model.model_fields.items()] if model else []
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]}? " if close else ""
    return f"unknown key; {hint}allowed: {_REFERENCE_KEYS}"
