"""The doctor's command (`python -m tools.doctor`, docs/doctor.md): flags, the report as text or JSON, exit
codes (0 nothing failed, 1 a check failed, 2 bad stack file or flag, 3 no usable credentials), `--leftovers`."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import Callable, Optional, TextIO

from google.api_core import exceptions as gexc

from infra.config import ConfigError, StackConfig
from infra.stack_file import DEFAULT_STACK, StackFile, StackFileError, load_stack
from tools.doctor.check_context import DEFAULT_TIMEOUT, FAIL, MAX_TIMEOUT, PASS, WARN, Result
from tools.doctor.check_runner import run_checks
from tools.doctor.google_clients import NO_CREDENTIALS, Clients, NoCredentials, bounded, connect, first_line
from workloads import cli_args

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NO_CREDENTIALS = 0, 1, 2, 3


def render_text(stack: str, cfg: StackConfig, results: list[Result]) -> str:
    lines = [f"doctor: stack {stack}, project {cfg.project}, {cfg.region} / {cfg.zone}"]
    width = max(len(r.check) for r in results)
    for r in results:
        lines.append(f"  {r.status:4}  {r.check:{width}}  {r.summary}")
        if r.fix and r.status != PASS:
            lines.append(f"  {'':4}  {'':{width}}  fix: {r.fix}")
    counts = {s: sum(r.status == s for r in results) for s in (FAIL, WARN, PASS)}
    lines.append(f"{counts[FAIL]} failed, {counts[WARN]} warning(s), {counts[PASS]} passed")
    return "\n".join(lines)


def render_json(stack: str, cfg: StackConfig, results: list[Result]) -> str:
    doc = {"stack": stack, "project": cfg.project, "ok": all(r.status != FAIL for r in results)}
    return json.dumps({**doc, "checks": [asdict(r) for r in results]}, indent=2)


def command_parser(prog: str, description: str, json_help: str, timeout_help: str) -> cli_args.OneLineParser:
    """`--stack`, `--json` and `--timeout`: the flags of the doctor and of the capacity finder."""
    p = cli_args.OneLineParser(prog=prog, description=description)
    stack_help = f"stack name (Pulumi.<stack>.yaml); default {DEFAULT_STACK}"
    p.add_argument("--stack", type=cli_args.stack_name, default=DEFAULT_STACK, help=stack_help)
    p.add_argument("--json", action="store_true", help=json_help)
    seconds = cli_args.seconds(positive=True, maximum=MAX_TIMEOUT)
    p.add_argument("--timeout", type=seconds, default=DEFAULT_TIMEOUT, help=timeout_help)
    return p


def parser() -> argparse.ArgumentParser:
    p = command_parser(
        "python -m tools.doctor",
        "Check the stack's Google Cloud project before `pulumi up` (read-only).",
        "print the results as JSON",
        f"seconds per API call (the run ends within 4x that); default {DEFAULT_TIMEOUT:g}",
    )
    after = "after `pulumi destroy`: list what of the stack is still in the project (exit 1 when anything is)"
    p.add_argument("--leftovers", action="store_true", help=after)
    return p


def error_json(stack: Optional[str], code: int, message: str, empty: tuple[str, ...] = ("checks",)) -> str:
    """The `--json` document of a run that could not check anything (its lists `empty`), for scripts."""
    doc = {"stack": stack, "ok": False, "exitCode": code, "error": message, **{key: [] for key in empty}}
    return json.dumps(doc, indent=2)


Fail = Callable[[int, str], int]
Body = Callable[[argparse.Namespace, StackFile, TextIO, Fail], int]


def run_command(argv, out: Optional[TextIO], err: Optional[TextIO], p, body: Body, empty=("checks",)) -> int:
    """Parse the flags, load the stack, run `body`: bad flags or a bad stack file are one line and exit 2, a
    project that cannot be asked one line and exit 3; with `--json` also as `error_json`'s document."""
    from google.auth.exceptions import RefreshError, TransportError
    from requests.exceptions import RequestException

    out, err = out or sys.stdout, err or sys.stderr
    argv = sys.argv[1:] if argv is None else list(argv)
    # Known before the flags parse, so that a bad flag next to --json still gets its JSON document.
    wants_json = "--json" in argv
    stack_name: Optional[str] = None

    def fail(code: int, message: str) -> int:
        err.write(f"error: {message}\n")
        if wants_json:
            out.write(error_json(stack_name, code, message, empty) + "\n")
        return code

    try:
        args = p.parse_args(argv)
    except cli_args.UsageError as exc:  # bad flags are one line and exit 2, like every other bad input
        return fail(EXIT_USAGE, str(exc))
    stack_name = args.stack
    try:
        stack = load_stack(args.stack)
    except (StackFileError, ConfigError) as exc:
        return fail(EXIT_USAGE, str(exc).replace(chr(10), "; "))
    try:
        return body(args, stack, out, fail)
    except NoCredentials as exc:
        return fail(EXIT_NO_CREDENTIALS, str(exc))
    except RefreshError as exc:
        return fail(EXIT_NO_CREDENTIALS, NO_CREDENTIALS.format(reason=f"refused: {first_line(exc)}"))
    except gexc.GoogleAPICallError as exc:
        project = stack.config.project
        return fail(EXIT_NO_CREDENTIALS, f"could not ask project {project}: {type(exc).__name__} ({first_line(exc)})")
    except (gexc.RetryError, TransportError, RequestException) as exc:  # a token, but no route to Google
        why = cli_args.without_credentials(first_line(exc))
        return fail(
            EXIT_NO_CREDENTIALS,
            f"could not reach Google Cloud for project {stack.config.project} ({why}): "
            "check the network (or HTTPS_PROXY), then run this command again",
        )


