"""YAML as the Pulumi CLI reads a stack or project file, and the files' one reader (`read_text`).

As the CLI (pulumi/pulumi sdk/go/common/workspace/loaders.go, tag v3.259.0; gopkg.in/yaml.v3 v3.0.1 resolve.go):
a byte-order mark is skipped; YAML 1.2 (`12:30` and `yes` are strings, `True` a boolean); a duplicate key, an
explicit tag its text does not resolve to (`!!bool yes`) and integers beyond 64 bits are errors. On top, since
ruamel.yaml has no limits: files over `MAX_STACK_FILE_BYTES`, more than `MAX_VALUES` values after aliases, an
anchor inside itself, nesting deeper than `MAX_DEPTH`, tags other than the core types, and `010` (octal to
yaml.v3, decimal to YAML 1.2). Every error is one line naming the file and line (`StackFileError`).
"""

from __future__ import annotations

import copy
import functools
import math
import re
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import MappingEndEvent, MappingStartEvent, SequenceEndEvent, SequenceStartEvent
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from workloads import cli_args

MAX_STACK_FILE_BYTES = 1 << 20
MAX_VALUES = 10_000
"""Values a stack file may expand to, aliases counted at every use (a real one has about a hundred)."""
MAX_DEPTH = 32
_MAX_FLOW_BRACKETS = 2 * MAX_DEPTH  # counted without regard to quotes: brackets inside strings count too

_CORE = "tag:yaml.org,2002:"
_BOM = b"\xef\xbb\xbf"


class StackFileError(Exception):
    """The stack file cannot be read as the Pulumi CLI would; the message is one line for the user, in which a
    value that looks like a credential (a key, a stack or ESC environment name) is not shown."""

    def __init__(self, message: str):
        super().__init__(cli_args.without_credentials(message))


def read_text(path: Path, where: str) -> str:
    """A stack or project file's text through `cli_args.read_user_file` (a bounded regular file), its byte-order
    mark skipped (loaders.go readFileStripUTF8BOM); `where` names it."""
    try:
        data = cli_args.read_user_file(path, MAX_STACK_FILE_BYTES)
    except cli_args.UnreadableFile as err:
        text = str(err)
        raise StackFileError(f"{where} {text}" if text.startswith("is ") else f"{where}: {text}") from None
    try:
        return data.removeprefix(_BOM).decode("utf-8")
    except UnicodeDecodeError as err:
        raise StackFileError(f"{path.name}: not valid UTF-8 (byte {err.start}); allowed: a UTF-8 text file") from None


def is_missing(path: Path) -> bool:
    """Whether nothing is at `path` (a name too long or a loop of links is a reading error, said as such)."""
    try:
        path.stat()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return False


def load_yaml(name: str, text: str) -> Any:
    """`text` as plain Python values, parsed once per text; a fresh copy each call."""
    return copy.deepcopy(_parsed(name, text))


@functools.lru_cache(maxsize=32)
def _parsed(name: str, text: str) -> Any:
    # Tens of milliseconds a file, read many times a process; a function of the text alone (errors never cached).
    return _Document(name).load(text)


