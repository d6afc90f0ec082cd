"""The one reader of `Pulumi.<stack>.yaml`, for the offline plan and the day-2 CLI.

`pulumi up` never reads the file itself: the Pulumi CLI does, and hands the program a flat config
map (structured values as JSON strings). `read_stack_file` produces that same map offline, so the
plan runs the program on exactly what the engine would pass; `load_stack` adds the validation the
program does at start (`infra.config.load`), so the CLI refuses what `pulumi up` would refuse.

What the Pulumi CLI does, and this reader with it (pulumi/pulumi sdk/go/common/workspace/loaders.go
and resource/config, tag v3.259.0; gopkg.in/yaml.v3 v3.0.1, the CLI's YAML parser):
- a UTF-8 byte-order mark is skipped; the text is YAML 1.2: `12:30` and `yes` are strings, `True`
  is a boolean, a duplicate key is an error;
- a key without a namespace (`flavour:`) belongs to the project (`nemo-rl-gke:flavour`), and
  `<ns>:config:<name>` is the old spelling of `<ns>:<name>`; any other key is an error;
- an empty top-level value is passed as ""; scalars reach the program as JSON text (`true`, `5`),
  structured values as JSON; `.inf` and `.nan` cannot be written as JSON, so the CLI fails on them.

Project config and ESC environments, as the CLI merges them before the program starts
(pulumi/pulumi pkg/workspace/config.go `mergeConfig`, sdk/go/common/workspace/project.go
`RewriteShorthandConfigValues`, `Project.Validate`, `ValidateConfigValue` and project.json, tag v3.259.0,
the newest tag of the mirror read; the pinned CLI is 3.272.0):
- `Pulumi.yaml` `config:` holds project-level defaults. `key: value` (a string, integer, boolean or
  list) is shorthand: `{default: value}` for a key of this project, `{value: value}` for another
  namespace's (`gcp:project`); the long form is `{type, items, description, secret, default, value}`
  and nothing else. Another namespace's key takes `value` only, without a type; `default` and `value`
  together are an error; a typed array needs `items`; a typed default must be of its type.
- A project key the stack file lacks takes the default (or value); the stack file's value wins whole:
  a stack map is not merged with a default map. A dotted key (`job.maxNumSteps`) is a path into the
  stack's map and is set only where that path is missing, `"true"`/`"false"` and plain integers
  becoming booleans and numbers there (resource/config map.go `Set` with path, object.go `coerce`).
- A typed key of this project with no default, no value and nothing in the stack file is "missing";
  a typed key's value must be of its type, and `secret: true` must be a `secure:` value.
- A stack file's `environment:` imports Pulumi ESC environments, which only the CLI (with Pulumi Cloud)
  resolves: refused here with one line, never read as if absent.

What it refuses on top, before anything is parsed further (yaml.v3 has limits of its own, ruamel.yaml
has none): files over `MAX_STACK_FILE_BYTES`, aliases that expand to more than `MAX_VALUES` values,
an anchor inside itself, nesting deeper than `MAX_DEPTH`, tags other than YAML's core types, and
integers with a leading zero (`010`: octal 8 to yaml.v3, decimal 10 to YAML 1.2; write 10 or 0o10).
As yaml.v3 does (go-yaml resolve.go, v3.0.1): an explicit tag its text does not resolve to (`!!bool yes`,
`!!int abc`), and integers beyond 64 bits. Files are read by `cli_args.read_user_file` (regular files only).

Every error is one line that names the file and line, or the config key.
"""

from __future__ import annotations

import copy
import functools
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import MappingEndEvent, MappingStartEvent, SequenceEndEvent, SequenceStartEvent
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from infra.config import (
    PROJECT,
    ConfigError,
    StackConfig,
    namespaced,
    parse,
    refuse_missing_secrets,
    refuse_plaintext_secrets,
    required_secrets,
)
from workloads import cli_args

ROOT = Path(__file__).resolve().parent.parent
"""The checkout: where `Pulumi.yaml` and the stack files are (defined once; the CLI, tools and tests
import it from here)."""
PROJECT_FILE = ROOT / "Pulumi.yaml"
"""The project file whose `config:` defaults every stack file is merged with (looked up at each read)."""
DEFAULT_STACK = "dev"
"""The stack read when a command names none (`python -m infra.plan`, `python -m jobctl`, `python -m tools.doctor`)."""
MAX_STACK_FILE_BYTES = 1 << 20
MAX_VALUES = 10_000
"""Values a stack file may expand to, aliases counted at every use (a real one has about a hundred)."""
MAX_DEPTH = 32
_MAX_FLOW_BRACKETS = 2 * MAX_DEPTH  # counted without regard to quotes: brackets inside strings count too
OFFLINE_SECRET = "offline-plan-secret-placeholder"
"""What a `secure:` value becomes offline: it cannot be decrypted without the stack's key."""

