"""The acceptance gate's all_gather beside nccl-tests' all_gather_perf, on the GPUs of this machine.

    python -m tools.gate_vs_nccl_tests NCCL_TESTS_CHECKOUT [--gpus N] [--out DIR]   (from the repo root)

The gate's fabric floor is `floor_fraction` (0.5, data/acceptance_gate.yaml) of a published
nccl-tests figure; that assumes the gate's own measurement (torch.distributed, one process per GPU)
reaches at least that fraction of what nccl-tests reaches on the same GPUs. This script measures both:

1. the gate's rank processes exactly as a worker node's actor starts them in the cluster:
   `workloads.gate.NodeProbe.ranks` (one `python -m workloads.gate rank`
   process per GPU, backend NCCL, NCCL_DEBUG=INFO into per-process files), with the message size and
   iterations of data/acceptance_gate.yaml, and the gate's own GPU and fabric verdicts on the result;
2. then, on the same GPUs, nccl-tests' all_gather_perf (one process driving all N GPUs, `-g N`: the
   MPI-free build) at the gate's message size and iterations, built from NCCL_TESTS_CHECKOUT against
   the NCCL that torch brings (the nvidia-nccl wheel's headers and libnccl.so.2), so both sides run the
   same library; both NCCL INFO logs must name the same version.

It prints both bus bandwidths at that size and their ratio. At one GPU all_gather's busbw is 0 by
definition (busbw = algbw x (n-1)/n, NVIDIA/nccl-tests doc/PERFORMANCE.md), so the ratio is reported
as undefined and only the algbw figures compare.

Pinned nccl-tests: tag v2.17.6 (commit da0b547, 2025-10-28), the release current with NCCL 2.28
(`git clone --branch v2.17.6 https://github.com/NVIDIA/nccl-tests`). If the checkout has no
build/all_gather_perf built against this NCCL, the script builds that one binary:
`make -C src MPI=0 NCCL_HOME=... CUDA_HOME=... BUILDDIR=<checkout>/build <checkout>/build/all_gather_perf`.

NVLink multicast (NVLS) is kept off for both sides (NCCL_NVLS_ENABLE=0 and the torch/NVSHMEM
equivalents): the machines this was run on forbid it, and both sides see the same environment, so the
ratio compares like with like; a cluster run with NVLS on may show both figures higher.

Offline tooling: needs GPUs, torch with CUDA, nvcc; never run by CI or imported by the program.
Exit codes: 0 measured; 2 bad arguments; 3 environment fault (no GPU, no NCCL wheel, build failed,
a side produced no figure, the two sides loaded different NCCL versions).
"""

from __future__ import annotations

import argparse
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
from typing import Any, Optional, Sequence

from workloads import gate

ROOT = Path(__file__).resolve().parent.parent
THRESHOLDS = ROOT / "data" / "acceptance_gate.yaml"
PINNED_TAG = "v2.17.6"
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


class Fault(Exception):
    """An environment fault: one line, exit 3."""


# ------------------------------------------------------------------------------------ nccl-tests output


def parse_nccl_tests(stdout: str, size_bytes: int) -> dict[str, float]:
    """Out-of-place time (us), algbw and busbw (GB/s) of the row for `size_bytes` in all_gather_perf's
    table. Columns are found by the header line (src/util.cu writeResultHeader, v2.17.6:
    `size count type redop root time algbw busbw #wrong time algbw busbw #wrong`), the first
    time/algbw/busbw being out-of-place."""
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
    """The verdict line on the ratio: undefined at one rank (busbw is 0 by definition) or at no figure."""
    if world < 2:
        return "ratio gate/nccl-tests busbw: undefined at 1 GPU (all_gather busbw = algbw x (n-1)/n = 0 on both sides)"
    if not gate_busbw or not tests_busbw:
        return "ratio gate/nccl-tests busbw: undefined (a side measured nothing)"
    return f"ratio gate/nccl-tests busbw: {gate_busbw / tests_busbw:.3f}"


# ------------------------------------------------------------------------------------ NCCL and the build


