"""Waiting for the RayCluster: `workloads.readiness` against a fake Kubernetes API server, and the
job hook's create waiting for it before it submits (against the shared local Ray head)."""

from __future__ import annotations

import json
import shlex
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Optional

import pytest

from workloads import hook, ray_connection, readiness
from workloads import submit as jobs
from workloads.hook import JobSubmissionProvider
from workloads.job_spec import META_STACK, JobSpec

TOKEN = "ya29.fake-token"
NS, NAME = "nemo-rl", "test-ray"
PATH = f"/apis/ray.io/v1/namespaces/{NS}/rayclusters/{NAME}"


def raycluster(head_ready: bool, ready: int, desired: int = 2, provisioned: Optional[bool] = None) -> dict:
    """A RayCluster as KubeRay reports it while its pods come up. `RayClusterProvisioned` turns true once every pod
    was ready and never back (ray-project/kuberay v1.7.0 ray-operator/apis/ray/v1/raycluster_types.go)."""
    provisioned = head_ready and ready >= desired if provisioned is None else provisioned
    conditions = [
        {
            "type": "HeadPodReady",
            "status": "True" if head_ready else "False",
            "reason": "HeadPodRunningAndReady" if head_ready else "ContainersNotReady",
        },
        {
            "type": "RayClusterProvisioned",
            "status": "True" if provisioned else "False",
            "reason": "AllPodRunningAndReadyFirstTime" if provisioned else "RayClusterPodsProvisioning",
        },
    ]
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": NAME, "namespace": NS},
        "status": {"conditions": conditions, "readyWorkerReplicas": ready, "desiredWorkerReplicas": desired},
    }


