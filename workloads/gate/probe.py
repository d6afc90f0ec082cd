"""The gate's probe on one worker node (a Ray actor): one per-GPU process per GPU with NCCL's INFO log on,
their reports and NCCL lines read back, and the node's storage I/O.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Mapping, Optional

from workloads.gate.checklist import GatePlan
from workloads.gate.storage_io import parallel_io

# The NCCL lines kept: those `workloads.gate.verdict.parse_nccl_log` reads, and NCCL's warnings.
_KEEP_LOG_LINE = re.compile(
    r"NCCL (?:INFO (?:Using network|Channel .* via NET/|NET/|Initialized NET|Assigned NET)|WARN)|NCCL version"
)
MAX_LOG_LINES_PER_PROCESS = 200


def _rank_spec(plan: GatePlan, node_rank: int, local: int, master: tuple[str, int], timeout_s: float, work: Path):
    return {
        "rank": node_rank * plan.gpus_per_node + local,
        "local_rank": local,
        "node_rank": node_rank,
        "world": plan.world_size,
        "backend": plan.backend,
        "device": plan.device,
        "master_addr": master[0],
        "master_port": master[1],
        "collective": plan.collective,
        "message_bytes": plan.message_bytes,
        "warmup_iters": plan.warmup_iters,
        "iters": plan.iters,
        "timeout_s": max(timeout_s, 1.0),
        "out": str(work / f"rank-{local}.json"),
    }


def _rank_report(plan: GatePlan, node_rank: int, local: int, proc: subprocess.Popen, work: Path) -> dict[str, Any]:
    """The ended (or killed) process's report, or one saying why there is none."""
    path = work / f"rank-{local}.json"
    report = (
        json.loads(path.read_text())
        if path.exists()
        else {
            "rank": node_rank * plan.gpus_per_node + local,
            "node_rank": node_rank,
            "host": socket.gethostname(),
            "device_error": "process ended without a report: " + _tail(work / f"rank-{local}.out"),
        }
    )
    if proc.returncode and "collective_error" not in report and "device_error" not in report:
        report["collective_error"] = f"exit code {proc.returncode}: " + _tail(work / f"rank-{local}.out")
    return report


class NodeProbe:
    def where(self) -> dict[str, Any]:
        import ray

        with socket.socket() as s:  # a free port for the group's TCP store, if this is node 0
            s.bind(("", 0))
            port = s.getsockname()[1]
        return {"ip": ray.util.get_node_ip_address(), "host": socket.gethostname(), "port": port}

    def ranks(
        self,
        plan_dict: Mapping[str, Any],
        node_rank: int,
        master_addr: str,
        master_port: int,
        timeout_s: float,
        keep_nccl_logs: Optional[str] = None,
    ) -> dict[str, Any]:
        """Run one process per GPU; their reports and NCCL INFO lines. `keep_nccl_logs`: copy the whole logs there
        (tools/gate_vs_nccl_tests.py)."""
        plan = GatePlan.from_dict(plan_dict)
        work = Path(tempfile.mkdtemp(prefix="nemo-rl-gke-gate-"))
        env = dict(os.environ)
        env.update(
            NCCL_DEBUG="INFO",
            NCCL_DEBUG_SUBSYS="INIT,NET",
            NCCL_DEBUG_FILE=str(work / "nccl.%h.%p.log"),
            # The directory holding `workloads` (a py_modules dir in the cluster, the checkout here).
            PYTHONPATH=os.pathsep.join(
                [str(Path(__file__).resolve().parents[2]), *filter(None, [env.get("PYTHONPATH")])]
            ),
        )
        procs = []
        try:
            for local in range(plan.gpus_per_node):
                path = work / f"spec-{local}.json"
                path.write_text(
                    json.dumps(_rank_spec(plan, node_rank, local, (master_addr, master_port), timeout_s, work))
                )
                log = open(work / f"rank-{local}.out", "wb")
                procs.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "workloads.gate", "rank", str(path)],
                        env=env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )
                log.close()
            deadline = time.monotonic() + timeout_s + 30.0
            timed_out = False
            for p in procs:
                try:
                    p.wait(timeout=max(deadline - time.monotonic(), 0.1))
                except subprocess.TimeoutExpired:
                    timed_out = True
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            reports = [_rank_report(plan, node_rank, local, p, work) for local, p in enumerate(procs)]
            return {"ranks": reports, "nccl_log": _nccl_lines(work), "timed_out": timed_out}
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
            for path in sorted(work.glob("nccl.*.log")) if keep_nccl_logs else ():
                shutil.copy(path, keep_nccl_logs)
            shutil.rmtree(work, ignore_errors=True)

    def write(self, directory: str, node_rank: int, size: int, streams: int) -> dict[str, Any]:
        return parallel_io(Path(directory), node_rank, size, streams, write=True)

    def read(self, directory: str, node_rank: int, size: int, streams: int) -> dict[str, Any]:
        return parallel_io(Path(directory), node_rank, size, streams, write=False)


def _tail(path: Path, chars: int = 300) -> str:
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return "no output"
    lines = [line for line in text.splitlines() if line.strip() and "Warning" not in line]
    return (lines[-1] if lines else "no output")[-chars:]


def _nccl_lines(work: Path) -> str:
    keep = []
    for path in sorted(work.glob("nccl.*.log")):
        lines = [line for line in path.read_text(errors="replace").splitlines() if _KEEP_LOG_LINE.search(line)]
        keep.extend(lines[:MAX_LOG_LINES_PER_PROCESS])
    return "\n".join(keep)
