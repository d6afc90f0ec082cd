"""The just-in-time GPU nodes' timer (infra/jit_gpu_nodes.py): a CPU pod that starts the suspended GPU placeholder
Job at the model's lead time before the Ray cluster is expected (Managed Lustre ready, the weights staged), and stops
it again when the RayCluster appears (the Ray workers take the nodes) or when it is later than the bound (the nodes
are given back).

It runs as `python -c` in the NeMo-RL image, so it uses the standard library only, and it talks to the Kubernetes
API with its pod's own service account token (in-cluster: `KUBERNETES_SERVICE_HOST`/`_PORT`, the token, CA and
namespace under /var/run/secrets/kubernetes.io/serviceaccount). Its Role allows exactly these calls: get its own
Job (the creation time the delay counts from, so a late start of the pod, e.g. behind the image pull on the system
node, does not shift the start of the GPU nodes), get the stack's RayCluster, get and patch the placeholder Job.

Why the RayCluster: the program creates it only once Lustre's claim exists and the weights are staged, and the job
submission asks for its workers at once (workloads/hook.py); they take the placeholders' nodes. While it exists the
placeholders are never started: a live stack upgraded to just-in-time nodes starts nothing.
"""

from __future__ import annotations

import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request
from datetime import datetime, timezone
from typing import Any, Callable, Optional

SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
POLL_SECONDS = 15.0

Api = Callable[[str, str, Optional[dict]], tuple[int, dict]]
"""(method, path, JSON merge patch or None) -> (HTTP status, JSON body)."""

LIVE = "lustre-ready-before-start"
EARLY = "lustre-ready-during-delay"
HANDED_OVER = "handed-over"
LATE = "lustre-late-given-back"


def in_cluster_api() -> Api:
    host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"]
    base = f"https://{host}:{port}"
    context = ssl.create_default_context(cafile=f"{SA_DIR}/ca.crt")

    def call(method: str, path: str, body: Optional[dict] = None) -> tuple[int, dict]:
        with open(f"{SA_DIR}/token") as f:  # re-read: the projected token rotates
            token = f.read().strip()
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/merge-patch+json"
        request = urllib.request.Request(base + path, data=data, method=method, headers=headers)
        try:
            with urllib.request.urlopen(request, context=context, timeout=30) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as err:
            return err.code, {}

    return call


def _ok(status: int, what: str) -> None:
    if status != 200:
        raise RuntimeError(f"{what}: HTTP {status}")


def exists(api: Api, path: str) -> bool:
    status, _ = api("GET", path, None)
    if status == 404:
        return False
    _ok(status, f"get {path}")
    return True


def ray_cluster_path(namespace: str, name: str) -> str:
    return f"/apis/ray.io/v1/namespaces/{namespace}/rayclusters/{name}"


def created_at(api: Api, namespace: str, job: str) -> float:
    status, body = api("GET", f"/apis/batch/v1/namespaces/{namespace}/jobs/{job}", None)
    _ok(status, f"get job {job}")
    stamp = body["metadata"]["creationTimestamp"]  # RFC 3339, UTC: 2026-12-07T03:50:40Z
    return datetime.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=timezone.utc).timestamp()


def set_suspended(api: Api, namespace: str, job: str, suspended: bool) -> None:
    status, _ = api("PATCH", f"/apis/batch/v1/namespaces/{namespace}/jobs/{job}", {"spec": {"suspend": suspended}})
    _ok(status, f"patch job {job} suspend={suspended}")


def run(
    api: Api,
    namespace: str,
    timer: str,
    placeholders: str,
    ray_cluster: str,
    delay_seconds: float,
    hold_seconds: float,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], Any] = time.sleep,
    say: Callable[[str], Any] = print,
) -> str:
    """Start the placeholders `delay_seconds` after this timer's Job was created, unless the RayCluster exists by
    then; once started, stop them when it appears (their nodes go to the Ray workers) or `hold_seconds` later
    (Lustre is late: the nodes are given back). Returns what happened (one of the module's outcomes)."""
    watched = ray_cluster_path(namespace, ray_cluster)
    if exists(api, watched):
        say(f"RayCluster {ray_cluster} exists: its workers ask for the GPU nodes themselves; nothing to start")
        return LIVE
    start_at = created_at(api, namespace, timer) + delay_seconds
    while clock() < start_at:
        sleep(min(POLL_SECONDS, max(0.0, start_at - clock())))
        if exists(api, watched):
            say(f"RayCluster {ray_cluster} appeared before the lead time: its workers ask for the GPU nodes")
            return EARLY
    set_suspended(api, namespace, placeholders, False)
    say(f"started {placeholders}: the GPU nodes come now; waiting up to {hold_seconds:.0f} s for {ray_cluster}")
    give_back_at = clock() + hold_seconds
    while clock() < give_back_at:
        if exists(api, watched):
            set_suspended(api, namespace, placeholders, True)
            say(f"RayCluster {ray_cluster} exists: stopped {placeholders}, its nodes go to the Ray workers")
            return HANDED_OVER
        sleep(min(POLL_SECONDS, max(0.0, give_back_at - clock())))
    set_suspended(api, namespace, placeholders, True)
    say(f"no RayCluster {ray_cluster} after {hold_seconds:.0f} s: stopped {placeholders}, its nodes go back")
    return LATE


def main(argv: list[str]) -> int:
    timer, placeholders, ray_cluster, delay, hold = argv
    with open(f"{SA_DIR}/namespace") as f:
        namespace = f.read().strip()
    run(in_cluster_api(), namespace, timer, placeholders, ray_cluster, float(delay), float(hold))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