NOT_FOUND = (404, {"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404})
PROVISIONING = (200, raycluster(False, 0))
PROVISIONED = (200, raycluster(True, 2))
RELEASED = (200, raycluster(True, 0, desired=0, provisioned=True))
"""After the run's owner released the workers: still "provisioned", no worker."""


@dataclass
class FakeApiServer:
    """Serves `PATH` from `script`, one entry per GET (the last one repeats); 401 without the token."""

    script: list = field(default_factory=list)
    seen: list = field(default_factory=list)
    base: str = ""

    def start(self) -> "FakeApiServer":
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's name)
                authorized = self.headers.get("Authorization") == f"Bearer {TOKEN}"
                fake.seen.append((self.path, authorized, time.monotonic()))
                if not authorized:
                    code, body = 401, {"kind": "Status", "reason": "Unauthorized", "code": 401}
                elif self.path != PATH:
                    code, body = NOT_FOUND
                else:
                    served = sum(1 for p, ok, _ in fake.seen if ok and p == PATH)
                    code, body = fake.script[min(served, len(fake.script)) - 1]
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="fake-kube-api", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def api():
    server = FakeApiServer().start()
    yield server
    server.stop()


class FakeClock:
    """A clock that only `sleep` advances: a long timeout without waiting for it."""

    def __init__(self):
        self.now, self.slept = 0.0, []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_waits_through_not_found_and_provisioning_until_provisioned(api):
    api.script = [NOT_FOUND, PROVISIONING, PROVISIONED]
    tokens, seen = [], []

    def headers():
        tokens.append(TOKEN)  # a fresh token on every poll
        return {"Authorization": f"Bearer {TOKEN}"}

    clock = FakeClock()
    obj = readiness.wait_for_raycluster(
        api.base,
        NS,
        NAME,
        headers=headers,
        verify=False,
        timeout_s=3600,
        poll_s=10,
        on_status=seen.append,
        clock=clock,
        sleep=clock.sleep,
    )
    assert obj["metadata"]["name"] == NAME and obj["status"]["readyWorkerReplicas"] == 2
    assert [(p.found, p.ready_workers, p.desired_workers, p.ready) for p in seen] == [
        (False, None, None, False),
        (True, 0, 2, False),
        (True, 2, 2, True),
    ]
    assert "workers 0/2 ready" in seen[1].describe() and "RayClusterPodsProvisioning" in seen[1].describe()
    assert [p for p, ok, _ in api.seen] == [PATH] * 3 and all(ok for _, ok, _ in api.seen)
    assert len(tokens) == 3 and clock.slept == [10, 10]


def test_times_out_naming_the_cluster_and_the_last_reason(api):
    api.script = [NOT_FOUND, PROVISIONING]
    clock = FakeClock()
    with pytest.raises(readiness.RayClusterNotReady) as err:
        readiness.wait_for_raycluster(
            api.base,
            NS,
            NAME,
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout_s=60,
            poll_s=10,
            clock=clock,
            sleep=clock.sleep,
        )
    message = str(err.value)
    assert f"RayCluster {NS}/{NAME}: head not ready after 60s" in message
    assert "RayClusterProvisioned=False (RayClusterPodsProvisioning)" in message and "workers 0/2 ready" in message
    assert "\n" not in message and err.value.last.conditions
    assert clock.now == 60 and len(api.seen) == 7  # polls at 0, 10, ..., 60 s


def test_never_created_times_out_saying_so(api):
    api.script = [NOT_FOUND]
    clock = FakeClock()
    with pytest.raises(readiness.RayClusterNotReady, match="not found"):
        readiness.wait_for_raycluster(
            api.base,
            NS,
            NAME,
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout_s=30,
            poll_s=10,
            clock=clock,
            sleep=clock.sleep,
        )


@pytest.mark.parametrize("token", ["wrong", None])
def test_an_auth_failure_ends_the_wait_at_once(api, token):
    api.script = [PROVISIONED]
    clock = FakeClock()
    started = time.monotonic()
    with pytest.raises(readiness.RayClusterAuthError, match="HTTP 401") as err:
        readiness.wait_for_raycluster(
            api.base,
            NS,
            NAME,
            headers={"Authorization": f"Bearer {token}"} if token else None,
            timeout_s=3600,
            poll_s=10,
            clock=clock,
            sleep=clock.sleep,
        )
    assert clock.slept == [] and len(api.seen) == 1 and time.monotonic() - started < 30
    assert "rayclusters.ray.io" in str(err.value)


def test_a_transient_server_error_keeps_the_last_real_view(api):
    api.script = [PROVISIONING, (500, {"reason": "InternalError"})]
    clock = FakeClock()
    with pytest.raises(readiness.RayClusterNotReady) as err:
        readiness.wait_for_raycluster(
            api.base,
            NS,
            NAME,
            headers={"Authorization": f"Bearer {TOKEN}"},
            timeout_s=30,
            poll_s=10,
            clock=clock,
            sleep=clock.sleep,
        )
    assert "RayClusterPodsProvisioning" in str(err.value)


def test_without_conditions_the_deprecated_state_and_every_worker_count():
    old = {"status": {"state": "ready", "readyWorkerReplicas": 1, "desiredWorkerReplicas": 2}}
    assert not readiness.progress_of(old, 0).ready
    old["status"]["readyWorkerReplicas"] = 2
    assert readiness.progress_of(old, 0).ready
    head_only = raycluster(True, 2)
    head_only["status"]["conditions"][0]["status"] = "False"  # provisioned once, head down now
    assert not readiness.progress_of(head_only, 0).ready


def test_the_gke_variant_sends_the_google_token(api, monkeypatch):
    api.script = [PROVISIONED]
    monkeypatch.setattr(ray_connection, "google_token_provider", lambda *a, **k: lambda: TOKEN)
    assert readiness.wait_for_raycluster_on_gke(api.base, NS, NAME, timeout_s=5, poll_s=0.01)["kind"] == "RayCluster"


# ------------------------------------------------------------------ the hook


def hook_props(head, api, **extra) -> dict:
    spec = JobSpec.create(
        stack=f"t-ready-{uuid.uuid4().hex[:6]}",
        recipe="r",
        entrypoint=f"{shlex.quote(sys.executable)} -c 'print(1)'",
        runtime_env={"env_vars": {"RAY_OVERRIDE_JOB_RUNTIME_ENV": "1"}},
    )
    # The dashboard at the local head; the RayCluster at the fake API server.
    return {
        **spec.to_dict(),
        "address": head.address,
        "gke_endpoint": api.base,
        "namespace": NS,
        "ray_cluster_name": NAME,
        "__provider": "serialized",
        **extra,
    }


@pytest.fixture
def fast_hook(monkeypatch):
    monkeypatch.setattr(ray_connection, "google_token_provider", lambda *a, **k: lambda: TOKEN)
    monkeypatch.setattr(hook, "RAY_CLUSTER_POLL", 0.02)
    submitted = []
    real_submit = jobs.submit_attempt

    # Every submission of a training attempt goes through submit_attempt (the hook via workloads.run_owner).
    def recording_submit(client, spec, attempt, metadata=None):
        submitted.append(spec.submission_id)
        return real_submit(client, spec, attempt, metadata)

    monkeypatch.setattr(jobs, "submit_attempt", recording_submit)
    return submitted


def test_create_waits_for_the_raycluster_before_submitting(head, api, fast_hook, capsys, monkeypatch):
    api.script = [NOT_FOUND, PROVISIONING, PROVISIONED]
    seen_at_submit = []
    real = jobs.submit_attempt
    monkeypatch.setattr(
        jobs,
        "submit_attempt",
        lambda client, spec, *a: (seen_at_submit.append(len(api.seen)), real(client, spec, *a))[1],
    )
    props = hook_props(head, api)
    started = time.monotonic()
    created = JobSubmissionProvider().create(props)
    assert time.monotonic() - started < 30, "the readiness polls did not use the fast poll interval"
    assert created.id == props["submission_id"] and fast_hook == [props["submission_id"]]
    assert seen_at_submit == [3], "submitted before the RayCluster was provisioned"
    assert created.outs["ray_cluster_name"] == NAME
    assert "workers 0/2 ready" in capsys.readouterr().err  # progress goes to the provider's stderr


def test_create_does_not_submit_when_the_raycluster_never_gets_ready(head, api, fast_hook):
    api.script = [NOT_FOUND, PROVISIONING]
    props = hook_props(head, api, ray_cluster_timeout=2)
    with pytest.raises(readiness.RayClusterNotReady, match=f"{NS}/{NAME}.*RayClusterPodsProvisioning"):
        JobSubmissionProvider().create(props)
    assert fast_hook == [] and jobs.list_jobs(jobs.connect(head.address), props["metadata"][META_STACK]) == []


def test_update_waits_too_and_an_empty_name_skips_the_wait(head, api, fast_hook):
    api.script = [(403, {"reason": "Forbidden"})]
    props = hook_props(head, api)
    with pytest.raises(readiness.RayClusterAuthError, match="HTTP 403"):
        JobSubmissionProvider().update("x", props, props)
    assert fast_hook == []
    assert JobSubmissionProvider().diff("x", props, {**props, "ray_cluster_name": "other"}).changes is True
    local = {**props, "ray_cluster_name": ""}
    JobSubmissionProvider().create(local)  # no API server involved
    assert fast_hook == [props["submission_id"]] and len(api.seen) == 1


def test_a_deploy_after_the_workers_were_released_asks_for_them_and_submits_only_once_ray_counts_them(
    head, api, fast_hook, monkeypatch
):
    # The RayCluster says "provisioned" for ever once it was (the one-way condition), with no worker: the run's owner
    # released them after the last run. A `pulumi up` with a changed job must ask for them and wait for Ray to see them.
    from test_gang_wait import FakeApi

    from workloads import worker_group
    from workloads.gang_wait import CLAIM_ANNOTATION, KubeGangView

    api.script = [RELEASED]
    kube = FakeApi([], {}, [{"groupName": "gpu", "replicas": 0, "minReplicas": 0, "maxReplicas": 2}])
    views = []
    monkeypatch.setattr(
        hook, "_worker_view", lambda props: views.append(props) or KubeGangView(kube.base, TOKEN, None, NS, NAME, "gpu")
    )
    polls = []

    def alive(_client):  # KubeRay and GKE bring the workers two polls after the group was scaled up
        polls.append(kube.groups()[0]["replicas"])
        return 2 if polls.count(2) >= 3 else 0

    monkeypatch.setattr(worker_group, "alive_gpu_nodes", alive)
    submitted_with = []
    real = jobs.submit_attempt
    monkeypatch.setattr(
        jobs, "submit_attempt", lambda client, spec, *a: (submitted_with.append(list(polls)), real(client, spec, *a))[1]
    )
    props = hook_props(head, api, worker_group="gpu", worker_replicas=2)
    try:
        created = JobSubmissionProvider().create(props)
    finally:
        kube.close()
    assert created.id == props["submission_id"]
    assert submitted_with == [[2, 2, 2]], "submitted before Ray counted the workers"
    assert kube.groups()[0]["replicas"] == 2
    claim = float(kube.cluster["metadata"]["annotations"][CLAIM_ANNOTATION])
    assert claim > time.time() + worker_group.CLAIM_TTL_S - 60, "the claim holds the workers against the release"


def test_a_deploy_whose_workers_never_come_submits_nothing_and_says_how_many_came(head, api, fast_hook, monkeypatch):
    from test_gang_wait import FakeApi

    from workloads import worker_group
    from workloads.gang_wait import KubeGangView

    api.script = [RELEASED]
    kube = FakeApi([], {}, [{"groupName": "gpu", "replicas": 0, "minReplicas": 0, "maxReplicas": 2}])
    monkeypatch.setattr(hook, "_worker_view", lambda props: KubeGangView(kube.base, TOKEN, None, NS, NAME, "gpu"))
    monkeypatch.setattr(worker_group, "alive_gpu_nodes", lambda _client: 1)
    props = hook_props(head, api, worker_group="gpu", worker_replicas=2, ray_cluster_timeout=0.5)
    try:
        with pytest.raises(worker_group.WorkersNotReady, match="1 of 2 Ray GPU workers alive after"):
            JobSubmissionProvider().create(props)
    finally:
        kube.close()
    assert fast_hook == []
