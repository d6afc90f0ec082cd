"""NeMo-RL overrides checked against the pinned NeMo-RL version, before the cluster sees them.

NeMo-RL applies overrides with Hydra's parser on its config in OmegaConf struct mode (nemo_rl/utils/config.py
`parse_hydra_overrides`, v0.4.0 ... v0.7.0; hydra-core 1.3.2 in its uv.lock and in requirements.txt).
`OverrideChecker` runs that parser on a skeleton of the pinned config (workloads/data/nemo_rl/<tag>.json, from
`python -m tools.nemo_rl_reference`), and also refuses a leading `-` (the GRPO scripts' argparse would swap
the config file) and deleting or replacing what the stack sets. `data_key_problem` checks `data.*` keys
against what the image's loader reads (`++data.subset=main` passes Hydra on v0.5.0 and is then ignored).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

DATA_DIR = Path(__file__).resolve().parent / "data" / "nemo_rl"
ALLOWED = (
    "allowed: key=value for a key of the recipe's config, +key=value or ++key=value to add one, ~key to delete one"
)


class OverrideError(ValueError):
    """An override NeMo-RL would reject, or one that would undo what the stack sets; `str()` is one line."""


@lru_cache(maxsize=None)
def reference(tag: str) -> Mapping[str, Any]:
    """The pinned NeMo-RL version's loader keys and config keys (workloads/data/nemo_rl/<tag>.json)."""
    path = DATA_DIR / f"{tag}.json"
    if not path.is_file():
        raise OverrideError(
            f"no config reference for NeMo-RL {tag}; generate {path.name} with python -m tools.nemo_rl_reference"
        )
    return json.loads(path.read_text())


def config_keys(tag: str, config_file: str) -> Mapping[str, str]:
    """Flattened keys of `config_file` at `tag` (after its `defaults:`), each with its kind."""
    configs = reference(tag)["configs"]
    if config_file not in configs:
        raise OverrideError(f"NeMo-RL {tag} has no {config_file} in its config reference")
    return configs[config_file]


@dataclass(frozen=True)
class ParsedOverride:
    """One override split the one way every reader splits it: its leading `~`/`+` marks ('' for `key=value`),
    its key and its value (after the first '=', stripped; None without one). Hydra's verdict is the checker's."""

    prefix: str
    key: str
    value: Optional[str]

    @property
    def deletes(self) -> bool:
        return self.prefix.startswith("~")

    @property
    def assigns(self) -> bool:
        """`key=value`, `+key=value` or `++key=value`: the key ends up holding `value`."""
        return "~" not in self.prefix and self.value is not None


def parse_override(override: str) -> ParsedOverride:
    """Split `override` into its marks, key and value: `++a.b=x=y` gives ('++', 'a.b', 'x=y')."""
    body = override.lstrip("~+")
    key, sep, value = body.partition("=")
    return ParsedOverride(override[: len(override) - len(body)], key.strip(), value.strip() if sep else None)


def override_key(override: str) -> str:
    """The config key an override touches: `++a.b=1`, `+a.b=1`, `a.b=1` and `~a.b` all give `a.b`."""
    return parse_override(override).key


def data_key_problem(tag: str, override: str) -> Optional[str]:
    """Why the `data.*` key of `override` is one the data loader of NeMo-RL `tag` does not read, or None."""
    parsed = parse_override(override)
    key = parsed.key
    if not key.startswith("data.") or parsed.deletes:
        return None
    keys = reference(tag)["loader"]["data_keys"]
    if key in keys or any(k.startswith(key + ".") for k in keys):
        return None
    layout = reference(tag)["loader"]["layout"]
    hint = (
        "allowed: the flat data.* keys it reads (data.train/validation/default came with v0.6)"
        if layout == "flat"
        else "allowed: data.train.*, data.validation.*, data.default.* and the other keys it reads (the flat ones "
        "went with v0.6)"
    )
    return f"{override!r}: NeMo-RL {tag}'s data loader does not read {key}; {hint}"


