"""The acceptance gate: prove the GPUs, the fabric and Lustre before the expensive job starts.

A NeMo-RL run that starts on a broken cluster does not fail: NCCL without the gIB plugin (not
installed, or the host's NCCL shadowing the image's) falls back to TCP sockets over eth0 and the run
is several times slower; Lustre mounted over the wrong interface makes checkpoints crawl. The gate
measures instead of trusting, in a few minutes, on the Ray cluster itself, with one Ray actor pinned
to each GPU worker node (`NodeAffinitySchedulingStrategy`, all of the node's GPUs):

1. GPUs: one process per GPU (`gpus_per_node` of them per node) opens its device, checks the name
   (e.g. "B200"), runs a small matmul and reports; every worker must show all its GPUs healthy.
2. Fabric: the same processes form one `torch.distributed` group across all worker nodes (NCCL in the
   cluster) and time `all_gather_into_tensor` of `message_bytes`, nccl-tests style: bus bandwidth
   busbw = algbw * (n-1)/n for all_gather and algbw * 2(n-1)/n for all_reduce, algbw = bytes / 1e9 /
   seconds (NVIDIA/nccl-tests src/all_gather.cu AllGatherGetBw, src/all_reduce.cu AllReduceGetBw,
   doc/PERFORMANCE.md). The processes run with NCCL_DEBUG=INFO into NCCL_DEBUG_FILE, and the log must
   show the expected net plugin (`parse_nccl_log`); the busbw must reach the flavour's floor.
3. Storage: every worker writes `storage_bytes_per_node` to the Lustre mount in parallel streams,
   then reads back the files ANOTHER worker wrote (so no node reads its own page cache), against the
   instance's aggregate throughput (capacity x tier); the files are removed afterwards.

How it runs: the client (`run_on_cluster`: the post-deploy hook, `python -m jobctl gate|submit`)
submits a Ray job whose entrypoint is `python -m workloads.acceptance_gate run <plan>`, shipping this
package with `runtime_env.py_modules`; the driver (`run`) prints one `RESULT_MARKER` line with the
report as JSON, which the client reads back from the job log. The job goes through the same Job API
(and API-server proxy) as the training job, so nothing else has to be reachable.

Everything device- and fabric-specific is a value of the `GatePlan`: the cluster runs
`backend="nccl", device="cuda", expect_net="gIB"`; the tests run the same orchestration on a local Ray
head with `backend="gloo", device="cpu"` and a temporary directory for the mount, and check the NCCL
log parser on recorded logs.

Why one process per GPU, started by the node's actor: that is how NCCL is measured (nccl-tests and
Google's published numbers run one rank per GPU, 8 per node), the processes inherit the worker pod's
environment exactly as Ray's workers do (NCCL_NET=gIB and the gIB library path, sourced by the worker's
start command before `ray start`), and a process that dies of a broken GPU cannot take the actor along.

Known only on the real cloud (tests cannot show it): the bus bandwidth torch.distributed reaches on
these machines (the floor leaves half of Google's published figure as margin), the Lustre throughput a
handful of clients reach, the NCCL version the image and the gIB installer bring (the parser reads the
lines NCCL 2.21 to 2.30 print), and whether the API-server proxy passes the `py_modules` upload (a PUT
to the dashboard's /api/packages, through the same `_do_request` as every Job API call). The training
actors of NeMo-RL get the driver's (the head's) environment on top of the worker's (NVIDIA-NeMo/RL
nemo_rl/distributed/virtual_cluster.py `init_ray`): the gate
proves the workers' NCCL setup, so the head must not override it (issue 12a aligns the head's library
path with the workers').

Imports: the standard library and Ray at module level; torch only inside the per-GPU processes (the
NeMo-RL image's torch); of the project only `workloads.submit` (client side, lazily).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence

POLICIES = ("enforce", "warn", "off")
RESULT_MARKER = "NEMO_RL_GKE_GATE_RESULT "
"""Prefix of the one log line that carries the report (JSON) from the gate's driver to the client."""
META_GATE = "nemo-rl-gke/gate"
"""Ray job metadata key of gate runs. Not `nemo-rl-gke/stack`: a gate run is not one of the stack's jobs."""
GB = 1e9
"""nccl-tests report GB/s as 1e9 bytes per second; so does the gate, for busbw and Lustre alike."""