def main(
    argv: Optional[list[str]] = None,
    out: Optional[TextIO] = None,
    err: Optional[TextIO] = None,
    connect: Callable[[str], Clients] = connect,
) -> int:
    def body(args: argparse.Namespace, stack: StackFile, out: TextIO, fail: Fail) -> int:
        if args.leftovers:
            return leftovers_main(stack.name, stack.config, args, out, fail, connect)
        results = run_checks(stack.name, stack.config, connect(stack.config.project), args.timeout)
        out.write((render_json if args.json else render_text)(stack.name, stack.config, results) + "\n")
        return EXIT_FAILED if any(r.status == FAIL for r in results) else EXIT_OK

    return run_command(argv, out, err, parser(), body)


CLOUD_ASSET_API = "cloudasset.googleapis.com"  # not needed by `pulumi up`; the leftover audit searches with it
SEARCH_PERMISSION = "cloudasset.assets.searchAllResources (roles/cloudasset.viewer)"


def leftovers_main(
    stack: str, cfg: StackConfig, args: argparse.Namespace, out: TextIO, fail: Fail, connect: Callable[[str], Clients]
) -> int:
    """`--leftovers`: 0 nothing of the stack is left, 1 something is, 3 the project could not be asked."""
    from infra.stack_file import available_stacks
    from tools import leftovers

    try:
        clients = bounded(connect(cfg.project), args.timeout)
        found = leftovers.audit(stack, cfg, clients.assets, clients.networks, args.timeout, available_stacks())
    except (gexc.Forbidden, gexc.PermissionDenied) as exc:
        enable = f"gcloud services enable {CLOUD_ASSET_API} --project {cfg.project}"
        why = f"the leftover audit could not search project {cfg.project} ({first_line(exc)})"
        return fail(EXIT_NO_CREDENTIALS, f"{why}: {enable}, and hold {SEARCH_PERMISSION}")
    out.write((leftovers.render_json if args.json else leftovers.render_text)(stack, cfg, found) + "\n")
    return EXIT_FAILED if found else EXIT_OK
