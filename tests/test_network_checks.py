"""The doctor's bucket, Private Service Access and organisation-policy checks
(tools/doctor/network_checks.py) against faked Google Cloud answers.
"""

from __future__ import annotations

import pytest
from doctor_fakes import NUMBER, PRINCIPAL, PROJECT, FakeProject, Rule, compute_v1, config, only, policy, run

from infra.storage import artifact_bucket_name
from tools.doctor.check_context import FAIL, PASS, WARN, Result
from tools.doctor.check_runner import run_checks


@pytest.fixture
def project():
    return FakeProject()


BUCKET = artifact_bucket_name(PROJECT, "dev")


def test_a_bucket_name_someone_else_owns_fails(project):
    project.buckets[BUCKET] = "forbidden"
    result = only(project, "bucket")
    assert result.status == FAIL and BUCKET in result.summary and "namePrefix" in result.fix


def test_a_bucket_in_another_readable_project_fails(project):
    project.buckets[BUCKET] = "999"
    assert only(project, "bucket").status == FAIL


def test_a_bucket_kept_by_an_earlier_destroy_fails_unless_adopted(project):
    project.buckets[BUCKET] = NUMBER
    result = only(project, "bucket")
    assert (
        result.status == FAIL and result.fix == "pulumi config set --stack dev --path storage.adoptExistingBucket true"
    )
    assert only(project, "bucket", config(storage={"adoptExistingBucket": True})).status == PASS


RENAME = "pulumi config set --stack dev namePrefix <another prefix>  # the bucket is <project>-<namePrefix>-artifacts"


def test_the_bucket_results_name_the_bucket_and_its_owner_whole(project):
    assert only(project, "bucket") == Result("bucket", PASS, f"gs://{BUCKET} is free")
    assert [kw["bucket_name"] for c, m, kw in project.calls if m == "lookup_bucket"] == [BUCKET]
    project.buckets[BUCKET] = "forbidden"
    assert only(project, "bucket") == Result(
        "bucket", FAIL, f"gs://{BUCKET} exists and belongs to someone else", RENAME
    )
    project.buckets[BUCKET] = "999"
    assert only(project, "bucket") == Result("bucket", FAIL, f"gs://{BUCKET} exists in another project (999)", RENAME)
    project.buckets[BUCKET] = NUMBER
    assert only(project, "bucket") == Result(
        "bucket",
        FAIL,
        f"gs://{BUCKET} already exists in this project (kept by an earlier `pulumi destroy`?)",
        "pulumi config set --stack dev --path storage.adoptExistingBucket true",
    )
    assert only(project, "bucket", config(storage={"adoptExistingBucket": True})) == Result(
        "bucket", PASS, f"gs://{BUCKET} exists in this project; storage.adoptExistingBucket takes it over"
    )


DEFAULT_NET = {"network": {"useDefaultNetwork": True}}


def test_a_leftover_vpc_of_the_stacks_name_warns(project):
    project.networks["dev-vpc"] = compute_v1.Network(name="dev-vpc")
    assert only(project, "psa").status == WARN


def test_the_default_vpc_missing_fails(project):
    assert only(project, "psa", config(**DEFAULT_NET)).status == FAIL


def test_an_existing_service_networking_peering_on_the_default_vpc_fails(project):
    project.networks["default"] = compute_v1.Network(
        name="default", peerings=[compute_v1.NetworkPeering(name="servicenetworking-googleapis-com", network="x")]
    )
    result = only(project, "psa", config(**DEFAULT_NET))
    assert result.status == FAIL and "useDefaultNetwork false" in result.fix


def test_a_psa_range_overlapping_a_peering_range_fails(project):
    project.networks["default"] = compute_v1.Network(name="default")
    project.addresses = [
        compute_v1.Address(
            name="google-managed",
            purpose="VPC_PEERING",
            address="10.16.2.0",
            prefix_length=24,
            network=f"projects/{PROJECT}/global/networks/default",
        )
    ]
    result = only(project, "psa", config(**DEFAULT_NET))
    assert result.status == FAIL and "google-managed" in result.summary


def test_a_psa_range_overlapping_a_subnet_fails_and_a_free_one_passes(project):
    project.networks["default"] = compute_v1.Network(name="default")
    project.subnetworks = [
        compute_v1.Subnetwork(
            name="default",
            region="europe-west4",
            ip_cidr_range="10.164.0.0/20",
            network=f"https://www.googleapis.com/compute/v1/projects/{PROJECT}/global/networks/default",
            secondary_ip_ranges=[compute_v1.SubnetworkSecondaryRange(range_name="x", ip_cidr_range="10.16.0.0/16")],
        )
    ]
    result = only(project, "psa", config(**DEFAULT_NET))
    assert result.status == FAIL and "10.16.0.0/16" in result.summary
    free = config(network={"useDefaultNetwork": True, "psaCidr": "10.20.0.0/22"})
    assert only(project, "psa", free).status == PASS


