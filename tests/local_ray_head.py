"""A real, private Ray head on loopback: the job-submission tests' (tests/ray_head.py) and the soak's (tests/soak).

Started with `ray start --head` from this venv, every port chosen free and bound to 127.0.0.1, its own
temp dir, and its own process group. `stop` kills that process group (and anything else still holding
the temp dir), never `ray stop`, which would stop every Ray process of the user, including other
sessions' heads. A watchdog does the same if the starting process dies without cleaning up, so no head
outlives it.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

RAY = str(Path(sys.executable).with_name("ray"))
START_TIMEOUT = 120.0
START_DEADLINE = 480.0
"""Seconds `LocalRayHead.start` keeps retrying a failed start (an idle machine needs one, ~10 s)."""


def free_ports(count: int) -> list[int]:
    """Distinct free TCP ports on 127.0.0.1 (held open together so they cannot repeat)."""
    socks = [socket.socket() for _ in range(count)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class HeadStartFailed(Exception):
    """No head started within the attempts and the deadline."""


class _StartFailed(Exception):
    """One attempt at starting a head failed (its processes are already stopped)."""


@dataclass
class LocalRayHead:
    address: str
    """Dashboard URL, http://127.0.0.1:<port>."""
    temp_dir: str
    pgid: int
    watchdog: subprocess.Popen | None = None

    @classmethod
    def start(cls, attempts: int = 3, deadline_s: float = START_DEADLINE) -> "LocalRayHead":
        """Start a head; retried with fresh ports (a port found free can be taken before Ray binds it)
        at least `attempts` times and for as long as `deadline_s` allows: `ray start` gives the raylet a
        fixed 30 s to register with the GCS (ray/_private/node.py `raylet_start_wait_time_s`, Ray 2.60.0),
        which three tries in a row missed at a load average of 39 on two cores (docs/testing.md)."""
        problems = []
        give_up = time.monotonic() + deadline_s
        while len(problems) < attempts or time.monotonic() < give_up:
            try:
                return cls._start_once()
            except _StartFailed as err:
                problems.append(str(err))
        joined = "\n---\n".join(problems)
        raise HeadStartFailed(f"a local Ray head did not start in {len(problems)} attempts:\n{joined}")

    @classmethod
    def _start_once(cls) -> "LocalRayHead":
        # Short path: Ray puts unix sockets under it and socket paths are limited to ~107 bytes.
        temp_dir = tempfile.mkdtemp(prefix="rt", dir="/tmp")
        gcs, dash, client, agent_http, agent_grpc, metrics, env_agent, node_mgr, obj_mgr = free_ports(9)
        env = dict(os.environ)
        env.pop("RAY_ADDRESS", None)
        env.update(
            RAY_USAGE_STATS_ENABLED="0",
            # Ray replaces 127.0.0.1 by the host's outward IP unless it believes it runs a
            # single-machine cluster; this keeps every component on loopback.
            RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0",
            # CPU the tests never use, on a machine of two cores where every Ray job's start is CPU-bound
            # (measured: 1.85 s instead of 2.3 s of CPU per `echo` job, a third less while idle). No test
            # reads Ray's own metrics; idle workers prestarted for one job are of no use to the next
            # (a worker serves one job). Names: src/ray/common/ray_config_def.h (Ray 2.60.0).
            RAY_enable_metrics_collection="0",
            RAY_enable_worker_prestart="0",
            RAY_prestart_worker_first_driver="0",
        )
        cmd = [
            RAY,
            "start",
            "--head",
            "--node-ip-address=127.0.0.1",
            f"--port={gcs}",
            "--dashboard-host=127.0.0.1",
            f"--dashboard-port={dash}",
            "--num-cpus=2",
            f"--temp-dir={temp_dir}",
            "--include-dashboard=true",
            f"--ray-client-server-port={client}",
            f"--dashboard-agent-listen-port={agent_http}",
            f"--dashboard-agent-grpc-port={agent_grpc}",
            f"--metrics-export-port={metrics}",
            f"--runtime-env-agent-port={env_agent}",
            f"--node-manager-port={node_mgr}",
            f"--object-manager-port={obj_mgr}",
            "--disable-usage-stats",
            # The log monitor streams worker output to drivers; the tests read job logs, which the job
            # supervisor writes itself. Off: a third less idle CPU per head (0.07 -> 0.045 of a core).
            "--include-log-monitor=false",
        ]
        # A new session: every daemon `ray start` leaves behind shares this process group.
        proc = subprocess.Popen(
            cmd, env=env, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        head = cls(address=f"http://127.0.0.1:{dash}", temp_dir=temp_dir, pgid=proc.pid)
        # The watchdog from the start, not once `ray start` returns: the daemons it has already left in the group
        # outlived a soak killed while it waited (SIGKILL or SIGTERM: no `finally` runs then).
        head._start_watchdog()
        try:
            output, _ = proc.communicate(timeout=START_TIMEOUT)
        except subprocess.TimeoutExpired:
            head.stop()
            raise _StartFailed(f"`ray start` did not return within {START_TIMEOUT:g}s") from None
        except BaseException:  # Ctrl-C, or a signal made an exception: stop now rather than at the watchdog's look
            head.stop()
            raise
        if proc.returncode != 0:
            head.stop()
            raise _StartFailed(f"`ray start` failed ({proc.returncode}):\n{output[-2000:]}")
        try:
            head._wait_ready()
        except _StartFailed:
            raise  # stopped already
        except BaseException:
            head.stop()
            raise
        return head

    def _start_watchdog(self) -> None:
        """Kill the head's process group once this (test) process is gone, however it ended."""
        script = (
            f"while kill -0 {os.getpid()} 2>/dev/null; do sleep 1; done; "
            f"kill -KILL -{self.pgid} 2>/dev/null; sleep 1; kill -KILL -{self.pgid} 2>/dev/null; "
            f"rm -rf {shlex.quote(self.temp_dir)}"
        )
        self.watchdog = subprocess.Popen(
            ["/bin/sh", "-c", script], start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            try:
                for path in ("/api/version", "/api/jobs/"):
                    with urllib.request.urlopen(self.address + path, timeout=2) as resp:
                        resp.read()
                return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise _StartFailed(f"the Ray dashboard at {self.address} did not come up within {START_TIMEOUT:g}s")

    def _pids_using_temp_dir(self) -> list[int]:
        """Processes naming the temp dir on their command line, except the watchdog (it names it too)."""
        spare = {os.getpid(), self.watchdog.pid if self.watchdog is not None else -1}
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) in spare:
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if self.temp_dir.encode() in cmdline:
                found.append(int(entry.name))
        return found

    def stop(self) -> None:
        """Kill this head's processes only, then remove its temp dir and end the watchdog.

        SIGKILL at once, not SIGTERM first: nothing of a test head needs a clean shutdown, and the GCS
        server takes seconds over a SIGTERM. Those seconds were fatal: xdist interrupts a worker's
        cleanup (a KeyboardInterrupt from execnet) shortly after the worker reports its session over, and a
        stop still waiting on a SIGTERM left the GCS server running for good. The watchdog is left alone
        until the end, so an interrupted stop is still finished by it."""
        for _ in range(3):
            try:
                os.killpg(self.pgid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            for pid in self._pids_using_temp_dir():
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + 2.0
            while time.monotonic() < deadline and (self._group_alive() or self._pids_using_temp_dir()):
                time.sleep(0.05)
            if not self._group_alive() and not self._pids_using_temp_dir():
                break
        shutil.rmtree(self.temp_dir, ignore_errors=True)
        if self.watchdog is not None:
            self.watchdog.kill()
            self.watchdog.wait()

    def _group_alive(self) -> bool:
        try:
            os.killpg(self.pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        # Zombies keep the group "alive" until reaped; count only live members.
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            state, pgrp = fields[0], int(fields[2])
            if pgrp == self.pgid and state != "Z":
                return True
        return False
