"""Preflight doctor: will `pulumi up` of this stack work in its project? Ask the project first.

    python -m tools.doctor [--stack NAME] [--json] [--timeout SECONDS]   # docs/doctor.md
    python -m tools.doctor --leftovers [--stack NAME] [--json]          # after `pulumi destroy`

One module per group of checks, the client wiring and the command apart:

- `check_context`: `Result`, `Context`, pass / warn / fail;
- `google_clients`: `Clients` and `connect` (Application Default Credentials), the seam tests replace;
- `project_checks`: APIs and IAM; `quota_checks`: GPU (per model and per family) and project-wide
  quotas, reservations; `zone_checks`: machine types, RoCE profile, Managed Lustre, the capacity
  ladder; `gke_version_checks` and `version_drift`: the release channel and the version matrix;
  `network_checks`: bucket, Private Service Access range, organisation policies;
- `check_runner`: every check at once under one deadline; `doctor_command`: the report and flags.

This file only re-exports what the command, the capacity finder and the tests name.
"""

from tools.doctor.check_context import DEFAULT_TIMEOUT, FAIL, MAX_TIMEOUT, PASS, WARN, Context, Result
from tools.doctor.check_runner import CHECKS, run_checks
from tools.doctor.doctor_command import (
    DEFAULT_STACK,
    EXIT_FAILED,
    EXIT_NO_CREDENTIALS,
    EXIT_OK,
    EXIT_USAGE,
    error_json,
    main,
    parser,
    render_json,
    render_text,
)
from tools.doctor.gke_version_checks import minimum_gke_version
from tools.doctor.google_clients import NO_CREDENTIALS, Clients, NoCredentials, connect, first_line
from tools.doctor.project_checks import CLOUD_QUOTAS_API, ORG_POLICY_API
from tools.doctor.quota_checks import GPU_FAMILY_QUOTA, LADDER_ELSEWHERE, global_quota_needs

_first_line = first_line  # the capacity finder's name for it (tools/capacity_finder.py)

__all__ = [
    "CHECKS",
    "CLOUD_QUOTAS_API",
    "DEFAULT_STACK",
    "DEFAULT_TIMEOUT",
    "EXIT_FAILED",
    "EXIT_NO_CREDENTIALS",
    "EXIT_OK",
    "EXIT_USAGE",
    "FAIL",
    "GPU_FAMILY_QUOTA",
    "LADDER_ELSEWHERE",
    "MAX_TIMEOUT",
    "NO_CREDENTIALS",
    "ORG_POLICY_API",
    "PASS",
    "WARN",
    "Clients",
    "Context",
    "NoCredentials",
    "Result",
    "connect",
    "error_json",
    "first_line",
    "global_quota_needs",
    "main",
    "minimum_gke_version",
    "parser",
    "render_json",
    "render_text",
    "run_checks",
]