def torch_nccl() -> dict[str, Any]:
    """The NCCL that torch loads: the nvidia-nccl wheel's include/ and lib/libnccl.so.2, and its version."""
    import torch

    if not torch.cuda.is_available():
        raise Fault("torch sees no CUDA device")
    try:
        import nvidia.nccl as wheel  # nvidia-nccl-cu12 / -cu13, torch's dependency
    except ImportError:
        raise Fault("no nvidia-nccl wheel in this Python: cannot build nccl-tests against torch's NCCL") from None
    home = Path(next(iter(wheel.__path__)))
    lib = home / "lib" / "libnccl.so.2"
    if not (home / "include" / "nccl.h").exists() or not lib.exists():
        raise Fault(f"{home}: no include/nccl.h or lib/libnccl.so.2")
    major, minor, patch = torch.cuda.nccl.version()
    # The library this process really mapped (libtorch_cuda links libnccl.so.2): it must be the wheel's,
    # or nccl-tests would be built against another NCCL than the gate's.
    maps = Path("/proc/self/maps").read_text().splitlines() if Path("/proc/self/maps").exists() else []
    loaded = sorted({line.split()[-1] for line in maps if "libnccl.so" in line})
    if loaded and os.path.realpath(loaded[0]) != os.path.realpath(lib):
        raise Fault(f"torch loaded {loaded[0]}, not the nvidia-nccl wheel's {lib}")
    return {
        "home": home,
        "lib": lib,
        "version": f"{major}.{minor}.{patch}",
        "torch": torch.__version__,
        "capability": torch.cuda.get_device_capability(0),
        "device_count": torch.cuda.device_count(),
        "device_name": torch.cuda.get_device_name(0),
    }


def cuda_home(given: Optional[str]) -> Path:
    for candidate in (given, os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if candidate and (Path(candidate) / "bin" / "nvcc").exists():
            return Path(candidate)
    nvcc = shutil.which("nvcc")
    if nvcc:
        return Path(os.path.realpath(nvcc)).parent.parent
    raise Fault("no nvcc: give --cuda-home")


def build_all_gather_perf(checkout: Path, nccl: dict[str, Any], cuda: Path, log: Path) -> Path:
    """<checkout>/build/all_gather_perf, built against torch's NCCL unless already so built."""
    build = checkout / "build"
    binary = build / "all_gather_perf"
    stamp = build / ".nccl-home"
    if binary.exists() and stamp.exists() and stamp.read_text() == str(nccl["lib"]):
        return binary
    # The wheel ships libnccl.so.2 only; the Makefile links -lnccl, so a NCCL_HOME with the wheel's
    # headers and an unversioned link is made beside the build.
    home = build / "nccl-home"
    (home / "lib").mkdir(parents=True, exist_ok=True)
    for link, target in ((home / "include", nccl["home"] / "include"), (home / "lib" / "libnccl.so", nccl["lib"])):
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target)
    for stale in [binary, *build.glob("*.o")]:
        stale.unlink(missing_ok=True)
    major, minor = nccl["capability"]
    cmd = [
        "make",
        "-C",
        str(checkout / "src"),
        f"-j{os.cpu_count() or 4}",
        "MPI=0",
        f"NCCL_HOME={home}",
        f"CUDA_HOME={cuda}",
        f"BUILDDIR={build}",
        str(binary),
    ]
    if "NVCC_GENCODE" not in os.environ:  # this GPU's architecture only: minutes less to compile
        cmd.append(f"NVCC_GENCODE=-gencode=arch=compute_{major}{minor},code=sm_{major}{minor}")
    print("building: " + " ".join(cmd), flush=True)
    start = time.monotonic()
    with open(log, "wb") as out:
        done = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT)
    if done.returncode or not binary.exists():
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["no output"]
        raise Fault(f"building all_gather_perf failed (exit {done.returncode}): {tail[0][:300]}; whole log: {log}")
    stamp.write_text(str(nccl["lib"]))
    print(f"built {binary} in {time.monotonic() - start:.0f} s", flush=True)
    return binary


# ------------------------------------------------------------------------------------ the two runs


