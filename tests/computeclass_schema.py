"""Derive the ComputeClass JSON schema the tests validate against from Google's Go API types.

GKE serves `cloud.google.com/v1 ComputeClass` from a CRD generated (controller-gen) from
GoogleCloudPlatform/compute-class-api `api/cloud.google.com/v1/types.go`; that file's kubebuilder markers
are the machine-readable source. Upstream code is not kept here: a maintainer downloads that file at
`COMMIT` (its SHA-256 is `SOURCE_SHA256`, also in tests/reference/README.md) and runs this on it, which
writes tests/reference/gke-computeclass/computeclass-v1.schema.json; the tests validate manifests against
the schema, and test the derivation itself on Go text of their own.

    .venv/bin/python -m tests.computeclass_schema PATH/types.go           # rewrite the schema
    .venv/bin/python -m tests.computeclass_schema PATH/types.go --check   # exit 1 when the schema is stale

What is derived, as controller-gen does (sigs.k8s.io/controller-tools pkg/crd/schema.go, `structToSchema`):
a field is required unless it is `+optional` / `+kubebuilder:validation:Optional` (on the field or its
struct) or `omitempty`, and `+kubebuilder:validation:Required` / `+required` make it required whatever its
tag; the validation markers (Enum, Minimum, Maximum, Min/MaxLength, Pattern, Min/MaxItems,
Min/MaxProperties, UniqueItems, `items:`) become the JSON-schema keywords of the same meaning; defaults are
recorded (`default`). The CEL rules (`XValidation`) are kept as `x-kubernetes-validations` for a reader:
JSON schema cannot run them, the API server does. Every object is closed (`additionalProperties: false`):
the API server prunes, or with strict field validation refuses, an unknown field, and a test should fail.
A Go subset only: the file's own shapes (structs, named scalars, pointers, slices, map[string]string).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path
from typing import Any, Optional

import yaml

REFERENCE = Path(__file__).resolve().parent.parent / "tests" / "reference" / "gke-computeclass"
SCHEMA = REFERENCE / "computeclass-v1.schema.json"
SOURCE = "GoogleCloudPlatform/compute-class-api api/cloud.google.com/v1/types.go"
COMMIT = "8067eaeb319407121f5559b07319f5fda7b6725d"
"""The commit the schema was derived from (2026-08-21, the repository's HEAD when it was read)."""
SOURCE_SHA256 = "f94262faa29c4208c17e4206d1fd31b7cab98c93ed2cd23fc083312665d89911"
"""SHA-256 of types.go at `COMMIT`: another file is refused until both are updated."""

SCALARS = {
    "string": {"type": "string"},
    "bool": {"type": "boolean"},
    "int": {"type": "integer"},
    "int32": {"type": "integer", "format": "int32"},
    "int64": {"type": "integer", "format": "int64"},
    "metav1.Time": {"type": "string", "format": "date-time"},
    "metav1.Condition": {"type": "object"},
}
MARKER = re.compile(r"^\s*//\s*\+(\S+?)(?:=(.*))?\s*$")
FIELD = re.compile(r"^\t(\w+)\s+(\S+)\s+`json:\"([^\"]*)\"")
TYPE_STRUCT = re.compile(r"^type (\w+) struct \{")
TYPE_SCALAR = re.compile(r"^type (\w+) (string|bool|int|int32|int64)\s*$")
NUMERIC = {"Minimum": "minimum", "Maximum": "maximum"}
COUNTS = {
    "MinLength": "minLength",
    "MaxLength": "maxLength",
    "MinItems": "minItems",
    "MaxItems": "maxItems",
    "MinProperties": "minProperties",
    "MaxProperties": "maxProperties",
}
VALIDATION = "kubebuilder:validation:"


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in '`"':
        return value[1:-1]
    return value


def _enum(value: str, kind: str) -> list[Any]:
    value = value.strip()
    items = value[1:-1].split(",") if value.startswith("{") else value.split(";")
    items = [_unquote(i) for i in items]
    return [int(i) for i in items] if kind == "integer" else items


def _number(value: str) -> float | int:
    number = float(value)
    return int(number) if number.is_integer() else number


def _constraints(markers: list[tuple[str, str]], kind: Optional[str]) -> dict[str, Any]:
    """The JSON-schema keywords of a field's or a type's validation markers (`items:` ones under `items`)."""
    out: dict[str, Any] = {}
    items: dict[str, Any] = {}
    for name, value in markers:
        if name == "kubebuilder:default":
            out["default"] = yaml.safe_load(value)
            continue
        if not name.startswith(VALIDATION):
            continue
        key, target = name[len(VALIDATION) :], out
        if key.startswith("items:"):
            key, target = key[len("items:") :], items
        if key == "Enum":
            target["enum"] = _enum(value, kind or "string")
        elif key in NUMERIC:
            target[NUMERIC[key]] = _number(value)
        elif key in COUNTS:
            target[COUNTS[key]] = int(value)
        elif key == "Pattern":
            target["pattern"] = _unquote(value)
        elif key == "UniqueItems":
            target["uniqueItems"] = value.strip() == "true"
        elif key == "XValidation":
            rule = dict(re.findall(r'(rule|message)=("(?:[^"\\]|\\.)*")', value))
            target.setdefault("x-kubernetes-validations", []).append({k: json.loads(v) for k, v in rule.items()})
    if items:
        out["items"] = items
    return out


def _type_schema(go_type: str, named: dict[str, dict[str, Any]]) -> dict[str, Any]:
    go_type = go_type.lstrip("*")
    if go_type.startswith("[]"):
        return {"type": "array", "items": _type_schema(go_type[2:], named)}
    if go_type == "map[string]string":
        return {"type": "object", "additionalProperties": {"type": "string"}}
    if go_type in SCALARS:
        return dict(SCALARS[go_type])
    if go_type in named:
        return {"$ref": f"#/$defs/{go_type}"}
    raise ValueError(f"{SOURCE}: type {go_type} is not in the Go subset this reads")


def _kind(go_type: str, named: dict[str, dict[str, Any]]) -> Optional[str]:
    base = go_type.lstrip("*").removeprefix("[]").lstrip("*")
    schema = SCALARS.get(base) or named.get(base) or {}
    return schema.get("type")


def _required(markers: list[tuple[str, str]], tag: list[str], struct_optional: bool) -> bool:
    names = {name for name, _ in markers}
    if VALIDATION + "Optional" in names:
        return False
    if VALIDATION + "Required" in names or "required" in names:
        return True
    return not ("optional" in names or "omitempty" in tag[1:] or struct_optional)


def parse(source: str) -> dict[str, dict[str, Any]]:
    """Every named type of the file as a JSON schema (structs closed, with their required fields)."""
    lines = source.splitlines()
    named: dict[str, dict[str, Any]] = {}
    pending: list[tuple[str, str]] = []
    structs: list[tuple[str, list[tuple[str, str]], int]] = []
    for number, line in enumerate(lines):
        marker = MARKER.match(line)
        if marker:
            pending.append((marker.group(1), marker.group(2) or ""))
        elif (scalar := TYPE_SCALAR.match(line)) is not None:
            kind = SCALARS[scalar.group(2)]["type"]
            named[scalar.group(1)] = {**SCALARS[scalar.group(2)], **_constraints(pending, kind)}
            pending = []
        elif (struct := TYPE_STRUCT.match(line)) is not None:
            named[struct.group(1)] = {"type": "object"}
            structs.append((struct.group(1), pending, number + 1))
            pending = []
        elif not line.startswith("//") and line.strip():
            pending = []
    for name, type_markers, start in structs:
        named[name] = _struct(lines, start, type_markers, named)
    return named


def _struct(
    lines: list[str], start: int, type_markers: list[tuple[str, str]], named: dict[str, dict[str, Any]]
) -> dict[str, Any]:
    struct_optional = any(name == VALIDATION + "Optional" for name, _ in type_markers)
    schema: dict[str, Any] = {"type": "object", "additionalProperties": False, "properties": {}}
    schema.update(_constraints(type_markers, "object"))
    required: list[str] = []
    markers: list[tuple[str, str]] = []
    for line in lines[start:]:
        if line.startswith("}"):
            break
        marker = MARKER.match(line)
        if marker:
            markers.append((marker.group(1), marker.group(2) or ""))
            continue
        field = FIELD.match(line)
        if field is None:
            if line.strip() and not line.lstrip().startswith("//"):
                markers = []  # an embedded type's markers are not the next field's
            continue
        go_name, go_type, tag = field.group(1), field.group(2), field.group(3).split(",")
        if "inline" in tag or go_type in ("metav1.TypeMeta", "metav1.ObjectMeta", "metav1.ListMeta"):
            markers = []
            continue  # apiVersion, kind and metadata: the API server's own (see `derive`)
        prop = _type_schema(go_type, named)
        prop.update(_constraints(markers, _kind(go_type, named)))
        if prop.get("type") == "array" and prop.get("default") == {}:
            prop["default"] = []  # controller-gen reads `default={}` on a slice as the empty list
        schema["properties"][tag[0] or go_name] = prop
        if _required(markers, tag, struct_optional):
            required.append(tag[0] or go_name)
        markers = []
    if required:
        schema["required"] = required
    return schema


def derive(source: str) -> dict[str, Any]:
    """The ComputeClass schema: the object's own fields from the Go types; apiVersion, kind and metadata
    (which the Go type embeds from apimachinery) as the API server checks them for a cluster-scoped object."""
    named = parse(source)
    top = named.pop("ComputeClass")
    named.pop("ComputeClassList", None)
    top["properties"] = {
        "apiVersion": {"const": "cloud.google.com/v1"},
        "kind": {"const": "ComputeClass"},
        "metadata": {
            "type": "object",
            "required": ["name"],
            "properties": {
                # A ComputeClass's name is also a node label value (cloud.google.com/compute-class).
                "name": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            },
        },
        **top["properties"],
    }
    top["required"] = ["apiVersion", "kind", "metadata", *top.get("required", [])]
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$comment": (
            f"Generated by tests/computeclass_schema.py from {SOURCE} at commit {COMMIT}; do not edit by "
            "hand. x-kubernetes-validations are CEL rules the API server runs and "
            "JSON schema does not."
        ),
        "title": "cloud.google.com/v1 ComputeClass",
        **top,
        "$defs": dict(sorted(named.items())),
    }


def render(source: str) -> str:
    return json.dumps(derive(source), indent=1, ensure_ascii=False) + "\n"


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("types_go", type=Path, help=f"{SOURCE} at commit {COMMIT}")
    parser.add_argument("--check", action="store_true", help="exit 1 when the kept schema is not the derived one")
    args = parser.parse_args(argv)
    source = args.types_go.read_bytes()
    if hashlib.sha256(source).hexdigest() != SOURCE_SHA256:
        print(
            f"error: {args.types_go}: not {SOURCE} at {COMMIT}; allowed: that file (for a newer one, set "
            "COMMIT and SOURCE_SHA256 first)",
            file=sys.stderr,
        )
        return 2
    text = render(source.decode())
    if args.check:
        stale = SCHEMA.read_text() != text
        if stale:
            print(f"{SCHEMA} is stale: run python -m tests.computeclass_schema", file=sys.stderr)
        return 1 if stale else 0
    SCHEMA.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
