"""`python -m tests.soak --faults N --seed S [--real-every K] [--no-ray]`: the owner's fault-injection soak
(docs/testing.md). Prints `N faults, M runs, V violations` and exits 1 naming the first violation."""

from __future__ import annotations

import argparse
import atexit
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NoReturn

from tests.soak.real_ray import REAL_FAULTS
from tests.soak.soak_run import SpecCache, pick_faults, play_run


def soak(faults: int, seed: int, real_every: int, out=sys.stdout) -> list[str]:
    """Inject `faults` faults (every `real_every`-th on the real local Ray head; 0: none); the violations."""
    rng, done, runs, found = random.Random(seed), 0, 0, []
    head = client = None
    try:
        with tempfile.TemporaryDirectory(prefix="soak") as tmp:
            while done < faults:
                work = _lustre()  # each run on a fresh Lustre, at one path: the job builder's specs are reused
                shutil.rmtree(work, ignore_errors=True)
                if real_every and (done + 1) % real_every == 0:
                    if head is None:
                        head, client = _start_head()
                    from tests.soak.real_ray import play_real

                    fault = rng.choice(REAL_FAULTS)
                    found += [
                        f"run {runs} (seed {seed}): {v}" for v in play_real(client, fault, Path(tmp) / f"real{runs}")
                    ]
                    done += 1
                else:
                    chosen = pick_faults(rng, faults - done)
                    is_async = rng.random() < 0.5
                    try:
                        _, violations = play_run(seed, runs, chosen, work, is_async=is_async, specs=_SPECS)
                    except Exception as err:  # noqa: BLE001 (the owner's code raised out of the run: a violation)
                        violations = [f"run {runs} (seed {seed}): raised {type(err).__name__}: {err}"]
                    found += [f"{v} [faults: {', '.join(chosen)}]" for v in violations]
                    done += len(chosen)
                runs += 1
    finally:
        if head is not None:
            head.stop()
    print(f"{done} faults, {runs} runs, {len(found)} violations", file=out)
    return found


_SPECS: SpecCache = {}
_LUSTRE: list[Path] = []


def _lustre() -> Path:
    """The soak's Lustre mount, one per process (removed at its exit), in memory where there is a tmpfs: a run
    makes and removes hundreds of directories, 3 ms each on the two-core machine's disk, microseconds there."""
    if not _LUSTRE:
        shm = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
        _LUSTRE.append(Path(tempfile.mkdtemp(prefix="soak-lustre", dir=shm)) / "lustre")
        atexit.register(shutil.rmtree, _LUSTRE[0].parent, True)
    return _LUSTRE[0]


def _start_head():
    from tests.local_ray_head import LocalRayHead
    from workloads import submit

    head = LocalRayHead.start()
    return head, submit.connect(head.address)


MAX_FAULTS = 10_000
"""About 15 minutes of soak on the two-core machine (300 take ~25 s)."""
MAX_SEED = 2**32 - 1


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        """One line, no usage: what is wrong and what is allowed (a value's control characters escaped)."""
        line = message.encode("ascii", "backslashreplace").decode().replace("\n", "\\n").replace("\r", "\\r")
        if "unrecognized arguments" in message:
            line += f"; allowed: {', '.join(FLAGS)}"
        print(f"error: {line}", file=sys.stderr)
        sys.exit(2)


def _bounded(low: int, high: int, meaning: str = "") -> Any:
    def parse(text: str) -> int:
        allowed = f"allowed: an integer from {low} to {high}{meaning}"
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text[:40]!r} is not an integer; {allowed}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is out of range; {allowed}")
        return value

    return parse


FLAGS = ("--faults", "--seed", "--real-every", "--no-ray", "--all")


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(prog="python -m tests.soak", description=__doc__, allow_abbrev=False)
    parser.add_argument("--faults", type=_bounded(1, MAX_FAULTS), default=300)
    parser.add_argument("--seed", type=_bounded(0, MAX_SEED), default=1)
    parser.add_argument(
        "--real-every",
        type=_bounded(0, MAX_FAULTS, " (0: none on the real head)"),
        default=25,
        help="every K-th fault on a real local Ray head",
    )
    parser.add_argument("--no-ray", action="store_true", help="only the simulated head")
    parser.add_argument("--all", action="store_true", help="list every violation, not only the first")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so that a `finally` stops the Ray head at once
    started = time.monotonic()
    found = soak(args.faults, args.seed, 0 if args.no_ray else args.real_every)
    print(f"wall time {time.monotonic() - started:.1f}s")
    if found:
        for line in found if args.all else found[:1]:
            print(f"violation: {line}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
