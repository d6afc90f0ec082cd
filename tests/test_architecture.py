"""The layers of docs/architecture.md, enforced: imports point down, and no project module imports
itself back through a cycle. Every import counts, lazy ones inside functions and TYPE_CHECKING
blocks included: a lazy upward import is still an upward dependency."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from conftest import ROOT

PACKAGES = ("infra", "tools", "workloads")

# Entry points: run as programs, never imported by project code.
PROGRAM = "__main__"
PLAN_LAUNCHER = "infra.plan"
CLI = "workloads.__main__"


def layer(module: str) -> str:
    if module in (PROGRAM, PLAN_LAUNCHER, CLI):
        return module
    return module.split(".")[0]


# What each layer (or entry point) may import, besides itself.
ALLOWED: dict[str, set[str]] = {
    "workloads": set(),
    "infra": {"workloads"},
    "tools": {"infra", "workloads"},
    PROGRAM: {"infra", "workloads"},
    PLAN_LAUNCHER: {"tools"},
    # The day-2 CLI reads stack files through infra (config model, stack-file reader, pool facts);
    # it is the only workloads module allowed to. Its in-cluster command, `watch --spec-file`,
    # imports none of it (tests/test_preemption.py runs it with infra unimportable).
    CLI: {"workloads", "infra"},
}


def project_modules(root: Path) -> dict[str, Path]:
    modules = {PROGRAM: root / "__main__.py"} if (root / "__main__.py").is_file() else {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):  # subpackages too (infra/config/)
            parts = path.relative_to(root).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def imports_of(path: Path, known: set[str]) -> set[str]:
    """Project modules `path` imports anywhere in its body."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
        else:
            continue
        for name in names:
            # `import infra.config` and `from infra import config` both mean the module infra.config.
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name not in PACKAGES:
                found.add(name)
    return found


def import_graph(root: Path) -> dict[str, set[str]]:
    modules = project_modules(root)
    known = set(modules)
    return {name: imports_of(path, known) - {name} for name, path in modules.items()}


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    problems = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            if target in (PROGRAM, PLAN_LAUNCHER, CLI):
                problems.append(f"{module} imports the entry point {target}")
            elif layer(target) != layer(module) and layer(target) not in ALLOWED[layer(module)]:
                problems.append(f"{module} ({layer(module)}) imports {target} ({layer(target)})")
    return problems


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_every_import_points_down_the_layers():
    assert upward_imports(import_graph(ROOT)) == []


def test_no_project_modules_import_each_other_in_a_cycle():
    assert cycles(import_graph(ROOT)) == []


def test_the_config_model_imports_neither_the_price_table_nor_the_job_builder():
    graph = import_graph(ROOT)
    config = {m for m in graph if m == "infra.config" or m.startswith("infra.config.")}
    assert len(config) > 1, "infra.config is a package of modules"
    assert not set().union(*(graph[m] for m in config)) & {"tools.cost", "workloads.job_spec", "infra.training_job"}


def test_the_program_never_imports_the_offline_tooling():
    graph = import_graph(ROOT)
    reachable, todo = set(), [PROGRAM]
    while todo:
        for target in graph[todo.pop()]:
            if target not in reachable:
                reachable.add(target)
                todo.append(target)
    assert not {m for m in reachable if layer(m) == "tools"}


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.mark.parametrize(
    ("module", "source", "problem"),
    [
        ("workloads/submit.py", "from infra.config import PROJECT\n", "workloads.submit (workloads) imports infra.config (infra)"),
        ("workloads/submit.py", "def f():\n    import tools.cost\n", "workloads.submit (workloads) imports tools.cost (tools)"),
        ("infra/network.py", "from tools import cost\n", "infra.network (infra) imports tools.cost (tools)"),
        ("infra/network.py", "import __main__\n", "infra.network imports the entry point __main__"),
        ("tools/cost.py", "from infra import plan\n", "tools.cost imports the entry point infra.plan"),
    ],
)
def test_an_upward_import_is_found(tmp_path, module, source, problem):
    tree = {f"{p}/__init__.py": "" for p in PACKAGES}
    tree |= {"infra/config.py": "", "infra/plan.py": "", "infra/network.py": "", "tools/cost.py": "",
             "workloads/submit.py": "", "workloads/__main__.py": "", "__main__.py": ""}
    tree[module] = source
    assert upward_imports(import_graph(write_tree(tmp_path, tree))) == [problem]


def test_a_cycle_through_a_lazy_import_is_found(tmp_path):
    tree = {f"{p}/__init__.py": "" for p in PACKAGES}
    tree |= {"infra/a.py": "from infra import b\n", "infra/b.py": "def f():\n    from infra.a import x\n"}
    assert cycles(import_graph(write_tree(tmp_path, tree))) == [["infra.a", "infra.b"]]
