"""The gate job's driver (`python -m workloads.gate run <plan>`): one probe actor pinned to each GPU worker
node, the GPU and fabric phase, the storage phase, and the report as one `RESULT_MARKER` line.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

from workloads.gate.checklist import GB, GatePlan
from workloads.gate.collective import rank_main
from workloads.gate.probe import NodeProbe
from workloads.gate.verdict import RESULT_MARKER, Check, GateReport, check_gpus, check_storage, fabric_from


def worker_nodes(plan: GatePlan, nodes: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The alive Ray nodes that can host a probe, sorted by IP so that node ranks are stable."""
    need = plan.gpus_per_node if plan.worker_resource == "GPU" else 0
    found = [
        n
        for n in nodes
        if n.get("Alive") and (n.get("Resources") or {}).get(plan.worker_resource, 0) >= max(need, 1e-9)
    ]
    return sorted(found, key=lambda n: (n.get("NodeManagerAddress", ""), n["NodeID"]))


def run(plan: GatePlan) -> GateReport:
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    start = time.monotonic()
    deadline = start + plan.timeout_s

    def left(share: float = 1.0) -> float:
        return max((deadline - time.monotonic()) * share, 1.0)

    if not ray.is_initialized():
        ray.init(address="auto", logging_level="WARNING", log_to_driver=False)
    nodes = worker_nodes(plan, ray.nodes())[: plan.node_count]
    if not nodes:
        return GateReport((check_gpus(plan, [], 0),), time.monotonic() - start, 0)
    actor_cls = ray.remote(NodeProbe)
    resources = {"num_gpus": plan.gpus_per_node} if plan.worker_resource == "GPU" else {"num_cpus": 0}
    probes = [
        actor_cls.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False),
            max_concurrency=2,
            **resources,
        ).remote()
        for n in nodes
    ]
    checks: list[Check] = []
    run_dir = Path(plan.mount_path) / ".acceptance-gate" / f"run-{int(time.time())}-{os.getpid()}"
    try:
        try:
            where = ray.get([p.where.remote() for p in probes], timeout=left(0.3))
        except ray.exceptions.GetTimeoutError:
            why = f"the probes did not get {plan.gpus_per_node} GPUs on each of {len(nodes)} node(s) in time"
            check = Check("gpus", False, f"{why} (GPUs held by another job?)")
            return GateReport((check,), time.monotonic() - start, len(nodes))
        master = where[0]
        budget = left(0.5)
        # With a node missing, the others still form a group: the fabric check fails for the missing one.
        present = dataclasses.replace(plan, node_count=len(nodes)).to_dict()
        try:
            results = ray.get(
                [p.ranks.remote(present, i, master["ip"], master["port"], budget) for i, p in enumerate(probes)],
                timeout=budget + 60,
            )
        except ray.exceptions.GetTimeoutError:  # the probes kill their processes at `budget`; this is a lost probe
            results = [{"ranks": [], "nccl_log": "", "timed_out": True}]
        ranks = [r for res in results for r in res["ranks"]]
        checks.append(check_gpus(plan, ranks, len(nodes)))
        checks.append(fabric_from(plan, results, ranks, nodes_found=len(nodes)))
        checks.append(_storage(plan, probes, run_dir, left))
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
        with contextlib.suppress(OSError):
            run_dir.parent.rmdir()  # only when no other run's directory is left in it
        for p in probes:
            ray.kill(p)
    return GateReport(tuple(checks), time.monotonic() - start, len(nodes))


def _storage(plan: GatePlan, probes: Sequence[Any], run_dir: Path, left: Callable[[float], float]) -> Check:
    import ray

    n = len(probes)
    try:
        run_dir.mkdir(parents=True, exist_ok=False)
        writes = ray.get(
            [
                p.write.remote(str(run_dir), i, plan.storage_bytes_per_node, plan.storage_streams)
                for i, p in enumerate(probes)
            ],
            timeout=left(0.5),
        )
        # Each node reads what the next node wrote: never its own pages.
        reads = ray.get(
            [
                p.read.remote(str(run_dir), (i + 1) % n, plan.storage_bytes_per_node, plan.storage_streams)
                for i, p in enumerate(probes)
            ],
            timeout=left(0.9),
        )
    except ray.exceptions.GetTimeoutError:
        return check_storage(plan, None, None, "timed out")
    except OSError as err:
        return check_storage(plan, None, None, f"cannot create {run_dir}: {err.strerror or err}")
    errors = [e for r in (*writes, *reads) for e in r["errors"]]
    if errors:
        return check_storage(plan, None, None, f"{len(errors)} I/O error(s), e.g. {errors[0]}")
    # The nodes start together; the aggregate is all bytes over the slowest node's time.
    write = sum(r["bytes"] for r in writes) / GB / max(r["seconds"] for r in writes)
    read = sum(r["bytes"] for r in reads) / GB / max(r["seconds"] for r in reads)
    return check_storage(plan, round(write, 3), round(read, 3))


def main(argv: Optional[Sequence[str]] = None) -> int:
    """`run <plan>`: the gate job's driver; `rank <spec file>`: one per-GPU process."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) == 2 and args[0] == "rank":
        return rank_main(args[1])
    if len(args) == 2 and args[0] == "run":
        plan = GatePlan.decode(args[1])
        try:
            report = run(plan)
        except Exception as err:  # the client sees this line instead of a traceback
            report = GateReport((), 0.0, plan.node_count, error=f"{type(err).__name__}: {err}".splitlines()[0][:400])
        for line in report.lines():
            print(line, flush=True)
        print(RESULT_MARKER + json.dumps(report.to_dict()), flush=True)
        return 0
    print("usage: python -m workloads.gate run <plan> | rank <spec-file>", file=sys.stderr)
    return 2
