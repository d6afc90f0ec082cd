"""Connecting to the Ray dashboard (`workloads.ray_connection`): unreachable and stalled dashboards, timeouts
on every call, and the GKE API server's service proxy with a bearer token, against a real local Ray head
and local stand-ins. Only 127.0.0.1 is contacted.
"""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
import time

import pytest
from conftest import ROOT
from dashboard_proxy import AuthProxy
from ray_head import JOB_TIMEOUT, STALL_BOUND, python_job
from stalled_http import StalledServer

from jobctl import cli
from workloads import ray_connection
from workloads import submit as jobs

PREFIX = "/api/v1/namespaces/ns/services/head:dashboard/proxy"

# Ray's own log-tail call trips a deprecation in the installed aiohttp; not ours to fix.
pytestmark = pytest.mark.filterwarnings("ignore:ssl=None is deprecated:DeprecationWarning")


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def test_an_unreachable_address_raises_dashboard_unreachable_and_the_cli_says_so_in_one_line():
    # A bound socket that never listens: connections are refused and nothing else can take the port.
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        address = f"http://127.0.0.1:{closed.getsockname()[1]}"
        with pytest.raises(jobs.DashboardUnreachable, match=f"unreachable at {address}.*check that the cluster is up"):
            jobs.connect(address)
        proc = subprocess.run(
            [sys.executable, "-m", "jobctl", "list", "--address", address],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=JOB_TIMEOUT,
        )
    assert proc.returncode == 3 and proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith(f"error: Ray dashboard unreachable at {address}")


def test_a_stalled_dashboard_ends_in_a_timeout_error_not_a_hang():
    # Accepted connections, no answer: Ray's client sends every request without a timeout.
    with StalledServer(answer_version=False) as address:
        started = time.monotonic()
        with pytest.raises(jobs.DashboardUnreachable, match="ReadTimeout: the request got no answer in time"):
            jobs.connect(address, read_timeout=0.5)
        assert time.monotonic() - started < STALL_BOUND


def test_every_job_api_call_after_connecting_has_a_timeout_too():
    with StalledServer(answer_version=True) as address:
        client = jobs.connect(address, read_timeout=0.5)  # the version check is answered
        for call in (lambda: jobs.status(client, "x"), lambda: jobs.list_jobs(client), lambda: jobs.stop(client, "x")):
            started = time.monotonic()
            with pytest.raises(jobs.DashboardUnreachable, match="ReadTimeout"):
                call()
            assert time.monotonic() - started < STALL_BOUND


@pytest.fixture
def proxy(head):
    p = AuthProxy(upstream=head.address, prefix=PREFIX, tokens={"tok-1", "tok-2"}).start()
    yield p
    p.stop()


def test_the_dashboard_is_reached_through_an_api_server_style_proxy_with_a_bearer_token(proxy, monkeypatch):
    issued = []

    def token() -> str:  # rotates, as a refreshed Google token would
        issued.append(f"tok-{len(issued) % 2 + 1}")
        return issued[-1]

    client = jobs.connect(gke_endpoint=proxy.base, namespace="ns", service="head", token_provider=token)
    assert client.get_address() == proxy.base + PREFIX
    spec = python_job("t-proxy", "import time\nfor i in range(3):\n    print('line', i, flush=True); time.sleep(0.3)")
    assert jobs.submit_attempt(client, spec, 1)[1]
    assert len(issued) > 2  # a token per request, not one for the client's life

    # The CLI takes the same path with --endpoint (Google credentials faked here) and follows
    # the log over the proxied websocket until the job ends.
    monkeypatch.setattr(ray_connection, "google_token_provider", lambda *a, **k: lambda: "tok-2")
    proxy_args = ("--stack", "dev", "--endpoint", proxy.base, "--namespace", "ns", "--head-service", "head")
    code, out, err = run_cli("logs", *proxy_args, "--job", spec.submission_id, "--follow")
    assert (code, err) == (0, "")
    assert all(f"line {i}" in out for i in range(3))
    code, out, err = run_cli("status", *proxy_args, "--job", spec.submission_id)
    assert (code, err) == (0, "") and out.startswith(f"{spec.submission_id}  SUCCEEDED")
    assert proxy.seen and all(s.authorized and s.path.startswith(PREFIX + "/api/") for s in proxy.seen)
    assert any(s.websocket and s.path.endswith(f"/api/jobs/{spec.submission_id}/logs/tail") for s in proxy.seen)


