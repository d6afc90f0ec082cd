"""Mutation testing of the modules that decide deployments and verdicts (`make mutants`; not in CI).

    python -m tests.mutants [MODULE ...] [--max-children N] [--only GLOB]

Each MODULE (`infra/naming`, or a package `infra/config`) is mutated by mutmut 3 (requirements-test.txt)
against only its mirror tests, in a fresh copy of the checkout under `.mutants/<module>/`, because mutmut
reads setup.cfg from its working directory and must not touch the checkout. Mutants judged equivalent in
docs/testing.md do not count. mutmut mutates function bodies only, so a limit held in a constant needs a
test pinning it to its source.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / ".mutants"
EQUIVALENTS_DOC = ROOT / "docs" / "testing.md"

DEFAULT_MODULES = (
    *("infra/config", "infra/naming", "infra/cluster", "infra/gate_plan", "workloads/gate/verdict"),
    *(f"tools/doctor/{m}" for m in ("project_checks", "quota_checks", "zone_checks", "network_checks")),
    *("tools/doctor/check_runner", "workloads/recovery/classify"),
)
# Helpers asserted through the cluster's tests (no mirror test module of their own).
TESTS_OF = {"infra/placement": "tests/test_cluster.py", "infra/gke_common": "tests/test_cluster.py"}
SOURCE_DIRS = ("infra", "workloads", "tools")  # copied as sources, so a module imports its mutated self

# mutmut's exit codes per mutant (mutmut/stats.py status_by_exit_code at 3.8.1).
KILLED = {1, 3, 24, -24, 152, 255, 36, 37}
SURVIVED = {0}
NO_TESTS = {5, 33}


class UsageError(Exception):
    pass


@dataclass(frozen=True)
class Target:
    name: str  # infra/naming
    mutate: str  # mutmut's only_mutate glob: infra/naming.py or infra/config/*
    tests: str

    @property
    def workdir(self) -> Path:
        return WORK / self.name.replace("/", ".")


def resolve(name: str) -> Target:
    name = name.strip().strip("/")
    if name.endswith(".py"):
        name = name[:-3]
    allowed = f"allowed: a module under {', '.join(SOURCE_DIRS)}"
    mutate = f"{name}.py" if (ROOT / f"{name}.py").is_file() else f"{name}/*"
    if mutate.endswith("*") and not (ROOT / name / "__init__.py").is_file():
        raise UsageError(f"module {name!r}: no {name}.py or package {name}/; {allowed}")
    if name.split("/")[0] not in SOURCE_DIRS:
        raise UsageError(f"module {name!r}: outside the source packages; {allowed}")
    tests = TESTS_OF.get(name, f"tests/test_{Path(name).name}.py")
    if not (ROOT / tests).is_file():
        raise UsageError(f"module {name!r}: no mirror test module {tests}; allowed: a module with one")
    return Target(name, mutate, tests)


def setup_cfg(target: Target, top_level: list[str]) -> str:
    def lines(values) -> str:
        return "".join(f"\n    {v}" for v in values)

    return (
        "# Written by tests/mutants.py for this run only.\n[mutmut]\n"
        f"source_paths ={lines(f'{d}/' for d in SOURCE_DIRS)}\n"
        f"only_mutate = {target.mutate}\n"
        f"also_copy ={lines(p for p in top_level if p not in SOURCE_DIRS)}\n"
        f"pytest_add_cli_args_test_selection = {target.tests}\n"
        # No xdist inside a mutant's process; no local Ray head per mutant (minutes on two cores):
        # what only `ray` tests cover is listed as not reached.
        "pytest_add_cli_args =\n    -p\n    no:xdist\n    -m\n    not ray\n"
    )


def prepare(target: Target) -> None:
    """A fresh copy of the checkout as git sees it, uncommitted edits included: old mutants would mislead."""
    shutil.rmtree(target.workdir, ignore_errors=True)
    out = subprocess.run(["git", "ls-files", "-coz", "--exclude-standard"], cwd=ROOT, capture_output=True, check=True)
    files = [p for p in out.stdout.decode().split("\0") if p and (ROOT / p).is_file()]
    for rel in files:
        dest = target.workdir / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dest)
    top_level = sorted({rel.split("/")[0] for rel in files})
    (target.workdir / "setup.cfg").write_text(setup_cfg(target, top_level))


def results(target: Target) -> dict[str, int]:
    found: dict[str, int] = {}
    for meta in (target.workdir / "mutants").rglob("*.py.meta"):
        data = json.loads(meta.read_text())
        found.update({k: v for k, v in data.get("exit_code_by_key", {}).items() if v is not None})
    return found


def equivalents(doc: Path = EQUIVALENTS_DOC) -> dict[str, tuple[str, str]]:
    """Mutant name -> (mutated line, why): docs/testing.md's table rows of equivalent mutants."""
    if not doc.is_file():
        return {}
    rows = re.findall(r"^\|\s*`([\w.ǁ]+__mutmut_\d+)`\s*\|\s*`(.+?)`\s*\|\s*([^|]+?)\s*\|\s*$", doc.read_text(), re.M)
    return {name: (line, why) for name, line, why in rows}


