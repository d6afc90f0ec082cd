"""Regenerate workloads/data/nemo_rl/<tag>.json from an NVIDIA-NeMo/RL git checkout (maintainers only).

    python -m tools.nemo_rl_reference --git-dir PATH/TO/RL --tag v0.6.0 > workloads/data/nemo_rl/v0.6.0.json

`loader`: the `data.*` keys NeMo-RL's GRPO data loader reads and the dataset names it accepts, found with `ast`
in the upstream sources it lists (flat layout <= v0.5, split data.train/validation/default >= v0.6); `configs`:
each recipe config's flattened keys after its `defaults:`, loaded with the tag's nemo_rl/utils/config.py and
omegaconf (docs/recipes-and-overrides.md). Names of keys and datasets are facts, no copied text.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

# The config files the recipes (workloads/recipes.py) name; a test checks the list covers them.
CONFIG_FILES = (
    "examples/configs/grpo_math_1B.yaml",
    "examples/configs/grpo_math_70B_megatron.yaml",
    "examples/configs/recipes/llm/grpo-gemma3-27b-it-8n4g-fsdp2tp4-actckpt-long.yaml",
)
PROG = "python -m tools.nemo_rl_reference"
FLAT_TAGS = ("v0.4.0", "v0.5.0")  # the flat data layout (examples/run_grpo_math.py)


def _git(git_dir: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", git_dir, *args], capture_output=True, text=True, check=True).stdout


def _typeddict_keys(src: str, cls: str) -> list[str]:
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            return [s.target.id for s in node.body if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)]
    raise KeyError(f"class {cls} not found")


def _is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _strs(nodes: list[ast.expr]) -> set[str]:
    return {n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def _keys_read(src: str, var: str = "data_config") -> tuple[set[str], set[str]]:
    """Keys read from `var` (`var[K]`, `var.get(K)`, `K in var`, `get_extra_kwargs(var, [K, ...])`) and dataset
    names compared with `dataset_name` in a flat-layout source."""
    keys: set[str] = set()
    names: set[str] = set()
    for n in ast.walk(ast.parse(src)):
        if isinstance(n, ast.Subscript) and _is_name(n.value, var):
            keys |= _strs([n.slice])
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "get":
            keys |= _strs(n.args[:1]) if _is_name(n.func.value, var) else set()
        elif isinstance(n, ast.Compare) and any(_is_name(c, var) for c in n.comparators):
            keys |= _strs([n.left])
        elif isinstance(n, ast.Call) and _is_name(n.func, "get_extra_kwargs") and len(n.args) == 2:
            keys |= _strs(n.args[1].elts) if isinstance(n.args[1], ast.List) else set()
        elif isinstance(n, ast.Compare) and _is_name(n.left, "dataset_name"):
            names |= _strs(n.comparators)
    return keys, names


def _registry(src: str) -> dict[str, str]:
    """DATASET_REGISTRY: dataset name -> class name (`partial(Cls, ...)` gives Cls)."""
    for n in ast.walk(ast.parse(src)):
        if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "DATASET_REGISTRY" for t in n.targets):
            out = {}
            for k, v in zip(n.value.keys, n.value.values, strict=True):
                out[k.value] = v.id if isinstance(v, ast.Name) else v.args[0].id
            return out
    raise KeyError("DATASET_REGISTRY not found")


def _init_args(src: str, cls: str) -> list[str]:
    for node in ast.walk(ast.parse(src)):
        if isinstance(node, ast.ClassDef) and node.name == cls:
            for f in node.body:
                if isinstance(f, ast.FunctionDef) and f.name == "__init__":
                    return [a.arg for a in f.args.args[1:] + f.args.kwonlyargs]
    return []


def loader_keys(git_dir: str, tag: str) -> dict[str, Any]:
    show = lambda path: _git(git_dir, "show", f"{tag}:{path}")  # noqa: E731
    init = "nemo_rl/data/__init__.py"
    if tag in FLAT_TAGS:
        paths = [init, "examples/run_grpo_math.py", "nemo_rl/data/datasets/response_datasets/__init__.py"]
        found = [_keys_read(show(path)) for path in paths[1:]]
        keys = set(_typeddict_keys(show(init), "DataConfig")).union(*(k for k, _ in found))
        names = set().union(*(n for _, n in found))
        data_keys = sorted(f"data.{k}" for k in keys)
        return {"layout": "flat", "paths": paths, "data_keys": data_keys, "dataset_names": sorted(names)}
    reg_path = "nemo_rl/data/datasets/response_datasets/__init__.py"
    reg_src = show(reg_path)
    registry = _registry(reg_src)
    package = "nemo_rl.data.datasets.response_datasets."
    imports = [n for n in ast.walk(ast.parse(reg_src)) if isinstance(n, ast.ImportFrom) and n.module]
    modules = {
        a.name: n.module.replace(".", "/") + ".py" for n in imports if n.module.startswith(package) for a in n.names
    }
    per_dataset = set(_typeddict_keys(show(init), "ResponseDatasetConfig"))
    paths = {init, reg_path, "nemo_rl/data/utils.py"}
    for cls in sorted(set(registry.values())):
        args = _init_args(show(modules[cls]), cls)
        if args:
            per_dataset |= set(args)
            paths.add(modules[cls])
    top = [k for k in _typeddict_keys(show(init), "DataConfig") if k not in ("train", "validation", "default")]
    keys = {f"data.{k}" for k in top}
    keys |= {f"data.{part}.{k}" for part in ("train", "validation", "default") for k in per_dataset}
    return {"layout": "split", "paths": sorted(paths), "data_keys": sorted(keys), "dataset_names": sorted(registry)}


def _flatten(node: Any, prefix: str, out: dict[str, str]) -> None:
    from omegaconf import DictConfig, ListConfig

    for key in node.keys():
        path = f"{prefix}{key}"
        child = node._get_node(key)
        if child._is_none():
            out[path] = "null"
        elif isinstance(child, DictConfig):
            if len(child):
                _flatten(child, path + ".", out)
            else:
                out[path] = "{}"
        elif isinstance(child, ListConfig):
            out[path] = f"[{len(child)}]"
        else:
            out[path] = "value"


def config_keys(git_dir: str, tag: str, files: tuple[str, ...] = CONFIG_FILES) -> dict[str, dict[str, str]]:
    with tempfile.TemporaryDirectory() as tmp:
        _git(git_dir, "archive", "-o", f"{tmp}/src.tar", tag, "examples/configs", "nemo_rl/utils/config.py")
        subprocess.run(["tar", "-x", "-C", tmp, "-f", f"{tmp}/src.tar"], check=True)
        spec = importlib.util.spec_from_file_location("_nemo_rl_config", f"{tmp}/nemo_rl/utils/config.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)  # NeMo-RL's own loader at this tag: its inheritance rules
        out: dict[str, dict[str, str]] = {}
        for name in files:
            if not (Path(tmp) / name).exists():
                continue
            flat: dict[str, str] = {}
            _flatten(module.load_config(f"{tmp}/{name}"), "", flat)
            out[name] = dict(sorted(flat.items()))
        return out


def reference(git_dir: str, tag: str) -> dict[str, Any]:
    commit = _git(git_dir, "rev-parse", f"{tag}^{{commit}}").strip()
    source = {"repo": "NVIDIA-NeMo/RL", "tag": tag, "commit": commit, "generated_by": PROG}
    return {"source": source, "loader": loader_keys(git_dir, tag), "configs": config_keys(git_dir, tag)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--git-dir", required=True, help="an NVIDIA-NeMo/RL clone's .git (or bare) directory")
    parser.add_argument("--tag", required=True, help="e.g. v0.6.0")
    args = parser.parse_args(argv)
    json.dump(reference(args.git_dir, args.tag), sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
