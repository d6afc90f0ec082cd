"""Mutation testing of the modules that decide deployments and verdicts (`make mutants`; not in CI).

    python -m tools.mutants [MODULE ...] [--max-children N]

A MODULE is a path without `.py` (`infra/naming`); a package directory (`infra/config/`) counts as one
module. Each module is mutated on its own by mutmut (pinned in requirements-test.txt), against only
the tests that mirror it (`tests/test_<name>.py`), in its own work directory `.mutants/<module>/`:
mutmut 3 reads its settings from the working directory's setup.cfg and mutates a copy of the tree
under `mutants/`, so each run gets a fresh copy of the checkout there and the checkout itself is never
touched. One line per module gives the kill rate; surviving mutants are listed with
`mutmut show NAME` run in that module's work directory. Mutants judged equivalent (no test can tell
them apart from the real code) are listed with the reason in docs/testing.md and do not count.

mutmut 3 mutates code inside functions and methods only: module-level constants and class bodies (an
enum's values, a dataclass field's default) are not mutated, so a limit held in a constant needs a test
that pins it to its source rather than a mutant (docs/testing.md).
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
    "infra/config",  # the config checks: what a stack file may say
    "infra/naming",  # name lengths and labels
    "infra/cluster",  # cluster and node-pool settings
    "infra/gate_plan",  # the gate's floors for a stack
    "workloads/gate/verdict",  # the gate's verdicts
    "tools/doctor/project_checks",  # the doctor's checks, one module each with its mirror tests
    "tools/doctor/quota_checks",
    "tools/doctor/zone_checks",
    "tools/doctor/network_checks",
    "tools/doctor/check_runner",
    "workloads/recovery/classify",  # the restart decisions
)
TESTS_OF = {
    # Helpers of the cluster component without a test module of their own: what decides their output
    # is asserted on the cluster and its pools.
    "infra/placement": "tests/test_cluster.py",
    "infra/gke_common": "tests/test_cluster.py",
}
"""Modules tested through another module's tests (no `tests/test_<name>.py` of their own)."""
SOURCE_DIRS = ("infra", "workloads", "tools")
"""Copied into mutmut's tree as sources (so the module under test imports its mutated self); only the
module under test is mutated."""

# mutmut's exit codes per mutant (mutmut/stats.py status_by_exit_code at 3.8.1).
KILLED = {1, 3, 24, -24, 152, 255, 36, 37}
SURVIVED = {0}
NO_TESTS = {5, 33}


class UsageError(Exception):
    """Bad command line: one line naming the argument."""


@dataclass(frozen=True)
class Target:
    name: str
    """`infra/naming`: what was asked for."""
    mutate: str
    """mutmut's only_mutate glob: `infra/naming.py` or `infra/config/*`."""
    tests: str
    """The mirror test module."""

    @property
    def workdir(self) -> Path:
        return WORK / self.name.replace("/", ".")


def resolve(name: str) -> Target:
    name = name.strip().strip("/")
    if name.endswith(".py"):
        name = name[:-3]
    if (ROOT / f"{name}.py").is_file():
        mutate = f"{name}.py"
    elif (ROOT / name / "__init__.py").is_file():
        mutate = f"{name}/*"
    else:
        raise UsageError(
            f"module {name!r}: no {name}.py or package {name}/; allowed: a module under {', '.join(SOURCE_DIRS)}"
        )
    if name.split("/")[0] not in SOURCE_DIRS:
        raise UsageError(
            f"module {name!r}: outside the source packages; allowed: a module under {', '.join(SOURCE_DIRS)}"
        )
    tests = TESTS_OF.get(name, f"tests/test_{Path(name).name}.py")
    if not (ROOT / tests).is_file():
        raise UsageError(f"module {name!r}: no mirror test module {tests}; allowed: a module with one")
    return Target(name, mutate, tests)


def tracked_files() -> list[str]:
    """The checkout as git sees it (tracked plus untracked-not-ignored), so a run sees uncommitted edits."""
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    return [p for p in out.decode().split("\0") if p and (ROOT / p).is_file()]


def setup_cfg(target: Target, top_level: list[str]) -> str:
    also_copy = sorted(p for p in top_level if p not in SOURCE_DIRS)

    def lines(values) -> str:
        return "".join(f"\n    {v}" for v in values)

    return (
        "# Written by tools/mutants.py for this run only.\n"
        "[mutmut]\n"
        f"source_paths ={lines(f'{d}/' for d in SOURCE_DIRS)}\n"
        f"only_mutate = {target.mutate}\n"
        f"also_copy ={lines(also_copy)}\n"
        f"pytest_add_cli_args_test_selection = {target.tests}\n"
        # One process per mutant is enough parallelism on two cores; xdist inside a worker is not. The
        # tests on the local Ray head (marked `ray` by tests/conftest.py) are left out: a head per
        # mutant is minutes on two cores; what they cover is listed as not reached, not hidden.
        "pytest_add_cli_args =\n    -p\n    no:xdist\n    -m\n    not ray\n"
    )


def prepare(target: Target) -> None:
    """A fresh copy of the checkout in the work directory: old mutants of edited code would mislead."""
    shutil.rmtree(target.workdir, ignore_errors=True)
    files = tracked_files()
    for rel in files:
        dest = target.workdir / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, dest)
    top_level = sorted({rel.split("/")[0] for rel in files})
    (target.workdir / "setup.cfg").write_text(setup_cfg(target, top_level))


def results(target: Target) -> dict[str, int]:
    """Mutant name -> mutmut exit code, from mutmut's per-file `.meta` records."""
    found: dict[str, int] = {}
    for meta in (target.workdir / "mutants").rglob("*.py.meta"):
        data = json.loads(meta.read_text())
        found.update({k: v for k, v in data.get("exit_code_by_key", {}).items() if v is not None})
    return found


def equivalents(doc: Path = EQUIVALENTS_DOC) -> dict[str, tuple[str, str]]:
    """Mutant name -> (its mutated line, why it is equivalent): the rows of the table of equivalent
    mutants in docs/testing.md, whose first two cells are code spans (the name, the mutated line)."""
    if not doc.is_file():
        return {}
    rows = re.findall(r"^\|\s*`([\w.ǁ]+__mutmut_\d+)`\s*\|\s*`(.+?)`\s*\|\s*([^|]+?)\s*\|\s*$", doc.read_text(), re.M)
    return {name: (line, why) for name, line, why in rows}


def mutated_line(target: Target, name: str) -> str:
    """The line a mutant changes, as `mutmut show` prints it (its `+` line, stripped)."""
    proc = subprocess.run(
        [sys.executable, "-m", "mutmut", "show", name], cwd=target.workdir, capture_output=True, text=True
    )
    added = [
        line[1:].strip() for line in proc.stdout.splitlines() if line.startswith("+") and not line.startswith("+++")
    ]
    return " ".join(added)


def summarize(
    target: Target, codes: dict[str, int], equivalent: dict[str, tuple[str, str]], shown: Callable[[str], str]
) -> tuple[str, list[str]]:
    """The module's one line and the mutants left open. A mutant counts as equivalent only while the line
    docs/testing.md judged is still the line it changes: mutmut numbers mutants in source order, so an
    edit of the module renumbers them and an old judgement must not hide a new survivor."""
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
    parser = argparse.ArgumentParser(prog="python -m tools.mutants", description=__doc__.split("\n\n")[0])
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