def _skeleton(keys: Mapping[str, str]) -> dict[str, Any]:
    """A nested mapping with the config's keys: all Hydra's rules look at (values are stand-ins)."""
    root: dict[str, Any] = {}
    for path, kind in keys.items():
        *parents, leaf = path.split(".")
        node = root
        for part in parents:
            node = node.setdefault(part, {})
        if kind == "null":
            node[leaf] = None
        elif kind == "{}":
            node[leaf] = {}
        elif kind.startswith("["):
            node[leaf] = [0] * int(kind[1:-1])
        else:
            node[leaf] = "value"
    return root


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


def _has_key(cfg: Any, key: str) -> bool:
    """`key` exists in `cfg`, null or not (a plain `key=value` may set a null key)."""
    from omegaconf import DictConfig

    node: Any = cfg
    for part in key.split("."):
        if not isinstance(node, DictConfig) or node._is_none() or part not in node:
            return False
        node = node._get_node(part)
    return True


class OverrideChecker:
    """Applies overrides one by one to a skeleton of one config file of one NeMo-RL version. Deleting or
    replacing a section holding an `owned` key (one the stack sets) is refused; setting one is the job
    builder's to judge, which knows the stack's value."""

    def __init__(self, tag: str, config_file: str, owned: Iterable[str] = ()):
        from omegaconf import OmegaConf

        self.tag, self.config_file = tag, config_file
        self.owned = frozenset(owned)
        self.cfg = OmegaConf.create(_skeleton(config_keys(tag, config_file)))
        OmegaConf.set_struct(self.cfg, True)  # as parse_hydra_overrides does
        self.where = f"{config_file} of NeMo-RL {tag}"

    def problem(self, override: str) -> Optional[str]:
        """Why `override` is refused, or None (then it is applied, so later overrides see its effect)."""
        from hydra._internal.config_loader_impl import ConfigLoaderImpl
        from hydra.core.override_parser.overrides_parser import OverridesParser
        from omegaconf import OmegaConf

        if override.startswith("-"):
            return (
                f"{override!r} starts with '-', which NeMo-RL's script reads as its own flag (--config=... would "
                f"swap the whole config file); {ALLOWED}"
            )
        try:
            parsed = OverridesParser.create().parse_override(override)
        except Exception as err:  # hydra.errors.OverrideParseException and its kin
            return f"{override!r} is not a Hydra override ({_first_line(err)}); {ALLOWED}"
        key = parsed.key_or_group
        if parsed.package is not None:
            return f"{override!r}: @package selects a config group, and NeMo-RL's configs have none; {ALLOWED}"
        below = sorted(k for k in self.owned if k.startswith(key + "."))
        if parsed.is_delete() and (key in self.owned or below):
            what = key if key in self.owned else f"{key}, which holds {below[0]}"
            return f"{override!r} deletes {what} that the stack sets; allowed: deleting a key the stack does not set"
        if below:
            return (
                f"{override!r} replaces {key}, which holds {below[0]} that the stack sets; allowed: setting the "
                f"keys below {key} one by one"
            )
        exists = OmegaConf.select(self.cfg, key, throw_on_missing=False) is not None
        if parsed.is_add() and exists and not isinstance(parsed.value(), (dict, list)):
            return f"{override!r}: {key} already exists in {self.where}; allowed: {key}=... or ++{key}=..."
        if parsed.is_delete() and not exists:
            return f"{override!r}: {self.where} has no {key} to delete (or it is null); {ALLOWED}"
        if not (parsed.is_add() or parsed.is_force_add() or parsed.is_delete()) and not _has_key(self.cfg, key):
            return f"{override!r}: {key} is not a key of {self.where}; {ALLOWED}"
        try:
            ConfigLoaderImpl._apply_overrides_to_config(overrides=[parsed], cfg=self.cfg)
        except Exception as err:  # whatever else Hydra refuses
            return f"{override!r}: NeMo-RL would refuse it ({_first_line(err)}); {ALLOWED}"
        return None

    def check(self, overrides: Sequence[str]) -> None:
        """Raise `OverrideError` naming every refused override (applies the rest in order)."""
        problems = [p for o in overrides if (p := self.problem(o))]
        if problems:
            raise OverrideError("; ".join(problems))
