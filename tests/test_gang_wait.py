"""The bounded wait for the whole gang (workloads/gang_wait.py) against a fake cluster view."""

from __future__ import annotations

import pytest

from infra.naming import NODE_POOL_LABEL
from workloads import gang_wait
from workloads.gang_wait import WorkerPod, wait_for_gang

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


def run(view, clock, **kw):
    said = []
    result = wait_for_gang(
        view,
        want=len(view.arrivals),
        rungs=RUNGS,
        max_wait_s=kw.pop("max_wait_s", 3600),
        say=said.append,
        poll_s=30,
        clock=clock,
        sleep=clock.sleep,
        **kw,
    )
    return result, said


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
        wait_for_gang(FakeView(FakeClock(), []), want=0, rungs={}, max_wait_s=1)