_CORE = "tag:yaml.org,2002:"
_BOM = b"\xef\xbb\xbf"


class StackFileError(Exception):
    """The stack file cannot be read as the Pulumi CLI would; the message is one line for the user, in which a
    value that looks like a credential (a key, a stack or ESC environment name) is not shown."""

    def __init__(self, message: str):
        super().__init__(cli_args.without_credentials(message))


def stack_path(stack: str, root: Path = ROOT) -> Path:
    return root / f"Pulumi.{stack}.yaml"


def available_stacks(root: Path = ROOT) -> list[str]:
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in root.glob("Pulumi.*.yaml"))


def shown_path(path: Path, root: Path = ROOT) -> str:
    """How messages name a stack file: `Pulumi.<stack>.yaml` beside the program, else the path as given
    (a `--config-file` elsewhere keeps its directory, so the user sees which file was meant)."""
    return path.name if path.parent.resolve() == root.resolve() else str(path)


def read_text(path: Path, where: str) -> str:
    """A stack or project file's text, read with the one reader of files the user names
    (`cli_args.read_user_file`: a regular file of at most `MAX_STACK_FILE_BYTES`, never a FIFO or a device),
    its byte-order mark skipped as the CLI does (loaders.go readFileStripUTF8BOM); `where` names it."""
    try:
        data = cli_args.read_user_file(path, MAX_STACK_FILE_BYTES)
    except cli_args.UnreadableFile as err:
        text = str(err)
        raise StackFileError(f"{where} {text}" if text.startswith("is ") else f"{where}: {text}") from None
    try:
        return data.removeprefix(_BOM).decode("utf-8")
    except UnicodeDecodeError as err:
        raise StackFileError(f"{path.name}: not valid UTF-8 (byte {err.start}); allowed: a UTF-8 text file") from None


def _missing(path: Path) -> bool:
    """Whether nothing is at `path` (a name too long or a loop of links is a reading error, said as such)."""
    try:
        path.stat()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return False


def read_stack_file(
    path: Path, project: str = PROJECT, project_file: Path | None = None
) -> tuple[dict[str, str], list[str]]:
    """Read `Pulumi.<stack>.yaml` into the flat config map the Pulumi engine hands a program:
    `namespace:key` -> string (JSON for structured values), the project file's (`PROJECT_FILE`)
    `config:` defaults merged in; `secure:` values become an offline placeholder and their keys are
    returned as the secret keys."""
    where = shown_path(path)  # the file by its path, its content by its name
    if _missing(path):
        here = f" (stacks here: {', '.join(available_stacks(path.parent)) or 'none'})" if path.parent.is_dir() else ""
        raise StackFileError(f"stack file {where} not found{here}")
    text = read_text(path, f"stack file {where}")
    return parse_stack_text(text, path.name, project, read_project_config(project_file or PROJECT_FILE, project))


def parse_stack_text(
    text: str, name: str, project: str = PROJECT, project_config: "list[ProjectKey] | None" = None
) -> tuple[dict[str, str], list[str]]:
    """`read_stack_file` for text already read; `name` is the file name used in messages,
    `project_config` the project file's keys (`read_project_config`) to merge."""
    doc = load_yaml(name, text)
    if doc is not None and not isinstance(doc, dict):
        raise StackFileError(f"{name}: the file is not a map; allowed: a map with a 'config' map at the top")
    doc = doc or {}  # an empty file: no config (loaders.go)
    _refuse_environment(doc.get("environment"), name)
    raw = doc.get("config")
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise StackFileError(f"{name}: 'config' is not a map; allowed: a map of `<namespace>:<key>: value` lines")
    values: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    for written, value in raw.items():
        key = _config_key(written, project, name)
        if key in spelled:
            raise StackFileError(
                f"{name}: {key} is given twice (as {spelled[key]!r} and {written!r}); allowed: each key once"
            )
        spelled[key] = written
        values[key] = value
    _merge_project_config(values, project_config or [], name, project)
    config: dict[str, str] = {}
    secret_keys: list[str] = []
    for key, value in values.items():
        config[key], secret = _engine_value(value)
        if secret:
            secret_keys.append(key)
    return config, secret_keys


# ----------------------------------------------------------------------------- ESC and project config


