"""The offline plan's files (`python -m infra.plan --out DIR`, `--graph [DIR]`): each Kubernetes object as
`<kind>-<name>.yaml`, each Helm release's values as `helm-values-<release>.yaml`, and the checks that refuse a
directory or a file the plan cannot write in place, before anything runs or is written."""

from __future__ import annotations

import argparse
import contextlib
import os
import stat
import sys
from pathlib import Path
from typing import Any, Optional

import yaml


def kubernetes_manifests(plan: Any) -> dict[str, Any]:
    """File name -> document for every Kubernetes object and Helm release values of `plan` (a
    `tools.offline_plan.Plan`)."""
    files: dict[str, Any] = {}
    for r in plan.resources:
        if not r.custom or not r.type.startswith("kubernetes:") or r.type.startswith("pulumi:providers:"):
            continue
        if r.type == "kubernetes:helm.sh/v3:Release":
            files[f"helm-values-{r.inputs.get('name', r.name)}.yaml"] = r.inputs.get("values", {})
            continue
        doc = {k: v for k, v in r.inputs.items() if not k.startswith("__")}
        kind = str(doc.get("kind", r.type.rsplit(":", 1)[-1]))
        name = (doc.get("metadata") or {}).get("name", r.name)
        files[f"{kind.lower()}-{name}.yaml"] = doc
    return files


def write_manifests(plan: Any, out: Path) -> list[Path]:
    """Write every manifest to `out`; every target is checked first (`_target_problem`), so a refusal writes nothing."""
    files = kubernetes_manifests(plan)
    for fname in files:
        problem = _target_problem(out / fname)
        if problem:
            raise OSError(0, f"{fname} {problem}; nothing was written")
    out.mkdir(parents=True, exist_ok=True)
    for fname, doc in files.items():
        (out / fname).write_text(yaml.safe_dump(doc, sort_keys=False))
    return [out / fname for fname in files]


def _target_problem(path: Path) -> Optional[str]:
    """Why a file the plan writes cannot be (over)written in place, or None: a link (dangling, a loop, or to
    a file elsewhere, which writing through would change), something not a regular file, a read-only file."""
    try:
        status = path.lstat()
    except FileNotFoundError:
        return None
    except OSError as err:
        return f"cannot be used ({err.strerror or err})"
    if stat.S_ISLNK(status.st_mode):
        return "is a symbolic link"
    if not stat.S_ISREG(status.st_mode):
        return "exists and is not a regular file"
    return None if os.access(path, os.W_OK) else "exists and is read-only"


def write_failed(flag: str, path: Path, err: OSError) -> int:
    print(f"error: {flag} {path}: {err.strerror or err}", file=sys.stderr)
    return 2


def _output_dir_problem(path: Path) -> Optional[str]:
    """Why `path` cannot be (or become) a directory to write to; None when it can. Creates nothing."""
    try:
        if path.is_symlink() and not path.exists():  # Path.exists() is False for a loop of links, and dangling ones
            path.stat()  # raises the reason (a loop of links), or FileNotFoundError (dangling)
        if path.exists():
            if not path.is_dir():
                return "exists and is not a directory"
            return None if os.access(path, os.W_OK | os.X_OK) else "is not writable"
        parent = path.parent
        while not parent.exists() and parent != parent.parent:
            parent = parent.parent
        if not parent.is_dir():
            return f"{parent} is not a directory"
        return None if os.access(parent, os.W_OK | os.X_OK) else f"{parent} is not writable"
    except FileNotFoundError:
        return "is a symbolic link to nothing"
    except OSError as err:  # a name longer than the filesystem allows, a loop of links
        return f"cannot be used ({err.strerror or err})"


def _same_dir(path: Path, other: Path) -> bool:
    with contextlib.suppress(OSError):
        return path.resolve() == other.resolve()
    return False


def output_dir(text: str) -> Path:
    """An argparse type for --out/--graph: `''` is refused (Path('') is the current directory, so the
    files would land wherever the command ran, usually among the stack files)."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not allowed; allowed: a directory path, e.g. plan-out/")
    return Path(text)


def check_output_dirs(dirs: dict[str, Optional[Path]], root: Path) -> None:
    """`--out` and `--graph` (flag -> directory, None when not given) checked before anything runs; `ValueError`
    is the one line that refuses one."""
    for flag, path in dirs.items():
        problem = path is not None and _output_dir_problem(path)
        if path is not None and not problem and _same_dir(path, root):
            # Some forty manifests among the stack files and the code; `plan-out/` is git-ignored for them.
            problem = "is the repository root"
        if problem:
            raise ValueError(f"{flag} {path}: {problem}; allowed: a writable directory (created if missing)")
