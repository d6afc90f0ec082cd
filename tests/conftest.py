"""Test setup: Pulumi mocks are installed before anything from `infra` is imported.

Whole-program tests run `__main__.py` through `tools.offline_plan.run_program`, which installs its own
mocks in a fresh thread per run; the module-level mocks here serve tests that build a single
component directly.
"""

from __future__ import annotations

import gc
import json
import os
from typing import Any

import pulumi
import pytest

# The checkout is on sys.path through pytest.ini (`pythonpath = .`).
from tools.mocks import PlanMocks, RecordingMonitor

_MOCKS = PlanMocks(project_id="test-project")
pulumi.runtime.set_mocks(_MOCKS, project="nemo-rl-gke", stack="test", preview=False, monitor=RecordingMonitor(_MOCKS))

from ray_head import ray_heads_first, shared_head  # noqa: E402

from infra.stack_file import ROOT, read_stack_file, with_required_secrets  # noqa: E402
from tools import offline_plan as plan_mod  # noqa: E402

STACKS = ("dev", "b200", "h200")
"""The GKE Standard stacks (node pools)."""
AUTOPILOT_STACKS = ("autopilot",)
"""The GKE Autopilot stacks (`cluster.mode: autopilot`, no node pools)."""
LADDER_STACKS = ("b200-ladder",)
"""The GKE Standard stacks with a capacity ladder (one GPU pool per rung and a ComputeClass)."""
ALL_STACKS = STACKS + AUTOPILOT_STACKS + LADDER_STACKS
"""Every committed stack: for what must hold whatever the cluster mode."""


def committed_stack(stack: str) -> tuple[dict[str, str], list[str]]:
    """A committed stack file's flat config as after the README's setup: the secrets its job needs
    (`hfToken` for the h200 recipe's gated model) set, as placeholders."""
    return with_required_secrets(stack, *read_stack_file(ROOT / f"Pulumi.{stack}.yaml"))


def stack_config(stack: str, **overrides: Any) -> tuple[dict[str, str], list[str]]:
    """The stack file's config with `key=value` overrides (camelCase key, Python value)."""
    config, secret_keys = committed_stack(stack)
    config = dict(config)
    for key, value in overrides.items():
        full = key if ":" in key else f"nemo-rl-gke:{key}"
        if value is None:
            config.pop(full, None)
        else:
            config[full] = value if isinstance(value, str) else json.dumps(value)
    return config, list(secret_keys)


def merged(stack: str, key: str, patch: dict[str, Any]) -> dict[str, Any]:
    """The stack file's structured value at `key` with `patch` merged in (one level deep)."""
    config, _ = read_stack_file(ROOT / f"Pulumi.{stack}.yaml")
    current = json.loads(config.get(f"nemo-rl-gke:{key}", "{}"))
    for k, v in patch.items():
        if isinstance(v, dict) and isinstance(current.get(k), dict):
            current[k] = {**current[k], **v}
        else:
            current[k] = v
    return current


def run_plan(stack: str = "dev", secret_keys: list[str] | None = None, **overrides: Any) -> plan_mod.Plan:
    config, keys = stack_config(stack, **overrides)
    return plan_mod.run_program(stack, config, keys + list(secret_keys or []))


_RUNS: dict[tuple, plan_mod.Plan] = {}
_SHARE_RUNS = {"on": False}
_real_run_program = plan_mod.run_program


def _shared_run_program(stack=plan_mod.DEFAULT_STACK, config=None, secret_keys=None, **kwargs):
    """`run_program`, run once per distinct input in a worker: about a third of the suite's program runs repeat
    one (the CLI tests plan the committed stacks again), at 0.3-0.6 CPU-seconds each (docs/testing.md, "Budget").
    Off for a test that uses `monkeypatch` (what it patches may change the plan) or is marked `fresh_plans`, and
    keyed by the mutant under `make mutants` as `stack_plan` is. A program that fails is run again each time."""
    mutant = os.environ.get("MUTANT_UNDER_TEST", "")
    if not _SHARE_RUNS["on"] or mutant == "stats":
        return _real_run_program(stack, config, secret_keys, **kwargs)
    key = (mutant, stack, json.dumps(config, sort_keys=True), tuple(secret_keys or ()), repr(sorted(kwargs.items())))
    if key not in _RUNS:
        _RUNS[key] = _real_run_program(stack, config, secret_keys, **kwargs)
    return _RUNS[key]


