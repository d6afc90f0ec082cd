"""The layers of docs/architecture.md, enforced.

import-linter keeps the contracts of `.importlinter` (imports point down the layers, entry points
are never imported, what the config model may not import, no cycles). It reads every import
statement of every module of the layer packages, subpackages included: lazy ones inside functions,
`TYPE_CHECKING` blocks and `from pkg import *` count.

What it cannot see is checked here, each on a synthetic tree too:
- an import by name at run time (`importlib.import_module("infra.x")`, `__import__`): refused in
  project code, so that every import is one the contracts see;
- a folder of a layer without `__init__.py` (a namespace subpackage, which grimp does not read);
- a root-level module or package in no layer (import-linter reads only the packages it is given);
- the program, `__main__.py` at the root, which is no package: it imports `infra` and `workloads`
  only. They never import `tools/` or `jobctl/` (the layers contract; `infra.plan`, the one
  exception, is an entry point nothing imports), so the program cannot reach them either.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT
from importlinter.api import read_configuration

CONTRACTS = ROOT / ".importlinter"
LAYER_PACKAGES = tuple(read_configuration(str(CONTRACTS))["session_options"]["root_packages"])
PROGRAM = "__main__.py"
PROGRAM_MAY_IMPORT = {"infra", "workloads"}
NOT_A_LAYER = {"tests"}
"""Root folders with Python that belong to no layer: the test suite imports from every layer."""
RUN_TIME_IMPORTERS = {"import_module", "__import__", "run_module"}
"""Calls that import a module named by a string (`importlib.import_module`, the builtin `__import__`,
`runpy.run_module`): import-linter does not follow them."""


def lint_imports(root: Path) -> subprocess.CompletedProcess:
    """import-linter on the tree at `root` with `root/.importlinter`, in a process of its own (the tree's
    packages have the project's names), without a cache."""
    code = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True, no_logo=True))"
    return subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=120)


def python_files(root: Path) -> list[Path]:
    files = [root / PROGRAM] if (root / PROGRAM).is_file() else []
    for package in LAYER_PACKAGES:
        files += sorted((root / package).rglob("*.py"))
    return files


def imports_by_name(root: Path) -> list[str]:
    """Run-time imports of a module by name in project code."""
    problems = []
    for path in python_files(root):
        text = path.read_text()
        if not any(name in text for name in RUN_TIME_IMPORTERS):  # parse only the files that may hold one
            continue
        for node in ast.walk(ast.parse(text, str(path))):
            if not isinstance(node, ast.Call):
                continue
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if name in RUN_TIME_IMPORTERS:
                what = ast.unparse(node.args[0]) if node.args else "?"
                problems.append(
                    f"{path.relative_to(root)}:{node.lineno}: {name}({what}) imports by name at run time, "
                    "which the layer contracts cannot see; use an import statement"
                )
    return problems


def folders_without_init(root: Path) -> list[str]:
    """Folders of a layer that hold Python modules but no `__init__.py`."""
    problems = []
    for package in LAYER_PACKAGES:
        for folder in sorted({p.parent for p in (root / package).rglob("*.py")}):
            if not (folder / "__init__.py").is_file():
                problems.append(
                    f"{folder.relative_to(root)}/ holds Python modules but no __init__.py, "
                    "so the layer contracts do not read them"
                )
    return problems


def outside_the_layers(root: Path) -> list[str]:
    """Root-level modules and packages that belong to no layer."""
    problems = []
    for entry in sorted(root.iterdir()):
        if entry.name.startswith(".") or entry.name in (PROGRAM, *LAYER_PACKAGES, *NOT_A_LAYER):
            continue
        if entry.suffix == ".py" or (entry.is_dir() and any(entry.rglob("*.py"))):
            problems.append(
                f"{entry.name} is in no layer: add it to .importlinter and docs/architecture.md, "
                "or move it into a layer"
            )
    return problems


