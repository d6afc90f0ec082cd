"""The bounded wait for the whole gang (workloads/gang_wait.py) against a fake cluster view."""

from __future__ import annotations

import pytest

from infra.naming import NODE_POOL_LABEL
from workloads import gang_wait
from workloads.gang_wait import WorkerPod

RUNGS = {"s-gpu-spot": "spot", "s-gpu-flex": "flexStart", "s-gpu-ondemand": "onDemand"}


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class FakeView:
    """Worker pods that get nodes on a schedule: `arrivals[i]` = (seconds, node pool) of worker i, None: never."""

    def __init__(self, clock: FakeClock, arrivals):
        self.clock, self.arrivals = clock, arrivals
        self.released = 0

    def worker_pods(self):
        if self.released:
            return []
        pods = []
        for i, arrival in enumerate(self.arrivals):
            if arrival is not None and self.clock.now >= arrival[0]:
                pods.append(WorkerPod(f"w{i}", "Running", f"node-{i}-{arrival[1]}"))
            else:
                pods.append(WorkerPod(f"w{i}", "Pending", None))
        return pods

    def node_pool(self, node):
        return node.split("-", 2)[2]

    def release(self):
        self.released += 1
        return "worker group gpu scaled to 0"


def run(view, clock, max_wait_s=3600, **kw):
    """The owner's looks every 30 s until the gang completes or the wait times out; the lines it says."""
    while True:
        result = gang_wait.look_at_gang(
            view, want=len(view.arrivals), rungs=RUNGS, waited_s=clock.now, max_wait_s=max_wait_s, **kw
        )
        if result.complete or result.timed_out:
            return result, [result.line]
        clock.sleep(min(30, max(0.0, max_wait_s - clock.now)))


def test_a_gang_that_never_completes_is_said_in_one_line_and_its_partial_nodes_released():
    clock = FakeClock()
    view = FakeView(clock, [(0, "s-gpu-spot"), (60, "s-gpu-spot"), (600, "s-gpu-ondemand"), None, None])
    result, said = run(view, clock, max_wait_s=3600)
    assert not result.complete and result.ready == 3 and result.want == 5
    assert result.by_rung == {"spot": 2, "onDemand": 1}
    assert view.released == 1, "the partial nodes are given back"
    assert result.waited_s >= 3600 and clock.now == pytest.approx(3600)
    assert len(said) == 1 and "\n" not in said[0]
    assert said[0] == (
        "gang incomplete: 3 of 5 GPU nodes after 60 min (spot 2, onDemand 1; no rung gave the rest); "
        "released: worker group gpu scaled to 0"
    )


def test_with_on_timeout_keep_the_workers_stay_and_the_line_says_so():
    clock = FakeClock()
    view = FakeView(clock, [(0, "s-gpu-spot"), None])
    result, said = run(view, clock, max_wait_s=600, release=False)
    assert not result.complete and view.released == 0 and result.released is None
    assert said == [
        "gang incomplete: 1 of 2 GPU nodes after 10 min (spot 1; no rung gave the rest); kept waiting "
        "(gpuPool.capacity.onTimeout: keep)"
    ]


def test_a_gang_from_several_rungs_completes_and_names_its_mix_in_ladder_order():
    clock = FakeClock()
    view = FakeView(clock, [(0, "s-gpu-ondemand"), (90, "s-gpu-spot"), (120, "s-gpu-flex"), (150, "s-gpu-spot")])
    result, said = run(view, clock)
    assert result.complete and view.released == 0
    assert result.by_rung == {"spot": 2, "flexStart": 1, "onDemand": 1}
    assert said == ["gang complete: 4 of 4 GPU nodes after 2 min (spot 2, flexStart 1, onDemand 1)"]
    assert clock.now == pytest.approx(150), "it stops polling as soon as the last worker runs"


def test_the_mix_line_reads_back_as_the_nodes_of_each_rung_the_ledger_prices():
    by_rung = {"spot": 3, "reservation r1": 1, "onDemand": 4}
    line = gang_wait._mix(by_rung, ["spot", "reservation r1", "onDemand"])
    assert line == "spot 3, reservation r1 1, onDemand 4"
    assert gang_wait.mix_counts(line) == by_rung
    assert gang_wait.mix_counts("none") == {} and gang_wait.mix_counts("") == {}


def test_a_pending_pod_bound_to_a_node_does_not_count_until_it_runs():
    class Bound(FakeView):
        def worker_pods(self):
            return [WorkerPod("w0", "Pending", "node-0-s-gpu-spot")]

    clock = FakeClock()
    result, _ = run(Bound(clock, [None]), clock, max_wait_s=60)
    assert not result.complete and result.ready == 0