def _refuse_environment(environment: Any, name: str) -> None:
    """An `environment:` the CLI would open through Pulumi ESC (project.go `Environment`: a list of
    names, or a definition with `imports:`): offline its values are unknown, so say so."""
    if environment in (None, [], {}):
        return
    if isinstance(environment, list):
        what = ", ".join(str(e) for e in environment)
    elif isinstance(environment, dict) and isinstance(environment.get("imports"), list):
        what = ", ".join(str(e) for e in environment["imports"]) or "an inline definition"
    else:
        what = "an inline definition"
    raise StackFileError(
        f"{name}: environment: imports Pulumi ESC environment(s) {what}, which only the Pulumi CLI resolves (with "
        "Pulumi Cloud), so the offline plan, the doctor and the CLI cannot see the config it sets; allowed: no "
        "`environment:` here: copy the values it sets into `config:` (`pulumi env open <org>/<env>` shows its "
        "pulumiConfig) and plan again"
    )


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
    """The project file's `config:` entries, validated as the CLI validates them when it loads the
    project (a missing file: none)."""
    if _missing(path):
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
                f"{where}: {_shown(value)} is not allowed; allowed: a string, integer, boolean or list "
                "(the default), or a map of type/default/value (write a number with a fraction as {default: 1.5})"
            )
        _validate_declaration(declaration, where, ours)
        key = _config_key(written, project, name)
        _path_of(key, where)
        keys.append(ProjectKey(written, key, declaration))
    return sorted(keys, key=lambda k: k.written)  # mergeConfig walks the keys sorted


def _shown(value: Any) -> str:
    return "an empty value" if value is None else repr(value)


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
    """(top-level key, path inside it) of a project key (resource/config map.go parseKeyPath); only
    dotted names here: an index or a quoted segment is refused rather than read differently."""
    namespace, _, name = key.partition(":")
    segments = name.split(".")
    if not all(_PATH_SEGMENT.match(s) for s in segments):
        raise StackFileError(f"{where}: {name!r} is not a key or dotted path of names; allowed: e.g. job.maxNumSteps")
    return f"{namespace}:{segments[0]}", segments[1:]


def _coerce(value: Any) -> Any:
    """What a project default becomes inside a map (config/object.go `coerce`): plain values are text
    first (pkg/workspace/config.go createConfigValue), then "true"/"false" and integers without a
    leading zero are typed again; lists and maps stay structured."""
    if isinstance(value, (dict, list)) or isinstance(value, float):
        return value
    text = _json_scalar(value) if isinstance(value, (bool, int)) else value
    if text in ("true", "false"):
        return text == "true"
    if re.fullmatch(r"-?[1-9]\d*|0", text):
        return int(text)
    return text


def _merge_project_config(values: dict[str, Any], keys: list[ProjectKey], name: str, project: str) -> None:
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
        content = value if isinstance(value, (dict, list)) else _engine_value(value)[0]
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
        if not isinstance(node, dict):
            raise StackFileError(f"{name}: {top} is not a map; allowed: a map there")
        node = node.setdefault(segment, {})
    if not isinstance(node, dict):
        raise StackFileError(f"{name}: {top} is not a map; allowed: a map there")
    node[path[-1]] = value


def _config_key(written: str, project: str, name: str) -> str:
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


