"""The Google Cloud clients the doctor calls, built on the user's Application Default Credentials.

Every Google API call goes through `Clients`, built by `connect`; tests hand in fakes there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

NO_CREDENTIALS = (
    "no usable Application Default Credentials ({reason}): run `gcloud auth application-default login` "
    "(or point GOOGLE_APPLICATION_CREDENTIALS at a key file), then run the doctor again"
)


class NoCredentials(Exception):
    """No usable Application Default Credentials; the message is one line."""


@dataclass
class Clients:
    """The Google Cloud clients the doctor calls; the one seam tests replace."""

    projects: Any  # resourcemanager_v3.ProjectsClient
    service_usage: Any  # service_usage_v1.ServiceUsageClient
    regions: Any  # compute_v1.RegionsClient
    machine_types: Any  # compute_v1.MachineTypesClient
    network_profiles: Any  # compute_v1.NetworkProfilesClient
    reservations: Any  # compute_v1.ReservationsClient
    networks: Any  # compute_v1.NetworksClient
    global_addresses: Any  # compute_v1.GlobalAddressesClient
    subnetworks: Any  # compute_v1.SubnetworksClient
    clusters: Any  # container_v1.ClusterManagerClient
    lustre: Any  # lustre_v1.LustreClient
    storage: Any  # storage.Client
    org_policy: Any  # orgpolicy_v2.OrgPolicyClient
    quotas: Any  # cloudquotas_v1.CloudQuotasClient
    compute_projects: Any = None  # compute_v1.ProjectsClient (project-wide quotas)
    assets: Any = None  # asset_v1.AssetServiceClient (the leftover audit, `--leftovers`)


def connect(project: str) -> Clients:
    """Clients on the user's Application Default Credentials; `NoCredentials` when there are none."""
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    try:
        credentials, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
    except DefaultCredentialsError as err:
        raise NoCredentials(NO_CREDENTIALS.format(reason=first_line(err))) from None

    from google.cloud import (
        asset_v1,
        cloudquotas_v1,
        compute_v1,
        container_v1,
        lustre_v1,
        orgpolicy_v2,
        resourcemanager_v3,
        service_usage_v1,
        storage,
    )

    c = {"credentials": credentials}
    return Clients(
        projects=resourcemanager_v3.ProjectsClient(**c),
        service_usage=service_usage_v1.ServiceUsageClient(**c),
        regions=compute_v1.RegionsClient(**c),
        machine_types=compute_v1.MachineTypesClient(**c),
        network_profiles=compute_v1.NetworkProfilesClient(**c),
        reservations=compute_v1.ReservationsClient(**c),
        networks=compute_v1.NetworksClient(**c),
        global_addresses=compute_v1.GlobalAddressesClient(**c),
        subnetworks=compute_v1.SubnetworksClient(**c),
        clusters=container_v1.ClusterManagerClient(**c),
        lustre=lustre_v1.LustreClient(**c),
        storage=storage.Client(project=project, credentials=credentials),
        org_policy=orgpolicy_v2.OrgPolicyClient(**c),
        quotas=cloudquotas_v1.CloudQuotasClient(**c),
        compute_projects=compute_v1.ProjectsClient(**c),
        assets=asset_v1.AssetServiceClient(**c),
    )


def first_line(exc: BaseException) -> str:
    """The first line of an error's message (a Google API error's own `message`), never a traceback."""
    text = getattr(exc, "message", None) or str(exc)
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__