# NCCL INFO lines the fabric verdict reads (NVIDIA/nccl v2.21.5-1 .. v2.30.7-1):
#   src/init.cc            INFO(NCCL_INIT, "Using network %s", comm->ncclNet->name)
#   src/transport/net.cc   "Channel %02d/%d : %d[%d] -> %d[%d] [send] via NET/%s/%d%s%s%s" (+ "[receive]"),
#                          suffix "/GDRDMA" when GPUDirect RDMA is used
#   src/debug.cc           line prefix "<host>:<pid>:<tid> [<dev>] NCCL INFO "
_USING_NETWORK = re.compile(r"NCCL INFO Using network (\S+)")
_CHANNEL_NET = re.compile(
    r"NCCL INFO Channel \d+/\d+ : \d+\[\d+\] -> \d+\[\d+\] \[(?:send|receive)\] via NET/([^/\s]+)/\d+(\S*)"
)
_NCCL_VERSION = re.compile(r"NCCL version (\S+)")
_KEEP_LOG_LINE = re.compile(
    r"NCCL (?:INFO (?:Using network|Channel .* via NET/|NET/|Initialized NET|Assigned NET)|WARN)|NCCL version"
)
MAX_LOG_LINES_PER_PROCESS = 200


class GateFailed(Exception):
    """Policy `enforce` and the gate failed (or could not run): the job must not be submitted.
    `str()` is one line naming what failed and the numbers."""

    def __init__(self, report: "GateReport"):
        super().__init__(report.summary())
        self.report = report


def enforce(report: "GateReport", policy: str) -> None:
    """Raise `GateFailed` when `policy` is enforce and the gate did not pass; warn and off never raise."""
    if policy not in POLICIES:
        raise ValueError(f"gate policy {policy!r}; allowed: {', '.join(POLICIES)}")
    if policy == "enforce" and not report.ok:
        raise GateFailed(report)


def gbps(value: float) -> str:
    """GB/s for a log line: three significant digits below 100 (a CPU test's 0.0123), one decimal above."""
    return f"{value:.1f}" if value >= 100 else f"{value:.3g}"


# ------------------------------------------------------------------------------------ the plan


@dataclass(frozen=True)
class GatePlan:
    """What to check and against which numbers. Built on the client from the stack config and
    data/acceptance_gate.yaml (`infra.gate_plan.gate_plan_for_stack`), shipped to the driver as JSON."""

    node_count: int
    gpus_per_node: int
    gpu_name: str
    """A substring every device name must contain (`torch.cuda.get_device_name`, e.g. "B200"); "cpu" on CPU."""
    busbw_floor_gbps: float
    """Bus bandwidth the collective must reach; 0 checks nothing (one node: no fabric to measure)."""
    busbw_source: str
    mount_path: str
    storage_expected_gbps: float
    """The Lustre instance's aggregate throughput, capacity x tier."""
    storage_floor_gbps: float
    storage_source: str
    storage_bytes_per_node: int
    storage_streams: int = 4
    backend: str = "nccl"
    device: str = "cuda"
    expect_net: Optional[str] = "gIB"
    """The NCCL net plugin the log must show ("Using network gIB"); None: no NCCL log to check (gloo)."""
    collective: str = "all_gather"
    message_bytes: int = 1 << 30
    """Total bytes of the collective, as nccl-tests' "size" (all_gather: the gathered output)."""
    warmup_iters: int = 5
    iters: int = 20
    worker_resource: str = "GPU"
    """Ray resource that marks a worker node (the head has none of it)."""
    timeout_s: float = 600.0
    """Upper bound of the whole run; each phase gets a share (`_deadline`)."""
    python: str = "python"
    """The interpreter the gate job's entrypoint runs (the image's; tests give this venv's)."""
    expect_nccl: Optional[str] = None
    """The NCCL release the stack's version-matrix row says the pods load (e.g. "2.27.5"); None: not checked."""
    expect_gib: Optional[str] = None
    """The gIB installer tag of the row; reported beside what NCCL shows (workloads/version_check.py)."""

    def __post_init__(self) -> None:
        if self.collective not in _BUS_FACTOR:
            raise ValueError(f"collective {self.collective!r}; allowed: {', '.join(_BUS_FACTOR)}")
        if self.node_count < 1 or self.gpus_per_node < 1:
            raise ValueError("node_count and gpus_per_node must be at least 1")

    @property
    def world_size(self) -> int:
        return self.node_count * self.gpus_per_node

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "GatePlan":
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def encode(self) -> str:
        """The plan as one shell-safe token (urlsafe base64 of its JSON) for the job's entrypoint."""
        return base64.urlsafe_b64encode(json.dumps(self.to_dict(), sort_keys=True).encode()).decode()

    @classmethod
    def decode(cls, token: str) -> "GatePlan":
        return cls.from_dict(json.loads(base64.urlsafe_b64decode(token.encode())))


