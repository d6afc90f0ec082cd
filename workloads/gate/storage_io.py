"""The gate's storage I/O on one node: parallel fsynced writes and reads with the page cache dropped; each
node reads what another wrote (`workloads.gate.driver`).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

BLOCK = 8 << 20


def parallel_io(directory: Path, node_rank: int, size: int, streams: int, *, write: bool) -> dict[str, Any]:
    """Write (or read) `size` bytes as `streams` files in parallel; the seconds to the last stream's end."""
    per_stream = max(size // streams // BLOCK, 1) * BLOCK
    # One slot per stream, so the report lists errors in stream order whatever order the threads end in.
    errors: list[str | None] = [None] * streams
    block = os.urandom(BLOCK)  # incompressible, in case the filesystem compresses

    def one(k: int) -> None:
        path = directory / f"node{node_rank}-{k}.bin"
        try:
            if write:
                with open(path, "wb", buffering=0) as f:
                    for _ in range(per_stream // BLOCK):
                        f.write(block)
                    os.fsync(f.fileno())
                    # Drop the pages this node cached, so no later read is served from memory.
                    _drop_cache(f.fileno())
            else:
                with open(path, "rb", buffering=0) as f:
                    _drop_cache(f.fileno())
                    got = 0
                    while chunk := f.read(BLOCK):
                        got += len(chunk)
                if got != per_stream:
                    errors[k] = f"{path.name}: read {got} of {per_stream} bytes"
        except OSError as err:
            errors[k] = f"{path.name}: {err.strerror or err}"

    directory.mkdir(parents=True, exist_ok=True)
    threads = [threading.Thread(target=one, args=(k,)) for k in range(streams)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - start
    return {
        "bytes": per_stream * streams,
        "seconds": seconds,
        "errors": [e for e in errors if e is not None],
        "host": socket.gethostname(),
    }


def _drop_cache(fd: int) -> None:
    if hasattr(os, "posix_fadvise"):
        with contextlib.suppress(OSError):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
