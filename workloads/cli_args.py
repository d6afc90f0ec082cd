"""Command-line argument types: every bad flag value becomes one line naming what is allowed.

Shared by the day-2 CLI (`python -m jobctl`), the in-cluster watcher (`python -m workloads.watcher`),
the offline plan (`python -m infra.plan`) and the doctor (`python -m tools.doctor`); it imports only
the standard library, so the watcher can ship it.
"""

from __future__ import annotations

import argparse
import math
import re
import typing
from typing import Callable, Optional

RUN = ".venv/bin/python -m"
"""How a printed command starts (stack outputs, hints in messages): the checkout's venv, from the
repository root, so that it works without activating the venv (the README says so)."""


class UsageError(Exception):
    """A bad command line; the entry point prints it as one line (exit 2), like every other refusal."""


class OneLineParser(argparse.ArgumentParser):
    """An `ArgumentParser` that raises `UsageError` instead of printing usage and exiting."""

    def error(self, message: str) -> "typing.NoReturn":
        raise UsageError(message)


def whole_number(low: int, high: Optional[int], allowed: str) -> Callable[[str], int]:
    """An argparse type: a whole number from `low` to `high` (no upper bound when None)."""

    def parse(text: str) -> int:
        try:
            value: Optional[int] = int(text)
        except ValueError:
            value = None
        if value is None or value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"{text!r} is not allowed; allowed: {allowed}")
        return value

    return parse


positive_int = whole_number(1, None, "a positive whole number")
port = whole_number(0, 65535, "0 (any free port) to 65535")


def seconds(positive: bool, maximum: Optional[float] = None) -> Callable[[str], float]:
    """A finite number of seconds, above 0 (`positive`) or at least 0, and at most `maximum` when given;
    nan, inf and negatives are refused."""
    what = "a number of seconds above 0" if positive else "a number of seconds, 0 or more"
    if maximum is not None:
        what += f", at most {maximum:g}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        too_big = maximum is not None and value > maximum
        if not math.isfinite(value) or value < 0 or (positive and value == 0) or too_big:
            raise argparse.ArgumentTypeError(f"{text!r} is not allowed; allowed: {what}")
        return value

    return parse


def _shown(text: str) -> str:
    return text if len(text) <= 40 else text[:37] + "..."


def stack_name(text: str) -> str:
    # Pulumi's rule (pulumi/pulumi sdk/go/common/tokens/stack_name.go ParseStackName).
    if not 1 <= len(text) <= 100 or not all(c.isascii() and (c.isalnum() or c in "_.-") for c in text):
        raise argparse.ArgumentTypeError(
            f"{_shown(text)!r} ({len(text)} characters) is not a Pulumi stack name; "
            "allowed: 1-100 letters, digits, '-', '_' or '.'"
        )
    return text


def namespace(text: str) -> str:
    if not (len(text) <= 63 and re.fullmatch(r"[a-z]([a-z0-9-]*[a-z0-9])?", text)):
        raise argparse.ArgumentTypeError(
            f"{_shown(text)!r} is not a namespace; allowed: 1-63 lowercase letters, digits and hyphens, starting "
            "with a letter"
        )
    return text