def estimated_seconds(plan: GatePlan) -> float:
    """What the gate typically takes (the plan's deploy-time step, the cost line before a run).

    Job start and actors ~30 s, the per-GPU processes importing torch and forming the group ~30 s, the
    collective at the floor, and the write and read of the storage phase at the floor (or, with no floor,
    the expected throughput). Typical, not a bound: `timeout_s` is the bound."""
    world = plan.world_size
    collective = (
        (plan.warmup_iters + plan.iters)
        * plan.message_bytes
        * _BUS_FACTOR[plan.collective](world)
        / (max(plan.busbw_floor_gbps, 1.0) * GB)
    )
    rate = plan.storage_expected_gbps or plan.storage_floor_gbps or 1.0
    storage = 2 * plan.node_count * plan.storage_bytes_per_node / (rate * GB)
    return 60.0 + collective + storage


# ------------------------------------------------------------------------------------ verdicts


@dataclass(frozen=True)
class Check:
    """One part of the verdict: `name` (gpus, fabric, storage), whether it passed, one line on what was seen."""

    name: str
    ok: bool
    summary: str
    numbers: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class NcclNetInfo:
    """What an NCCL INFO log says about the network transport."""

    networks: Counter
    """`Using network <name>` per communicator."""
    channel_nets: Counter
    """`via NET/<name>/...` per inter-node channel connection."""
    gdr_channels: int
    """Channel connections with /GDRDMA (GPUDirect RDMA)."""
    versions: frozenset[str]


def parse_nccl_log(text: str) -> NcclNetInfo:
    """Read the net transport out of NCCL_DEBUG=INFO output (any number of processes, interleaved)."""
    networks: Counter = Counter()
    channels: Counter = Counter()
    gdr = 0
    versions = set()
    for line in text.splitlines():
        if m := _USING_NETWORK.search(line):
            networks[m.group(1)] += 1
        elif m := _CHANNEL_NET.search(line):
            channels[m.group(1)] += 1
            gdr += "/GDRDMA" in m.group(2)
        elif m := _NCCL_VERSION.search(line):
            versions.add(m.group(1))
    return NcclNetInfo(networks, channels, gdr, frozenset(versions))


def net_check(info: NcclNetInfo, expect: str) -> Optional[str]:
    """None when every communicator used the `expect` net (NCCL matches plugin names case-insensitively,
    src/plugin/net.cc strcasecmp) and every inter-node channel went over it; otherwise why not."""
    want = expect.lower()
    if not info.networks:
        return f"no 'Using network' line in the NCCL INFO log: cannot prove that {expect} was used"
    other = sorted(n for n in info.networks if n.lower() != want)
    if other:
        return f"NCCL used the {'/'.join(other)} transport, not {expect}"
    other = sorted(n for n in info.channel_nets if n.lower() != want)
    if other:
        return f"NCCL channels ran over NET/{'/'.join(other)}, not NET/{expect}"
    return None


def check_gpus(plan: GatePlan, ranks: Sequence[Mapping[str, Any]], nodes_found: int) -> Check:
    """Every worker node present, and each with `gpus_per_node` healthy devices named like `gpu_name`."""
    problems = []
    if nodes_found < plan.node_count:
        problems.append(f"{nodes_found} of {plan.node_count} worker nodes in the Ray cluster")
    by_node: dict[int, list[Mapping[str, Any]]] = {}
    for r in ranks:
        by_node.setdefault(int(r["node_rank"]), []).append(r)
    healthy = 0
    for node_rank in range(nodes_found):
        reports = by_node.get(node_rank, [])
        good = [
            r for r in reports if r.get("device_ok") and plan.gpu_name.lower() in str(r.get("device_name", "")).lower()
        ]
        healthy += len(good)
        if len(good) < plan.gpus_per_node:
            host = next((r.get("host") for r in reports if r.get("host")), f"worker {node_rank}")
            seen = sorted(
                {str(r.get("device_name") or r.get("device_error") or "nothing") for r in reports if r not in good}
            )
            problems.append(
                f"{host}: {len(good)} of {plan.gpus_per_node} healthy {plan.gpu_name} GPUs"
                + (f" (saw {', '.join(seen)[:160]})" if seen else "")
            )
    want = plan.node_count * plan.gpus_per_node
    numbers = {"healthyGpus": healthy, "expectedGpus": want}
    if problems:
        return Check("gpus", False, "; ".join(problems), numbers)
    return Check("gpus", True, f"{healthy} healthy {plan.gpu_name} GPUs on {nodes_found} nodes", numbers)


