"""The doctor's project checks: the APIs the stack uses are on, and the deployer holds every permission."""

from __future__ import annotations

from infra.config import StackConfig
from infra.project_apis import required_apis
from tools.deployer_permissions import required_permissions
from tools.doctor.check_context import FAIL, PASS, WARN, Context, Result, failed, passed

# Not needed by `pulumi up`: the doctor reads the organisation policies and the GPU family quotas with them.
ORG_POLICY_API, CLOUD_QUOTAS_API = "orgpolicy.googleapis.com", "cloudquotas.googleapis.com"
SERVICE_USAGE_BATCH = 30  # BatchGetServices takes at most 30 names (google-cloud-service-usage BatchGetServicesRequest)
TEST_IAM_BATCH = 100  # permissions per testIamPermissions call: the stack needs about 40


def manages_apis(cfg: StackConfig) -> bool:
    """Whether `pulumi up` enables the APIs itself (project.manageApis, issue 11)."""
    return cfg.manage_apis


def check_apis(ctx: Context) -> tuple[Result, set[str]]:
    """Every API the stack uses is on (or `pulumi up` turns it on); also the APIs that are off, for the checks."""
    apis = required_apis(ctx.cfg)
    wanted = [*apis, ORG_POLICY_API, CLOUD_QUOTAS_API]
    parent = f"projects/{ctx.project_number}"
    states: dict[str, bool] = {}
    for i in range(0, len(wanted), SERVICE_USAGE_BATCH):
        response = ctx.clients.service_usage.batch_get_services(
            request={
                "parent": parent,
                "names": [f"{parent}/services/{api}" for api in wanted[i : i + SERVICE_USAGE_BATCH]],
            },
            timeout=ctx.timeout,
        )
        for service in response.services:
            states[service.name.rsplit("/", 1)[-1]] = service.state.name == "ENABLED"
    off = {api for api in wanted if not states.get(api, False)}
    missing = [api for api in apis if api in off]
    if not missing:
        return Result("apis", PASS, f"all {len(apis)} APIs the stack uses are enabled"), off
    enable = f"gcloud services enable {' '.join(missing)} --project {ctx.project}"
    if manages_apis(ctx.cfg):
        return Result(
            "apis",
            WARN,
            f"off, and `pulumi up` enables them (project.manageApis): {', '.join(missing)}; "
            "the checks that need them are skipped until then",
            enable,
        ), off
    return Result("apis", FAIL, f"off: {', '.join(missing)}", enable), off


def check_iam(ctx: Context) -> Result:
    """The deployer (the Application Default Credentials) holds every permission `pulumi up` uses."""
    needed = required_permissions(ctx.cfg)
    wanted = sorted(needed)
    granted: set[str] = set()
    for i in range(0, len(wanted), TEST_IAM_BATCH):
        response = ctx.clients.projects.test_iam_permissions(
            request={"resource": f"projects/{ctx.project}", "permissions": wanted[i : i + TEST_IAM_BATCH]},
            timeout=ctx.timeout,
        )
        granted |= set(response.permissions)
    missing = [p for p in wanted if p not in granted]
    if not missing:
        return passed(f"you hold all {len(wanted)} permissions `pulumi up` and `pulumi destroy` use")
    roles = sorted({needed[p] for p in missing})
    bind = " && ".join(
        f"gcloud projects add-iam-policy-binding {ctx.project} --member=user:<you> --role={r}" for r in roles
    )
    return failed(f"missing {len(missing)} permission(s): {', '.join(missing)}", bind)
