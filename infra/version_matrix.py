"""The version matrix (data/version_matrix.yaml): which GKE, driver, gIB, NCCL, NeMo-RL, Ray and KubeRay chart
versions are deployed together, and which pairs are known to break. Pure: `Pins` in, a verdict out."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Optional

import yaml

MATRIX_FILE = Path(__file__).resolve().parent.parent / "data" / "version_matrix.yaml"
_OPS = ("<=", ">=", "==", "<", ">")


@lru_cache(maxsize=2)
def load(path: Path = MATRIX_FILE) -> Mapping[str, Any]:
    return yaml.safe_load(path.read_text())


def parse_version(text: str) -> tuple[int, ...]:
    """1.33.2-gke.1111000 -> (1, 33, 2, 1111000); 2.27.5+cuda12.9 -> (2, 27, 5) (the suffix is the build's)."""
    return tuple(int(n) for n in re.findall(r"\d+", str(text).split("+", 1)[0]))


def _within(version: str, bound: tuple[int, ...]) -> tuple[int, ...]:
    # A bound of fewer parts (1.36) covers 1.36.x.
    return parse_version(version)[: len(bound)]


def satisfies(version: str, spec: str) -> bool:
    op = next(o for o in _OPS if spec.startswith(o))
    bound = parse_version(spec[len(op) :])
    have = _within(version, bound)
    return {"<": have < bound, "<=": have <= bound, ">": have > bound, ">=": have >= bound, "==": have == bound}[op]


def gke_in_row(version: str, row: Mapping[str, Any]) -> bool:
    gke = row["gke"]
    low, high = parse_version(gke["min"]), parse_version(gke["below"])
    return parse_version(version) >= low and _within(version, high) < high


def gke_range(row: Mapping[str, Any]) -> str:
    return f">={row['gke']['min']}, <{row['gke']['below']}"


@dataclass(frozen=True)
class Pins:
    mode: str
    flavour: str
    gke: Optional[str]  # None: the channel's default (the doctor checks the live one)
    gpu_driver_version: str
    gib_image: str  # repository:tag
    nemo_rl_tag: str
    chart_version: str

    @property
    def gib_tag(self) -> str:
        return self.gib_image.rsplit(":", 1)[1]


class VersionError(ValueError):
    def __init__(self, key: str, message: str):
        super().__init__(message)
        self.key = key


def _mismatches(pins: Pins, row: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    covers, out = row["covers"], []
    if pins.mode not in covers["modes"]:
        out.append(("cluster.mode", pins.mode, "/".join(covers["modes"])))
    if pins.flavour not in covers["flavours"]:
        out.append(("flavour", pins.flavour, "/".join(covers["flavours"])))
    if pins.gke and not gke_in_row(pins.gke, row):
        out.append(("cluster.minMasterVersion", pins.gke, f"GKE {gke_range(row)}"))
    allowed = row["gpuDriverVersion"]["allowed"]
    if pins.gpu_driver_version not in allowed:
        out.append(("gpuPool.gpuDriverVersion", pins.gpu_driver_version, "/".join(allowed)))
    gib = f"{row['gib']['image']}:{row['gib']['tag']}"
    if pins.gib_image != gib:
        out.append(("ray.ncclInstallerImage", pins.gib_image, gib))
    images = [k for k in row["nemoRl"] if k != "source"]
    if pins.nemo_rl_tag not in images:
        out.append(("job.recipe", f"a recipe on NeMo-RL {pins.nemo_rl_tag}", f"a recipe on NeMo-RL {'/'.join(images)}"))
    if pins.chart_version != str(row["kuberayChart"]["version"]):
        out.append(("ray.chartVersion", pins.chart_version, str(row["kuberayChart"]["version"])))
    return out


def nearest(
    pins: Pins, matrix: Optional[Mapping[str, Any]] = None
) -> tuple[Mapping[str, Any], list[tuple[str, str, str]]]:
    """On a tie a row with the recipe's NeMo-RL image wins (the image comes with the recipe), then the first."""
    rows = (matrix or load())["rows"]
    scored = [(row, _mismatches(pins, row)) for row in rows]
    return min(scored, key=lambda s: (len(s[1]), any(key == "job.recipe" for key, _, _ in s[1])))


def versions(pins: Pins, row: Mapping[str, Any]) -> dict[str, Optional[str]]:
    image = row["nemoRl"].get(pins.nemo_rl_tag) or {}
    nccl = row["nccl"]
    return {
        "gke": pins.gke,
        "gib": pins.gib_tag,
        "nccl": image.get("nccl") if nccl["from"] == "image" else nccl.get("version"),
        "ncclFrom": nccl["from"],
        "nemoRl": pins.nemo_rl_tag,
        "ray": image.get("ray"),
        "kuberayChart": pins.chart_version,
    }


def _applies(rule: Mapping[str, Any], have: Mapping[str, Optional[str]], flavour: str) -> bool:
    when = rule.get("when") or {}
    return bool(when) and all(
        flavour in spec if name == "flavour" else have.get(name) is not None and satisfies(have[name], str(spec))
        for name, spec in when.items()
    )


def known_bad(
    pins: Pins, row: Mapping[str, Any], matrix: Optional[Mapping[str, Any]] = None
) -> list[Mapping[str, Any]]:
    have = versions(pins, row)
    return [r for r in (matrix or load())["knownBad"] if _applies(r, have, pins.flavour)]


def check(pins: Pins, allow_untested: bool, matrix: Optional[Mapping[str, Any]] = None) -> None:
    row, outside = nearest(pins, matrix)
    for rule in known_bad(pins, row, matrix):
        if rule["effect"] == "refuse":
            raise VersionError(
                rule["key"],
                f"{_what(rule, pins, row)} is a known-bad combination ({rule['id']}: {rule['issue']}); allowed: "
                "another pin (allowUntestedVersions does not admit a known-bad pair)",
            )
    if outside and not allow_untested:
        key, have, want = outside[0]
        raise VersionError(
            key,
            f"{have} is outside the version matrix; the nearest tested row {row['id']} has {want} "
            f"(data/version_matrix.yaml); allowed: that, or allowUntestedVersions: true",
        )


def _what(rule: Mapping[str, Any], pins: Pins, row: Mapping[str, Any]) -> str:
    have = versions(pins, row)
    parts = [f"flavour {pins.flavour}" if n == "flavour" else f"{n} {have.get(n)}" for n in rule["when"]]
    return ", ".join(parts)


def report(pins: Pins, matrix: Optional[Mapping[str, Any]] = None) -> dict[str, Any]:
    row, outside = nearest(pins, matrix)
    have = versions(pins, row)
    cautions = [
        {"id": r["id"], "issue": r["issue"], "effect": r["effect"]}
        for r in known_bad(pins, row, matrix)
        if r["effect"] != "refuse"
    ]
    return {
        "row": None if outside else row["id"],
        "nearestRow": row["id"],
        "outside": [{"key": k, "stack": h, "row": w} for k, h, w in outside],
        "gke": gke_range(row),
        "versions": have,
        "cautions": cautions,
        "verifiedBy": row.get("verifiedBy"),
        # gIB's release is not in NCCL's log lines, so it is reported as expected, not read.
        "expect": {"nccl": have["nccl"] if not outside else None, "gib": have["gib"]},
    }


def report_line(rep: Mapping[str, Any]) -> str:
    v = rep["versions"]
    body = (
        f"GKE {rep['gke']}, gIB {v['gib']}, NCCL {v['nccl'] or 'unrecorded'} ({v['ncclFrom']}), "
        f"NeMo-RL {v['nemoRl']} / Ray {v['ray']}, KubeRay chart {v['kuberayChart']}"
    )
    head = (
        f"row {rep['row']}"
        if rep["row"]
        else f"UNTESTED (nearest row {rep['nearestRow']}; outside: "
        + ", ".join(f"{o['key']} {o['stack']}" for o in rep["outside"])
        + ")"
    )
    cautions = "".join(f"; caution {c['id']} ({c['issue']})" for c in rep["cautions"])
    return f"{head}: {body}{cautions}"
