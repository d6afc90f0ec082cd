"""The acceptance gate's version verdict: the NCCL (and net plugin) the pods really loaded, from their
NCCL INFO log, against what the stack's version-matrix row expects (data/version_matrix.yaml, handed in
as plain values through the gate plan: `GatePlan.expect_nccl`, `GatePlan.expect_gib`).

Runtime module (shipped into the cluster): imports nothing from infra or tools.

What the log can show: `NCCL version 2.27.5+cuda12.9` (src/init.cc VERSION_STRING, every process) and
`NET/Plugin: Loaded net plugin gIB (v10)` (src/plugin/net, 2.27+: the plugin's name and the NCCL net
API version it speaks). The gIB release (v1.1.1) is not among NCCL's lines, and the gIB plugin's own
lines have not been seen in any log read here, so the gIB release is reported as expected, never as
seen; only on the real cloud could its own lines be read (an A4 run with NCCL_DEBUG=INFO).
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Optional

_PLUGIN_API = re.compile(r"NET/Plugin: Loaded net plugin (\S+) \((v\d+)\)")


def nccl_release(version: str) -> str:
    """`2.27.5+cuda12.9` -> `2.27.5`: the CUDA suffix is the build's, the matrix records NCCL's release."""
    return version.split("+", 1)[0]


def plugin_apis(log_text: str) -> list[str]:
    """`gIB v10` for each distinct net plugin NCCL loaded (name and net API version)."""
    return sorted({f"{m.group(1)} {m.group(2)}" for m in _PLUGIN_API.finditer(log_text)})


def version_numbers(
    versions: Iterable[str], log_text: str, expect_nccl: Optional[str], expect_gib: Optional[str]
) -> dict[str, Any]:
    """What the gate reports: the NCCL releases seen, the net plugins loaded, and what the row expects."""
    return {
        "ncclVersions": sorted({nccl_release(v) for v in versions}) or None,
        "netPlugins": plugin_apis(log_text) or None,
        "expectedNccl": expect_nccl,
        "expectedGib": expect_gib,
    }


def version_problem(versions: Iterable[str], expect_nccl: Optional[str]) -> Optional[str]:
    """None when every process loaded the row's NCCL (or the row records none); otherwise why not."""
    if not expect_nccl:
        return None
    seen = sorted({nccl_release(v) for v in versions})
    if not seen:
        return (
            f"no 'NCCL version' line in the NCCL INFO log: cannot prove NCCL {expect_nccl} (the version matrix "
            "row's) was loaded"
        )
    other = [v for v in seen if v != expect_nccl]
    if other:
        return f"NCCL {'/'.join(other)} loaded, not {expect_nccl} of the version matrix row (data/version_matrix.yaml)"
    return None
