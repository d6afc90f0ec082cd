"""What the watcher saw, kept across its own restarts and the Ray head's (`Seen`, `StateFile`).

A head restarted without GCS fault tolerance forgets every job; a watcher restarted with it (same
node drained, same eviction) forgets what it saw too, unless it kept it: with a state file (on Lustre
in the cluster) it reloads the last attempt, its counts and whether it had ended, and a job that was
running is then found lost (`LostJob`) and resubmitted.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from workloads.recovery.classify import LOST


@dataclass(frozen=True)
class LostJob:
    """What the watcher reports for an attempt the cluster forgot (a restarted head without GCS FT)."""

    submission_id: str
    end_time: int
    status: str = "FAILED"
    error_type: str = LOST
    driver_exit_code: Optional[int] = None
    start_time: Optional[int] = None

    @property
    def message(self) -> str:
        return f"the cluster no longer knows job {self.submission_id} (the Ray head restarted?)"


@dataclass
class Seen:
    """The newest attempt the watcher saw, and whether it had ended for good (persisted by `StateFile`)."""

    spec_hash: str
    submission_id: str
    attempt: int
    restarts: int
    capacity_waits: int = 0
    status: str = ""
    final: bool = False
    """It succeeded, was stopped, or the watcher gave up on it: nothing to resubmit if it is gone."""
    lost_since: Optional[float] = None

    def to_json(self) -> str:
        data = dataclasses.asdict(self)
        data.pop("lost_since")
        return json.dumps(data, sort_keys=True)


class StateFile:
    """What the watcher last saw, in a file that outlives the watcher's pod and the Ray head.

    In the cluster it is on Lustre (`<mount>/.nemo-rl-gke/watcher/<stack>.json`): a Ray head restarted
    without GCS fault tolerance forgets its jobs, and a watcher restarted with it (same node drained)
    forgets what it saw, but Lustre keeps both this file and the checkpoints a resubmission resumes
    from, for exactly as long as the stack lives. Written by rename, so a reader never sees half a file.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def load(self, spec_hash: str) -> Optional[Seen]:
        """The recorded attempt of `spec_hash`, or None (no file, another spec's, or unreadable)."""
        try:
            data = json.loads(self.path.read_text())
            seen = Seen(**{f.name: data[f.name] for f in dataclasses.fields(Seen) if f.name in data})
        except (OSError, ValueError, TypeError):
            return None
        return seen if seen.spec_hash == spec_hash else None

    def save(self, seen: Seen) -> None:
        """Record `seen`; a failed write is ignored (the watcher keeps working from memory)."""
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(seen.to_json() + "\n")
            os.replace(tmp, self.path)
