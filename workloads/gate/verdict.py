"""The gate's verdict: the checks from what the probes measured, the NCCL INFO log parser, the report (one
`RESULT_MARKER` JSON line in the job's log) and the policy's consequence (`enforce`, `GateFailed`).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

from workloads.gate.checklist import GatePlan

RESULT_MARKER = "NEMO_RL_GKE_GATE_RESULT "

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


class GateFailed(Exception):
    """Enforce and the gate failed: the job must not be submitted; `str()` is one line."""

    def __init__(self, report: "GateReport"):
        super().__init__(report.summary())
        self.report = report


def gbps(value: float) -> str:
    """GB/s for a line: three significant digits below 100, one decimal above."""
    return f"{value:.1f}" if value >= 100 else f"{value:.3g}"


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    summary: str
    numbers: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class NcclNetInfo:
    networks: Counter
    channel_nets: Counter
    gdr_channels: int
    versions: frozenset[str]


def parse_nccl_log(text: str) -> NcclNetInfo:
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
    """None when every communicator and inter-node channel used `expect` (matched case-insensitively as NCCL
    does, src/plugin/net.cc strcasecmp); otherwise why not."""
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
    checks: tuple[Check, ...]
    seconds: float
    node_count: int
    error: str = ""

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
        """What the gate held (the offline plan prices it, tools/estimates.py)."""
        return f"gate cost: {self.node_count} GPU node(s) x {self.seconds:.0f} s = {self.node_hours:.3f} node-hours"

    def summary(self) -> str:
        if self.error:
            return f"acceptance gate could not run: {self.error}"
        failed = [c for c in self.checks if not c.ok]
        if failed:
            return "acceptance gate FAILED: " + "; ".join(f"{c.name}: {c.summary}" for c in failed)
        return f"acceptance gate passed in {self.seconds:.0f} s: " + "; ".join(c.summary for c in self.checks)

    def lines(self) -> list[str]:
        out = [f"gate {c.name}: {'ok' if c.ok else 'FAILED'}: {c.summary}" for c in self.checks]
        if self.error:
            out.append(f"gate error: {self.error}")
        out.append(self.cost_line())
        out.append(self.summary())
        return out

    def outputs(self) -> dict[str, Any]:
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
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "GateReport":
        return cls(
            checks=tuple(Check(**c) for c in data.get("checks", ())),
            seconds=float(data.get("seconds", 0.0)),
            node_count=int(data.get("node_count", 0)),
            error=str(data.get("error", "")),
        )


def fabric_from(
    plan: GatePlan, results: Sequence[Mapping[str, Any]], ranks: Sequence[Mapping[str, Any]], nodes_found: int
) -> Check:
    """The fabric check from the probes' results and ranks: the first failure that explains the rest is the error."""
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


def parse_result(log_text: str) -> Optional[GateReport]:
    """The report of the gate job's log (its last `RESULT_MARKER` line), or None."""
    for line in reversed(log_text.splitlines()):
        if line.startswith(RESULT_MARKER):
            return GateReport.from_dict(json.loads(line[len(RESULT_MARKER) :]))
    return None
