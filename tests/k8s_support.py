"""Helpers shared by the Kubernetes-half test modules.

`record` builds a component under fresh mocks in its own thread, exactly as `tools.offline_plan.run_program`
runs the whole program, so registrations of different tests never mix; `k8s_doc` and
`schema_problems` check what it registered against the Kubernetes OpenAPI schema.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable

import kubernetes_validate
import pulumi

from infra.stack_context import GpuPoolFacts, NicAttachment, StackContext
from tools.mocks import PlanMocks, RecordingMonitor, Registration, canonical_order, plain

K8S_VERSION = "1.33"
"""Kubernetes schema version objects are validated against (GKE 1.33/1.34 clusters; kubernetes_validate ships it)."""

CTX = StackContext(stack="t", project="test-project", region="us-east1", zone="us-east1-b", prefix="t")


def sample_nics() -> tuple[NicAttachment, ...]:
    """The NIC layout infra/network.py publishes: gVNIC as eth1, then rdma-0..7 as eth2..eth9."""
    gvnic = NicAttachment("eth1", "gvnic-1", "t-gvnic-vpc", "t-gvnic-subnet", "NetDevice")
    rdma = tuple(
        NicAttachment(f"eth{i + 2}", f"rdma-{i}", "t-rdma-vpc", f"t-rdma-subnet-{i}", "RDMA") for i in range(8)
    )
    return (gvnic, *rdma)


def gpu_pool(flavour: str = "h200", nodes: int = 2, taints: tuple[dict[str, str], ...] | None = None) -> GpuPoolFacts:
    from infra.flavours import FLAVOURS

    f = FLAVOURS[flavour]
    return GpuPoolFacts(
        pool_name=f"t-gpu-{flavour}",
        node_count=nodes,
        gpus_per_node=f.gpus_per_node,
        accelerator_type=f.accelerator_type,
        machine_type=f.machine_type,
        vcpus=f.vcpus,
        memory_gib=f.memory_gib,
        nccl_tuner_config=f.nccl_tuner_config,
        taints=taints
        if taints is not None
        else ({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},),
        nics=sample_nics(),
    )


class Recorded:
    """What one `record` run registered."""

    def __init__(
        self, result: Any, registrations: list[Registration], component_outputs: dict[str, dict], resolved: dict
    ):
        self.result = result
        self.resources = registrations
        self.component_outputs = component_outputs
        self.resolved = resolved

    def by_type(self, typ: str) -> list[Registration]:
        return [r for r in self.resources if r.type == typ]

    def one(self, typ: str) -> Registration:
        found = self.by_type(typ)
        assert len(found) == 1, f"expected one {typ}, found {[r.name for r in found]}"
        return found[0]

    def outputs_of(self, typ: str) -> dict:
        urns = [r.urn for r in self.resources if r.type == typ]
        assert len(urns) == 1, f"expected one {typ} component, found {len(urns)}"
        return self.component_outputs[urns[0]]


def record(build: Callable[[], Any], resolve: Callable[[Any], dict] | None = None) -> Recorded:
    """Run `build()` under fresh mocks in a new thread; `resolve(result)` may name Outputs to await."""
    out: dict[str, Any] = {}

    def target() -> None:
        from pulumi.runtime import mocks, settings
        from pulumi.runtime.stack import wait_for_rpcs

        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        plan_mocks = PlanMocks(project_id=CTX.project)
        monitor = RecordingMonitor(plan_mocks)
        # As tools.offline_plan does: Pulumi's context properties otherwise fall back to the first thread's
        # values, and this run would wait on another event loop's tasks.
        settings.SETTINGS.outputs = set()
        settings.SETTINGS.lock = threading.Lock()
        mocks.set_mocks(plan_mocks, project="nemo-rl-gke", stack="test", preview=False, monitor=monitor)
        try:
            result = build()
            loop.run_until_complete(wait_for_rpcs())
            resolved = {}
            for key, value in (resolve(result) if resolve else {}).items():
                resolved[key] = loop.run_until_complete(pulumi.Output.from_input(value).future())
            loop.run_until_complete(wait_for_rpcs())
            out["recorded"] = Recorded(
                result, canonical_order(monitor.registrations), dict(monitor.component_outputs), resolved
            )
        except BaseException as exc:  # noqa: BLE001 re-raised in the test's thread
            out["error"] = exc
            try:  # let the registrations made before the error settle, as tools.offline_plan does
                loop.run_until_complete(wait_for_rpcs())
            except BaseException:  # noqa: BLE001 the first error is the one to report
                pass
        finally:
            loop.close()

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in out:
        raise out["error"]
    return out["recorded"]


def k8s_doc(reg: Registration) -> dict[str, Any]:
    """A registered Kubernetes object as the API server would receive it (secrets revealed, engine keys dropped)."""
    doc = plain(reg.raw_inputs, reveal_secrets=True)
    return {k: v for k, v in doc.items() if not k.startswith("__")}


def schema_problems(doc: dict[str, Any], what: str) -> list[str]:
    """Problems of a core/apps object against the Kubernetes OpenAPI schema (strict: unknown fields fail)."""
    try:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    except kubernetes_validate.ValidationError as err:
        path = "/".join(str(p) for p in err.path)
        return [f"{what}: {err.message} at {path or '(root)'}"]
    return []