def check_fabric(plan: GatePlan, busbw_gbps: Optional[float], nccl_log: str, error: str = "") -> Check:
    """The net plugin (from the NCCL log) and the bus bandwidth against the floor."""
    numbers: dict[str, Any] = {"busbwGBps": busbw_gbps, "floorGBps": plan.busbw_floor_gbps}
    problems = []
    info = parse_nccl_log(nccl_log)
    if plan.expect_net:
        numbers["network"] = ",".join(sorted(info.networks)) or None
        numbers["gdrChannels"] = info.gdr_channels
        why = net_check(info, plan.expect_net)
        if why:
            problems.append(why)
    if plan.expect_nccl or plan.expect_gib:
        from workloads.version_check import version_numbers, version_problem

        numbers.update(version_numbers(info.versions, nccl_log, plan.expect_nccl, plan.expect_gib))
        if why := version_problem(info.versions, plan.expect_nccl):
            problems.append(why)
    if error:
        problems.append(error)
    elif busbw_gbps is None:
        problems.append("no bandwidth measured")
    elif busbw_gbps < plan.busbw_floor_gbps:
        problems.append(f"below the floor {plan.busbw_floor_gbps:g} GB/s")
    measured = f"{plan.collective} busbw {gbps(busbw_gbps)} GB/s" if busbw_gbps is not None else plan.collective
    if problems:
        return Check("fabric", False, f"{measured}: " + "; ".join(problems), numbers)
    via = f" over {plan.expect_net}" if plan.expect_net else f" ({plan.backend})"
    floor = f" >= floor {plan.busbw_floor_gbps:g} GB/s" if plan.busbw_floor_gbps else " (one node: no floor)"
    return Check("fabric", True, f"{measured}{via}{floor}", numbers)


def check_storage(plan: GatePlan, write_gbps: Optional[float], read_gbps: Optional[float], error: str = "") -> Check:
    numbers = {
        "writeGBps": write_gbps,
        "readGBps": read_gbps,
        "expectedGBps": plan.storage_expected_gbps,
        "floorGBps": plan.storage_floor_gbps,
    }
    if error or write_gbps is None or read_gbps is None:
        return Check("storage", False, f"Lustre at {plan.mount_path}: {error or 'nothing measured'}", numbers)
    measured = f"Lustre write {gbps(write_gbps)} GB/s, read {gbps(read_gbps)} GB/s"
    low = [
        f"{what} below the floor {plan.storage_floor_gbps:g} GB/s"
        for what, v in (("write", write_gbps), ("read", read_gbps))
        if v < plan.storage_floor_gbps
    ]
    if low:
        return Check(
            "storage", False, f"{measured}: {'; '.join(low)} (expected {plan.storage_expected_gbps:g} GB/s)", numbers
        )
    return Check("storage", True, f"{measured} >= floor {plan.storage_floor_gbps:g} GB/s", numbers)