def test_the_proxy_path_reports_bad_credentials_and_a_wrong_service_clearly(proxy):
    with pytest.raises(jobs.DashboardAuthError, match="not authorized"):
        jobs.connect(gke_endpoint=proxy.base, namespace="ns", service="head", token_provider=lambda: "wrong")
    with pytest.raises(jobs.DashboardUnreachable, match="wrong service or namespace"):
        jobs.connect(gke_endpoint=proxy.base, namespace="ns", service="other", token_provider=lambda: "tok-1")


def test_a_dashboard_trickling_its_answer_ends_at_the_overall_deadline(monkeypatch):
    # One byte every 0.2 s: each read is answered long before the read timeout, so only the deadline ends it.
    monkeypatch.setattr(ray_connection, "REQUEST_DEADLINE", 1.0)
    with StalledServer(answer_version=True, trickle=0.2, trickle_bytes=40) as address:
        client = jobs.connect(address)
        started = time.monotonic()
        with pytest.raises(jobs.DashboardUnreachable, match="got no whole answer within 1s"):
            jobs.list_jobs(client)
        assert time.monotonic() - started < 4


TOKEN = "hf_abcdefghijabcdefghijABCDEFGH"
EXTERNAL_ACCOUNT = {
    "type": "external_account",
    "audience": "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p/providers/x",
    "subject_token_type": "urn:ietf:params:oauth:token-type:jwt",
    "token_url": "https://sts.googleapis.com/v1/token",
}


def adc_file(tmp_path, monkeypatch, document, name: str = "adc.json"):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document))
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(path))
    return path


def no_credentials_line(within_s: float = 10.0) -> str:
    """The one line `google_token_provider` (and its first token) fails with, within `within_s` (a FIFO would wait)."""
    import threading

    failure: list[BaseException] = []

    def load() -> None:
        try:
            ray_connection.google_token_provider()()
        except BaseException as exc:  # noqa: BLE001 (asserted below)
            failure.append(exc)

    worker = threading.Thread(target=load, daemon=True)
    worker.start()
    worker.join(within_s)
    assert not worker.is_alive(), "still loading the credentials (a FIFO waited on?)"
    assert failure and isinstance(failure[0], jobs.DashboardAuthError), failure
    text = str(failure[0])
    assert "\n" not in text and "abcdefghij" not in text and len(text) < 900, text
    return text


def test_a_token_in_a_key_files_type_or_path_is_never_repeated(tmp_path, monkeypatch):
    adc_file(tmp_path, monkeypatch, {"type": TOKEN})
    assert "does not have a valid type" in no_credentials_line()
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / TOKEN / "key.json"))
    assert "was not found" in no_credentials_line()


@pytest.mark.parametrize("source", ["directory", "fifo", "dead url"])
def test_an_external_account_whose_source_cannot_be_read_is_one_line_not_a_traceback_or_a_wait(
    source, tmp_path, monkeypatch
):
    import os

    if source == "directory":
        credential_source = {"file": str(tmp_path)}
    elif source == "fifo":
        os.mkfifo(tmp_path / "token.fifo")
        credential_source = {"file": str(tmp_path / "token.fifo")}
    else:
        with socket.socket() as closed:
            closed.bind(("127.0.0.1", 0))
            credential_source = {"url": f"http://127.0.0.1:{closed.getsockname()[1]}/token"}
    adc_file(tmp_path, monkeypatch, {**EXTERNAL_ACCOUNT, "credential_source": credential_source})
    line = no_credentials_line()
    if source != "dead url":
        assert "credential_source.file" in line and ("directory" in line or "named pipe" in line), line


def test_a_token_endpoints_error_description_is_one_line_without_the_credential(tmp_path, monkeypatch):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from stalled_http import AnsweringServer

    key = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    answer = {"error": "invalid_grant", "error_description": f"bad key {TOKEN}\nerror: forged line"}
    with AnsweringServer({"/token": (400, "application/json", json.dumps(answer).encode())}) as url:
        adc_file(
            tmp_path,
            monkeypatch,
            {
                "type": "service_account",
                "private_key": pem,
                "client_email": "a@p.iam.gserviceaccount.com",
                "token_uri": f"{url}/token",
                "project_id": "p",
            },
        )
        line = no_credentials_line()
    assert "token refresh failed" in line, line
