"""The private Ray head's start (tests/local_ray_head.py), with a stand-in `ray start` that leaves a daemon
in its process group and then hangs, as a slow start does: whatever kills the starting process then, the
head's processes go with it."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

TESTS = Path(__file__).parent


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM, signal.SIGINT], ids=lambda s: s.name)
def test_a_process_killed_while_its_head_starts_leaves_no_head_process(tmp_path, sig):
    marker = tmp_path / "daemon.pid"
    fake_ray = tmp_path / "ray"
    fake_ray.write_text(
        f"#!/bin/sh\n(while :; do sleep 0.1; done) & echo $! > {marker}.tmp; mv {marker}.tmp {marker}; sleep 600\n"
    )
    fake_ray.chmod(0o755)
    # Ctrl-C as an interactive process gets it: a runner started in the background (`cmd &` of a non-interactive
    # shell, nohup) hands its children SIGINT ignored, and Python then installs no handler for it.
    starter = textwrap.dedent(
        f"""
        import signal, sys
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sys.path.insert(0, {str(TESTS)!r})
        import local_ray_head
        local_ray_head.RAY = {str(fake_ray)!r}
        local_ray_head.LocalRayHead._start_once()
        """
    )
    proc = subprocess.Popen([sys.executable, "-c", starter], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    daemon = int(marker.read_text())
    group = os.getpgid(daemon)  # `ray start`'s own, where its daemons stay
    try:
        os.kill(proc.pid, sig)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 6  # the watchdog looks every second
        while alive(daemon) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not alive(daemon), f"the head's daemon {daemon} outlived the process that started it ({sig.name})"
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)  # what a failed test would leave, the stand-in `ray start` too
