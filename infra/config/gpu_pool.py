"""`gpuPool`: the GPU node pool and how its nodes are obtained."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any, Literal, Optional

from pydantic import BeforeValidator, Field

from infra.config.base import Model
from infra.config.errors import KeyedValueError, shown
from infra.config.patterns import DISK_IMAGE, LOWER_NAME


class Provisioning(str, Enum):
    """How the GPU nodes are obtained."""

    SPOT = "spot"
    RESERVATION = "reservation"
    FLEX_START = "flexStart"
    ON_DEMAND = "onDemand"


@dataclass(frozen=True)
class Rung:
    """One rung of the capacity ladder: how its nodes are obtained (and which reservation)."""

    provisioning: Provisioning
    reservation_name: Optional[str] = None

    @property
    def label(self) -> str:
        """How the plan, the pool names and the gang report name the rung."""
        if self.provisioning is Provisioning.RESERVATION:
            return f"reservation {self.reservation_name}"
        return self.provisioning.value


class RungConfig(Model):
    """A rung as a stack file writes it: `spot`, `flexStart`, `onDemand` or `{reservation: NAME}`."""

    provisioning: Provisioning
    """How the rung's nodes are obtained."""
    reservation_name: Optional[str] = Field(None, pattern=LOWER_NAME, max_length=63)
    """The Compute Engine reservation of a reservation rung."""


DISK_IMAGE_URL = "https://www.googleapis.com/compute/v1/"
"""How the Cloud console's "Equivalent REST" and `gcloud compute images describe --format='value(selfLink)'` write an
image (Compute Engine API, `Image.selfLink`): the path after it is the form the node pool takes."""


def read_disk_image(value: Any) -> Any:
    """An image's full URL (its `selfLink`) read as its path `projects/PROJECT/global/images/NAME`."""
    if isinstance(value, str) and value.startswith(DISK_IMAGE_URL):
        return value[len(DISK_IMAGE_URL) :]
    return value


RUNG_HELP = "spot, flexStart, onDemand or {reservation: NAME}"
SHORT_RUNGS = (Provisioning.SPOT.value, Provisioning.FLEX_START.value, Provisioning.ON_DEMAND.value)
_RUNG_KEYS = {"provisioning", "reservationName"}  # RungConfig's keys, as a stack file writes them


def expand_rung_shorthand(value: Any) -> Any:
    """`spot` means {provisioning: spot}; `{reservation: NAME}` a reservation rung."""
    if not isinstance(value, (list, tuple)):
        return value
    if not value:
        raise ValueError(f"an empty ladder is not allowed; allowed: one or more of {RUNG_HELP}")
    rungs = []
    for i, raw in enumerate(value):
        if isinstance(raw, dict) and set(raw) == {"reservation"}:
            raw = {"provisioning": Provisioning.RESERVATION.value, "reservationName": raw["reservation"]}
        elif isinstance(raw, str) and raw in SHORT_RUNGS:
            raw = {"provisioning": raw}
        elif not isinstance(raw, dict):
            raise KeyedValueError(f"[{i}]", f"{shown(raw)} is not allowed; allowed: {RUNG_HELP}")
        elif not set(raw) <= _RUNG_KEYS:
            # One line for the rung, not one per key pydantic would find wrong in it.
            unknown = sorted(str(k) for k in set(raw) - _RUNG_KEYS)
            close = difflib.get_close_matches(unknown[0], ["reservation", *_RUNG_KEYS], n=1, cutoff=0.6)
            hint = f"did you mean {close[0]}? " if close else ""
            raise KeyedValueError(
                f"[{i}]", f"unknown key(s) {shown(', '.join(unknown))} in a rung; {hint}allowed: {RUNG_HELP}"
            )
        rungs.append(raw)
    return rungs


def check_ladder_rungs(capacity: CapacityConfig) -> None:
    """A reservation rung has its name and no other rung has one; each rung appears once."""
    seen: set[tuple[Provisioning, Optional[str]]] = set()
    for i, r in enumerate(capacity.ladder):
        if (r.provisioning is Provisioning.RESERVATION) != bool(r.reservation_name):
            raise KeyedValueError(
                f"ladder[{i}]", f"a reservation rung needs its name and no other rung has one; allowed: {RUNG_HELP}"
            )
        key = (r.provisioning, r.reservation_name)
        if key in seen:
            raise KeyedValueError(f"ladder[{i}]", f"{Rung(*key).label} appears twice; allowed: each rung once")
        seen.add(key)


class CapacityConfig(Model):
    """`gpuPool.capacity`: the ordered capacity ladder GKE's autoscaler walks through a ComputeClass."""

    ladder: Annotated[tuple[RungConfig, ...], BeforeValidator(expand_rung_shorthand)]
    """Ordered rungs, most preferred first: each of spot, flexStart, onDemand or {reservation: NAME}. One GPU pool per
    rung (same machine, NICs and RDMA networks, autoscaled 0..nodeCount) and a ComputeClass whose priorities name them
    in this order; a gang may mix nodes of several rungs."""
    max_wait_minutes: int = Field(60, ge=5, le=7 * 24 * 60)
    """How long the run owner (the preemption watcher) waits for the whole gang (gpuPool.nodeCount Ray workers running,
    on nodes of any rungs) before each attempt it submits; then it says so in one line and acts by `onTimeout`. Also
    with a one-rung ladder."""
    on_timeout: Literal["releaseWorkers", "keep"] = "releaseWorkers"
    """`releaseWorkers` (default): scale the Ray worker group to 0 and submit nothing for that attempt, so the
    autoscaler removes the partial nodes (every GPU pool autoscales from 0 to nodeCount); `keep`: only say so, keep
    waiting, submit once the gang is whole."""

    checks = (check_ladder_rungs,)


