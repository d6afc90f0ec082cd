"""`python -m infra.plan --compare BEFORE.json`: the previous plan document read and checked, and whether this
plan continues its training run (`run_change`); the node pools' verdicts are tools/pool_replacement.py's."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tools.pool_replacement import compare
from workloads import cli_args

MAX_PLAN_BYTES = 16 << 20
"""The most a `--compare` document may hold: a plan document is about half a megabyte."""


def read_compare(path: Path, stack: str, project: str) -> dict[str, Any]:
    """The `--compare` document, checked to be a plan of `stack` of `project` (this one) with resources of the
    documented shape; `ValueError` says in one line why not."""
    try:
        doc = json.loads(cli_args.read_user_file(path, MAX_PLAN_BYTES))
    except cli_args.UnreadableFile as err:
        raise ValueError(str(err).partition("; allowed")[0]) from None
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except ValueError as err:  # JSON, or UTF-8, that does not decode
        raise ValueError(str(err).splitlines()[0]) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("resources"), list):
        raise ValueError("no resources list")
    for i, resource in enumerate(doc["resources"]):
        if not (
            isinstance(resource, dict)
            and isinstance(resource.get("name"), str)
            and isinstance(resource.get("type"), str)
            and isinstance(resource.get("inputs"), dict)
        ):
            # A resource without inputs would read as "every input unset": verdicts about nothing.
            raise ValueError(f"resources[{i}] is not a resource with a name, a type and a map of inputs")
    outputs = doc.get("outputs", {})
    if not isinstance(outputs, dict):
        raise ValueError("outputs is not a map")
    for key in ("runId", "jobId"):
        if outputs.get(key) is not None and not isinstance(outputs[key], str):
            raise ValueError(f"outputs.{key} is not a string")
    if (doc.get("project"), doc.get("stack")) != (project, stack):
        # Another stack's pools differ in every input: its verdicts ("REPLACED, every node lost") would be false.
        raise ValueError(
            f"a plan of {cli_args.without_credentials(repr(doc.get('project')))} / "
            f"{cli_args.without_credentials(repr(doc.get('stack')))}, not of {project} / {stack}"
        )
    return doc


def run_change(before: dict[str, Any], after: dict[str, Any]) -> str:
    """Whether `after` continues the training run of `before` (the `runId` output: stack, recipe, checkpoint
    key) as a new attempt that resumes from its last complete checkpoint, or starts a new run at step 0."""
    old, new = before.get("outputs") or {}, after.get("outputs") or {}
    run = new.get("runId")
    if not old.get("runId"):
        return (
            f"run {run}: the previous plan names no run (made before run ids); the job adopts the checkpoints "
            "of that release's directory (a new attempt)"
        )
    if old["runId"] != run:
        return (
            f"run: NEW RUN {run} (was {old['runId']}): the checkpoint key changed; it starts at step 0 in a "
            "directory of its own"
        )
    if old.get("jobId") != new.get("jobId"):
        return (
            f"run {run}: same run, new attempt ({old.get('jobId')} -> {new.get('jobId')}): it resumes from its "
            "last complete checkpoint"
        )
    return f"run {run}: same run, same job (no new attempt)"


def compare_lines(previous: dict[str, Any], after: dict[str, Any]) -> str:
    """What `--compare` says of the plan document `after` against `previous`: each node pool's verdict, then
    the run's."""
    return "\n".join(one_line(line) for line in [*compare(previous, after), run_change(previous, after)])


_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def one_line(text: str) -> str:
    """A line that shows values of the `--compare` document (a pool's name or inputs, `runId`, `jobId`): each control
    character escaped (`\\n`), so a value never forges a line of its own, and what looks like a credential (a
    service account or run id pasted with a token) replaced (`cli_args.without_credentials`)."""
    return cli_args.without_credentials(_CONTROL.sub(lambda m: repr(m.group())[1:-1], text))
