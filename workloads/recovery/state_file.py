"""What the watcher saw, kept on Lustre across its own restarts and the Ray head's: a job that was running and
is then gone is found lost (`LostJob`) and resubmitted.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from workloads.ledger import write_quietly
from workloads.recovery.classify import LOST


@dataclass(frozen=True)
class LostJob:
    """An attempt the cluster forgot (a head restarted without GCS fault tolerance)."""

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
    spec_hash: str
    submission_id: str
    attempt: int
    restarts: int
    capacity_waits: int = 0
    status: str = ""
    final: bool = False
    lost_since: Optional[float] = None

    def to_json(self) -> str:
        data = dataclasses.asdict(self)
        data.pop("lost_since")
        return json.dumps(data, sort_keys=True)


class StateFile:
    """What the watcher last saw, in a file written by rename (`<mount>/.nemo-rl-gke/watcher/<stack>.json`)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def load(self, spec_hash: str) -> Optional[Seen]:
        try:
            data = json.loads(self.path.read_text())
            seen = Seen(**{f.name: data[f.name] for f in dataclasses.fields(Seen) if f.name in data})
        except (OSError, ValueError, TypeError):
            return None
        return seen if seen.spec_hash == spec_hash else None

    def save(self, seen: Seen) -> None:
        write_quietly(self.path, seen.to_json() + "\n")