@dataclass(frozen=True)
class GateReport:
    """The gate's outcome: its checks, how long it took, what it cost."""

    checks: tuple[Check, ...]
    seconds: float
    node_count: int
    error: str = ""
    """The gate itself could not run (set instead of checks)."""

    @property
    def ok(self) -> bool:
        return not self.error and bool(self.checks) and all(c.ok for c in self.checks)

    def check(self, name: str) -> Optional[Check]:
        return next((c for c in self.checks if c.name == name), None)

    def number(self, check: str, key: str) -> Any:
        found = self.check(check)
        return found.numbers.get(key) if found else None

    @property
    def node_hours(self) -> float:
        return self.node_count * self.seconds / 3600

    def cost_line(self) -> str:
        """What the gate held: the whole GPU pool for its duration. The offline plan prices a typical
        run in dollars (tools/estimates.py); the cluster side knows no prices."""
        return f"gate cost: {self.node_count} GPU node(s) x {self.seconds:.0f} s = {self.node_hours:.3f} node-hours"

    def summary(self) -> str:
        """One line: pass, or what failed and the numbers."""
        if self.error:
            return f"acceptance gate could not run: {self.error}"
        failed = [c for c in self.checks if not c.ok]
        if failed:
            return "acceptance gate FAILED: " + "; ".join(f"{c.name}: {c.summary}" for c in failed)
        return f"acceptance gate passed in {self.seconds:.0f} s: " + "; ".join(c.summary for c in self.checks)

    def lines(self) -> list[str]:
        """The log lines: one per check, the cost, the verdict."""
        out = [f"gate {c.name}: {'ok' if c.ok else 'FAILED'}: {c.summary}" for c in self.checks]
        if self.error:
            out.append(f"gate error: {self.error}")
        out.append(self.cost_line())
        out.append(self.summary())
        return out

    def outputs(self) -> dict[str, Any]:
        """The stack output (camelCase numbers)."""
        return {
            "passed": self.ok,
            "busbwGBps": self.number("fabric", "busbwGBps"),
            "busbwFloorGBps": self.number("fabric", "floorGBps"),
            "lustreWriteGBps": self.number("storage", "writeGBps"),
            "lustreReadGBps": self.number("storage", "readGBps"),
            "lustreFloorGBps": self.number("storage", "floorGBps"),
            "healthyGpus": self.number("gpus", "healthyGpus"),
            "seconds": round(self.seconds, 1),
            "nodeHours": round(self.node_hours, 4),
            "summary": self.summary(),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "checks": [dataclasses.asdict(c) for c in self.checks],
            "seconds": self.seconds,
            "node_count": self.node_count,
            "error": self.error,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "GateReport":
        return cls(
            checks=tuple(Check(**c) for c in data.get("checks", ())),
            seconds=float(data.get("seconds", 0.0)),
            node_count=int(data.get("node_count", 0)),
            error=str(data.get("error", "")),
        )


def _bus_factor_all_gather(n: int) -> float:
    return (n - 1) / n


def _bus_factor_all_reduce(n: int) -> float:
    return 2 * (n - 1) / n


_BUS_FACTOR: dict[str, Callable[[int], float]] = {
    "all_gather": _bus_factor_all_gather,
    "all_reduce": _bus_factor_all_reduce,
}


def bus_bandwidth(collective: str, size_bytes: int, seconds: float, world: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s, as nccl-tests computes them (module docstring)."""
    algbw = size_bytes / GB / seconds
    return algbw, algbw * _BUS_FACTOR[collective](world)


# ------------------------------------------------------------------------------------ per-GPU process


def _rank_main(spec_path: str) -> int:
    """One process per GPU: probe the device, then join the collective; writes its report as JSON."""
    spec = json.loads(Path(spec_path).read_text())
    out = Path(spec["out"])
    report: dict[str, Any] = {"rank": spec["rank"], "node_rank": spec["node_rank"], "host": socket.gethostname()}

    def save() -> None:
        tmp = out.with_suffix(".tmp")
        tmp.write_text(json.dumps(report))
        tmp.replace(out)

    try:
        import torch
        import torch.distributed as dist

        if spec["device"] == "cuda":
            local = spec["local_rank"]
            torch.cuda.set_device(local)
            device = torch.device("cuda", local)
            report["device_count"] = torch.cuda.device_count()
            report["device_name"] = torch.cuda.get_device_name(local)
        else:
            device = torch.device("cpu")
            report["device_count"] = 1
            report["device_name"] = "cpu"
        a = torch.randn(512, 512, device=device)
        b = a @ a.T
        _sync(torch, device)
        report["device_ok"] = bool(torch.isfinite(b).all().item())
    except Exception as err:  # a missing or broken GPU: report it, do not join the group
        report["device_error"] = f"{type(err).__name__}: {err}"[:300]
        save()
        return 1
    save()
    try:
        import datetime

        dist.init_process_group(
            spec["backend"],
            init_method=f"tcp://{spec['master_addr']}:{spec['master_port']}",
            rank=spec["rank"],
            world_size=spec["world"],
            timeout=datetime.timedelta(seconds=spec["timeout_s"]),
        )
        report.update(_time_collective(torch, dist, device, spec))
        dist.destroy_process_group()
    except Exception as err:
        report["collective_error"] = f"{type(err).__name__}: {err}".splitlines()[0][:300]
        save()
        return 1
    save()
    return 0


def _sync(torch: Any, device: Any) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _time_collective(torch: Any, dist: Any, device: Any, spec: Mapping[str, Any]) -> dict[str, Any]:
    """nccl-tests' out-of-place timing: warm up, then `iters` back-to-back ops between two syncs; the
    slowest rank's time counts. nccl-tests by default reports the average over ranks (`-a 1`; NVIDIA/nccl-tests
    src/common.cu v2.19.6 `static int average = 1`); the slowest rank is its `-a 3`, stricter than the
    published averages the floor comes from, so a single slow rank fails the gate. Checks the gathered data."""
    world, rank = spec["world"], spec["rank"]
    elements = max(spec["message_bytes"] // 4 // world, 1)  # float32 per rank
    if spec["collective"] == "all_gather":
        inp = torch.full((elements,), float(rank), dtype=torch.float32, device=device)
        outp = torch.empty(elements * world, dtype=torch.float32, device=device)
        size = elements * world * 4

        def op() -> None:
            dist.all_gather_into_tensor(outp, inp)
    else:
        inp = torch.ones(elements * world, dtype=torch.float32, device=device)
        outp = inp
        size = elements * world * 4

        def op() -> None:
            dist.all_reduce(inp)

    for _ in range(spec["warmup_iters"]):
        op()
    _sync(torch, device)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(spec["iters"]):
        op()
    _sync(torch, device)
    elapsed = torch.tensor([(time.perf_counter() - start) / spec["iters"]], dtype=torch.float64, device=device)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    seconds = float(elapsed.item())
    wrong = 0
    if spec["collective"] == "all_gather":
        expected = torch.arange(world, dtype=torch.float32, device=device).repeat_interleave(elements)
        wrong = int((outp != expected).sum().item())
    algbw, busbw = bus_bandwidth(spec["collective"], size, seconds, world)
    return {"size_bytes": size, "seconds_per_op": seconds, "algbw_gbps": algbw, "busbw_gbps": busbw, "wrong": wrong}


# ------------------------------------------------------------------------------------ per-node actor


def _package_root() -> str:
    """The directory holding the `workloads` package (a py_modules dir in the cluster, the checkout here)."""
    return str(Path(__file__).resolve().parent.parent)


class NodeProbe:
    """Runs on one worker node (a Ray actor, created by `run`): the per-GPU processes and the storage I/O."""

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
        """Start one process per GPU, wait for them, return their reports and their NCCL INFO lines.
        `keep_nccl_logs`: a directory to copy the processes' whole NCCL_DEBUG_FILEs into
        (tools/gate_vs_nccl_tests.py; the cluster keeps only the lines the verdict reads)."""
        plan = GatePlan.from_dict(plan_dict)
        work = Path(tempfile.mkdtemp(prefix="nemo-rl-gke-gate-"))
        env = dict(os.environ)
        env.update(
            NCCL_DEBUG="INFO",
            NCCL_DEBUG_SUBSYS="INIT,NET",
            NCCL_DEBUG_FILE=str(work / "nccl.%h.%p.log"),
            PYTHONPATH=os.pathsep.join([_package_root(), *filter(None, [env.get("PYTHONPATH")])]),
        )
        procs = []
        try:
            for local in range(plan.gpus_per_node):
                spec = {
                    "rank": node_rank * plan.gpus_per_node + local,
                    "local_rank": local,
                    "node_rank": node_rank,
                    "world": plan.world_size,
                    "backend": plan.backend,
                    "device": plan.device,
                    "master_addr": master_addr,
                    "master_port": master_port,
                    "collective": plan.collective,
                    "message_bytes": plan.message_bytes,
                    "warmup_iters": plan.warmup_iters,
                    "iters": plan.iters,
                    "timeout_s": max(timeout_s, 1.0),
                    "out": str(work / f"rank-{local}.json"),
                }
                path = work / f"spec-{local}.json"
                path.write_text(json.dumps(spec))
                log = open(work / f"rank-{local}.out", "wb")
                procs.append(
                    subprocess.Popen(
                        [sys.executable, "-m", "workloads.acceptance_gate", "rank", str(path)],
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
            reports = []
            for local, p in enumerate(procs):
                if p.poll() is None:
                    p.kill()
                    p.wait()
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
                if p.returncode and "collective_error" not in report and "device_error" not in report:
                    report["collective_error"] = f"exit code {p.returncode}: " + _tail(work / f"rank-{local}.out")
                reports.append(report)
            return {"ranks": reports, "nccl_log": _nccl_lines(work), "timed_out": timed_out}
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
            for path in sorted(work.glob("nccl.*.log")) if keep_nccl_logs else ():
                shutil.copy(path, keep_nccl_logs)
            shutil.rmtree(work, ignore_errors=True)

    def write(self, directory: str, node_rank: int, size: int, streams: int) -> dict[str, Any]:
        return _parallel_io(Path(directory), node_rank, size, streams, write=True)

    def read(self, directory: str, node_rank: int, size: int, streams: int) -> dict[str, Any]:
        return _parallel_io(Path(directory), node_rank, size, streams, write=False)


def _tail(path: Path, chars: int = 300) -> str:
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return "no output"
    lines = [line for line in text.splitlines() if line.strip() and "Warning" not in line]
    return (lines[-1] if lines else "no output")[-chars:]


def _nccl_lines(work: Path) -> str:
    """The NCCL INFO lines the verdict needs, from every process's NCCL_DEBUG_FILE (bounded)."""
    keep = []
    for path in sorted(work.glob("nccl.*.log")):
        lines = [line for line in path.read_text(errors="replace").splitlines() if _KEEP_LOG_LINE.search(line)]
        keep.extend(lines[:MAX_LOG_LINES_PER_PROCESS])
    return "\n".join(keep)


BLOCK = 8 << 20
"""Bytes per write/read call: large sequential I/O, as a checkpoint writer does."""


def _parallel_io(directory: Path, node_rank: int, size: int, streams: int, *, write: bool) -> dict[str, Any]:
    """Write (or read) `size` bytes as `streams` files `node<r>-<k>.bin` in parallel threads; the
    seconds from the first byte to the last stream's end (fsync included for writes)."""
    per_stream = max(size // streams // BLOCK, 1) * BLOCK
    # One slot per stream, so the report lists errors in stream order whatever order the threads end in.
    errors: list[str | None] = [None] * streams
    block = os.urandom(BLOCK)  # incompressible, in case the filesystem compresses

    def one(k: int) -> None:
        path = directory / f"node{node_rank}-{k}.bin"
        try:
            if write:
                with open(path, "wb", buffering=0) as f:
                    for _ in range(per_stream // BLOCK):
                        f.write(block)
                    os.fsync(f.fileno())
                    # Drop the pages this node cached, so no later read is served from memory.
                    _drop_cache(f.fileno())
            else:
                with open(path, "rb", buffering=0) as f:
                    _drop_cache(f.fileno())
                    got = 0
                    while chunk := f.read(BLOCK):
                        got += len(chunk)
                if got != per_stream:
                    errors[k] = f"{path.name}: read {got} of {per_stream} bytes"
        except OSError as err:
            errors[k] = f"{path.name}: {err.strerror or err}"

    directory.mkdir(parents=True, exist_ok=True)
    threads = [threading.Thread(target=one, args=(k,)) for k in range(streams)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - start
    return {
        "bytes": per_stream * streams,
        "seconds": seconds,
        "errors": [e for e in errors if e is not None],
        "host": socket.gethostname(),
    }


def _drop_cache(fd: int) -> None:
    if hasattr(os, "posix_fadvise"):
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        except OSError:
            pass


# ------------------------------------------------------------------------------------ the driver


def worker_nodes(plan: GatePlan, nodes: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The alive Ray nodes that can host a probe (`worker_resource` >= what one probe needs), sorted by
    IP so that node ranks are stable."""
    need = plan.gpus_per_node if plan.worker_resource == "GPU" else 0
    found = [
        n
        for n in nodes
        if n.get("Alive") and (n.get("Resources") or {}).get(plan.worker_resource, 0) >= max(need, 1e-9)
    ]
    return sorted(found, key=lambda n: (n.get("NodeManagerAddress", ""), n["NodeID"]))


def run(plan: GatePlan) -> GateReport:
    """The gate on the Ray cluster this process is connected to (the gate job's driver)."""
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
            return GateReport(
                (
                    Check(
                        "gpus",
                        False,
                        f"the probes did not get {plan.gpus_per_node} GPUs on each of {len(nodes)} node(s) in time "
                        "(GPUs held by another job?)",
                    ),
                ),
                time.monotonic() - start,
                len(nodes),
            )
        master = where[0]
        budget = left(0.5)
        # With a node missing, the nodes that are there still form their own group: their GPUs are
        # checked and their bandwidth shown, and the fabric check fails for the missing node.
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
        checks.append(_fabric_from(plan, results, ranks, nodes_found=len(nodes)))
        checks.append(_storage(plan, probes, run_dir, left))
    finally:
        shutil.rmtree(run_dir, ignore_errors=True)
        try:
            run_dir.parent.rmdir()  # only when no other run's directory is left in it
        except OSError:
            pass
        for p in probes:
            ray.kill(p)
    return GateReport(tuple(checks), time.monotonic() - start, len(nodes))


def _fabric_from(
    plan: GatePlan, results: Sequence[Mapping[str, Any]], ranks: Sequence[Mapping[str, Any]], nodes_found: int
) -> Check:
    log = "\n".join(r["nccl_log"] for r in results if r.get("nccl_log"))
    errors = sorted({str(r["collective_error"]) for r in ranks if r.get("collective_error")})
    wrong = sum(int(r.get("wrong") or 0) for r in ranks)
    measured = [r for r in ranks if r.get("busbw_gbps") is not None]
    error = ""
    if nodes_found < plan.node_count:
        error = f"only {nodes_found} of {plan.node_count} nodes took part"
    elif errors:
        error = f"{len(errors)} distinct collective error(s), e.g. {errors[0]}"
    elif any(r.get("device_error") for r in ranks):
        error = "not every GPU joined the collective"
    elif wrong:
        error = f"{wrong} wrong elements in the gathered data"
    elif len(measured) < plan.world_size:
        error = f"{len(measured)} of {plan.world_size} ranks finished the collective" + (
            " (timed out)" if any(r.get("timed_out") for r in results) else ""
        )
    busbw = min((float(r["busbw_gbps"]) for r in measured), default=None)  # all ranks share the max time
    return check_fabric(plan, round(busbw, 2) if busbw is not None else None, log, error)


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


# ------------------------------------------------------------------------------------ the client


def job_entrypoint(plan: GatePlan) -> str:
    return f"{shlex.quote(plan.python)} -m workloads.acceptance_gate run {plan.encode()}"


def parse_result(log_text: str) -> Optional[GateReport]:
    """The report from the gate job's log (its last `RESULT_MARKER` line), or None."""
    for line in reversed(log_text.splitlines()):
        if line.startswith(RESULT_MARKER):
            return GateReport.from_dict(json.loads(line[len(RESULT_MARKER) :]))
    return None


def start_on_cluster(
    client: Any, plan: GatePlan, *, job_id: str, label: str, metadata: Optional[Mapping[str, str]] = None
) -> bool:
    """Submit the gate as the Ray job `job_id` (metadata `META_GATE: label` plus `metadata`) and return at
    once; False when a job of that id already exists (someone started this very gate first: that is it).
    Raises `submit.JobError`s when the job cannot be submitted."""
    from workloads import submit

    try:
        submit._guard(
            client.get_address(),
            lambda: client.submit_job(
                entrypoint=job_entrypoint(plan),
                submission_id=job_id,
                runtime_env={"py_modules": [str(Path(__file__).resolve().parent)]},
                metadata={META_GATE: label, **dict(metadata or {})},
            ),
        )
    except submit.DashboardError as err:
        if "already exists" not in str(err):
            raise
        return False
    return True


def result_on_cluster(client: Any, plan: GatePlan, job_id: str, final: Any) -> GateReport:
    """The report of the ended gate job `job_id` (from its log); a job that ended without one gives a
    report with `error` set: a gate that could not run does not pass."""
    from workloads import submit

    text = "".join(submit.logs(client, job_id))
    report = parse_result(text)
    if report is None:
        tail = [line for line in text.splitlines() if line.strip()][-1:] or ["no log"]
        return GateReport(
            (), 0.0, plan.node_count, error=f"gate job {job_id} ended {final} without a report: {tail[0][:300]}"
        )
    return report


def run_on_cluster(
    client: Any,
    plan: GatePlan,
    *,
    label: str,
    on_line: Callable[[str], None] = lambda _l: None,
    poll_interval: float = 2.0,
) -> GateReport:
    """Submit the gate as a Ray job through `client`, wait for it and return its report (the on-demand
    `python -m jobctl gate`; submissions go through `workloads.run_owner`, which starts the same job).

    Raises `submit.JobError`s when the job cannot be submitted; a job that ends without a report gives a
    report with `error` set (a gate that cannot run does not pass)."""
    from workloads import submit

    job_id = f"{label}-gate-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    on_line(
        f"acceptance gate: {plan.node_count} node(s) x {plan.gpus_per_node} GPUs, "
        f"~{estimated_seconds(plan) / 60:.1f} min expected (job {job_id})"
    )
    start_on_cluster(client, plan, job_id=job_id, label=label)
    try:
        final = submit.wait(client, job_id, timeout=plan.timeout_s + 120, poll_interval=poll_interval)
    except submit.WaitTimeout:
        submit.stop(client, job_id)
        return GateReport(
            (),
            plan.timeout_s,
            plan.node_count,
            error=f"gate job {job_id} did not finish in {plan.timeout_s + 120:.0f} s",
        )
    return result_on_cluster(client, plan, job_id, final)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """`run <plan>`: the gate job's driver; `rank <spec file>`: one per-GPU process."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) == 2 and args[0] == "rank":
        return _rank_main(args[1])
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
    print("usage: python -m workloads.acceptance_gate run <plan> | rank <spec-file>", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
