"""The doctor's network and policy checks: the artifacts bucket's name, the Private Service Access range
and the organisation policies that would refuse what the stack creates.
"""

from __future__ import annotations

import ipaddress
from dataclasses import replace
from typing import Any, Optional

from google.api_core import exceptions as gexc

from infra.network import DEFAULT_NETWORK, SERVICE_NETWORKING
from infra.storage import artifact_bucket_name, workload_identity_principal
from tools.doctor.check_context import FAIL, Context, Result, failed, passed, warning


def check_bucket(ctx: Context) -> Result:
    """The artifacts bucket's global name is free, or is this project's bucket the stack may adopt."""
    name = artifact_bucket_name(ctx.project, ctx.names.prefix)
    rename = "pulumi config set namePrefix <another prefix>  # the bucket is <project>-<namePrefix>-artifacts"
    try:
        bucket = ctx.clients.storage.lookup_bucket(name, timeout=ctx.timeout)
    except gexc.Forbidden:
        return failed(f"gs://{name} exists and belongs to someone else", rename)
    if bucket is None:
        return passed(f"gs://{name} is free")
    if str(bucket.project_number) != ctx.project_number:
        return failed(f"gs://{name} exists in another project ({bucket.project_number})", rename)
    if ctx.cfg.storage.adopt_existing_bucket:
        return passed(f"gs://{name} exists in this project; storage.adoptExistingBucket takes it over")
    return failed(
        f"gs://{name} already exists in this project (kept by an earlier `pulumi destroy`?)",
        "pulumi config set --path storage.adoptExistingBucket true",
    )


def check_psa(ctx: Context) -> Result:
    """The Private Service Access range conflicts with nothing already on the cluster's network."""
    cfg = ctx.cfg
    psa = ipaddress.IPv4Network(cfg.network.psa_cidr)
    if not cfg.network.use_default_network:
        vpc = ctx.names.name("vpc")
        try:
            ctx.clients.networks.get(project=ctx.project, network=vpc, timeout=ctx.timeout)
        except gexc.NotFound:
            return passed(f"the stack creates VPC {vpc}: no peering or range there yet ({psa} is free)")
        return warning(
            f"VPC {vpc} already exists: fine if this stack created it, otherwise `pulumi up` fails to create it",
            "pulumi config set namePrefix <another prefix>",
        )
    try:
        network = ctx.clients.networks.get(project=ctx.project, network=DEFAULT_NETWORK, timeout=ctx.timeout)
    except gexc.NotFound:
        return failed(
            f"network.useDefaultNetwork is true but the project has no {DEFAULT_NETWORK!r} VPC",
            "pulumi config set --path network.useDefaultNetwork false",
        )
    own = "pulumi config set --path network.useDefaultNetwork false  # a VPC of the stack's own"
    other_range = "pulumi config set --path network.psaCidr <a free /22>"
    on_default = f"/networks/{DEFAULT_NETWORK}"
    service_peering = SERVICE_NETWORKING.replace(".", "-")
    if any(p.name == service_peering for p in network.peerings):
        # The stack's Service Networking connection would collide with this one (see infra/network.py).
        return failed(
            f"the {DEFAULT_NETWORK} VPC already has a Service Networking peering "
            f"({service_peering}, e.g. Cloud SQL's); creating the stack's fails",
            own,
        )
    for address in ctx.clients.global_addresses.list(project=ctx.project, timeout=ctx.timeout):
        if address.purpose != "VPC_PEERING" or not address.network.endswith(on_default):
            continue
        taken = ipaddress.IPv4Network(f"{address.address}/{address.prefix_length}", strict=False)
        if taken.overlaps(psa):
            return failed(f"network.psaCidr {psa} overlaps the peering range {address.name} ({taken})", other_range)
    scopes = ctx.clients.subnetworks.aggregated_list(project=ctx.project, timeout=ctx.timeout)
    for subnet in (subnet for _, scoped in scopes for subnet in scoped.subnetworks):
        if not subnet.network.endswith(on_default):
            continue
        for cidr in [subnet.ip_cidr_range, *(r.ip_cidr_range for r in subnet.secondary_ip_ranges)]:
            if cidr and ipaddress.IPv4Network(cidr, strict=False).overlaps(psa):
                return failed(f"network.psaCidr {psa} overlaps subnet {subnet.name} ({cidr})", other_range)
    return passed(f"{psa} overlaps no subnet or peering range of the {DEFAULT_NETWORK} VPC")


