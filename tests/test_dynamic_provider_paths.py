"""Dynamic providers are pickled into every stack's state by module path (pulumi/pulumi
sdk/python/lib/pulumi/dynamic/dynamic.py `serialize_provider`). Providers pickled by an earlier
version of this program must still load, or `pulumi destroy` of its stacks fails."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import ROOT

PICKLED = json.loads((ROOT / "tests" / "reference" / "pickled_providers.json").read_text())["providers"]

# What Pulumi's dynamic provider process does with the state's `__provider` (pulumi/dynamic/__main__.py):
# base64, then dill.loads, with the project root as the working directory.
LOAD = """
import base64, sys
import dill
provider = dill.loads(base64.b64decode(sys.stdin.read()))
cls = type(provider)
methods = ("create", "read", "diff", "update", "delete")
print(f"{cls.__module__}.{cls.__qualname__}", *sorted(m for m in methods if callable(getattr(provider, m, None))))
"""


@pytest.mark.parametrize("path", sorted(PICKLED))
def test_a_provider_pickled_by_an_earlier_version_still_loads(path):
    proc = subprocess.run(
        [sys.executable, "-c", LOAD], input=PICKLED[path], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, f"{path}: {proc.stderr.strip().splitlines()[-1:]}"
    assert proc.stdout.split() == [path, "create", "delete", "diff", "read", "update"]


def test_todays_providers_pickle_to_the_same_module_paths():
    from pulumi.dynamic.dynamic import serialize_provider

    from infra.lustre_guard import LustreGuardProvider
    from infra.weights_import import WeightsImportProvider
    from workloads.hook import JobSubmissionProvider

    assert serialize_provider(JobSubmissionProvider()) == PICKLED["workloads.hook.JobSubmissionProvider"]
    assert serialize_provider(LustreGuardProvider()) == PICKLED["infra.lustre_guard.LustreGuardProvider"]
    assert serialize_provider(WeightsImportProvider()) == PICKLED["infra.weights_import.WeightsImportProvider"]