def fabric_settings(path: Path = THRESHOLDS) -> dict[str, int]:
    """The gate's message size and iterations, as the cluster plan takes them (infra/gate_plan.py reads
    the same file; it is not imported here because it needs the program's dependencies)."""
    import yaml

    fabric = yaml.safe_load(path.read_text())["fabric"]
    return {k: int(fabric[k]) for k in ("message_bytes", "warmup_iters", "iters")}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_gate_ranks(plan: gate.GatePlan, logs: Path, timeout_s: float) -> dict[str, Any]:
    """The gate's per-GPU processes, through the actor's own code (no Ray: node rank 0, master on loopback)."""
    logs.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    result = gate.NodeProbe().ranks(plan.to_dict(), 0, "127.0.0.1", free_port(), timeout_s, keep_nccl_logs=str(logs))
    ranks = result["ranks"]
    # The driver's verdicts on what the processes reported (gate.run does the same after ray.get).
    checks = [gate.check_gpus(plan, ranks, 1), gate.fabric_from(plan, [result], ranks, nodes_found=1)]
    full = "\n".join(p.read_text(errors="replace") for p in sorted(logs.glob("nccl.*.log")))
    return {
        "ranks": ranks,
        "checks": checks,
        "kept_log": result["nccl_log"],
        "full_log": full,
        "seconds": time.monotonic() - start,
    }


def run_nccl_tests(
    binary: Path, nccl: dict[str, Any], world: int, size: int, settings: dict[str, int], logs: Path, timeout_s: float
) -> dict[str, Any]:
    logs.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.update(
        NO_MULTICAST,
        NCCL_DEBUG="INFO",
        NCCL_DEBUG_SUBSYS="INIT,NET",  # as the gate's processes run
        NCCL_DEBUG_FILE=str(logs / "nccl-tests.%h.%p.log"),
        LD_LIBRARY_PATH=os.pathsep.join([str(nccl["lib"].parent), *filter(None, [env.get("LD_LIBRARY_PATH")])]),
    )
    # -b/-e: nccl-tests' size for all_gather is the gathered output, as the gate's message_bytes;
    # -c 1 checks the data after timing, as the gate does; float, as the gate's tensors.
    cmd = [
        str(binary),
        "-b",
        str(size),
        "-e",
        str(size),
        "-f",
        "2",
        "-g",
        str(world),
        "-d",
        "float",
        "-w",
        str(settings["warmup_iters"]),
        "-n",
        str(settings["iters"]),
        "-c",
        "1",
    ]
    print("running: " + " ".join(cmd), flush=True)
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
    (logs / "all_gather_perf.out").write_text(done.stdout + done.stderr)
    if done.returncode:
        tail = (done.stdout + done.stderr).strip().splitlines()[-1:] or ["no output"]
        raise Fault(f"all_gather_perf exit {done.returncode}: {tail[0][:300]}")
    full = "\n".join(p.read_text(errors="replace") for p in sorted(logs.glob("nccl-tests.*.log")))
    return {
        **parse_nccl_tests(done.stdout, size),
        "versions": nccl_tests_versions(done.stdout),
        "full_log": full,
        "stdout": done.stdout,
    }