def _restricted_values(rules: list[Any]) -> Optional[list[str]]:
    """Allowed values of a list constraint, or None when nothing restricts it."""
    if not rules or any(r.allow_all for r in rules):
        return None
    if any(r.deny_all for r in rules):
        return []
    return [v for r in rules for v in r.values.allowed_values]


def _workload_identity(ctx: Context) -> tuple[str, str]:
    """(pool, principal) the bucket grant names; before `pulumi up` no cluster reports its pool yet."""
    principal = workload_identity_principal(
        project_number=ctx.project_number,
        workload_pool=f"{ctx.project}.svc.id.goog",
        namespace=ctx.cfg.ray.namespace,
        ksa=ctx.cfg.ray.service_account,
    )
    return f"workloadIdentityPools/{ctx.project}.svc.id.goog", principal


def _member_domains(ctx: Context, rules: list[Any]) -> Result:
    pool, principal = _workload_identity(ctx)
    allowed = _restricted_values(rules)
    if allowed is None or any(pool in v for v in allowed):
        return passed("lets the bucket grant name the Workload Identity principal")
    return failed(
        f"domain-restricted sharing (allowed: {', '.join(allowed) or 'none'}) refuses the bucket grant to {principal}"
    )


def _managed_members(ctx: Context, rules: list[Any]) -> Result:
    enforced = [r for r in rules if r.enforce]
    if not enforced:
        return passed("not enforced")
    pool, principal = _workload_identity(ctx)
    params = {k: list(v) for r in enforced for k, v in (r.parameters or {}).items()}
    subjects, sets = params.get("allowedMemberSubjects", []), params.get("allowedPrincipalSets", [])
    if principal in subjects or any(pool in s for s in sets):
        return passed("allows the Workload Identity principal")
    return failed(f"refuses the bucket grant to {principal}")


def _service_account_creation(ctx: Context, rules: list[Any]) -> Result:
    if any(r.enforce for r in rules):
        return failed("enforced: the stack creates the GKE node service account")
    return passed("not enforced")


def _resource_locations(ctx: Context, rules: list[Any]) -> Result:
    cfg = ctx.cfg
    allowed = _restricted_values(rules)
    places = {cfg.region, cfg.zone, f"in:{cfg.region}-locations", f"in:{cfg.zone}-locations"}
    if allowed is None or places & set(allowed):
        return passed(f"allows {cfg.region}")
    if any(v.startswith("in:") for v in allowed):
        # Value groups (in:us-locations) expand server-side; the doctor cannot resolve them.
        return warning(f"allows only {', '.join(allowed)}: make sure that includes {cfg.zone}")
    return failed(
        f"allows only {', '.join(allowed)}, not {cfg.region}",
        "pulumi config set region <an allowed region> && pulumi config set zone <a zone in it>",
    )


ORG_POLICIES = (
    ("iam.allowedPolicyMemberDomains", _member_domains),
    ("iam.managed.allowedPolicyMembers", _managed_members),
    ("iam.disableServiceAccountCreation", _service_account_creation),
    ("gcp.resourceLocations", _resource_locations),
)


def check_org_policies(ctx: Context) -> list[Result]:
    """Organisation policies that would refuse what the stack creates, one result per constraint; a failure
    without a config fix gets the policy reset."""
    results = []
    for name, judge in ORG_POLICIES:
        policy = ctx.clients.org_policy.get_effective_policy(
            name=f"projects/{ctx.project}/policies/{name}", timeout=ctx.timeout
        )
        found = judge(ctx, list(policy.spec.rules) if policy and policy.spec else [])
        reset = f"gcloud org-policies reset {name} --project {ctx.project}  # needs roles/orgpolicy.policyAdmin"
        fix = found.fix or (reset if found.status == FAIL else None)
        results.append(replace(found, summary=f"{name}: {found.summary}", fix=fix))
    return results
