"""The Google Cloud clients the doctor calls (`Clients`, the seam tests replace), on the user's ADC."""

from __future__ import annotations

import functools
import inspect
import json
import os
from dataclasses import dataclass, fields, replace
from typing import Any, Mapping

from workloads import cli_args

NO_CREDENTIALS = (
    "no usable Application Default Credentials ({reason}): run `gcloud auth application-default login` "
    "(or point GOOGLE_APPLICATION_CREDENTIALS at a key file), then run this command again"
)  # the doctor's and the capacity finder's

CREDENTIALS_ENV = "GOOGLE_APPLICATION_CREDENTIALS"
MAX_CREDENTIALS_BYTES = 64 * 1024  # a key is ~2.4 KB, a federation config < 2 KB: more is no credentials file


class NoCredentials(Exception):
    """No usable Application Default Credentials (a one-line message)."""


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
    images: Any = None  # compute_v1.ImagesClient (gpuPool.imageCacheDiskImage)
    assets: Any = None  # asset_v1.AssetServiceClient (the leftover audit, `--leftovers`)
    credentials: Any = None  # google.auth Credentials the clients share; None for the tests' fakes


def connect(project: str) -> Clients:
    """Clients on the user's Application Default Credentials; `NoCredentials` when there are none."""
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    check_credentials_file(os.environ)
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
        images=compute_v1.ImagesClient(**c),
        assets=asset_v1.AssetServiceClient(**c),
        credentials=credentials,
    )


def first_line(exc: BaseException) -> str:
    """The first line of an error's message (a Google API error's own `message`), never a traceback."""
    text = getattr(exc, "message", None) or str(exc)
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__


def check_credentials_file(environ: Mapping[str, str]) -> None:
    """`NoCredentials` when GOOGLE_APPLICATION_CREDENTIALS names no regular file of a JSON object (google-auth
    raises IsADirectoryError or AttributeError, or waits on a FIFO); a missing path is google-auth's to say."""
    path = environ.get(CREDENTIALS_ENV)
    if not path or not os.path.lexists(path):
        return

    def refuse(why: str) -> NoCredentials:
        return NoCredentials(
            f"{CREDENTIALS_ENV} names {path} ({why}): point it at a key file (a JSON object), or unset it and run "
            "`gcloud auth application-default login`, then run this command again"
        )

    try:
        parsed = json.loads(cli_args.read_user_file(path, MAX_CREDENTIALS_BYTES))
    except cli_args.UnreadableFile as exc:
        raise refuse(str(exc).partition("; allowed")[0]) from None
    except ValueError:  # the content is never echoed: it may be a secret
        raise refuse("not JSON") from None
    if not isinstance(parsed, dict):
        raise refuse(f"a JSON {type(parsed).__name__}, not an object")


def bounded(clients: Clients, timeout: float) -> Clients:
    """The clients with every call bounded by `timeout` (`NoCredentials` when no token comes): the token once
    (else 120 s, google-auth google/auth/transport/requests.py _DEFAULT_TIMEOUT), and each call's retry (else
    60 s of UNAVAILABLE retries, resourcemanager_v3 get_project's default retry)."""
    if clients.credentials is not None:
        _fetch_token(clients.credentials, timeout)
    wrapped = {
        f.name: _Bounded(getattr(clients, f.name), timeout)
        for f in fields(clients)
        if f.name != "credentials" and getattr(clients, f.name) is not None
    }
    return replace(clients, **wrapped)


def _fetch_token(credentials: Any, timeout: float) -> None:
    from google.auth.exceptions import RefreshError, TransportError
    from google.auth.transport.requests import Request

    try:
        credentials.refresh(functools.partial(Request(), timeout=timeout))
    except RefreshError as exc:
        raise NoCredentials(NO_CREDENTIALS.format(reason=f"refused: {first_line(exc)}")) from None
    except TransportError as exc:
        raise NoCredentials(
            f"could not fetch an access token within {timeout:g}s ({first_line(exc)}): check the network "
            "and the credentials, then run this command again"
        ) from None


class _Bounded:
    """A client whose methods that take `retry` get a google-api-core Retry that stops after `timeout`."""

    def __init__(self, client: Any, timeout: float):
        self._client = client
        self._timeout = timeout

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)
        if not callable(method) or not _takes_retry(method):
            return method
        from google.api_core.retry import Retry

        return functools.partial(method, retry=Retry(timeout=self._timeout))


def _takes_retry(method: Any) -> bool:
    try:
        return "retry" in inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False