# ------------------------------------------------------------------------------------ main


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("nccl_tests", help=f"a checkout of NVIDIA/nccl-tests at {PINNED_TAG}")
    ap.add_argument("--gpus", type=int, default=0, help="GPUs to use (default: all torch sees)")
    ap.add_argument("--gpu-name", default="", help="what every device name must contain (default: GPU 0's name)")
    ap.add_argument("--expect-net", default="gIB", help="the net the gate's log check expects (the cluster's: gIB)")
    ap.add_argument("--out", default="", help="directory for the NCCL logs, nccl-tests' output and summary.json")
    ap.add_argument("--cuda-home", default=None)
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds for each side's run")
    args = ap.parse_args(argv)
    checkout = Path(args.nccl_tests).resolve()
    if not (checkout / "src" / "all_gather.cu").exists():
        print(
            f"nccl_tests: {checkout} is not an nccl-tests checkout (no src/all_gather.cu); clone NVIDIA/nccl-tests "
            f"at {PINNED_TAG}",
            file=sys.stderr,
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
    world = args.gpus or nccl["device_count"]
    if world > nccl["device_count"]:
        raise Fault(f"--gpus {world}: torch sees {nccl['device_count']} GPU(s)")
    out = Path(args.out or tempfile.mkdtemp(prefix="gate-vs-nccl-tests-")).resolve()
    out.mkdir(parents=True, exist_ok=True)
    settings = fabric_settings()
    print(
        f"machine: {socket.gethostname()}, {world} x {nccl['device_name']}; torch {nccl['torch']}, NCCL "
        f"{nccl['version']} ({nccl['lib']})",
        flush=True,
    )
    binary = build_all_gather_perf(checkout, nccl, cuda_home(args.cuda_home), out / "build.log")

    plan = gate.GatePlan(
        node_count=1,
        gpus_per_node=world,
        gpu_name=args.gpu_name or nccl["device_name"].split()[-1],
        busbw_floor_gbps=0.0,
        busbw_source="tools/gate_vs_nccl_tests.py: measured, not enforced",
        mount_path=str(out),
        storage_expected_gbps=0.0,
        storage_floor_gbps=0.0,
        storage_source="not measured",
        storage_bytes_per_node=0,
        expect_net=args.expect_net or None,
        collective="all_gather",
        message_bytes=settings["message_bytes"],
        warmup_iters=settings["warmup_iters"],
        iters=settings["iters"],
        python=sys.executable,
    )
    g = run_gate_ranks(plan, out / "gate", args.timeout)
    for c in g["checks"]:
        print(f"gate {c.name}: {'ok' if c.ok else 'FAILED'}: {c.summary}", flush=True)
    measured = [r for r in g["ranks"] if r.get("busbw_gbps") is not None]
    if len(measured) < world:
        raise Fault(f"{len(measured)} of {world} gate ranks measured; reports in {out / 'gate'}")
    slowest = max(measured, key=lambda r: r["seconds_per_op"])  # the gate's figure: the max time over ranks
    size = int(slowest["size_bytes"])
    t = run_nccl_tests(binary, nccl, world, size, settings, out / "nccl-tests", args.timeout)

    gate_versions = sorted(gate.parse_nccl_log(g["full_log"]).versions)
    tests_versions = sorted(gate.parse_nccl_log(t["full_log"]).versions)
    tests_net = sorted(gate.parse_nccl_log(t["full_log"]).networks)
    summary = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "host": socket.gethostname(),
        "gpus": world,
        "device": nccl["device_name"],
        "torch": nccl["torch"],
        "nccl_lib": str(nccl["lib"]),
        "nccl_gate_log": gate_versions,
        "nccl_tests_log": tests_versions,
        "nccl_tests": t["versions"],
        "collective": "all_gather",
        "size_bytes": size,
        **settings,
        "gate": {
            "seconds_per_op": slowest["seconds_per_op"],
            "algbw_gbps": slowest["algbw_gbps"],
            "busbw_gbps": slowest["busbw_gbps"],
            "checks": {c.name: {"ok": c.ok, "summary": c.summary} for c in g["checks"]},
        },
        "nccl_tests_run": {
            "time_us": t["time_us"],
            "algbw_gbps": t["algbw"],
            "busbw_gbps": t["busbw"],
            "network": tests_net,
        },
    }
    summary["ratio_busbw"] = slowest["busbw_gbps"] / t["busbw"] if world > 1 and t["busbw"] else None
    summary["ratio_algbw"] = slowest["algbw_gbps"] / t["algbw"] if t["algbw"] else None
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")

    print(
        f"NCCL in the logs: gate {', '.join(gate_versions) or 'none'}; all_gather_perf "
        f"{', '.join(tests_versions) or 'none'}; {t['versions'] or 'nccl-tests version not printed'}"
    )
    print(
        f"all_gather of {size} bytes on {world} GPU(s), {settings['warmup_iters']} warm-up + {settings['iters']} "
        "timed iterations:"
    )
    print(
        f"  gate (torch.distributed, {world} process(es), NCCL): {slowest['seconds_per_op'] * 1e6:.1f} us  algbw "
        f"{slowest['algbw_gbps']:.2f} GB/s  busbw {slowest['busbw_gbps']:.2f} GB/s"
    )
    print(
        f"  nccl-tests all_gather_perf (1 process, -g {world}): {t['time_us']:.1f} us  algbw {t['algbw']:.2f} GB/s  "
        f"busbw {t['busbw']:.2f} GB/s"
    )
    print("  " + ratio_line(slowest["busbw_gbps"], t["busbw"], world))
    if summary["ratio_algbw"] is not None:
        print(f"  ratio gate/nccl-tests algbw: {summary['ratio_algbw']:.3f}")
    print(f"logs and summary.json: {out}")
    if gate_versions != tests_versions:
        raise Fault(f"the two sides loaded different NCCL versions: gate {gate_versions}, nccl-tests {tests_versions}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