FREE_RANGE = "pulumi config set --stack dev --path network.psaCidr <a free /22>"

DEFAULT_VPC = f"projects/{PROJECT}/global/networks/default"


def test_the_stacks_own_vpc_results_whole(project):
    assert only(project, "psa") == Result(
        "psa", PASS, "the stack creates VPC dev-vpc: no peering or range there yet (10.16.0.0/22 is free)"
    )
    assert [kw["network"] for c, m, kw in project.calls if c == "networks"] == ["dev-vpc"]
    project.networks["dev-vpc"] = compute_v1.Network(name="dev-vpc")
    assert only(project, "psa") == Result(
        "psa",
        WARN,
        "VPC dev-vpc already exists: fine if this stack created it, otherwise `pulumi up` fails to create it",
        "pulumi config set --stack dev namePrefix <another prefix>",
    )


def test_the_default_vpc_results_whole(project):
    assert only(project, "psa", config(**DEFAULT_NET)) == Result(
        "psa",
        FAIL,
        "network.useDefaultNetwork is true but the project has no 'default' VPC",
        "pulumi config set --stack dev --path network.useDefaultNetwork false",
    )
    assert [kw["network"] for c, m, kw in project.calls if c == "networks"] == ["default"]
    project.networks["default"] = compute_v1.Network(
        name="default", peerings=[compute_v1.NetworkPeering(name="servicenetworking-googleapis-com", network="x")]
    )
    assert only(project, "psa", config(**DEFAULT_NET)) == Result(
        "psa",
        FAIL,
        "the default VPC already has a Service Networking peering (servicenetworking-googleapis-com, e.g. Cloud "
        "SQL's); creating the stack's fails",
        "pulumi config set --stack dev --path network.useDefaultNetwork false  # a VPC of the stack's own",
    )
    project.networks["default"] = compute_v1.Network(
        name="default", peerings=[compute_v1.NetworkPeering(name="peer-to-hub", network="x")]
    )
    assert only(project, "psa", config(**DEFAULT_NET)) == Result(
        "psa", PASS, "10.16.0.0/22 overlaps no subnet or peering range of the default VPC"
    )


def test_only_peering_ranges_of_the_default_vpc_count_and_the_first_overlap_is_named(project):
    project.networks["default"] = compute_v1.Network(name="default")

    def address(name, purpose="VPC_PEERING", network=DEFAULT_VPC):
        # Host bits set: the check reads the range leniently, as the API may echo the address given.
        return compute_v1.Address(name=name, purpose=purpose, address="10.16.2.7", prefix_length=23, network=network)

    project.addresses = [
        address("a-nat-ip", purpose="NAT_AUTO"),
        address("on-another-vpc", network=f"projects/{PROJECT}/global/networks/other"),
    ]
    assert only(project, "psa", config(**DEFAULT_NET)).status == PASS
    project.addresses.append(address("google-managed"))
    project.addresses.append(address("second"))
    assert only(project, "psa", config(**DEFAULT_NET)) == Result(
        "psa",
        FAIL,
        "network.psaCidr 10.16.0.0/22 overlaps the peering range google-managed (10.16.2.0/23)",
        FREE_RANGE,
    )


def test_only_subnets_of_the_default_vpc_count_and_an_ipv6_only_subnet_is_skipped(project):
    project.networks["default"] = compute_v1.Network(name="default")
    project.subnetworks = [
        compute_v1.Subnetwork(
            name="elsewhere",
            region="us-east1",
            ip_cidr_range="10.16.0.0/20",
            network=f"https://www.googleapis.com/compute/v1/projects/{PROJECT}/global/networks/other",
        ),
        compute_v1.Subnetwork(
            name="v6-only", region="us-east1", network=f"https://www.googleapis.com/compute/v1/{DEFAULT_VPC}"
        ),
    ]
    assert only(project, "psa", config(**DEFAULT_NET)).status == PASS
    project.subnetworks.append(
        compute_v1.Subnetwork(
            name="primary",
            region="us-east1",
            ip_cidr_range="10.16.3.9/24",
            network=f"https://www.googleapis.com/compute/v1/{DEFAULT_VPC}",
        )
    )
    project.subnetworks.append(
        compute_v1.Subnetwork(
            name="later",
            region="us-east1",
            ip_cidr_range="10.16.0.0/24",
            network=f"https://www.googleapis.com/compute/v1/{DEFAULT_VPC}",
        )
    )
    assert only(project, "psa", config(**DEFAULT_NET)) == Result(
        "psa", FAIL, "network.psaCidr 10.16.0.0/22 overlaps subnet primary (10.16.3.9/24)", FREE_RANGE
    )


