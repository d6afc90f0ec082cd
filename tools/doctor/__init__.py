"""Preflight doctor: will `pulumi up` of this stack work in its project? Ask the project first.

    python -m tools.doctor [--stack NAME] [--json] [--timeout SECONDS]   # docs/doctor.md
    python -m tools.doctor --leftovers [--stack NAME] [--json]          # after `pulumi destroy`

One module per group of checks (`*_checks`, `version_drift`), the clients (`google_clients`, the seam
tests replace), every check under one deadline (`check_runner`) and the command (`doctor_command`).
This file only re-exports what the command, the capacity finder and the tests name.
"""

# ruff: noqa: F401

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