def test_the_node_pool_label_is_the_one_infra_uses():
    assert gang_wait.NODE_POOL_LABEL == NODE_POOL_LABEL


def test_a_gang_of_nobody_is_refused():
    with pytest.raises(ValueError):
        gang_wait.look_at_gang(FakeView(FakeClock(), []), want=0, rungs={}, waited_s=0, max_wait_s=1)


def test_on_a_one_rung_stack_every_node_is_of_its_rung_whatever_its_pool_is_called():
    clock = FakeClock()
    view = FakeView(clock, [(0, "gk3-autopilot-pool-1"), (0, "gk3-autopilot-pool-2")])
    result = gang_wait.look_at_gang(view, want=2, rungs={}, waited_s=0, max_wait_s=60, default_rung="spot")
    assert result.complete and result.by_rung == {"spot": 2} and result.mix == "spot 2"


def test_one_look_while_waiting_says_how_far_the_gang_is_and_neither_ends_nor_releases():
    clock = FakeClock()
    view = FakeView(clock, [(0, "s-gpu-flex"), (0, "s-gpu-spot"), None])
    result = gang_wait.look_at_gang(view, want=3, rungs=RUNGS, waited_s=59, max_wait_s=60)
    assert not (result.complete or result.timed_out) and view.released == 0
    assert result.line == "waiting for the gang: 2 of 3 GPU nodes (spot 1, flexStart 1)"
    late = gang_wait.look_at_gang(view, want=3, rungs=RUNGS, waited_s=60, max_wait_s=60, release=False, kept_why="why")
    assert late.timed_out and late.line.endswith("; kept waiting (why)") and view.released == 0


# ----------------------------------------------------------------------------- KubeGangView's API calls


def apply_json_patch(doc, ops):
    """RFC 6902 as the API server applies it, for the ops `KubeGangView` sends (test, replace, add); a failed
    `test` or a missing path refuses the whole patch (HTTP 422 there; ValueError here)."""
    import copy

    out = copy.deepcopy(doc)
    for op in ops:
        *parents, last = [p.replace("~1", "/").replace("~0", "~") for p in op["path"].split("/")[1:]]
        target = out
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        key = int(last) if isinstance(target, list) else last
        if op["op"] == "test":
            if target[key] != op["value"]:
                raise ValueError(f"test failed at {op['path']}")
        elif op["op"] == "replace":
            if isinstance(target, dict) and key not in target:
                raise ValueError(f"replace of a missing member {op['path']}")
            target[key] = op["value"]
        elif op["op"] == "add":
            target[key] = op["value"]
        else:
            raise ValueError(op["op"])
    return out


