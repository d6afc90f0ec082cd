"""The acceptance gate's all_gather beside nccl-tests' all_gather_perf, on the GPUs of this machine.

    python -m tools.gate_vs_nccl_tests NCCL_TESTS_CHECKOUT [--gpus N] [--out DIR]   (from the repo root)

Why: the gate's fabric floor is `floor_fraction` of a published nccl-tests figure (docs/acceptance-gate.md).
At one GPU busbw is 0 (busbw = algbw x (n-1)/n, NVIDIA/nccl-tests doc/PERFORMANCE.md). Pinned nccl-tests:
v2.17.6 (commit da0b547). Needs GPUs and nvcc; never run by CI. Exit 0 measured, 2 bad arguments, 3 environment.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Optional, Sequence

from workloads import gate

ROOT = Path(__file__).resolve().parent.parent
THRESHOLDS = ROOT / "data" / "acceptance_gate.yaml"
PINNED_TAG = "v2.17.6"
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


class Fault(Exception):
    """An environment fault: one line, exit 3."""


def parse_nccl_tests(stdout: str, size_bytes: int) -> dict[str, float]:
    """Out-of-place time (us), algbw and busbw of the `size_bytes` row; columns by the header line
    (src/util.cu writeResultHeader, v2.17.6), the first time/algbw/busbw being out-of-place."""
    columns: Optional[list[str]] = None
    for line in stdout.splitlines():
        tokens = line.lstrip("#").split()
        if line.startswith("#") and tokens[:2] == ["size", "count"] and "busbw" in tokens:
            columns = tokens
        elif columns and not line.startswith("#") and tokens and tokens[0] == str(size_bytes):
            pick = {name: columns.index(name) for name in ("algbw", "busbw")}
            pick["time_us"] = columns.index("cputime" if "cputime" in columns else "time")
            return {name: float(tokens[i]) for name, i in pick.items()}
    raise Fault(f"all_gather_perf printed no row for {size_bytes} bytes" + ("" if columns else " (no table header)"))


def nccl_tests_versions(stdout: str) -> Optional[str]:
    """`nccl-tests version 2.17.6 nccl-headers=22809 nccl-library=22809` (src/util.cu), or None."""
    m = re.search(r"nccl-tests version (\S+) nccl-headers=(\d+) nccl-library=(\d+)", stdout)
    return f"nccl-tests {m.group(1)} (nccl-headers={m.group(2)} nccl-library={m.group(3)})" if m else None


def ratio_line(gate_busbw: Optional[float], tests_busbw: Optional[float], world: int) -> str:
    if world < 2:
        return "ratio gate/nccl-tests busbw: undefined at 1 GPU (all_gather busbw = algbw x (n-1)/n = 0 on both sides)"
    if not gate_busbw or not tests_busbw:
        return "ratio gate/nccl-tests busbw: undefined (a side measured nothing)"
    return f"ratio gate/nccl-tests busbw: {gate_busbw / tests_busbw:.3f}"


def fabric_settings(path: Path = THRESHOLDS) -> dict[str, int]:
    """The gate's message size and iterations from infra/gate_plan.py's file (not imported: the program's deps)."""
    import yaml

    fabric = yaml.safe_load(path.read_text())["fabric"]
    return {k: int(fabric[k]) for k in ("message_bytes", "warmup_iters", "iters")}


def torch_nccl() -> dict[str, Any]:
    """The nvidia-nccl wheel torch depends on: its home, libnccl.so.2 and the device facts."""
    import torch

    if not torch.cuda.is_available():
        raise Fault("torch sees no CUDA device")
    try:
        import nvidia.nccl as wheel
    except ImportError:
        raise Fault("no nvidia-nccl wheel in this Python: cannot build nccl-tests against torch's NCCL") from None
    home = Path(next(iter(wheel.__path__)))
    if not (home / "include" / "nccl.h").exists() or not (home / "lib" / "libnccl.so.2").exists():
        raise Fault(f"{home}: no include/nccl.h or lib/libnccl.so.2")
    return {"home": home, "lib": home / "lib" / "libnccl.so.2", "count": torch.cuda.device_count(),
            "name": torch.cuda.get_device_name(0), "capability": torch.cuda.get_device_capability(0)}  # fmt: skip


def build_all_gather_perf(checkout: Path, nccl: dict[str, Any], cuda: Optional[str], log: Path) -> Path:
    """<checkout>/build/all_gather_perf, built against torch's NCCL unless already so built."""
    build, home = checkout / "build", checkout / "build" / "nccl-home"
    binary, stamp = build / "all_gather_perf", build / ".nccl-home"
    if binary.exists() and stamp.exists() and stamp.read_text() == str(nccl["lib"]):
        return binary
    nvcc = shutil.which("nvcc", path=f"{cuda or '/usr/local/cuda'}/bin") or shutil.which("nvcc")
    if not nvcc:
        raise Fault("no nvcc: give --cuda-home")
    # The wheel ships libnccl.so.2 only and the Makefile links -lnccl: a NCCL_HOME with an unversioned link.
    (home / "lib").mkdir(parents=True, exist_ok=True)
    for link, target in ((home / "include", nccl["home"] / "include"), (home / "lib" / "libnccl.so", nccl["lib"])):
        link.unlink(missing_ok=True)
        link.symlink_to(target)
    for stale in [binary, *build.glob("*.o")]:
        stale.unlink(missing_ok=True)
    major, minor = nccl["capability"]
    cmd = ["make", "-C", str(checkout / "src"), f"-j{os.cpu_count() or 4}", "MPI=0", f"NCCL_HOME={home}",
           f"CUDA_HOME={Path(os.path.realpath(nvcc)).parent.parent}", f"BUILDDIR={build}", str(binary),
           f"NVCC_GENCODE=-gencode=arch=compute_{major}{minor},code=sm_{major}{minor}"]  # fmt: skip
    print("building: " + " ".join(cmd), flush=True)
    with open(log, "wb") as out:
        done = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode or not binary.exists():
        raise Fault(f"building all_gather_perf failed (exit {done.returncode}); log: {log}")
    stamp.write_text(str(nccl["lib"]))
    return binary


def run_nccl_tests(binary: Path, nccl: dict, world: int, size: int, settings: dict, logs: Path, timeout_s: float):
    logs.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **NO_MULTICAST, "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET",
           "NCCL_DEBUG_FILE": str(logs / "nccl-tests.%h.%p.log"),
           "LD_LIBRARY_PATH": f"{nccl['lib'].parent}{os.pathsep}{os.environ.get('LD_LIBRARY_PATH', '')}"}  # fmt: skip
    # nccl-tests' all_gather size is the gathered output, as the gate's message_bytes; -c 1 checks the data.
    cmd = [str(binary), "-b", str(size), "-e", str(size), "-f", "2", "-g", str(world), "-d", "float",
           "-w", str(settings["warmup_iters"]), "-n", str(settings["iters"]), "-c", "1"]  # fmt: skip
    print("running: " + " ".join(cmd), flush=True)
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
    (logs / "all_gather_perf.out").write_text(done.stdout + done.stderr)
    if done.returncode:
        raise Fault(f"all_gather_perf exit {done.returncode}; output in {logs / 'all_gather_perf.out'}")
    return {**parse_nccl_tests(done.stdout, size), "versions": nccl_tests_versions(done.stdout)}


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("nccl_tests", help=f"a checkout of NVIDIA/nccl-tests at {PINNED_TAG}")
    ap.add_argument("--gpus", type=int, default=0, help="GPUs to use (default: all torch sees)")
    ap.add_argument("--out", default="", help="directory for the NCCL logs and nccl-tests' output")
    ap.add_argument("--cuda-home", default=os.environ.get("CUDA_HOME"))
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds for each side's run")
    args = ap.parse_args(argv)
    checkout = Path(args.nccl_tests).resolve()
    if not (checkout / "src" / "all_gather.cu").exists():
        print(
            f"nccl_tests: {checkout} has no src/all_gather.cu; clone NVIDIA/nccl-tests at {PINNED_TAG}", file=sys.stderr
        )
        return 2
    if args.gpus < 0:
        print("--gpus: a number of GPUs, 1 or more (0: all)", file=sys.stderr)
        return 2
    os.environ.update(NO_MULTICAST)  # before torch loads; NodeProbe.ranks passes os.environ on
    try:
        return _measure(args, checkout)
    except (Fault, subprocess.TimeoutExpired) as err:
        print(f"gate_vs_nccl_tests: {err}", file=sys.stderr)
        return 3