def by_constraint(project, cfg=None) -> dict[str, Result]:
    return {r.summary.split(":", 1)[0]: r for r in run(project, cfg)["org-policy"]}


def test_domain_restricted_sharing_that_omits_the_pool_fails(project):
    project.policies["iam.allowedPolicyMemberDomains"] = policy(
        Rule(values=Rule.StringValues(allowed_values=["C01abc"]))
    )
    result = by_constraint(project)["iam.allowedPolicyMemberDomains"]
    assert result.status == FAIL and PRINCIPAL in result.summary
    assert "gcloud org-policies reset iam.allowedPolicyMemberDomains" in result.fix


def test_domain_restricted_sharing_that_allows_the_pool_passes(project):
    project.policies["iam.allowedPolicyMemberDomains"] = policy(
        Rule(
            values=Rule.StringValues(
                allowed_values=[
                    "C01abc",
                    f"principalSet://iam.googleapis.com/projects/{NUMBER}/locations/global/workloadIdentityPools/{PROJECT}.svc.id.goog/*",
                ]
            )
        )
    )
    assert by_constraint(project)["iam.allowedPolicyMemberDomains"].status == PASS


def test_the_managed_member_constraint_is_read_from_its_parameters(project):
    project.policies["iam.managed.allowedPolicyMembers"] = policy(
        Rule(enforce=True, parameters={"allowedMemberSubjects": ["user:a@example.com"], "allowedPrincipalSets": []})
    )
    assert by_constraint(project)["iam.managed.allowedPolicyMembers"].status == FAIL
    project.policies["iam.managed.allowedPolicyMembers"] = policy(
        Rule(enforce=True, parameters={"allowedMemberSubjects": [PRINCIPAL]})
    )
    assert by_constraint(project)["iam.managed.allowedPolicyMembers"].status == PASS


def test_service_account_creation_disabled_fails(project):
    project.policies["iam.disableServiceAccountCreation"] = policy(Rule(enforce=True))
    assert by_constraint(project)["iam.disableServiceAccountCreation"].status == FAIL


@pytest.mark.parametrize(
    "allowed, status",
    [
        (["in:us-east1-locations"], PASS),
        (["in:us-locations"], WARN),
        (["in:europe-west4-locations"], WARN),
        (["europe-west4"], FAIL),
    ],
)
def test_resource_locations(project, allowed, status):
    project.policies["gcp.resourceLocations"] = policy(Rule(values=Rule.StringValues(allowed_values=allowed)))
    assert by_constraint(project)["gcp.resourceLocations"].status == status


RESET = "gcloud org-policies reset {} --project my-gcp-project  # needs roles/orgpolicy.policyAdmin"

POOL_SET = (
    f"principalSet://iam.googleapis.com/projects/{NUMBER}/locations/global/workloadIdentityPools/"
    f"{PROJECT}.svc.id.goog/*"
)


def test_unrestricted_policies_pass_whole_and_each_constraint_is_read_once(project):
    assert run(project)["org-policy"] == [
        Result(
            "org-policy",
            PASS,
            "iam.allowedPolicyMemberDomains: lets the bucket grant name the Workload Identity principal",
        ),
        Result("org-policy", PASS, "iam.managed.allowedPolicyMembers: not enforced"),
        Result("org-policy", PASS, "iam.disableServiceAccountCreation: not enforced"),
        Result("org-policy", PASS, "gcp.resourceLocations: allows us-east1"),
    ]
    assert [kw["name"] for c, m, kw in project.calls if c == "org_policy"] == [
        f"projects/{PROJECT}/policies/{c}"
        for c in (
            "iam.allowedPolicyMemberDomains",
            "iam.managed.allowedPolicyMembers",
            "iam.disableServiceAccountCreation",
            "gcp.resourceLocations",
        )
    ]