class _Document:
    """YAML 1.2 text -> plain Python values (dict, list, str, int, float, bool, None), with limits."""

    def __init__(self, name: str):
        self.name = name
        self.values = 0
        self.seen: set[int] = set()
        self.aliased = False  # a node reached twice: the value count includes an alias's copies

    def load(self, text: str) -> Any:
        yaml = YAML(typ="safe", pure=True)  # YAML 1.2 resolver; pure: the same on every platform
        try:
            self.check_depth(yaml, text)
            node = yaml.compose(text)
        except MarkedYAMLError as err:
            mark = err.problem_mark or err.context_mark
            where = f"line {mark.line + 1}: " if mark is not None else ""
            problem = err.problem or err.context or "syntax error"
            if "another document" in problem:
                problem = "a stack file holds one YAML document; allowed: no second '---' document"
            raise StackFileError(f"{self.name}: not valid YAML: {where}{problem}") from None
        except YAMLError as err:
            raise StackFileError(f"{self.name}: not valid YAML: {str(err).splitlines()[0]}") from None
        except RecursionError:
            raise StackFileError(f"{self.name}: nested too deeply; allowed: at most {MAX_DEPTH} levels") from None
        if node is None:
            return None
        return self.value(node, (), frozenset())

    def check_depth(self, yaml: YAML, text: str) -> None:
        """Refuse deep nesting from the event stream (the composer recurses and would take seconds to fail), and
        flow brackets on the raw text first (ruamel's scanner takes a second over a thousand of them)."""
        depth = deepest = 0
        for char in text:
            if char in "[{":
                depth += 1
                deepest = max(deepest, depth)
            elif char in "]}" and depth:
                depth -= 1
        if deepest > _MAX_FLOW_BRACKETS:
            raise StackFileError(
                f"{self.name}: nested too deeply ({deepest} open brackets); allowed: at most {MAX_DEPTH} levels"
            )
        depth = 0
        for event in yaml.parse(text):
            if isinstance(event, (SequenceStartEvent, MappingStartEvent)):
                depth += 1
                if depth > MAX_DEPTH + 2:  # the document map and `config` are two of the levels
                    raise self.fail(event, f"nested too deeply; allowed: at most {MAX_DEPTH} levels")
            elif isinstance(event, (SequenceEndEvent, MappingEndEvent)):
                depth -= 1

    def fail(self, node: Any, message: str) -> StackFileError:
        return StackFileError(f"{self.name}: line {node.start_mark.line + 1}: {message}")

    def value(self, node: Node, path: tuple[str, ...], active: frozenset[int]) -> Any:
        self.values += 1
        self.aliased = self.aliased or id(node) in self.seen
        self.seen.add(id(node))
        if self.values > MAX_VALUES:
            what = "expands to" if self.aliased else "holds"
            why = " (aliases count at every use)" if self.aliased else ""
            tail = "" if self.aliased else " (a stack file has about a hundred)"
            raise self.fail(node, f"{what} more than {MAX_VALUES} values{why}; allowed: at most {MAX_VALUES}{tail}")
        if len(path) > MAX_DEPTH:
            raise self.fail(node, f"nested too deeply; allowed: at most {MAX_DEPTH} levels")
        if id(node) in active:
            raise self.fail(node, "an anchor contains itself; allowed: aliases of anchors outside them")
        if isinstance(node, ScalarNode):
            return self.scalar(node, path)
        active = active | {id(node)}
        if isinstance(node, SequenceNode):
            self.check_tag(node, "seq", path)
            return [self.value(item, (*path, f"[{i}]"), active) for i, item in enumerate(node.value)]
        if isinstance(node, MappingNode):
            self.check_tag(node, "map", path)
            return self.mapping(node, path, active)
        raise self.fail(node, f"unsupported YAML node {type(node).__name__}; allowed: plain values, lists and maps")

    def mapping(self, node: MappingNode, path: tuple[str, ...], active: frozenset[int]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        lines: dict[str, int] = {}
        merged: list[dict[str, Any]] = []
        for key_node, value_node in node.value:
            if isinstance(key_node, ScalarNode) and key_node.tag == _CORE + "merge":
                merged.extend(self.merge_sources(value_node, path, active))
                continue
            key = self.key(key_node, path)
            if key in out:
                raise self.fail(key_node, f"duplicate key {key!r} (first at line {lines[key]}); allowed: each key once")
            lines[key] = key_node.start_mark.line + 1
            out[key] = self.value(value_node, (*path, key), active)
        for source in merged:  # YAML merge keys: explicit keys win, earlier sources win
            for key, value in source.items():
                out.setdefault(key, value)
        return out

    def merge_sources(self, node: Node, path: tuple[str, ...], active: frozenset[int]) -> list[dict[str, Any]]:
        items = node.value if isinstance(node, SequenceNode) else [node]
        sources = []
        for item in items:
            value = self.value(item, path, active)
            if not isinstance(value, dict):
                raise self.fail(item, "a merge key (<<) with something else; allowed: a map or a list of maps")
            sources.append(value)
        return sources

    def key(self, node: Node, path: tuple[str, ...]) -> str:
        if not isinstance(node, ScalarNode):
            raise self.fail(node, "a map key is a list or map; allowed: a plain value")
        value = self.scalar(node, path)
        if value is None:
            raise self.fail(node, "a map key is empty or null; allowed: a plain, non-empty key")
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)

    def check_tag(self, node: Node, kind: str, path: tuple[str, ...]) -> None:
        if node.tag != _CORE + kind:
            raise self.fail(node, f"tag {_short(node.tag)} is not supported; allowed: plain values, lists and maps")

    def scalar(self, node: ScalarNode, path: tuple[str, ...]) -> Any:
        tag, text = node.tag, node.value
        kind = tag[len(_CORE) :] if tag.startswith(_CORE) else None
        where = _where(path)
        if kind in ("str", "timestamp"):  # yaml.v3 decodes timestamps into `any` as their text
            return text
        if kind == "null":
            return None
        if kind == "bool":
            # yaml.v3 v3.0.1 resolve.go: only these six spellings are !!bool; ruamel would read `!!bool yes` as false.
            if text not in ("true", "True", "TRUE", "false", "False", "FALSE"):
                raise self.fail(node, f"{where}: {_cut(text)!r} is not a YAML 1.2 boolean; allowed: true or false")
            return text.lower() == "true"
        if kind == "int":
            return self.integer(node, text, where)
        if kind == "float":
            return self.floating(node, text, where)
        raise self.fail(node, f"tag {_short(tag)} is not supported; allowed: plain values, lists and maps")

    def floating(self, node: ScalarNode, text: str, where: str) -> float:
        if text.lower().lstrip("+-") in (".inf", ".nan"):
            raise self.fail(
                node,
                f"{where}: {text} is not allowed; allowed: a finite number (the Pulumi CLI cannot pass inf or nan)",
            )
        try:
            value = float(text.replace("_", ""))
        except ValueError:  # `!!float x`: yaml.v3 fails as for `!!bool yes`
            if re.fullmatch(r"[-+]?[0-9_]+|[-+]?0[xob][0-9a-fA-F_]+", text):
                return float(self.integer(node, text, where))  # `!!float 5` and `!!float 0x10`: yaml.v3 converts
            raise self.fail(node, f"{where}: {_cut(text)!r} is not a number; allowed: a number") from None
        if not math.isfinite(value):  # `1e999`, or four hundred digits: float64 overflows
            raise self.fail(node, f"{where}: {_cut(text)} overflows; allowed: a finite number")
        return value

    def integer(self, node: ScalarNode, text: str, where: str) -> int:
        plain = text.replace("_", "")
        sign = -1 if plain.startswith("-") else 1
        digits = plain.lstrip("+-")
        lower = digits.lower()
        base, body = 10, digits
        for prefix, radix in (("0x", 16), ("0o", 8), ("0b", 2)):
            if lower.startswith(prefix):
                base, body = radix, digits[2:]
        if len(body) > 64:  # before int(): Python refuses to convert over 4300 digits, and a 64-bit one has 20
            raise self.fail(node, f"{where}: a {len(body)}-digit integer; allowed: a whole number within 64 bits")
        if base == 10 and len(digits) > 1 and digits.startswith("0"):
            raise self.fail(
                node,
                f"{where}: {text} is ambiguous (octal to the Pulumi CLI's YAML parser, decimal in YAML 1.2); "
                f"allowed: {int(digits)} without the leading zero, or 0o{digits.lstrip('0') or '0'} for octal",
            )
        try:
            value = sign * int(body, base)
        except ValueError:  # `!!int abc`, `0x` without digits
            raise self.fail(node, f"{where}: {_cut(text)!r} is not a whole number; allowed: a whole number") from None
        if not -(1 << 63) <= value < (1 << 64):  # yaml.v3 parses into int64 or uint64
            raise self.fail(node, f"{where}: {_cut(text)} is beyond 64 bits; allowed: a whole number within 64 bits")
        return value


def _cut(text: str) -> str:
    return text if len(text) <= 40 else text[:37] + "..."


def _short(tag: str) -> str:
    return "!!" + tag[len(_CORE) :] if tag.startswith(_CORE) else tag


def _where(path: tuple[str, ...]) -> str:
    """`config`, `nemo-rl-gke:cost`, `bucketGib` -> `nemo-rl-gke:cost.bucketGib` (the key as users spell it)."""
    if len(path) >= 2 and path[0] == "config":
        return ".".join(path[1:]).replace(".[", "[")
    return ".".join(path).replace(".[", "[") or "the document"
