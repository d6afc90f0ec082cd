"""Connecting to the Ray dashboard (`workloads.ray_connection`): unreachable and stalled dashboards, timeouts
on every call, and the GKE API server's service proxy with a bearer token, against a real local Ray head
and local stand-ins. Only 127.0.0.1 is contacted.
"""

from __future__ import annotations

import io
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