def _engine_value(value: Any) -> tuple[str, bool]:
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
    if _is_secure(value):
        return True
    if isinstance(value, dict):
        return any(_has_secure(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_secure(v) for v in value)
    return False


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


def load_yaml(name: str, text: str) -> Any:
    """`text` (a file called `name` in messages) as plain Python values, parsed at most once per text: a
    fresh copy each call, so a caller may change what it gets."""
    return copy.deepcopy(_parsed(name, text))


@functools.lru_cache(maxsize=32)
def _parsed(name: str, text: str) -> Any:
    # The pure-Python YAML parser takes tens of milliseconds a stack file, and a process may read the same
    # file many times: the plan reads the stack and the project file, `jobctl` and the doctor read them
    # again, the test suite some 600 times. Parsing is a function of the text alone (errors are raised,
    # never cached), so the text is the key; a file edited between two reads is a new text.
    return _Document(name).load(text)


class _Document:
    """YAML 1.2 text -> plain Python values (dict, list, str, int, float, bool, None), with limits."""

    def __init__(self, name: str):
        self.name = name
        self.values = 0
        self.seen: set[int] = set()
        self.aliased = False
        """Whether a node was reached twice: an alias was expanded, so the value count includes its copies."""

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
        """Refuse deep nesting from the event stream, which the parser produces without recursion:
        the composer recurses per level and would take seconds to hit Python's limit."""
        # Flow brackets first, on the raw text: ruamel's scanner looks ahead over pending simple keys,
        # which costs about a second for a thousand open brackets before the first event arrives.
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
            if self.aliased:
                raise self.fail(
                    node,
                    f"expands to more than {MAX_VALUES} values (aliases count at every use); allowed: at most "
                    f"{MAX_VALUES}",
                )
            raise self.fail(
                node,
                f"holds more than {MAX_VALUES} values; allowed: at most {MAX_VALUES} (a stack file has about a "
                "hundred)",
            )
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
        if kind == "str":
            return text
        if kind == "timestamp":  # yaml.v3 decodes timestamps into `any` as their text
            return text
        if kind == "null":
            return None
        if kind == "bool":
            # yaml.v3 v3.0.1 resolve.go: only these six spellings resolve to !!bool (YAML 1.2), and an explicit
            # tag its text does not resolve to is an error ("cannot decode !!str `yes` as a !!bool"); ruamel
            # would read `!!bool yes` as false.
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


@dataclass(frozen=True)
class StackFile:
    """A stack file, validated as the program validates its config."""

    name: str
    config: StackConfig
    secret_keys: frozenset[str]
    """`namespace:key` names of the `secure:` values."""


def load_stack(name: str, root: Path = ROOT, path: Path | None = None) -> StackFile:
    """Read and validate `Pulumi.<name>.yaml` (or `path`, as `pulumi up --config-file`) the way
    `pulumi up` would (`infra.config.load`); the secrets a job needs are the job's commands' to check.

    Raises `StackFileError` for an unreadable file and `ConfigError` for a config the program refuses.
    """
    shown = f"--config-file {path}" if path else None
    path = path or stack_path(name, root)
    flat, secret_keys = read_stack_file(path)
    raw = namespaced(flat)
    refuse_plaintext_secrets(raw, set(secret_keys), name, value_source(path, shown or shown_path(path, root)))
    return StackFile(name, parse(raw, name), frozenset(secret_keys))


def value_source(path: Path, shown: str) -> "Callable[[str], str]":
    """Where a key (without namespace) of the config read from `path` was set: the stack file (`shown`, as
    messages name it: `Pulumi.dev.yaml`, `--config-file team.yaml`), or the project file whose default filled it in."""

    def source(key: str) -> str:
        try:
            doc = load_yaml(path.name, read_text(path, shown_path(path)))
            written = {_config_key(k, PROJECT, path.name) for k in ((doc or {}).get("config") or {})}
        except (StackFileError, AttributeError, TypeError):
            written = set()
        return shown if f"{PROJECT}:{key}" in written else PROJECT_FILE.name

    return source


def validate_flat(
    stack: str,
    config: dict[str, str],
    secret_keys: "list[str] | frozenset[str]",
    path: Path | None = None,
    shown: str | None = None,
) -> StackConfig:
    """What `infra.config.load` checks at the start of `pulumi up`, on a flat map: plaintext secrets,
    the config model, the secrets the job needs. `path` is the stack file the map was read from, `shown` how
    messages name it (`value_source`). Raises `ConfigError`."""
    raw = namespaced(config)
    source = value_source(path, shown or shown_path(path)) if path else None
    refuse_plaintext_secrets(raw, set(secret_keys), stack, source)
    parsed = parse(raw, stack)
    refuse_missing_secrets(parsed, present_secrets(secret_keys))
    return parsed


def present_secrets(secret_keys: "list[str] | frozenset[str] | set[str]") -> set[str]:
    """This project's secret keys (without namespace) among `namespace:key` names."""
    return {k.partition(":")[2] for k in secret_keys if k.startswith(f"{PROJECT}:")}


def with_required_secrets(
    stack: str, config: dict[str, str], secret_keys: list[str]
) -> tuple[dict[str, str], list[str]]:
    """The flat map as after `pulumi config set --secret` of every secret the stack's job needs
    (placeholders, as for `secure:` values): what the golden plans and `--assume-secrets` show."""
    needed = required_secrets(parse(namespaced(config), stack))
    config, secret_keys = dict(config), list(secret_keys)
    for key in needed:
        full = f"{PROJECT}:{key}"
        if full not in secret_keys:
            config[full] = OFFLINE_SECRET
            secret_keys.append(full)
    return config, secret_keys


__all__ = [
    "ConfigError",
    "StackFile",
    "StackFileError",
    "available_stacks",
    "load_stack",
    "read_project_config",
    "read_stack_file",
]