def test_domain_restricted_sharing_results_whole(project):
    name = "iam.allowedPolicyMemberDomains"
    project.policies[name] = policy(
        Rule(values=Rule.StringValues(allowed_values=["C01abc"])),
        Rule(values=Rule.StringValues(allowed_values=["C02def"])),
    )
    assert by_constraint(project)[name] == Result(
        "org-policy",
        FAIL,
        f"{name}: domain-restricted sharing (allowed: C01abc, C02def) refuses the bucket grant to {PRINCIPAL}",
        RESET.format(name),
    )
    project.policies[name] = policy(Rule(values=Rule.StringValues(allowed_values=["C01abc"])), Rule(deny_all=True))
    assert by_constraint(project)[name].summary == (
        f"{name}: domain-restricted sharing (allowed: none) refuses the bucket grant to {PRINCIPAL}"
    )
    project.policies[name] = policy(Rule(values=Rule.StringValues(allowed_values=["C01abc"])), Rule(allow_all=True))
    assert by_constraint(project)[name].status == PASS
    project.policies[name] = policy(Rule(values=Rule.StringValues(allowed_values=["C01abc", POOL_SET])))
    assert by_constraint(project)[name].status == PASS


def test_the_managed_member_constraint_results_whole(project):
    name = "iam.managed.allowedPolicyMembers"
    refusing = {"allowedMemberSubjects": ["user:a@example.com"], "allowedPrincipalSets": ["principalSet://x/*"]}
    project.policies[name] = policy(Rule(enforce=False, parameters=refusing))
    assert by_constraint(project)[name] == Result("org-policy", PASS, f"{name}: not enforced")
    project.policies[name] = policy(Rule(enforce=False, parameters=refusing), Rule(enforce=True, parameters=refusing))
    assert by_constraint(project)[name] == Result(
        "org-policy", FAIL, f"{name}: refuses the bucket grant to {PRINCIPAL}", RESET.format(name)
    )
    project.policies[name] = policy(Rule(enforce=True, parameters={"allowedPrincipalSets": [POOL_SET]}))
    assert by_constraint(project)[name] == Result("org-policy", PASS, f"{name}: allows the Workload Identity principal")
    project.policies[name] = policy(Rule(enforce=True))  # enforced with no parameters: nobody is allowed
    assert by_constraint(project)[name].status == FAIL


def test_service_account_creation_disabled_fails_whole(project):
    name = "iam.disableServiceAccountCreation"
    project.policies[name] = policy(Rule(enforce=False), Rule(enforce=True))
    assert by_constraint(project)[name] == Result(
        "org-policy",
        FAIL,
        f"{name}: enforced: the stack creates the GKE node service account",
        RESET.format(name),
    )


@pytest.mark.parametrize("allowed", [["us-east1"], ["us-east1-b"], ["in:us-east1-b-locations"]])
def test_resource_locations_that_name_the_region_or_zone_pass(project, allowed):
    project.policies["gcp.resourceLocations"] = policy(Rule(values=Rule.StringValues(allowed_values=allowed)))
    assert by_constraint(project)["gcp.resourceLocations"].status == PASS


def test_resource_locations_results_whole(project):
    name = "gcp.resourceLocations"
    project.policies[name] = policy(Rule(values=Rule.StringValues(allowed_values=["europe-west4", "in:us-locations"])))
    assert by_constraint(project)[name] == Result(
        "org-policy",
        WARN,
        f"{name}: allows only europe-west4, in:us-locations: make sure that includes us-east1-b",
    )
    project.policies[name] = policy(Rule(values=Rule.StringValues(allowed_values=["europe-west4", "asia-east1"])))
    assert by_constraint(project)[name] == Result(
        "org-policy",
        FAIL,
        f"{name}: allows only europe-west4, asia-east1, not us-east1",
        "pulumi config set --stack dev region <an allowed region> && pulumi config set --stack dev zone <a zone in it>",
    )


def test_the_bucket_psa_and_org_policy_calls_name_the_project_and_carry_the_timeout(project):
    project.networks["default"] = compute_v1.Network(name="default")
    run_checks("dev", config(), project.clients(), timeout=5)
    run_checks("dev", config(**DEFAULT_NET), project.clients(), timeout=5)
    clients = {"storage", "networks", "global_addresses", "subnetworks", "org_policy"}
    calls = [(c, kw) for c, m, kw in project.calls if c in clients]
    assert {c for c, _ in calls} == clients
    for client, kwargs in calls:
        assert kwargs["timeout"] == 5, f"{client}: {kwargs}"
        if "project" in kwargs or client in {"networks", "global_addresses", "subnetworks"}:
            assert kwargs["project"] == PROJECT, f"{client}: {kwargs}"