def program_imports(root: Path) -> list[str]:
    """Project packages the program imports that it may not."""
    problems = []
    for node in ast.walk(ast.parse((root / PROGRAM).read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top in LAYER_PACKAGES and top not in PROGRAM_MAY_IMPORT:
                problems.append(
                    f"{PROGRAM}:{node.lineno} imports {name}; the program may import only "
                    f"{', '.join(sorted(PROGRAM_MAY_IMPORT))}"
                )
    return problems


def problems(root: Path) -> list[str]:
    return imports_by_name(root) + folders_without_init(root) + outside_the_layers(root) + program_imports(root)


# ------------------------------------------------------------------------------------------ the project


def test_import_linter_keeps_every_contract():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_nothing_hides_an_import_from_the_contracts_or_sits_outside_the_layers():
    assert problems(ROOT) == []


# ------------------------------------------------------------------------------------------ synthetic trees


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def tree(tmp_path: Path, files: "dict[str, str] | None" = None) -> Path:
    """A small project of the real shape that keeps every rule, with `files` added or replaced."""
    base = {f"{p}/__init__.py": "" for p in LAYER_PACKAGES}
    base |= {
        PROGRAM: "import pulumi\nfrom infra import config\nfrom workloads import job_spec\n",
        "infra/config.py": "",
        "infra/network.py": "",
        "infra/training_job.py": "from workloads import job_spec\n",
        "infra/plan.py": "from tools import offline_plan\n",
        "tools/offline_plan.py": "from infra import config\n",
        "tools/cost.py": "",
        "workloads/job_spec.py": "",
        "workloads/submit.py": "from workloads import job_spec\n",
        "jobctl/__main__.py": "from jobctl import cli\n",
        "jobctl/cli.py": "from infra import config\n",
        "tests/test_x.py": "import tools.cost\n",
    }
    base |= files or {}
    root = write_tree(tmp_path, base)
    shutil.copy(CONTRACTS, root / ".importlinter")
    return root


BROKEN = {
    "workloads/lazy.py": "def f():\n    from infra.config import PROJECT\n",
    "infra/typed.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from tools import cost\n",
    "tools/sideways.py": "import jobctl.cli\n",
    "tools/launches.py": "from infra import plan\n",
    "jobctl/reenters.py": "import jobctl.__main__\n",
    "infra/a.py": "from infra import b\n",
    "infra/b.py": "def f():\n    from infra.a import x\n",
    "workloads/ops/__init__.py": "",
    "workloads/ops/deep/__init__.py": "",
    "workloads/ops/deep/probe.py": "from infra.config import PROJECT\n",
    "workloads/star.py": "from infra import *\n",
    "workloads/loose/probe.py": "from infra.config import PROJECT\n",
}
"""One tree with a rule broken in each module (a run of import-linter per case would cost seconds)."""


@pytest.fixture(scope="module")
def broken(tmp_path_factory) -> str:
    """import-linter's report on the `BROKEN` tree."""
    result = lint_imports(tree(tmp_path_factory.mktemp("broken"), BROKEN))
    assert result.returncode != 0, f"import-linter kept every contract:\n{result.stdout}"
    return result.stdout


def test_the_synthetic_project_keeps_every_rule(tmp_path):
    root = tree(tmp_path)
    result = lint_imports(root)
    assert result.returncode == 0, result.stdout + result.stderr
    assert problems(root) == []


def test_an_upward_or_sideways_import_breaks_the_layers_lazy_and_type_checking_ones_too(broken):
    assert "- workloads.lazy -> infra.config (l.2)" in broken
    assert "- infra.typed -> tools.cost (l.3)" in broken
    assert "- tools.sideways -> jobctl.cli (l.1)" in broken


def test_importing_an_entry_point_is_refused(broken):
    assert "- tools.launches -> infra.plan (l.1)" in broken and "- jobctl.reenters -> jobctl.__main__ (l.1)" in broken


def test_a_cycle_through_a_lazy_import_is_refused(broken):
    assert "No cycles are allowed in infra." in broken and "- .b -> .a (1 import)" in broken


# The four ways past the walker this file replaces, each caught.


@pytest.mark.parametrize(
    ("source", "line", "call"),
    [
        (
            "import importlib\n\ndef f():\n    return importlib.import_module('infra.config')\n",
            4,
            "import_module('infra.config')",
        ),
        ("def f():\n    return __import__('tools.cost')\n", 2, "__import__('tools.cost')"),
        (
            "from importlib import import_module\nname = 'infra' + '.config'\nimport_module(name)\n",
            3,
            "import_module(name)",
        ),
    ],
)
def test_a_by_name_import_from_a_lower_layer_is_refused(tmp_path, source, line, call):
    root = tree(tmp_path, {"workloads/submit.py": source})
    assert problems(root) == [
        f"workloads/submit.py:{line}: {call} imports by name at run time, which the layer contracts cannot see; "
        "use an import statement"
    ]


def test_an_upward_import_in_a_subpackage_breaks_the_layers(broken):
    assert "- workloads.ops.deep.probe -> infra.config (l.1)" in broken


def test_a_subfolder_without_init_which_import_linter_does_not_read_is_refused(broken, tmp_path):
    assert "workloads.loose" not in broken  # what grimp does not read, it cannot check
    root = tree(tmp_path, {"workloads/loose/probe.py": "from infra.config import PROJECT\n"})
    assert problems(root) == [
        "workloads/loose/ holds Python modules but no __init__.py, so the layer contracts do not read them"
    ]


@pytest.mark.parametrize(
    ("files", "entry"),
    [
        ({"budget.py": "from tools import cost\n"}, "budget.py"),
        ({"placement/__init__.py": "", "placement/pick.py": "import tools.cost\n"}, "placement"),
        ({"scripts/run.py": "import jobctl.cli\n"}, "scripts"),
    ],
)
def test_a_root_level_module_or_package_in_no_layer_is_refused(tmp_path, files, entry):
    root = tree(tmp_path, files)
    assert problems(root) == [
        f"{entry} is in no layer: add it to .importlinter and docs/architecture.md, or move it into a layer"
    ]


def test_a_star_import_from_a_higher_layer_breaks_the_layers(broken):
    assert "- workloads.star -> infra (l.1)" in broken


def test_the_program_may_not_import_the_tooling_or_the_cli(tmp_path):
    root = tree(tmp_path, {PROGRAM: "from infra import config\nimport tools.cost\nfrom jobctl.cli import main\n"})
    assert problems(root) == [
        "__main__.py:2 imports tools.cost; the program may import only infra, workloads",
        "__main__.py:3 imports jobctl.cli; the program may import only infra, workloads",
    ]


def test_no_two_modules_of_the_layers_share_a_file_name():
    # A name says a module's role once: `cluster.py` in two packages reads as one thing in a traceback or a
    # review (docs/architecture.md). Package entry files (`__init__`, `__main__`) are the exception.
    seen: dict[str, list[str]] = {}
    for layer in ("infra", "workloads", "jobctl", "tools"):
        for path in sorted((ROOT / layer).rglob("*.py")):
            if path.name not in ("__init__.py", "__main__.py"):
                seen.setdefault(path.name, []).append(path.relative_to(ROOT).as_posix())
    assert {name: paths for name, paths in seen.items() if len(paths) > 1} == {}