def _measure(args: argparse.Namespace, checkout: Path) -> int:
    nccl = torch_nccl()
    world = args.gpus or nccl["count"]
    if world > nccl["count"]:
        raise Fault(f"--gpus {world}: torch sees {nccl['count']} GPU(s)")
    out = Path(args.out or tempfile.mkdtemp(prefix="gate-vs-nccl-tests-")).resolve()
    (out / "gate").mkdir(parents=True, exist_ok=True)
    settings = fabric_settings()
    binary = build_all_gather_perf(checkout, nccl, args.cuda_home, out / "build.log")
    plan = gate.GatePlan(
        node_count=1, gpus_per_node=world, gpu_name=nccl["name"].split()[-1], busbw_floor_gbps=0.0,
        busbw_source="tools/gate_vs_nccl_tests.py: measured, not enforced", mount_path=str(out),
        storage_expected_gbps=0.0, storage_floor_gbps=0.0, storage_source="not measured", storage_bytes_per_node=0,
        expect_net="gIB", collective="all_gather", python=sys.executable, **settings,
    )  # fmt: skip
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = gate.NodeProbe().ranks(
        plan.to_dict(), 0, "127.0.0.1", port, args.timeout, keep_nccl_logs=str(out / "gate")
    )
    ranks = result["ranks"]
    for c in (gate.check_gpus(plan, ranks, 1), gate.fabric_from(plan, [result], ranks, nodes_found=1)):
        print(f"gate {c.name}: {'ok' if c.ok else 'FAILED'}: {c.summary}", flush=True)
    measured = [r for r in ranks if r.get("busbw_gbps") is not None]
    if len(measured) < world:
        raise Fault(f"{len(measured)} of {world} gate ranks measured; reports in {out / 'gate'}")
    slowest = max(measured, key=lambda r: r["seconds_per_op"])  # the gate's figure: the max time over ranks
    size = int(slowest["size_bytes"])
    t = run_nccl_tests(binary, nccl, world, size, settings, out / "nccl-tests", args.timeout)

    def versions(folder: str, pattern: str) -> list[str]:
        text = "\n".join(p.read_text(errors="replace") for p in sorted((out / folder).glob(pattern)))
        return sorted(gate.parse_nccl_log(text).versions)

    gate_versions, tests_versions = versions("gate", "nccl.*.log"), versions("nccl-tests", "nccl-tests.*.log")
    print(f"NCCL in the logs: gate {gate_versions}; all_gather_perf {tests_versions}; {t['versions']}")
    print(f"all_gather of {size} bytes on {world} GPU(s), {settings['warmup_iters']}+{settings['iters']} iterations:")
    for side, us, algbw, busbw in (
        ("gate", slowest["seconds_per_op"] * 1e6, slowest["algbw_gbps"], slowest["busbw_gbps"]),
        (f"all_gather_perf -g {world}", t["time_us"], t["algbw"], t["busbw"]),
    ):
        print(f"  {side}: {us:.1f} us  algbw {algbw:.2f} GB/s  busbw {busbw:.2f} GB/s")
    print("  " + ratio_line(slowest["busbw_gbps"], t["busbw"], world))
    print(f"logs: {out}")
    if gate_versions != tests_versions:
        raise Fault(f"the two sides loaded different NCCL versions: gate {gate_versions}, nccl-tests {tests_versions}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
