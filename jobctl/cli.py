"""The CLI's flags and its one entry point, `main` (usage in jobctl/__init__.py)."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from typing import Any, Optional, TextIO

from infra.stack_file import DEFAULT_STACK
from jobctl.commands import COMMANDS
from jobctl.stack import load_stack
from workloads import cli_args, exit_codes, watcher
from workloads.exit_codes import CommandError


def common_flags() -> argparse.ArgumentParser:
    """The flags of every command: which stack, and where its Ray dashboard is."""
    common = cli_args.OneLineParser(add_help=False)
    stack_help = f"stack name (Pulumi.<stack>.yaml); default {DEFAULT_STACK}"
    common.add_argument("--stack", type=cli_args.stack_name, default=DEFAULT_STACK, help=stack_help)
    config_help = "read the stack config from PATH (as `pulumi up --config-file`)"
    common.add_argument("--config-file", type=cli_args.file_path, metavar="PATH", help=config_help)
    common.add_argument("--address", help="Ray dashboard URL, e.g. http://127.0.0.1:8265")
    common.add_argument("--endpoint", help="GKE cluster endpoint, to go through the API server's service proxy")
    ca_help = "PEM file of the cluster CA (with an IP --endpoint)"
    common.add_argument("--ca-file", type=cli_args.file_path, help=ca_help)
    common.add_argument("--head-service", help="Ray head service name (with --endpoint)")
    namespace_help = "namespace of the Ray cluster; default ray.namespace of the stack"
    common.add_argument("--namespace", type=cli_args.namespace, help=namespace_help)
    return common


def parser() -> argparse.ArgumentParser:
    common = common_flags()
    job = cli_args.OneLineParser(add_help=False)
    job.add_argument("--job", type=cli_args.submission_id, help="submission id; default the stack's newest job")
    wait = cli_args.OneLineParser(add_help=False)
    wait.add_argument("--wait", action="store_true", help="wait until the job ends, showing its status")
    timeout_help = "with --wait: give up after this many seconds (exit 4)"
    wait.add_argument("--timeout", type=cli_args.seconds(positive=True), help=timeout_help)
    p = cli_args.OneLineParser(prog="python -m jobctl", description="Submit and watch the stack's NeMo-RL job.")
    sub = p.add_subparsers(dest="command", required=True, metavar="{" + ",".join(COMMANDS) + "}")
    s = sub.add_parser("submit", parents=[common, wait], help="submit the stack's job (idempotent)")
    s.add_argument("--dry-run", action="store_true", help="print entrypoint and runtime env; no network")
    gate_help = "acceptance gate policy for this submission; default job.gate of the stack"
    s.add_argument("--gate", choices=("enforce", "warn", "off"), help=gate_help)
    sub.add_parser("gate", parents=[common], help="run the acceptance gate (GPUs, fabric, Lustre) on the cluster now")
    s = sub.add_parser("status", parents=[common, job, wait], help="show a job's status and the run ledger")
    ledger_help = "read the run ledger from PATH instead of the head's Lustre mount"
    s.add_argument("--ledger-file", type=cli_args.file_path, metavar="PATH", help=ledger_help)
    s = sub.add_parser("logs", parents=[common, job], help="print a job's log")
    s.add_argument("--follow", action="store_true", help="keep streaming until the job ends")
    tail_help = "only the last N lines (with --follow: then the new ones)"
    s.add_argument("--tail", type=cli_args.positive_int, metavar="N", help=tail_help)
    sub.add_parser("stop", parents=[common, job], help="stop a job")
    sub.add_parser("list", parents=[common], help="list the stack's jobs")
    watch_help = "resubmit the stack's job after a spot preemption"
    watcher.add_watch_flags(sub.add_parser("watch", parents=[common], help=watch_help))
    s = sub.add_parser("dashboard", parents=[common], help="serve the Ray dashboard on 127.0.0.1 (no kubectl)")
    s.add_argument("--port", type=cli_args.port, default=8265, help="local port; 0 picks a free one (default 8265)")
    return p


def main(argv: Optional[list[str]] = None, out: Optional[TextIO] = None, err: Optional[TextIO] = None) -> int:
    """Run one command; returns the exit code. Errors a user can act on print one line."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        args = parser().parse_args(argv)
    except cli_args.UsageError as exc:
        err.write(f"error: {cli_args.shown_line(str(exc))}\n")
        return exit_codes.USAGE
    # Ray's job SDK logs every websocket close at INFO; the CLI prints what matters itself.
    logging.getLogger("ray.dashboard.modules.job.sdk").setLevel(logging.WARNING)
    guarded = _Output(out)
    try:
        return exit_codes.run(
            lambda: COMMANDS[args.command](args, load_stack(args.stack, args.config_file), guarded), err
        )
    except _ReaderGone:
        return exit_codes.OK


class _ReaderGone(Exception):
    """Standard output's reader went away (`| head -1`)."""


class _Output:
    """`out` whose failures are the CLI's own: a reader gone (`| head`) ends quietly, as for `cat`; a full output
    (`> /dev/full`) is one error line and exit 3."""

    def __init__(self, out: TextIO):
        self._out = out

    def _guard(self, action: Any) -> Any:
        try:
            return action()
        except OSError as exc:
            # Point the failed output at /dev/null, so Python's flush at exit does not fail on it again.
            with contextlib.suppress(OSError, ValueError, AttributeError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), self._out.fileno())
            if isinstance(exc, BrokenPipeError):
                raise _ReaderGone() from None
            message = f"cannot write to standard output ({exc.strerror or exc})"
            raise CommandError(message, exit_codes.UNREACHABLE) from None

    def write(self, text: str) -> int:
        count = self._guard(lambda: self._out.write(text))
        self.flush()  # a full disk shows at the flush: said here, inside the command, not at exit
        return count

    def flush(self) -> None:
        self._guard(self._out.flush)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._out, name)
