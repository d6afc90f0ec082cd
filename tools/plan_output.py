"""The offline plan's files (`python -m infra.plan --out DIR`, `--graph [DIR]`): each Kubernetes object as
`<kind>-<name>.yaml`, each Helm release's values as `helm-values-<release>.yaml`, and the checks that refuse a
directory or a file the plan cannot write in place, before anything runs or is written."""

from __future__ import annotations

import argparse
import contextlib
import os
import stat
import sys
import tempfile
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


GRAPH_FILE = "graph.mmd"
"""What `--graph DIR` writes in DIR (tools/graph.py `mermaid`)."""

SOURCE_FOLDERS = ("infra", "workloads", "jobctl", "tools", "tests", "docs", "data", ".git")
"""The checkout's folders of code, docs and data: `--out`/`--graph` inside one would mix some forty generated files
into the source tree (and could overwrite a module of the same name)."""


def plan_files(plan: Any, out: Optional[Path], graph: Optional[Path]) -> dict[Path, str]:
    """Path -> text of every file `--out` and `--graph` write for `plan`."""
    files: dict[Path, str] = {}
    if out is not None:
        files |= {out / name: yaml.safe_dump(doc, sort_keys=False) for name, doc in kubernetes_manifests(plan).items()}
    if graph is not None:
        from tools.graph import build, mermaid

        files[graph / GRAPH_FILE] = mermaid(build(plan))
    return files


def write_files(files: dict[Path, str]) -> None:
    """Write every file, each checked first (`_target_problem`), so a refusal writes nothing; each file is written
    beside its target and renamed onto it, so none is ever left half written. `OSError` names the first problem, and
    its `filename` the file."""
    for path in files:
        problem = _target_problem(path)
        if problem:
            raise OSError(0, f"{path.name} {problem}; nothing was written", str(path))
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, part = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")  # O_EXCL: never through a link
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text)
            os.chmod(part, 0o644)  # as a plain write would leave it, not mkstemp's 0600
            os.replace(part, path)
        finally:
            with contextlib.suppress(OSError):
                os.unlink(part)


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


def _in_source_tree(path: Path, root: Path) -> Optional[str]:
    """The source folder of the checkout `path` is (or is inside), through any link, or None."""
    with contextlib.suppress(OSError, RuntimeError):
        resolved, top = path.resolve(), root.resolve()
        for folder in SOURCE_FOLDERS:
            if resolved == top / folder or (top / folder) in resolved.parents:
                return folder
    return None


def check_output_dirs(dirs: dict[str, Optional[Path]], root: Path) -> None:
    """`--out` and `--graph` (flag -> directory, None when not given) checked before anything runs, and the file
    `--graph` writes (a link, a FIFO or a directory there is refused, never written through or opened); `ValueError`
    is the one line that refuses one."""
    for flag, path in dirs.items():
        if path is None:
            continue
        problem = _output_dir_problem(path)
        folder = None if problem else _in_source_tree(path, root)
        if not problem and _same_dir(path, root):
            # Some forty manifests among the stack files and the code; `plan-out/` is git-ignored for them.
            problem = "is the repository root"
        elif folder:
            problem = f"is inside the checkout's {folder}/ folder"
        elif not problem and flag == "--graph":
            target = _target_problem(path / GRAPH_FILE)
            problem = target and f"{GRAPH_FILE} there {target}"
        if problem:
            raise ValueError(f"{flag} {path}: {problem}; allowed: a writable directory (created if missing)")
