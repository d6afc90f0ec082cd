"""The Google Cloud clients the doctor calls (`Clients`, the seam tests replace), on the user's ADC."""

from __future__ import annotations

import functools
import inspect
import os
from dataclasses import fields, make_dataclass, replace
from typing import Any, Mapping

from workloads import google_credentials

NO_CREDENTIALS = (
    "no usable Application Default Credentials ({reason}): run `gcloud auth application-default login` "
    "(or point GOOGLE_APPLICATION_CREDENTIALS at a key file), then run this command again"
)  # the doctor's and the capacity finder's

CREDENTIALS_ENV = google_credentials.CREDENTIALS_ENV
MAX_CREDENTIALS_BYTES = google_credentials.MAX_CREDENTIALS_BYTES


class NoCredentials(Exception):
    """No usable Application Default Credentials (a one-line message)."""


# The Google Cloud clients the doctor calls (`connect` names each one's class) and the credentials they share; None
# unless set: the one seam tests replace (with fakes).
CLIENT_NAMES = """projects service_usage regions machine_types network_profiles reservations networks global_addresses
subnetworks clusters lustre storage org_policy quotas compute_projects images assets credentials""".split()
Clients = make_dataclass("Clients", [(name, Any, None) for name in CLIENT_NAMES])


def connect(project: str) -> Clients:
    """Clients on the user's Application Default Credentials; `NoCredentials` when there are none."""
    import google.auth
    from google.auth.exceptions import GoogleAuthError

    check_credentials_file(os.environ)
    try:
        credentials, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
    except (GoogleAuthError, OSError, ValueError) as err:  # an external account fetches its token here already
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

    classes = {
        "projects": resourcemanager_v3.ProjectsClient,
        "service_usage": service_usage_v1.ServiceUsageClient,
        "regions": compute_v1.RegionsClient,
        "machine_types": compute_v1.MachineTypesClient,
        "network_profiles": compute_v1.NetworkProfilesClient,
        "reservations": compute_v1.ReservationsClient,
        "networks": compute_v1.NetworksClient,
        "global_addresses": compute_v1.GlobalAddressesClient,
        "subnetworks": compute_v1.SubnetworksClient,
        "clusters": container_v1.ClusterManagerClient,
        "lustre": lustre_v1.LustreClient,
        "org_policy": orgpolicy_v2.OrgPolicyClient,
        "quotas": cloudquotas_v1.CloudQuotasClient,
        "compute_projects": compute_v1.ProjectsClient,  # project-wide quotas
        "images": compute_v1.ImagesClient,  # gpuPool.imageCacheDiskImage
        "assets": asset_v1.AssetServiceClient,  # the leftover audit
    }
    made = {name: cls(credentials=credentials) for name, cls in classes.items()}
    return Clients(**made, storage=storage.Client(project=project, credentials=credentials), credentials=credentials)


def first_line(exc: BaseException) -> str:
    """The first line of an error's message (a Google API error's own `message`), never a traceback, and with no
    credential (google-auth repeats a key file's path and `type`, a token endpoint's `error_description`)."""
    return google_credentials.message(exc)


def check_credentials_file(environ: Mapping[str, str]) -> None:
    """`NoCredentials` when the ADC file is not a regular file of a JSON object, or an external account whose
    credential source is not a regular file (`workloads.google_credentials`: google-auth raises IsADirectoryError or
    AttributeError, or waits on a FIFO); a missing path is google-auth's to say."""
    try:
        google_credentials.check_credentials_file(environ)
    except google_credentials.BadCredentialsFile as exc:
        raise NoCredentials(
            f"{exc}: point it at a key file (a JSON object), or unset it and run "
            "`gcloud auth application-default login`, then run this command again"
        ) from None


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
    except (RefreshError, OSError, ValueError) as exc:  # OSError: an external account's source file unreadable
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
