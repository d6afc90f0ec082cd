"""The one reader of `Pulumi.<stack>.yaml`, for the offline plan and the day-2 CLI: the flat config map the
Pulumi CLI would hand the program (`read_stack_file`), and the program's validation on it (`load_stack`).

The YAML as the CLI reads it is `infra/pulumi_yaml.py`'s, the project file's defaults and the engine's encoding
`infra/pulumi_project_config.py`'s. Here: the stack file's shape, and ESC: an `environment:` imports Pulumi ESC
environments only the CLI resolves, so it is refused, never read as if absent (pulumi/pulumi
sdk/go/common/workspace/project.go `Environment`, tag v3.259.0). Every error is one line naming the file or key.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from infra.config import (
    PROJECT,
    StackConfig,
    namespaced,
    parse,
    refuse_missing_secrets,
    refuse_plaintext_secrets,
    required_secrets,
)
from infra.pulumi_project_config import (
    OFFLINE_SECRET,
    config_key,
    engine_value,
    merge_project_config,
    read_project_config,
)
from infra.pulumi_yaml import StackFileError, is_missing, load_yaml, read_text

ROOT = Path(__file__).resolve().parent.parent
"""The checkout: where `Pulumi.yaml` and the stack files are."""
PROJECT_FILE = ROOT / "Pulumi.yaml"
DEFAULT_STACK = "dev"
"""The stack read when a command names none."""


def stack_path(stack: str, root: Path = ROOT) -> Path:
    return root / f"Pulumi.{stack}.yaml"


def available_stacks(root: Path = ROOT) -> list[str]:
    return sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in root.glob("Pulumi.*.yaml"))


def shown_path(path: Path, root: Path = ROOT) -> str:
    """How messages name a stack file: `Pulumi.<stack>.yaml` beside the program, else the path as given."""
    return path.name if path.parent.resolve() == root.resolve() else str(path)


def read_stack_file(
    path: Path, project: str = PROJECT, project_file: Path | None = None
) -> tuple[dict[str, str], list[str]]:
    """The flat config map the engine hands a program (`namespace:key` -> string, JSON for structured values),
    project defaults merged in, and the keys of the `secure:` values (an offline placeholder in the map)."""
    where = shown_path(path)  # the file by its path, its content by its name
    if is_missing(path):
        here = f" (stacks here: {', '.join(available_stacks(path.parent)) or 'none'})" if path.parent.is_dir() else ""
        raise StackFileError(f"stack file {where} not found{here}")
    name, text = path.name, read_text(path, f"stack file {where}")
    project_config = read_project_config(project_file or PROJECT_FILE, project)
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
        key = config_key(written, project, name)
        if key in spelled:
            raise StackFileError(
                f"{name}: {key} is given twice (as {spelled[key]!r} and {written!r}); allowed: each key once"
            )
        spelled[key] = written
        values[key] = value
    merge_project_config(values, project_config, name, project)
    config: dict[str, str] = {}
    secret_keys: list[str] = []
    for key, value in values.items():
        config[key], secret = engine_value(value)
        if secret:
            secret_keys.append(key)
    return config, secret_keys


# ----------------------------------------------------------------------------- ESC and project config


def _refuse_environment(environment: Any, name: str) -> None:
    """An `environment:` (project.go `Environment`: a list of names, or a definition with `imports:`)."""
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


@dataclass(frozen=True)
class StackFile:
    """A stack file, validated as the program validates its config."""

    name: str
    config: StackConfig
    secret_keys: frozenset[str]  # `namespace:key`


def load_stack(name: str, root: Path = ROOT, path: Path | None = None) -> StackFile:
    """`Pulumi.<name>.yaml` (or `path`, as `--config-file`) validated as `pulumi up` would (`infra.config.load`),
    but for the secrets a job needs (the job's commands check them). Raises `StackFileError` or `ConfigError`."""
    shown = f"--config-file {path}" if path else None
    path = path or stack_path(name, root)
    flat, secret_keys = read_stack_file(path)
    raw = namespaced(flat)
    refuse_plaintext_secrets(raw, set(secret_keys), name, value_source(path, shown or shown_path(path, root)))
    return StackFile(name, parse(raw, name), frozenset(secret_keys))


def value_source(path: Path, shown: str) -> "Callable[[str], str]":
    """Where a key (without namespace) was set: the stack file (`shown`) or the project file's default."""

    def source(key: str) -> str:
        try:
            doc = load_yaml(path.name, read_text(path, shown_path(path)))
            written = {config_key(k, PROJECT, path.name) for k in ((doc or {}).get("config") or {})}
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
    """What `infra.config.load` checks at the start of `pulumi up`, on a flat map read from `path`."""
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
    """The flat map as after `pulumi config set --secret` of every secret the job needs (`--assume-secrets`)."""
    needed = required_secrets(parse(namespaced(config), stack))
    config, secret_keys = dict(config), list(secret_keys)
    for key in needed:
        full = f"{PROJECT}:{key}"
        if full not in secret_keys:
            config[full] = OFFLINE_SECRET
            secret_keys.append(full)
    return config, secret_keys
