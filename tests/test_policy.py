"""The recovery policy (workloads/recovery/policy.py): its checks, its backoff and where its values come from."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest
from recovery_support import info

from workloads.recovery import Action, RecoveryPolicy
from workloads.recovery.classify import decide

pytestmark = pytest.mark.filterwarnings("ignore:ssl=None is deprecated:DeprecationWarning")


def test_the_recovery_policy_rejects_each_bad_value_naming_it():
    def rejects(message: str, **values) -> None:
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            RecoveryPolicy(**values)

    counts = "check interval must be > 0, max restarts and backoff >= 0"
    rejects(counts, check_interval_seconds=0)
    rejects(counts, max_restarts=-1)
    rejects(counts, backoff_seconds=-1)
    rejects("max backoff must be at least the backoff", backoff_seconds=100, max_backoff_seconds=99)
    rejects("pool GPUs must be >= 0", pool_gpus=-1)
    # The edges are allowed: no restarts at all, no backoff, a maximum equal to the backoff.
    never = RecoveryPolicy(max_restarts=0, backoff_seconds=0, max_backoff_seconds=0)
    assert decide(info(exit_code=143), 1, never, 2000.0).action is Action.GIVE_UP
    assert RecoveryPolicy(backoff_seconds=100, max_backoff_seconds=100).backoff(3) == 100


def test_the_backoff_doubling_stops_at_two_to_the_62nd_so_a_long_run_never_overflows():
    # A float times 2**1024 overflows; the cap on the exponent keeps any restart count computable.
    assert RecoveryPolicy(backoff_seconds=1, max_backoff_seconds=1e30).backoff(10_000) == 2.0**62


def test_the_policy_comes_from_the_recovery_section_and_travels_in_the_run_plan_as_plain_values():
    recovery = SimpleNamespace(check_interval_seconds=30, max_restarts=4, backoff_seconds=45.5, max_backoff_seconds=900)
    policy = RecoveryPolicy.from_config(recovery)
    assert policy == RecoveryPolicy(30.0, 4, 45.5, 900.0, pool_gpus=0, resubmit_missing=False)
    values = {"check_interval_seconds": 30.0, "max_restarts": 4, "backoff_seconds": 45.5, "max_backoff_seconds": 900.0}
    assert policy.to_dict() == {**values, "pool_gpus": 0, "resubmit_missing": False}
    submitted = RecoveryPolicy.from_config(recovery, pool_gpus=16, resubmit_missing=True)
    assert submitted.to_dict() == {**values, "pool_gpus": 16, "resubmit_missing": True}
    # Through JSON (run.json) and back; a key it does not know is left out, a missing one is the default.
    assert RecoveryPolicy.from_dict(json.loads(json.dumps(submitted.to_dict()))) == submitted
    assert RecoveryPolicy.from_dict({"max_restarts": 2, "later": 1}) == RecoveryPolicy(max_restarts=2)
    with pytest.raises(ValueError, match="^max backoff must be at least the backoff$"):
        RecoveryPolicy.from_dict({"backoff_seconds": 9, "max_backoff_seconds": 1})
