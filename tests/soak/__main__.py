"""`python -m tests.soak --faults N --seed S [--real-every K] [--no-ray]`: the owner's fault-injection soak
(docs/testing.md). Prints `N faults, M runs, V violations` and exits 1 naming the first violation."""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

from tests.soak.real_ray import REAL_FAULTS
from tests.soak.soak_run import pick_faults, play_run


def soak(faults: int, seed: int, real_every: int, out=sys.stdout) -> list[str]:
    """Inject `faults` faults (every `real_every`-th on the real local Ray head; 0: none); the violations."""
    rng, done, runs, found = random.Random(seed), 0, 0, []
    head = client = None
    try:
        with tempfile.TemporaryDirectory(prefix="soak") as tmp:
            while done < faults:
                work = Path(tmp) / f"run{runs}"
                if real_every and (done + 1) % real_every == 0:
                    if head is None:
                        head, client = _start_head()
                    from tests.soak.real_ray import play_real

                    fault = rng.choice(REAL_FAULTS)
                    found += [f"run {runs} (seed {seed}): {v}" for v in play_real(client, fault, work)]
                    done += 1
                else:
                    chosen = pick_faults(rng, faults - done)
                    count, violations = play_run(seed, runs, chosen, work, is_async=rng.random() < 0.5)
                    found += [f"{v} [faults: {', '.join(chosen)}]" for v in violations]
                    done += len(chosen)
                runs += 1
    finally:
        if head is not None:
            head.stop()
    print(f"{done} faults, {runs} runs, {len(found)} violations", file=out)
    return found


def _start_head():
    from tests.local_ray_head import LocalRayHead
    from workloads import submit

    head = LocalRayHead.start()
    return head, submit.connect(head.address)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.soak", description=__doc__)
    parser.add_argument("--faults", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--real-every", type=int, default=25, help="every K-th fault on a real local Ray head")
    parser.add_argument("--no-ray", action="store_true", help="only the simulated head")
    parser.add_argument("--all", action="store_true", help="list every violation, not only the first")
    args = parser.parse_args(argv)
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
