"""The Ray GPU worker group's one writer: asked for before every attempt, released once no run needs it.

The Helm values install the group at 0 replicas, between 0 and the pool's node count (infra/ray_cluster.py), so
no Helm upgrade or reinstall brings billed workers back: Helm sends the worker group list whole in its JSON merge
patch of a custom resource (helm/helm pkg/kube/client.go `createPatch`: `jsonpatch.CreateMergePatch` for
unstructured objects), and a `replicas: N` there would undo the owner's release. Every path that starts an attempt
(the deploy hook, `python -m jobctl submit` and `gate`, the watcher's resubmission) asks for the workers here
first, with a claim (an annotation on the RayCluster, renewed while it waits) that the watcher's release
honours; the watcher releases the workers when the run has ended, and again whenever they come back with no
attempt to need them and no live claim (a hand edit, a submitter that died after asking). docs/architecture.md.

Readiness counts workers: Ray's alive GPU nodes, never KubeRay's `RayClusterProvisioned`, which stays true once
set (ray-project/kuberay v1.7.0 ray-operator/apis/ray/v1/raycluster_types.go), also after a release to 0.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Callable, Optional

if TYPE_CHECKING:
    from workloads.gang_wait import GangView, WorkerGroup

CLAIM_TTL_S = 600.0
"""How long a claim holds the workers against the owner's release without being renewed: a submitter renews it on
every poll while it waits, so only a submitter that died leaves workers idle, for at most this plus one look."""
POLL_S = 10.0


class WorkersNotReady(Exception):
    """The workers asked for did not all join Ray within the bound; `str()` is one line."""


def ask(view: "GangView", want: int, now: float) -> Optional[int]:
    """Scale the group to `want` and claim it until `now + CLAIM_TTL_S`; the replicas it had, or None when it
    had `want` already."""
    return view.scale(want, claim_until=now + CLAIM_TTL_S, asked_at=now)


def claimed(view: "GangView", now: float) -> bool:
    """Whether a party that asked for the workers still holds them (the owner then does not release them)."""
    until = view.group().claimed_until
    return until is not None and until > now


def claim_after(group: "WorkerGroup", ended: float, now: float) -> bool:
    """Whether a live claim was made after `ended` (the run's end): a claim from before it is the ended run's own (its
    submitter asked, then the attempt ran), which must not hold its workers for another `CLAIM_TTL_S`. The ask's time
    is the claim's end less the TTL, on the submitter's clock; a new submission asks minutes after the end, far more
    than clocks disagree."""
    until = group.claimed_until
    return until is not None and until > now and until - CLAIM_TTL_S >= ended


def alive_gpu_nodes(client: Any) -> int:
    """Ray's alive nodes with GPUs: the workers NeMo-RL's placement groups can use (the node set a gate verdict
    belongs to, `run_owner.worker_node_ids`)."""
    from workloads import run_owner, submit

    return len(run_owner.worker_node_ids(submit.ray_nodes(client)))


def ensure_workers(
    view: Optional["GangView"],
    want: int,
    alive: Callable[[], int],
    *,
    timeout_s: float,
    poll_s: Optional[float] = None,
    on_line: Callable[[str], None] = lambda _l: None,
    clock: Callable[[], float] = time.time,
    monotonic: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    fallback: str = "",
) -> int:
    """Ask for `want` workers (through `view`; None: no Kubernetes API to ask, only Ray's count is checked) and
    wait until `alive()` counts them. The ask is repeated on every poll, so a release that raced this wait is
    undone and the claim stays live. Returns the count; raises `WorkersNotReady` after `timeout_s`, or at once
    without a `view` when they are missing (`fallback`: the command that asks for them by hand)."""
    if want < 1:
        return alive()
    poll_s = POLL_S if poll_s is None else poll_s
    deadline = monotonic() + timeout_s
    shown = ""
    while True:
        if view is not None:
            had = ask(view, want, clock())
            if had is not None:
                on_line(f"Ray workers asked for: {had} -> {want} (GKE adds the GPU nodes for them)")
        count = alive()
        if count >= want:
            return count
        if view is None:
            raise WorkersNotReady(
                f"{count} of {want} Ray GPU workers alive and no Kubernetes API to ask for the rest"
                + (f": run `{fallback}`, then submit again" if fallback else "")
            )
        line = f"waiting for the Ray GPU workers: {count} of {want} alive"
        if line != shown:
            shown = line
            on_line(line)
        if monotonic() + poll_s > deadline:
            raise WorkersNotReady(
                f"{count} of {want} Ray GPU workers alive after {timeout_s / 60:.0f} min (spot capacity, image "
                "pulls): nothing was submitted; their claim lapses and the run's owner gives them back"
            )
        sleep(poll_s)