def check_gpu_pool_provisioning(pool: GpuPoolConfig) -> None:
    """`capacity` or `provisioning`/`reservationName`, not both; a reservation has its name; no flex-start with
    compact placement."""
    if pool.capacity is not None:
        both = sorted({"provisioning", "reservation_name"} & pool.model_fields_set)
        if both:
            key = {"provisioning": "provisioning", "reservation_name": "reservationName"}[both[0]]
            raise KeyedValueError(
                key, "is set next to gpuPool.capacity; allowed: one of them (a one-rung ladder is `provisioning`)"
            )
        if pool.compact_placement and any(r.provisioning is Provisioning.FLEX_START for r in pool.ladder):
            raise KeyedValueError(
                "compactPlacement", "not allowed with a flexStart rung in gpuPool.capacity; allowed: false"
            )
        if len(pool.ladder) == 1:
            # A one-rung ladder is that one `provisioning` (the single pool, its price, the doctor's
            # reservation check read these two fields); frozen, so set past pydantic's guard, once, here.
            (rung,) = pool.ladder
            object.__setattr__(pool, "provisioning", rung.provisioning)
            object.__setattr__(pool, "reservation_name", rung.reservation_name)
        return
    if pool.provisioning is Provisioning.RESERVATION and not pool.reservation_name:
        raise KeyedValueError("reservationName", "required when gpuPool.provisioning is 'reservation'")
    if pool.provisioning is not Provisioning.RESERVATION and pool.reservation_name:
        raise KeyedValueError("reservationName", "only allowed when gpuPool.provisioning is 'reservation'")
    if pool.provisioning is Provisioning.FLEX_START and pool.compact_placement:
        raise KeyedValueError("compactPlacement", "not allowed with gpuPool.provisioning 'flexStart'; allowed: false")


class GpuPoolConfig(Model):
    """The GPU node pool."""

    node_count: int = Field(1, ge=1, le=64)
    """GPU nodes in the pool; the Ray worker replicas and the job's `cluster.num_nodes`."""
    provisioning: Provisioning = Provisioning.SPOT
    """`spot` (default, cheapest, preemptible), `reservation` (needs `reservationName`), `flexStart` (flex-start VMs:
    the pool starts empty and GKE's autoscaler gets nodes for the pending Ray workers, for at most seven days each) or
    `onDemand`. A one-rung `gpuPool.capacity`; set one or the other."""
    reservation_name: Optional[str] = Field(None, pattern=LOWER_NAME, max_length=63)
    """Compute Engine reservation to consume when `provisioning` is `reservation`."""
    compact_placement: bool = False
    """Ask for a COMPACT placement policy (lower latency between nodes)."""
    gpu_driver_version: Literal["DEFAULT", "LATEST"] = "LATEST"
    """GPU driver GKE installs on the nodes."""
    warm_minutes: Optional[int] = Field(None, ge=10, le=240)
    """Off by default (unset). Warm the GPU pool during Managed Lustre's creation, for those who value time over money:
    a Job of `nodeCount` placeholder pods (priority -10, the NeMo-RL image, one whole node each) makes the autoscaler
    bring the GPU nodes and pull the image while Lustre is created; the Ray workers preempt them and the Job ends (or
    ends at the latest this many minutes after it starts; then unused nodes leave after the autoscaler's scale-down
    delay). Billed from the nodes' arrival; the plan shows minutes and dollars before the job with this setting.
    Standard clusters only."""
    image_cache_disk_image: Annotated[Optional[str], BeforeValidator(read_disk_image)] = Field(
        None, pattern=DISK_IMAGE, max_length=200
    )
    """A Compute Engine disk image holding the NeMo-RL container image (built with Google's gke-disk-image-builder,
    docs/deploy.md), as `global/images/NAME`, `projects/PROJECT/global/images/NAME` or the image's full URL (its
    selfLink): every GPU node gets it as a
    secondary boot disk (mode CONTAINER_IMAGE_CACHE, with image streaming on), so a new node finds the image there
    instead of pulling ~20 GB. Unset: none. Changing it replaces the GPU pool (ForceNew). Standard clusters only."""
    capacity: Optional[CapacityConfig] = None
    """The capacity ladder (`ladder`, `maxWaitMinutes`, `onTimeout`): more than one way to get the GPUs, tried in order
    by GKE's autoscaler. Unset: the one rung `provisioning` (and `reservationName`) names."""
    just_in_time: bool = True
    """On by default. Ask for the GPU nodes so that they are Ready, with the image pulled, when the Ray cluster is
    expected to be: the `warmMinutes` placeholders, created suspended and started by a small CPU timer Job at a lead
    time from the deploy-time model (node boot, driver, image; infra/jit_gpu_nodes.py) before the Ray release is
    expected (Lustre ready, the weights staged); when the RayCluster appears, the timer hands their nodes to its
    workers. A live stack (its RayCluster already there) never starts them.
    `warmMinutes`, when set, replaces it. Standard clusters only (Autopilot makes no nodes ahead of pods)."""
    just_in_time_max_wait_minutes: int = Field(15, ge=5, le=120)
    """How long the just-in-time nodes wait for a late Lustre after their expected readiness before they are given
    back (the placeholder Job's deadline); the Ray workers then ask for nodes again once Lustre is ready."""

    @property
    def ladder(self) -> tuple[Rung, ...]:
        """The rungs in order: `capacity.ladder`, or the one rung of `provisioning`."""
        if self.capacity is not None:
            return tuple(Rung(r.provisioning, r.reservation_name) for r in self.capacity.ladder)
        return (Rung(self.provisioning, self.reservation_name),)

    checks = (check_gpu_pool_provisioning,)