plan_mod.run_program = _shared_run_program


@pytest.fixture(autouse=True)
def _program_runs_shared_unless_patched(request):
    _SHARE_RUNS["on"] = not ("monkeypatch" in request.fixturenames or request.node.get_closest_marker("fresh_plans"))
    yield
    _SHARE_RUNS["on"] = False


_PLANS: dict[tuple[str, str], plan_mod.Plan] = {}


def stack_plan(stack: str) -> plan_mod.Plan:
    """The plan of a stack file as committed; computed once per test session, and once per mutant under
    `make mutants`: mutmut forks each mutant's tests from the process that ran the unmutated code, so a
    plain cache would hand every mutant the unmutated plan (mutmut sets MUTANT_UNDER_TEST per mutant).
    Not cached in mutmut's first pass ("stats"), where it maps each test to the functions the test
    reaches: a test served from the cache would reach none, and no mutant would run it."""
    mutant = os.environ.get("MUTANT_UNDER_TEST", "")
    if mutant == "stats":
        return plan_mod.committed_plan(stack)
    key = (mutant, stack)
    if key not in _PLANS:
        _PLANS[key] = plan_mod.committed_plan(stack)
    return _PLANS[key]


@pytest.fixture(params=STACKS)
def any_stack_plan(request) -> plan_mod.Plan:
    return stack_plan(request.param)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """The session is over (its reports sent, the Ray head stopped): freeze the heap. The interpreter's
    last garbage collection at exit otherwise walks every object the session made (plans, the client
    libraries' message classes, torch) — 2-4 s a process on two busy cores, measured, while xdist's
    main process waits for each worker to exit. Frozen objects are not walked; what they hold is
    released with the process (docs/testing.md, "Budget")."""
    gc.freeze()


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Mark every test that needs the local Ray head (the `head` fixture, directly or through `client`)
    as `ray`: `-m "not ray"` then leaves out the slow part (the mutation run does, docs/testing.md).
    Marked from the fixtures, so a new Ray test cannot be left unmarked.

    Under xdist, the Ray tests are also moved to the fronts of the first two workers' shares, so that
    one worker fewer starts a head of its own (docs/testing.md, "Budget")."""
    ray_items = [item for item in items if "head" in getattr(item, "fixturenames", ())]
    for item in ray_items:
        item.add_marker(pytest.mark.ray)
    workers = getattr(config, "workerinput", {}).get("workercount", 1)
    if workers >= 3 and ray_items:
        items[:] = ray_heads_first(items, ray_items, workers)


@pytest.fixture(scope="session")
def head(request):
    """The session's private local Ray head (see tests/ray_head.py), started on first use."""
    return shared_head(request.config)


@pytest.fixture(scope="module")
def client(head):
    """A JobSubmissionClient on the local head, through the same `connect` users run."""
    from workloads import submit as jobs

    return jobs.connect(head.address)


def spec_of(stack: str, cfg: Any, *, wandb_key_set: bool):
    """The job `__main__.py` builds for `cfg` (same pool facts, same run plan, same builder), for tests that need it."""
    from infra.gate_plan import gate_plan_for_stack
    from infra.placement import gpu_pool_facts
    from infra.run_plan import run_plan_for_stack
    from infra.stack_context import StackContext
    from infra.training_job import job_spec_for_stack

    pool = gpu_pool_facts(StackContext.from_config(stack, cfg), cfg)
    run = run_plan_for_stack(stack, cfg, pool, gate_plan_for_stack(cfg, pool))
    return job_spec_for_stack(stack, cfg, wandb_key_set=wandb_key_set, pool=pool, run=run)
