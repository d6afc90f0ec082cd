"""The Google Cloud APIs a stack needs enabled in its project: the one list.

Keyed by the Pulumi resource type that calls the API, so a new resource type without an entry fails
a test (tests/test_project_apis.py walks every stack's plan). The preflight doctor
(`python -m tools.doctor`) checks that each is on; `pulumi up` enabling them itself
(`project.manageApis`, issue 11) is meant to read this same list.

A fresh project has compute, container, iam, cloudresourcemanager, servicenetworking and lustre off;
logging, monitoring, storage and serviceusage are on by default (docs.cloud.google.com/service-usage/
docs/enabled-service). Only on the real cloud: an organisation may turn default ones off.
"""

from __future__ import annotations

API_BY_RESOURCE_TYPE: dict[str, str] = {
    "gcp:compute/network:Network": "compute.googleapis.com",
    "gcp:compute/subnetwork:Subnetwork": "compute.googleapis.com",
    "gcp:compute/firewall:Firewall": "compute.googleapis.com",
    "gcp:compute/router:Router": "compute.googleapis.com",
    "gcp:compute/routerNat:RouterNat": "compute.googleapis.com",
    "gcp:compute/globalAddress:GlobalAddress": "compute.googleapis.com",
    "gcp:servicenetworking/connection:Connection": "servicenetworking.googleapis.com",
    "gcp:container/cluster:Cluster": "container.googleapis.com",
    "gcp:container/nodePool:NodePool": "container.googleapis.com",
    "gcp:serviceaccount/account:Account": "iam.googleapis.com",
    "gcp:projects/iAMMember:IAMMember": "cloudresourcemanager.googleapis.com",
    "gcp:projects/serviceIdentity:ServiceIdentity": "serviceusage.googleapis.com",
    "gcp:projects/service:Service": "serviceusage.googleapis.com",
    "gcp:lustre/instance:Instance": "lustre.googleapis.com",
    "gcp:storage/bucket:Bucket": "storage.googleapis.com",
    "gcp:storage/bucketIAMMember:BucketIAMMember": "storage.googleapis.com",
    "gcp:logging/metric:Metric": "logging.googleapis.com",
    "gcp:monitoring/dashboard:Dashboard": "monitoring.googleapis.com",
}

REQUIRED_APIS: tuple[str, ...] = tuple(
    sorted(
        {
            *API_BY_RESOURCE_TYPE.values(),
            # The project number (the Workload Identity principal) is read with getProject on every stack.
            "cloudresourcemanager.googleapis.com",
        }
    )
)
"""Every API any stack uses, sorted."""