class FakeApi:
    """A Kubernetes API server on localhost answering what `KubeGangView` asks, recording every request; its
    RayCluster takes the JSON patches (`cluster`), so a later read sees them."""

    def __init__(self, pods, nodes, groups, annotations=None):
        import http.server
        import json
        import threading

        self.requests: list[tuple[str, str, str, object]] = []
        self.cluster = {"metadata": {"name": "nemo-rl"}, "spec": {"workerGroupSpecs": groups}}
        if annotations is not None:
            self.cluster["metadata"]["annotations"] = annotations
        api = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self, body):
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                api.requests.append(("GET", self.path, self.headers["Authorization"], None))
                if self.path.startswith("/api/v1/namespaces/nemo-rl/pods?"):
                    self._answer({"items": pods})
                elif self.path.startswith("/api/v1/nodes/"):
                    name = self.path.rsplit("/", 1)[1]
                    pool, created = nodes[name] if isinstance(nodes[name], tuple) else (nodes[name], None)
                    meta = {"labels": {NODE_POOL_LABEL: pool}, **({"creationTimestamp": created} if created else {})}
                    self._answer({"metadata": meta})
                else:
                    self._answer(api.cluster)

            def do_PATCH(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                api.requests.append(("PATCH", self.path, self.headers["Content-Type"], body))
                try:
                    api.cluster = apply_json_patch(api.cluster, body)
                except (ValueError, KeyError, IndexError):
                    self.send_response(422)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self._answer(api.cluster)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()  # a quick shutdown
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"

    def groups(self):
        return self.cluster["spec"]["workerGroupSpecs"]

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def pod(name, phase, node=None, deleting=False, scheduled=None, started=()):
    """A pod as the API returns it; `scheduled`: its PodScheduled time; `started`: each container's running
    startedAt (None: a container still waiting, e.g. pulling its image)."""
    meta = {"name": name, **({"deletionTimestamp": "2027-01-15T08:00:00Z"} if deleting else {})}
    status = {"phase": phase}
    if scheduled:
        status["conditions"] = [
            {"type": "Initialized", "status": "True", "lastTransitionTime": "2027-01-15T06:00:00Z"},
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": scheduled},
        ]
    if started:
        status["containerStatuses"] = [
            {"state": {"running": {"startedAt": s}} if s else {"waiting": {"reason": "ContainerCreating"}}}
            for s in started
        ]
    return {"metadata": meta, "spec": {"nodeName": node} if node else {}, "status": status}


def test_the_kube_view_reads_the_groups_pods_and_their_nodes_pools_and_scales_the_group_to_zero():
    api = FakeApi(
        [pod("w0", "Running", "n0"), pod("w1", "Running", "n1", deleting=True), pod("w2", "Pending")],
        {"n0": "t-gpu-spot", "n1": "t-gpu-spot"},
        [{"groupName": "other"}, {"groupName": "gpu", "replicas": 8, "minReplicas": 8}],
    )
    try:
        view = gang_wait.KubeGangView(api.base, "tok", None, "nemo-rl", "nemo-rl", "gpu")
        # A pod being deleted is no part of the gang, whatever phase it still shows.
        assert view.worker_pods() == [WorkerPod("w0", "Running", "n0"), WorkerPod("w2", "Pending", None)]
        assert view.node_pool("n0") == view.node_pool("n0") == "t-gpu-spot"
        said = view.release()
    finally:
        api.close()
    method, path, auth, _ = api.requests[0]
    assert (method, auth) == ("GET", "Bearer tok")
    assert path == "/api/v1/namespaces/nemo-rl/pods?labelSelector=ray.io/cluster%3Dnemo-rl%2Cray.io/group%3Dgpu"
    assert [r[1] for r in api.requests].count("/api/v1/nodes/n0") == 1, "a node's pool is read once"
    assert api.requests[-2][:2] == ("GET", "/apis/ray.io/v1/namespaces/nemo-rl/rayclusters/nemo-rl")
    assert api.requests[-1] == (
        "PATCH",
        "/apis/ray.io/v1/namespaces/nemo-rl/rayclusters/nemo-rl",
        "application/json-patch+json",
        [
            {"op": "test", "path": "/spec/workerGroupSpecs/1/groupName", "value": "gpu"},
            {"op": "replace", "path": "/spec/workerGroupSpecs/1/replicas", "value": 0},
            {"op": "replace", "path": "/spec/workerGroupSpecs/1/minReplicas", "value": 0},
        ],
    )
    assert said == "worker group gpu of RayCluster nemo-rl scaled to 0"
    assert api.groups()[1] == {"groupName": "gpu", "replicas": 0, "minReplicas": 0}


class BrokenView(FakeView):
    """The API answers nothing (an expired token, the API server away): every look raises as urllib does."""

    def worker_pods(self):
        raise OSError("HTTP Error 401: Unauthorized")


def test_an_api_error_before_the_bound_is_raised_for_the_owner_to_wait_and_look_again():
    view = BrokenView(FakeClock(), [None, None])
    with pytest.raises(OSError, match="401"):
        gang_wait.look_at_gang(view, want=2, rungs=RUNGS, waited_s=600, max_wait_s=3600)
    assert view.released == 0


def test_past_the_bound_an_api_error_still_releases_the_workers_so_partial_nodes_are_not_held_forever():
    view = BrokenView(FakeClock(), [None, None])
    result = gang_wait.look_at_gang(view, want=2, rungs=RUNGS, waited_s=3600, max_wait_s=3600)
    assert view.released == 1
    assert (result.complete, result.timed_out, result.released) == (False, True, "worker group gpu scaled to 0")
    assert result.line == (
        "gang unseen after 60 min (cannot look at the gang: HTTP Error 401: Unauthorized); "
        "released: worker group gpu scaled to 0"
    )


def test_past_the_bound_an_api_error_with_on_timeout_keep_ends_the_wait_and_keeps_the_workers():
    view = BrokenView(FakeClock(), [None, None])
    result = gang_wait.look_at_gang(view, want=2, rungs=RUNGS, waited_s=3601, max_wait_s=3600, release=False)
    assert view.released == 0
    assert (result.timed_out, result.released) == (True, None)
    assert result.line.endswith(f"kept waiting ({gang_wait.KEEP_WHY})")


def test_the_in_cluster_view_reads_the_service_account_token_again_for_every_request(tmp_path, monkeypatch):
    api = FakeApi([pod("w0", "Running", "n0")], {"n0": "t-gpu-spot"}, [{"groupName": "gpu"}])
    (tmp_path / "token").write_text("first\n")
    monkeypatch.setattr(gang_wait, "SA_DIR", tmp_path)
    monkeypatch.setattr(gang_wait.ssl, "create_default_context", lambda cafile: None)  # no ca.crt here
    host, port = api.base.removeprefix("http://").split(":")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", host)
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", port)
    try:
        view = gang_wait.KubeGangView.in_cluster("nemo-rl", "nemo-rl", "gpu")
        view.base = api.base  # the fake speaks plain HTTP
        view.worker_pods()
        (tmp_path / "token").write_text("rotated\n")  # the kubelet rotates the projected token
        view.worker_pods()
    finally:
        api.close()
    assert [r[2] for r in api.requests] == ["Bearer first", "Bearer rotated"]


def test_the_kube_view_reads_when_each_pod_was_bound_and_started_and_when_its_node_registered():
    api = FakeApi(
        [
            pod("w0", "Running", "n0", scheduled="2027-01-15T08:06:00Z", started=["2027-01-15T08:17:30Z"]),
            pod("w1", "Running", "n1", scheduled="2027-01-15T08:07:00Z", started=["2027-01-15T08:18:00Z", None]),
        ],
        {"n0": ("t-gpu-spot", "2027-01-15T08:04:00Z"), "n1": ("t-gpu-spot", "2027-01-15T08:05:00Z")},
        [],
    )
    try:
        view = gang_wait.KubeGangView(api.base, "tok", None, "nemo-rl", "nemo-rl", "gpu")
        w0, w1 = view.worker_pods()
        created = view.node_created("n0"), view.node_pool("n0")
    finally:
        api.close()
    at = gang_wait.kube_time
    assert (w0.scheduled_at, w0.started_at) == (at("2027-01-15T08:06:00Z"), at("2027-01-15T08:17:30Z"))
    # A second container still waiting: the pod has not started as a whole.
    assert (w1.scheduled_at, w1.started_at) == (at("2027-01-15T08:07:00Z"), None)
    assert created == (at("2027-01-15T08:04:00Z"), "t-gpu-spot")
    assert [r[1] for r in api.requests].count("/api/v1/nodes/n0") == 1, "a node is read once for both"


def test_a_kubernetes_timestamp_is_read_as_utc_epoch_seconds():
    assert gang_wait.kube_time("1970-01-01T01:00:05Z") == 3605.0
    assert gang_wait.kube_time("2027-01-15T08:04:00Z") - gang_wait.kube_time("2027-01-15T08:03:00Z") == 60.0
    assert gang_wait.kube_time(None) is None and gang_wait.kube_time("") is None


class TimedView:
    """Pods with their times: `pods[i]` = (scheduled, started, node created), epoch seconds or None."""

    def __init__(self, pods, asked_at=None):
        self.pods, self.asked_at = pods, asked_at

    def group(self):
        return gang_wait.WorkerGroup(0, len(self.pods), 0, len(self.pods), None, self.asked_at)

    def worker_pods(self):
        return [
            WorkerPod(f"w{i}", "Running" if started else "Pending", f"n{i}", scheduled, started)
            for i, (scheduled, started, _) in enumerate(self.pods)
        ]

    def node_pool(self, node):
        return "gpu"

    def node_created(self, node):
        return self.pods[int(node[1:])][2]

    def release(self):
        return "released"


def test_the_pods_marks_are_the_first_node_registered_the_last_pod_bound_and_the_last_pod_started():
    view = TimedView([(1060.0, 1700.0, 1000.0), (1120.0, 1660.0, 1030.0), (1090.0, 1750.0, 1010.0)])
    assert gang_wait.pod_marks(view, 3) == {"paidFrom": 1000.0, "nodesReady": 1120.0, "podsRunning": 1750.0}


def test_there_are_no_pod_marks_until_the_whole_gang_runs_with_its_containers_started():
    pulling = TimedView([(1060.0, 1700.0, 1000.0), (1120.0, None, 1030.0)])
    assert gang_wait.pod_marks(pulling, 2) == {}
    assert gang_wait.pod_marks(TimedView([(1060.0, 1700.0, 1000.0)]), 2) == {}
    # Nodes of unknown registration: the pods' own marks still hold, and paid time starts where it did.
    unknown = TimedView([(1060.0, 1700.0, None)])
    assert gang_wait.pod_marks(unknown, 1) == {"nodesReady": 1060.0, "podsRunning": 1700.0}
