"""Command-line argument types, shared by the CLI, the watcher, the offline plan and the doctor: every bad
value is one line naming what is allowed. Standard library only (the watcher ships it).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import stat
import typing
import unicodedata
from typing import Any, Callable, Optional

MAX_USER_FILE_BYTES = 1 << 20
"""The most a file named on a command line (or a stack file) may hold; every real one is far smaller."""

RUN = ".venv/bin/python -m"
"""How a printed command starts: the checkout's venv, from the repository root."""


class UsageError(Exception):
    """A bad command line: one line, exit 2."""


class OneLineParser(argparse.ArgumentParser):
    """An `ArgumentParser` that raises `UsageError` instead of printing usage and exiting."""

    def error(self, message: str) -> "typing.NoReturn":
        raise UsageError(shown_line(message))  # a token typed as a flag's value is not repeated


def whole_number(low: int, high: Optional[int], allowed: str) -> Callable[[str], int]:

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
    """A finite number of seconds, above 0 (`positive`) or at least 0, at most `maximum`."""
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


def file_path(text: str) -> str:
    """`''` (an unset shell variable) is refused rather than read as "no flag"."""
    if not text.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not allowed; allowed: a file path (is a shell variable unset?)")
    return text


def _shown(text: str) -> str:
    return text if len(text) <= 40 else text[:37] + "..."


SUBMISSION_ID_MAX = 128
"""Longer than any id this program makes (`job_types`: an 80-character slug, 8 hex, `-rN`) or Ray does
(`raysubmit_` and 16 characters)."""


def submission_id(text: str) -> str:
    """A Ray submission id as `--job` takes it: it becomes a URL path part (`/api/jobs/<id>`), so `..`, `/`, `?`
    are refused, not sent; `''` (an unset variable) is refused, not read as "the stack's newest job" (which `stop`
    would stop); a credential-shaped value is named as such and never repeated."""
    allowed = (
        f"allowed: a submission id (1-{SUBMISSION_ID_MAX} letters, digits, '-', '_' or '.', not starting with '.'), "
        f"as `{RUN} jobctl list` shows them; leave --job out for the stack's newest job"
    )
    if not text.strip():
        raise argparse.ArgumentTypeError(f"{text!r} is not allowed (is a shell variable unset?); {allowed}")
    if looks_like_credential(text):
        raise argparse.ArgumentTypeError(f"{CREDENTIAL_SHOWN} is not allowed; {allowed}")
    if len(text) > SUBMISSION_ID_MAX or not re.fullmatch(r"[A-Za-z0-9_-][A-Za-z0-9_.-]*", text, re.ASCII):
        raise argparse.ArgumentTypeError(f"{_shown(text)!r} ({len(text)} characters) is not allowed; {allowed}")
    return text


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


class UnreadableFile(ValueError):
    """A file the user named cannot be read as a small regular file (the caller names it)."""


def _file_kind(mode: int) -> str:
    for test, what in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a named pipe (FIFO)"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return what
    return "not a regular file"


def read_user_file(path: "str | os.PathLike[str]", limit: int = MAX_USER_FILE_BYTES) -> bytes:
    """The one reader of files a user names: a regular file of at most `limit` bytes, else `UnreadableFile`; the
    type is checked before a non-blocking open (a FIFO would wait) and at most `limit` + 1 bytes are read."""
    allowed = f"allowed: a regular file of at most {limit} bytes"
    try:
        status = os.stat(path)
    except FileNotFoundError:
        raise UnreadableFile(f"not found; {allowed}") from None
    except OSError as err:  # a loop of links, a parent that is a file, a name too long, no permission
        raise UnreadableFile(f"cannot be read ({err.strerror or err}); {allowed}") from None
    if not stat.S_ISREG(status.st_mode):
        raise UnreadableFile(f"is {_file_kind(status.st_mode)}; {allowed}")
    if status.st_size > limit:
        raise UnreadableFile(f"{status.st_size} bytes; {allowed}")
    try:
        # O_NONBLOCK: the name may have been swapped for a FIFO since the stat; then open returns at once.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise UnreadableFile(f"is {_file_kind(os.fstat(handle.fileno()).st_mode)}; {allowed}")
            data = handle.read(limit + 1)
    except OSError as err:  # no read permission, an I/O error
        raise UnreadableFile(f"cannot be read ({err.strerror or err}); {allowed}") from None
    if len(data) > limit:
        raise UnreadableFile(f"more than {limit} bytes; {allowed}")
    return data


