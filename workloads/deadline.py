"""An overall deadline for one blocking call (an HTTP request). A read timeout bounds each wait for a byte, not
the whole answer: a server that trickles a byte every few seconds would hold a request open without end. Standard
library only (the watcher ships it).
"""

from __future__ import annotations

import threading
from typing import Callable, TypeVar

T = TypeVar("T")


class DeadlinePassed(TimeoutError):
    """The call had not ended after its deadline (an OSError, as the network errors around it)."""


def within(seconds: float, call: Callable[[], T], what: str = "the request") -> T:
    """`call()`, or `DeadlinePassed` after `seconds`. The call runs on a daemon thread, left to its own timeouts
    when abandoned (nothing can interrupt a blocked read in Python); it never keeps the process from exiting."""
    result: list[T] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            result.append(call())
        except BaseException as exc:  # noqa: BLE001 (handed to the caller's thread, whatever it is)
            failure.append(exc)

    worker = threading.Thread(target=run, name="deadline", daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise DeadlinePassed(f"{what} got no whole answer within {seconds:g}s")
    if failure:
        raise failure[0]
    return result[0]
