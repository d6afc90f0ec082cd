"""Runs the doctor's checks: the project first, then every other check at once under one deadline."""

from __future__ import annotations

import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import replace
from typing import Callable, Union

from google.api_core import exceptions as gexc

from infra.config import StackConfig
from infra.stack_context import StackContext
from tools.doctor.check_context import DEFAULT_TIMEOUT, FAIL, PASS, WARN, Context, Result
from tools.doctor.gke_version_checks import check_gke_versions
from tools.doctor.google_clients import NO_CREDENTIALS, Clients, NoCredentials, bounded, first_line
from tools.doctor.network_checks import check_bucket, check_org_policies, check_psa
from tools.doctor.project_checks import ORG_POLICY_API, check_apis, check_iam
from tools.doctor.quota_checks import check_global_quota, check_gpu_quota, check_reservation
from tools.doctor.version_drift import check_version_matrix
from tools.doctor.zone_checks import (
    check_capacity_ladder,
    check_image_cache,
    check_lustre,
    check_placement,
    check_zone,
)

Check = Callable[[Context], Union[Result, list[Result]]]


CHECKS: tuple[tuple[str, Check, tuple[str, ...]], ...] = (
    # (name, check, APIs it calls in the project)
    ("zone", check_zone, ("compute.googleapis.com",)),
    ("gpu-quota", check_gpu_quota, ("compute.googleapis.com",)),
    ("global-quota", check_global_quota, ("compute.googleapis.com",)),
    ("reservation", check_reservation, ("compute.googleapis.com",)),
    ("capacity-ladder", check_capacity_ladder, ("compute.googleapis.com",)),
    ("lustre", check_lustre, ("lustre.googleapis.com",)),
    ("image-cache", check_image_cache, ("compute.googleapis.com",)),
    ("placement", check_placement, ()),  # from the config alone: no API asked
    ("iam", check_iam, ("cloudresourcemanager.googleapis.com",)),
    ("gke-versions", check_gke_versions, ("container.googleapis.com",)),
    ("version-matrix", check_version_matrix, ("container.googleapis.com",)),
    ("bucket", check_bucket, ("storage.googleapis.com",)),
    ("psa", check_psa, ("compute.googleapis.com",)),
    ("org-policy", check_org_policies, (ORG_POLICY_API,)),
)


def _as_warning(name: str, exc: BaseException, timeout: float) -> Result:
    """A check that could not ask: say why, never a traceback."""
    if isinstance(exc, (gexc.Forbidden, gexc.PermissionDenied)):
        return Result(name, WARN, f"not checked: permission denied ({first_line(exc)})")
    if isinstance(exc, (gexc.DeadlineExceeded, TimeoutError)):
        return Result(name, WARN, f"not checked: no answer within {timeout:g}s")
    if isinstance(exc, gexc.GoogleAPICallError):
        return Result(name, WARN, f"not checked: {type(exc).__name__} ({first_line(exc)})")
    return Result(name, WARN, f"not checked: {type(exc).__name__}: {first_line(exc)}")


def run_checks(stack: str, cfg: StackConfig, clients: Clients, timeout: float = DEFAULT_TIMEOUT) -> list[Result]:
    """Every check, concurrently; the project first (nothing else can be asked without it)."""
    from google.auth.exceptions import RefreshError

    clients = bounded(clients, timeout)  # NoCredentials when no token can be had within `timeout`

    try:
        number = clients.projects.get_project(name=f"projects/{cfg.project}", timeout=timeout).name.rsplit("/")[-1]
    except RefreshError as exc:
        raise NoCredentials(NO_CREDENTIALS.format(reason=f"refused: {first_line(exc)}")) from None
    except (gexc.NotFound, gexc.Forbidden, gexc.PermissionDenied):
        fix = f"gcloud projects describe {cfg.project}  # fix nemo-rl-gke:project, or ask for roles/browser on it"
        return [Result("project", FAIL, f"project {cfg.project} does not exist or you cannot see it", fix)]
    except Exception as exc:  # e.g. no route to Google: nothing at all could be checked
        why = f"{type(exc).__name__} ({first_line(exc)})"
        return [Result("project", FAIL, f"could not ask for project {cfg.project}: {why}")]
    ctx = Context(stack, cfg, StackContext.from_config(stack, cfg), number, clients, timeout)
    results = [Result("project", PASS, f"{cfg.project} is project number {number}")]
    try:
        apis, off = check_apis(ctx)
    except Exception as exc:
        apis, off = _as_warning("apis", exc, timeout), set()
    results.append(apis)

    by_name: dict[str, list[Result]] = {}
    runnable = []
    for name, check, needs in CHECKS:
        skipped = [api for api in needs if api in off]
        if skipped:
            fix = f"gcloud services enable {' '.join(skipped)} --project {cfg.project}"
            by_name[name] = [Result(name, WARN, f"not checked: {', '.join(skipped)} is off", fix)]
        else:
            runnable.append((name, check))
    # A check makes at most four calls in a row (org-policy), each bounded by `timeout`.
    deadline = time.monotonic() + 4 * timeout + 5
    pool = ThreadPoolExecutor(max_workers=len(runnable) or 1, thread_name_prefix="doctor")
    futures: dict[Future, str] = {pool.submit(check, ctx): name for name, check in runnable}
    pending = set(futures)
    while pending:
        done, pending = wait(pending, timeout=max(0.0, deadline - time.monotonic()), return_when=FIRST_COMPLETED)
        if not done:
            break
        for future in done:
            name = futures[future]
            try:
                outcome = future.result()
                results_of = [outcome] if isinstance(outcome, Result) else outcome
                by_name[name] = [replace(r, check=r.check or name) for r in results_of]
            except Exception as exc:
                by_name[name] = [_as_warning(name, exc, timeout)]
    for future in pending:
        by_name[futures[future]] = [_as_warning(futures[future], TimeoutError(), timeout)]
    pool.shutdown(wait=False, cancel_futures=True)
    for name, _, _ in CHECKS:
        results.extend(by_name[name])
    # Fixes that change the stack's config name the stack, so they are right whichever stack is selected.
    return [
        replace(r, fix=r.fix.replace("pulumi config set ", f"pulumi config set --stack {stack} ")) if r.fix else r
        for r in results
    ]
