"""The gate's version verdict: the NCCL release the pods loaded (`NCCL version 2.27.5+cuda12.9`, src/init.cc)
and net plugins (`NET/Plugin: Loaded net plugin gIB (v10)`, src/plugin/net, 2.27+) from their NCCL INFO
log, against the version-matrix row's `expect_nccl`. NCCL's lines never name the gIB release, so it is
reported as expected, never as seen.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Optional

_PLUGIN_API = re.compile(r"NET/Plugin: Loaded net plugin (\S+) \((v\d+)\)")


def nccl_release(version: str) -> str:
    """`2.27.5+cuda12.9` -> `2.27.5`."""
    return version.split("+", 1)[0]


def plugin_apis(log_text: str) -> list[str]:
    return sorted({f"{m.group(1)} {m.group(2)}" for m in _PLUGIN_API.finditer(log_text)})


def version_numbers(
    versions: Iterable[str], log_text: str, expect_nccl: Optional[str], expect_gib: Optional[str]
) -> dict[str, Any]:
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