# The project's one credential detector: a known token prefix, a URL with a password, 32+ hex digits with
# digits and letters both (a W&B key is 40), or 32+ letters and digits mixing upper, lower case and digits.
_CREDENTIAL_VALUE = re.compile(
    r"hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_\w{20,}|sk-[A-Za-z0-9_\-]{20,}|AKIA[0-9A-Z]{16}"
    r"|AIza[0-9A-Za-z_\-]{35}|xox[abprs]-[A-Za-z0-9\-]{10,}|eyJ[A-Za-z0-9_\-]{10,}\.[A-Za-z0-9_\-]{10,}|-----BEGIN"
    r"|://[^/@:]*:[^/@]+@"
)
_HEX_RUN = re.compile(r"[0-9a-fA-F]{32,}")
_RANDOM_RUN = re.compile(r"[A-Za-z0-9]{32,}")
_IMAGE_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}\b")
CREDENTIAL_SHOWN = "a value that looks like a credential (not shown)"


def looks_like_credential(value: str) -> bool:
    """Whether `value` has the shape of a token or key (the rule above); an image digest is not one."""
    value = _IMAGE_DIGEST.sub("@sha256:digest", value)
    if _CREDENTIAL_VALUE.search(value):
        return True
    if any(re.search(r"[0-9]", run) and re.search(r"[a-fA-F]", run) for run in _HEX_RUN.findall(value)):
        return True
    return any(
        re.search(r"[a-z]", run) and re.search(r"[A-Z]", run) and re.search(r"[0-9]", run)
        for run in _RANDOM_RUN.findall(value)
    )


_QUOTED = re.compile(r"'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"")


def without_credentials(text: str) -> str:
    """`text` with each quoted value, then each word, that looks like a credential replaced by `CREDENTIAL_SHOWN`."""
    if not looks_like_credential(text):
        return text
    text = _QUOTED.sub(lambda m: CREDENTIAL_SHOWN if looks_like_credential(m.group()) else m.group(), text)
    return re.sub(r"[^\s,;()]+", lambda m: CREDENTIAL_SHOWN if looks_like_credential(m.group()) else m.group(), text)


MAX_LINE = 2000
"""The most characters of one message line: a value a user pasted (100,000 characters) is cut, not printed whole."""


def one_line(text: str, limit: int = MAX_LINE) -> str:
    """`text` as one bounded line: each control character (a newline would forge a second `error:` line, an
    escape sequence would rewrite the terminal) and each Unicode line or paragraph separator shown as its escape,
    then cut to `limit` characters, saying how long it was."""
    shown = "".join(
        repr(c)[1:-1]
        if unicodedata.category(c) in ("Cc", "Zl", "Zp")
        or c in "\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
        else c
        for c in text
    )
    return shown if len(shown) <= limit else f"{shown[: limit - 40]}... ({len(shown)} characters, cut)"


def shown_line(text: str, limit: int = MAX_LINE) -> str:
    """The one sanitiser of a message that may hold what a user or a server sent: no credential, one line, bounded."""
    return one_line(without_credentials(text), limit)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows; allowed: finite numbers")


def loads_json(data: "bytes | str", largest: Optional[float] = None) -> Any:
    """JSON as RFC 8259 has it: `NaN`, `Infinity` and a float that overflows (`1e309`) are refused (Python's
    parser takes them; they would end in a traceback where a time or a price is used), so are an integer of more
    than 4300 digits and nesting past the recursion limit (Python's own limits), and with `largest` any number
    beyond it (a time of 1e300 has no calendar date): all as a one-line `ValueError`."""

    def number(text: str, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError(f"{_shown(text)} is beyond a 64-bit float; allowed: finite numbers")
        if largest is not None and abs(value) > largest:
            raise ValueError(f"{_shown(text)} is out of range; allowed: numbers up to {largest:g}")
        return value

    try:
        return json.loads(
            data,
            parse_constant=_refuse_constant,
            parse_float=lambda text: number(text, float(text)),
            parse_int=lambda text: int(number(text, int(text))),
        )
    except RecursionError:
        raise ValueError("nested too deeply; allowed: JSON of at most a few hundred levels") from None
