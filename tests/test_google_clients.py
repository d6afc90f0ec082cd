"""The doctor's client wiring (tools/doctor/google_clients.py): what GOOGLE_APPLICATION_CREDENTIALS may
name, and that no call or token fetch outlives the run's timeout. Only the network is fake: the token
fetch and a real client's call go to loopback stand-ins (a server that never answers, a closed port)."""

from __future__ import annotations

import io
import os
import socket
import time

import pytest
from stalled_http import StalledServer

from tools.doctor import doctor_command, google_clients
from tools.doctor.doctor_command import EXIT_NO_CREDENTIALS
from tools.doctor.google_clients import Clients, NoCredentials


def doctor_with_credentials(monkeypatch, path) -> tuple[int, str, float]:
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(path))
    out, err = io.StringIO(), io.StringIO()
    start = time.monotonic()
    code = doctor_command.main(["--stack", "dev", "--timeout", "2"], out=out, err=err)
    assert out.getvalue() == ""
    return code, err.getvalue(), time.monotonic() - start


def test_credentials_naming_a_directory_are_one_line_naming_the_variable_and_exit_3(monkeypatch, tmp_path):
    code, err, _ = doctor_with_credentials(monkeypatch, tmp_path)
    assert code == EXIT_NO_CREDENTIALS and err.count("\n") == 1
    assert err.startswith(f"error: GOOGLE_APPLICATION_CREDENTIALS names {tmp_path} (is a directory): "), err


def test_credentials_holding_a_json_list_are_one_line_and_exit_3(monkeypatch, tmp_path):
    key = tmp_path / "key.json"
    key.write_text('[{"type": "service_account"}]')
    code, err, _ = doctor_with_credentials(monkeypatch, key)
    assert code == EXIT_NO_CREDENTIALS and err.count("\n") == 1
    assert f"names {key} (a JSON list, not an object)" in err, err


def test_credentials_naming_a_fifo_are_refused_at_once_without_reading_it(monkeypatch, tmp_path):
    fifo = tmp_path / "key.json"
    os.mkfifo(fifo)  # google-auth would wait for a writer (90 s in the run)
    code, err, took = doctor_with_credentials(monkeypatch, fifo)
    assert code == EXIT_NO_CREDENTIALS and f"names {fifo} (is a named pipe (FIFO))" in err, err
    assert took < 10, took


def test_a_credentials_file_past_the_size_bound_or_not_json_is_refused_without_echoing_it(monkeypatch, tmp_path):
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (google_clients.MAX_CREDENTIALS_BYTES + 1))
    code, err, _ = doctor_with_credentials(monkeypatch, big)
    assert code == EXIT_NO_CREDENTIALS and f"({google_clients.MAX_CREDENTIALS_BYTES + 1} bytes)" in err, err
    secret = tmp_path / "token.txt"
    secret.write_text("hf_" + "a" * 34)
    code, err, _ = doctor_with_credentials(monkeypatch, secret)
    assert code == EXIT_NO_CREDENTIALS and "(not JSON)" in err and "hf_" not in err, err


def test_the_no_credentials_line_names_no_one_command_so_the_capacity_finder_may_print_it_too():
    line = google_clients.NO_CREDENTIALS.format(reason="x")
    assert line.endswith("then run this command again") and "doctor" not in line


def service_account(token_uri: str):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from google.oauth2 import service_account as sa

    key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    return sa.Credentials.from_service_account_info(
        {"private_key": pem, "client_email": "doctor@p.iam.gserviceaccount.com", "token_uri": token_uri},
        scopes=["https://www.googleapis.com/auth/cloud-platform"],
    )


def test_a_token_endpoint_that_never_answers_ends_the_run_within_its_timeout_as_exit_3():
    with StalledServer(answer_version=False) as url:
        clients = Clients(**{name: None for name in Clients.__dataclass_fields__})
        clients.credentials = service_account(f"{url}/token")
        start = time.monotonic()
        with pytest.raises(NoCredentials) as raised:
            google_clients.bounded(clients, 0.5)
    assert time.monotonic() - start < 5
    assert str(raised.value).startswith("could not fetch an access token within 0.5s ("), raised.value


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_call_to_an_unreachable_endpoint_gives_up_after_the_timeout_not_the_clients_60_s_retry():
    from google.api_core import exceptions as gexc
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import resourcemanager_v3

    client = resourcemanager_v3.ProjectsClient(
        credentials=AnonymousCredentials(), client_options={"api_endpoint": f"127.0.0.1:{closed_port()}"}
    )
    projects = google_clients.bounded(Clients(**{**EMPTY, "projects": client}), 0.5).projects
    start = time.monotonic()
    with pytest.raises((gexc.RetryError, gexc.ServiceUnavailable, gexc.DeadlineExceeded)):
        projects.get_project(name="projects/p", timeout=0.5)
    assert time.monotonic() - start < 5  # get_project's default retry keeps trying UNAVAILABLE for 60 s


EMPTY = {name: None for name in Clients.__dataclass_fields__}


def test_only_methods_that_take_a_retry_get_one():
    class Fake:
        def with_retry(self, *, timeout=None, retry=None):
            return retry

        def without(self, *, timeout=None):
            return timeout

    wrapped = google_clients.bounded(Clients(**{**EMPTY, "regions": Fake()}), 3).regions
    assert wrapped.with_retry(timeout=3).timeout == 3 and wrapped.without(timeout=3) == 3


def test_connect_builds_every_client_the_doctor_names_on_the_one_set_of_credentials(monkeypatch):
    import google.auth
    from doctor_fakes import real_clients
    from google.auth.credentials import AnonymousCredentials

    credentials = AnonymousCredentials()
    monkeypatch.delenv("GOOGLE_APPLICATION_CREDENTIALS", raising=False)
    monkeypatch.setattr(google.auth, "default", lambda scopes: (credentials, "p"))
    clients = google_clients.connect("p")
    assert clients.credentials is credentials
    assert all(getattr(clients, name) is not None for name in google_clients.CLIENT_NAMES), clients
    for name, cls in real_clients().items():
        assert type(getattr(clients, name)) is cls, name
    assert type(clients.assets).__name__ == "AssetServiceClient"
