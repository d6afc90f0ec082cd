"""The exit codes the CLI and the watcher share (workloads/exit_codes.py): `run`, the end of both `main`s."""

from __future__ import annotations

import io

import pytest

from workloads import exit_codes
from workloads.cli_args import UsageError


def run(body):
    err = io.StringIO()
    return exit_codes.run(body, err), err.getvalue()


def test_what_the_body_returns_is_the_exit_code_and_nothing_is_printed():
    assert run(lambda: exit_codes.JOB_FAILED) == (exit_codes.JOB_FAILED, "")


def raises(exc: BaseException):
    def body() -> int:
        raise exc

    return body


@pytest.mark.parametrize(
    "exc,code",
    [
        (exit_codes.CommandError("--spec-file x: no such file"), exit_codes.USAGE),
        (exit_codes.CommandError("the dashboard is down", exit_codes.UNREACHABLE), exit_codes.UNREACHABLE),
        (UsageError("--port: not a number"), exit_codes.USAGE),
    ],
)
def test_an_error_the_user_can_act_on_is_one_line_and_its_code(exc, code):
    assert run(raises(exc)) == (code, f"error: {exc}\n")


def test_ctrl_c_is_130_without_a_line():
    assert run(raises(KeyboardInterrupt())) == (130, "")


def test_a_bug_raises_instead_of_becoming_an_exit_code():
    with pytest.raises(ZeroDivisionError):
        run(raises(ZeroDivisionError("division by zero")))
