"""REF for the upgrade check (tools/upgrade_check.py): a tag, branch or commit of this clone, or a release
CHANGELOG.md records on a `release-commit:` line (a clone has no tags), checked to be an earlier state of this
project; and REF's tree, a detached temporary worktree removed after, also when a signal ends the check.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import tempfile
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from workloads import cli_args


class EnvironmentProblem(Exception):
    """Git cannot give the check REF, or nothing at REF plans (exit 3)."""


def _git(root: Path, *args: str) -> str:
    proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        raise EnvironmentProblem(lines[-1] if lines else f"git {args[0]} exit code {proc.returncode}")
    return proc.stdout.strip()


@contextmanager
def worktree(root: Path, commit: str) -> Iterator[Path]:
    """A detached worktree of `commit` in a temp directory, removed after, also when a signal ends the check:
    SIGINT and SIGTERM wait while it is removed, and its git commands run in their own session, so a second Ctrl-C
    at the terminal (sent to the whole process group) does not stop them part way."""
    parent = Path(tempfile.mkdtemp(prefix="upgrade-check-"))
    tree = parent / "ref"
    try:
        _git(root, "worktree", "add", "--detach", "--quiet", str(tree), commit)
        yield tree
    finally:
        with _signals_held():
            for args in (["worktree", "remove", "--force", str(tree)], ["worktree", "prune"]):
                subprocess.run(["git", *args], cwd=root, capture_output=True, start_new_session=True)
                shutil.rmtree(parent, ignore_errors=True)


@contextmanager
def _signals_held() -> Iterator[None]:
    held = {signal.SIGINT, signal.SIGTERM}
    main = threading.current_thread() is threading.main_thread()
    if main:
        signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        yield
    finally:
        if main:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, held)


def committed_stacks(root: Path, commit: str) -> list[str]:
    names = _git(root, "ls-tree", "--name-only", commit).splitlines()
    return sorted(n[len("Pulumi.") : -len(".yaml")] for n in names if re.fullmatch(r"Pulumi\.[^/]+\.yaml", n))


# ---- REF: a tag, branch or commit, or a release CHANGELOG.md records

_RELEASE_HEADING = re.compile(r"## \[(?P<version>[^\]]+)\]")
_RELEASE_COMMIT = re.compile(r"release-commit:\s*(?P<commit>[0-9a-fA-F]{7,40})\b")


def changelog_releases(root: Path) -> dict[str, str]:
    """Each release CHANGELOG.md records with its commit: the `release-commit:` line under its `## [X.Y.Z]`
    heading (CHANGELOG.md's preamble; `.ci/run` reads the same lines). Empty when there is no readable file."""
    try:
        text = (root / "CHANGELOG.md").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return {}
    releases: dict[str, str] = {}
    version = None
    for line in text.splitlines():
        if heading := _RELEASE_HEADING.match(line):
            version = heading["version"].strip()
        elif version and (commit := _RELEASE_COMMIT.match(line.strip())):
            releases.setdefault(version, commit["commit"].lower())
    return releases


@dataclass(frozen=True)
class Ref:
    shown: str  # REF as the user typed it, unless it looks like a credential
    commit: str
    via: str = ""  # how a name that is no git ref was read ("CHANGELOG.md release-commit")


def _shown(ref: str) -> str:
    return cli_args.without_credentials(ref)


def check_ref_text(ref: str) -> None:
    """REF as a git revision: not empty, no option, no control character (one line, never an option to git)."""
    why = ""
    if not ref.strip():
        why = "empty"
    elif ref.startswith("-"):
        why = "starts with '-'"
    elif any(ord(c) < 32 or ord(c) == 127 for c in ref):
        why = "holds a control character"
    elif len(ref) > 256:
        why = f"{len(ref)} characters long"
    if why:
        raise cli_args.UsageError(
            f"--from: the value {why}; allowed: a release tag, branch or commit id, or a release CHANGELOG.md names"
        )


def resolve(root: Path, ref: str) -> Ref:
    """REF's commit: git's, else (a clone without tags) the `release-commit:` CHANGELOG.md records for it."""
    shown = _shown(ref)
    if not _git(root, "rev-parse", "--is-inside-work-tree") == "true":
        raise EnvironmentProblem(f"{root} is not a git checkout")
    try:
        commit = _git(root, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    except EnvironmentProblem:
        pass
    else:
        # A full commit id looks like a W&B key (40 hex digits): shown shortened, as git does.
        return Ref(commit[:12] if commit.startswith(ref.lower()) and shown != ref else shown, commit)
    releases = changelog_releases(root)
    version = ref.removeprefix("v")
    recorded = releases.get(version) or releases.get(ref)
    if recorded is None:
        known = ", ".join(releases) or "none"
        raise EnvironmentProblem(
            f"--from {shown}: not a tag, branch or commit of this clone, and not a release CHANGELOG.md records "
            f"(its releases: {known}); allowed: a release tag (a clone has none until `git fetch --tags`), a branch, "
            "a commit id, or a release CHANGELOG.md records on a `release-commit:` line"
        )
    try:
        commit = _git(root, "rev-parse", "--verify", "--quiet", f"{recorded}^{{commit}}")
    except EnvironmentProblem:
        raise EnvironmentProblem(
            f"--from {shown}: no such tag here, and the commit CHANGELOG.md records for release {version} "
            f"({recorded}) is not in this clone either (shallow?); allowed: a clone with that commit "
            "(`git fetch --unshallow`, or `git fetch --tags`)"
        ) from None
    return Ref(shown, commit, f"CHANGELOG.md release-commit {recorded}")


def check_history(root: Path, ref: Ref, stacks: list[str], named: list[Path]) -> None:
    """REF is an earlier state of this project: it shares history with this checkout and has stack files."""
    at = f"--from {ref.shown} ({ref.commit[:10]})"
    try:
        _git(root, "merge-base", ref.commit, "HEAD")
    except EnvironmentProblem:
        raise cli_args.UsageError(
            f"{at}: shares no history with this checkout, so it is no release of this project; allowed: a release "
            "tag, branch or commit of this repository's history, or a release CHANGELOG.md records"
        ) from None
    if not stacks and not named:
        raise cli_args.UsageError(
            f"{at}: has no committed stack file (Pulumi.<stack>.yaml) and no --stack-file was given: nothing to "
            "compare; allowed: a release of this project, or --stack-file Pulumi.<stack>.yaml"
        )
