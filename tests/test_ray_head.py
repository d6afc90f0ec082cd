"""The test Ray head's teardown (tests/ray_head.py), on stand-in processes instead of a real head.

A head's processes are whatever `ray start` leaves in its process group, plus anything naming its
temp dir. The stand-ins here are shells that ignore SIGTERM, as the GCS server does for seconds.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
import time

from ray_head import LocalRayHead, ray_heads_first


def stand_in_head() -> tuple[LocalRayHead, list[int]]:
    """A process group of SIGTERM-deaf shells naming a fresh temp dir, as a head's processes do: the
    group's leader and the shell it forked (and their `sleep`s). Returns the head and the shells' pids."""
    temp_dir = tempfile.mkdtemp(prefix="rt", dir="/tmp")
    loop = "while :; do sleep 0.1; done"
    script = f"trap '' TERM; : {temp_dir}; ({loop}) >/dev/null & echo $!; {loop}"
    leader = subprocess.Popen(
        ["/bin/sh", "-c", script], start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    forked = int(leader.stdout.readline())
    return LocalRayHead(address="http://127.0.0.1:1", temp_dir=temp_dir, pgid=leader.pid), [leader.pid, forked]


def command_line(pid: int) -> bytes:
    """The process's command line, once it has one: a child read right after its fork is still blank."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmdline = f.read()
        if cmdline:
            return cmdline
        time.sleep(0.01)
    raise AssertionError(f"process {pid} had no command line within 30 s")


def gone(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def test_stop_kills_processes_that_ignore_sigterm_removes_the_temp_dir_and_ends_the_watchdog():
    head, pids = stand_in_head()
    head._start_watchdog()
    started = time.monotonic()
    head.stop()
    assert time.monotonic() - started < 4, "stop waited on a SIGTERM grace (the old one was 5 s)"
    assert all(gone(p) for p in pids), f"stop left the stand-in head's processes {pids} running"
    assert not os.path.exists(head.temp_dir)
    assert head.watchdog.poll() is not None


def test_the_watchdog_is_spared_by_the_sweep_of_the_temp_dir_until_stop_ends():
    head, pids = stand_in_head()
    try:
        head._start_watchdog()
        # Its command line names the temp dir (it removes it), yet it is not one of the head's processes.
        assert head.temp_dir.encode() in command_line(head.watchdog.pid)
        assert head.watchdog.pid not in head._pids_using_temp_dir()
        assert set(pids) <= set(head._pids_using_temp_dir())
    finally:
        head.stop()


def test_a_head_whose_owner_dies_without_stopping_it_is_killed_by_the_watchdog(tmp_path):
    # The owner starts the stand-in head and its watchdog, then exits at once, as a worker killed by
    # xdist or a timeout would: no stop() runs.
    owner = textwrap.dedent(
        f"""
        import sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        from test_ray_head import stand_in_head
        head, pids = stand_in_head()
        head._start_watchdog()
        print(head.temp_dir, *pids, flush=True)
        """
    )
    out = subprocess.run([sys.executable, "-c", owner], capture_output=True, text=True, timeout=60, check=True)
    temp_dir, *pids = out.stdout.split()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (all(gone(int(p)) for p in pids) and not os.path.exists(temp_dir)):
        time.sleep(0.1)
    assert all(gone(int(p)) for p in pids), f"the watchdog left the stand-in head's processes {pids} running"
    assert not os.path.exists(temp_dir)


def test_the_ray_tests_open_the_first_two_workers_shares_in_turns_and_the_rest_keep_their_order():
    items = [f"t{i}" for i in range(30)]
    ray = [items[i] for i in (3, 4, 10, 11, 20, 29)]  # the same objects, as pytest's items are
    ordered = ray_heads_first(items, ray, workers=3)
    # worksteal's first deal: three contiguous shares of 10.
    assert ordered[:10] == ["t3", "t10", "t20", "t0", "t1", "t2", "t5", "t6", "t7", "t8"]
    assert ordered[10:20] == ["t4", "t11", "t29", "t9", "t12", "t13", "t14", "t15", "t16", "t17"]
    assert ordered[20:] == ["t18", "t19", "t21", "t22", "t23", "t24", "t25", "t26", "t27", "t28"]
    assert sorted(ordered) == sorted(items)


def test_more_ray_tests_than_a_share_still_keeps_every_test_once():
    items = [f"t{i}" for i in range(9)]
    ordered = ray_heads_first(items, items[:8], workers=3)
    assert ordered == ["t0", "t2", "t4", "t6", "t1", "t3", "t5", "t7", "t8"]
