"""What the watcher saw, kept on Lustre across its own restarts and the Ray head's: a job that was running and
is then gone is found lost (`LostJob`) and resubmitted.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from workloads import cli_args
from workloads.ledger import _fits, write_quietly
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


_LARGEST = 1e12
"""No count or time of the state comes near it (as the ledger's, `LedgerFile.LARGEST`)."""


class StateFile:
    """What the watcher last saw, in a file written by rename (`<mount>/.nemo-rl-gke/watcher/<stack>.json`)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def load(self, spec_hash: str) -> Optional[Seen]:
        """What the file says of `spec_hash`'s job; None when it says nothing of it, or is not a state file: read
        by the bounded reader (a FIFO or /dev/zero is refused, not waited on or read without end), its JSON strict
        (no NaN, 1e309) and each field of its type (`ledger._fits`, the ledger's shape check)."""
        try:
            data = cli_args.loads_json(cli_args.read_user_file(self.path), _LARGEST)
            if not isinstance(data, dict):
                return None
            values = {f.name: data[f.name] for f in dataclasses.fields(Seen) if f.name in data}
            seen = Seen(**values)
        except (OSError, ValueError, TypeError):  # UnreadableFile is a ValueError; a field missing: TypeError
            return None
        if not _fits(dataclasses.asdict(seen), Seen):
            return None
        return seen if seen.spec_hash == spec_hash else None

    def save(self, seen: Seen) -> None:
        write_quietly(self.path, seen.to_json() + "\n")
