"""Pod facts several components share: taints and tolerations, in one place."""

import pytest

from infra.pod_facts import TAINT_EFFECTS, kubernetes_taint, toleration_for, worker_tolerations


def test_gke_taint_effects_become_kubernetes_effects():
    assert kubernetes_taint({"key": "k", "value": "v", "effect": "NO_EXECUTE"}) == {
        "key": "k",
        "value": "v",
        "effect": "NoExecute",
    }


@pytest.mark.parametrize("gke_effect", sorted(TAINT_EFFECTS))
def test_a_node_pool_taint_is_tolerated_alike_in_either_spelling(gke_effect):
    taint = {"key": "k", "value": "v", "effect": gke_effect}
    assert (
        toleration_for(taint)
        == toleration_for(kubernetes_taint(taint))
        == {
            "key": "k",
            "operator": "Equal",
            "value": "v",
            "effect": TAINT_EFFECTS[gke_effect],
        }
    )


def test_workers_tolerate_the_gpu_taint_and_the_spot_shutdown_taint_even_without_pool_taints():
    keys = [t["key"] for t in worker_tolerations([])]
    assert keys == ["nvidia.com/gpu", "cloud.google.com/impending-node-termination"]