def mutated_line(target: Target, name: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "mutmut", "show", name], cwd=target.workdir, capture_output=True, text=True
    )
    return " ".join(x[1:].strip() for x in proc.stdout.splitlines() if x.startswith("+") and not x.startswith("+++"))


def summarize(
    target: Target, codes: dict[str, int], equivalent: dict[str, tuple[str, str]], shown: Callable[[str], str]
) -> tuple[str, list[str]]:
    """The module's line and the mutants left open. An equivalent counts only while its judged line is
    still the one it changes: an edit renumbers mutants, and an old judgement must not hide a survivor."""
    survivors = sorted(k for k, v in codes.items() if v in SURVIVED)
    judged = [k for k in survivors if k in equivalent and shown(k) == equivalent[k][0]]
    live = [k for k in survivors if k not in judged]
    killed = sum(1 for v in codes.values() if v in KILLED)
    untested = sorted(k for k, v in codes.items() if v in NO_TESTS)
    other = len(codes) - killed - len(survivors) - len(untested)
    counted = killed + len(live) + len(untested)
    rate = 100.0 * killed / counted if counted else 100.0
    line = (
        f"{target.name}: {rate:.1f}% killed ({killed} of {counted}; {len(codes)} mutants, "
        f"{len(judged)} equivalent, {len(live)} survived, {len(untested)} not reached by {target.tests}"
        + (f", {other} suspicious or segfault" if other else "")
        + ")"
    )
    return line, live + untested


def run(target: Target, max_children: int, only: tuple[str, ...] = ()) -> tuple[str, list[str]]:
    prepare(target)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "RAY_ADDRESS")}
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "mutmut", "run", "--max-children", str(max_children), *only],
        cwd=target.workdir,
        env=env,
        capture_output=True,
        text=True,
    )
    log = target.workdir / "mutmut.log"
    log.write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise RuntimeError(
            f"{target.name}: mutmut failed ({proc.returncode}); its output is in {log.relative_to(ROOT)}"
        )
    line, open_ = summarize(target, results(target), equivalents(), lambda name: mutated_line(target, name))
    return f"{line} in {time.monotonic() - started:.0f}s", open_


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.mutants", description=__doc__.split("\n\n")[0])
    parser.add_argument("modules", nargs="*", help=f"default: {' '.join(DEFAULT_MODULES)}")
    parser.add_argument("--max-children", type=int, default=2, help="mutants tested at once (default 2: two cores)")
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="GLOB",
        help="only the mutants whose names match (mutmut's globs, e.g. 'infra.cluster.x_provisioning_settings*'); "
        "the rate then counts those",
    )
    args = parser.parse_args(argv)
    names = [m for arg in args.modules for m in re.split(r"[,\s]+", arg) if m] or list(DEFAULT_MODULES)
    try:
        targets = [resolve(n) for n in names]
    except UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    open_total = 0
    for target in targets:
        try:
            line, open_ = run(target, args.max_children, tuple(args.only))
        except RuntimeError as err:
            print(f"error: {err}", file=sys.stderr)
            return 1
        print(line, flush=True)
        for name in open_:
            print(
                f"  survived: {name}  (cd {target.workdir.relative_to(ROOT)} && {sys.executable} -m mutmut show {name})"
            )
        open_total += len(open_)
    return 0


if __name__ == "__main__":
    sys.exit(main())
