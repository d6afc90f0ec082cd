"""`gpuPool`: the GPU node pool and how its nodes are obtained."""

from __future__ import annotations

from enum import Enum
from typing import Literal, Optional

from pydantic import Field, model_validator

from infra.config.base import Model
from infra.config.errors import KeyedValueError
from infra.config.patterns import LOWER_NAME


class Provisioning(str, Enum):
    """How the GPU nodes are obtained."""

    SPOT = "spot"
    RESERVATION = "reservation"
    FLEX_START = "flexStart"
    ON_DEMAND = "onDemand"


class GpuPoolConfig(Model):
    """The GPU node pool."""

    node_count: int = Field(1, ge=1, le=64, description="GPU nodes in the pool; the Ray worker replicas and the job's `cluster.num_nodes`.")
    provisioning: Provisioning = Field(
        Provisioning.SPOT,
        description="`spot` (default, cheapest, preemptible), `reservation` (needs `reservationName`), "
        "`flexStart` (DWS queued provisioning: the pool starts empty and gets nodes only for a ProvisioningRequest, "
        "which this program does not create; needs `job.submit: false`) or `onDemand`.",
    )
    reservation_name: Optional[str] = Field(
        None, pattern=LOWER_NAME, max_length=63, description="Compute Engine reservation to consume when `provisioning` is `reservation`."
    )
    compact_placement: bool = Field(False, description="Ask for a COMPACT placement policy (lower latency between nodes).")
    gpu_driver_version: Literal["DEFAULT", "LATEST"] = Field(
        "LATEST", description="GPU driver GKE installs on the nodes."
    )

    @model_validator(mode="after")
    def _reservation_needs_name(self) -> "GpuPoolConfig":
        if self.provisioning is Provisioning.RESERVATION and not self.reservation_name:
            raise KeyedValueError("reservationName", "required when gpuPool.provisioning is 'reservation'")
        if self.provisioning is not Provisioning.RESERVATION and self.reservation_name:
            raise KeyedValueError("reservationName", "only allowed when gpuPool.provisioning is 'reservation'")
        if self.provisioning is Provisioning.FLEX_START and self.compact_placement:
            raise KeyedValueError("compactPlacement", "not allowed with gpuPool.provisioning 'flexStart'; allowed: false")
        return self
