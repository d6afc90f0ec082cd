"""Checkpoint sizing: how big a NeMo-RL checkpoint is, how long Lustre takes to write it, and
whether the stack's Managed Lustre instance is big and fast enough.

Mixed-precision Adam keeps 16 bytes/parameter (bf16 weights and gradients, fp32 master copy and both
moments: ZeRO, Rajbhandari et al. 2020, section 3.1); a saved `step_N` holds 14 of them plus state, and
the DTensor path keeps fp32 parameters, so 16 B/param is the round, slightly conservative size. A bf16
export, and the HF cache (times `HF_CACHE_FACTOR`), are 2 B/param.

Capacity = (keep_top_k + 1) checkpoints (NeMo-RL writes `tmp_step_N` and renames it when whole) + the HF
cache, times `HEADROOM` (Lustre slows when nearly full). `keep_top_k` is the last override's, else
NeMo-RL's default 3 (examples/configs/grpo_math_1B.yaml, inherited by the other GRPO configs); `null`
keeps all. Write time = bytes / (TiB x the tier's MB/s per TiB,
https://cloud.google.com/managed-lustre/docs/performance-tiers; MB = 10^6): the best case.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional

from infra.lustre_catalogue import LUSTRE_TIERS, lustre_aggregate_mb_s
from infra.run_plan import CHECKPOINT_BYTES_PER_PARAM, NEMO_RL_DEFAULT_SAVE_PERIOD
from workloads.overrides import parse_override

BYTES_PER_PARAM_CHECKPOINT = CHECKPOINT_BYTES_PER_PARAM
"""Mixed-precision Adam: bf16 weights 2 + bf16 grads 2 + fp32 master 4 + Adam m 4 + Adam v 4 (the job builder
derives the save period from the same figure, infra/run_plan.py)."""
BYTES_PER_PARAM_BF16 = 2
"""A bf16 copy of the weights: the HF export and the HF model download."""
HF_CACHE_FACTOR = 1.5
"""HF cache = bf16 weights x this (tokenizer, configs, datasets cache, a duplicate weight format)."""
HEADROOM = 1.10
"""Keep 10% of the instance free."""
NEMO_RL_DEFAULT_KEEP_TOP_K = 3
"""`checkpointing.keep_top_k` in NeMo-RL's examples/configs/grpo_math_1B.yaml."""
DEFAULT_WRITE_TARGET_SECONDS = 300
GIB = 1024**3
MB = 10**6


def last_override(overrides: Iterable[str], key: str) -> tuple[bool, Optional[str]]:
    """(found, value) of the last `key=value` / `+key=value` / `++key=value` / `~key` in `overrides`.

    A deletion (`~key`, or `~key=value`, which Hydra also deletes by) counts as found with value None:
    NeMo-RL then has no such key.
    """
    found, value = False, None
    for override in overrides:
        parsed = parse_override(override.strip())
        if parsed.key != key:
            continue
        if parsed.deletes:
            found, value = True, None
        elif parsed.assigns:
            found, value = True, parsed.value
    return found, value


def _int_or_none(value: Optional[str]) -> Optional[int]:
    if value is None or value.lower() in ("null", "none", "~", ""):
        return None
    if re.fullmatch(r"\d+", value):
        return int(value)
    raise ValueError(f"not an integer: {value!r}")


@dataclass(frozen=True)
class CheckpointPolicy:
    """What the run keeps: from the recipe's overrides then the user's."""

    keep_top_k: Optional[int]
    """None keeps every checkpoint."""
    save_period: int
    max_num_steps: int
    keep_top_k_source: str

    @property
    def kept_checkpoints(self) -> int:
        if self.keep_top_k is None:
            return max(1, math.ceil(self.max_num_steps / max(1, self.save_period)))
        return max(1, min(self.keep_top_k, math.ceil(self.max_num_steps / max(1, self.save_period))))

    @classmethod
    def from_overrides(cls, overrides: Iterable[str], max_num_steps: int) -> "CheckpointPolicy":
        overrides = list(overrides)
        found, value = last_override(overrides, "checkpointing.keep_top_k")
        try:
            keep = _int_or_none(value) if found else NEMO_RL_DEFAULT_KEEP_TOP_K
        except ValueError:
            keep, found = NEMO_RL_DEFAULT_KEEP_TOP_K, False
        source = "from the overrides" if found else "NeMo-RL's default"
        sp_found, sp_value = last_override(overrides, "checkpointing.save_period")
        try:
            save_period = _int_or_none(sp_value) if sp_found else None
        except ValueError:
            save_period = None
        return cls(
            keep_top_k=keep,
            save_period=save_period or NEMO_RL_DEFAULT_SAVE_PERIOD,
            max_num_steps=max_num_steps,
            keep_top_k_source=source,
        )


@dataclass(frozen=True)
class LustreOption:
    """A valid Managed Lustre shape."""

    capacity_gib: int
    tier: int
    """perUnitStorageThroughput, MB/s per TiB."""
    monthly_usd: Optional[float] = None

    @property
    def throughput_mb_s(self) -> float:
        return aggregate_throughput_mb_s(self.capacity_gib, self.tier)


@dataclass
class CheckpointEstimate:
    model: str
    params: float
    policy: CheckpointPolicy
    capacity_gib: int
    tier: int
    target_seconds: int
    checkpoint_bytes: float = 0.0
    hf_export_bytes: float = 0.0
    hf_cache_bytes: float = 0.0
    required_bytes: float = 0.0
    required_gib: int = 0
    throughput_mb_s: float = 0.0
    write_seconds: float = 0.0
    suggestion: Optional[LustreOption] = None
    warnings: list[str] = field(default_factory=list)

    @property
    def fits(self) -> bool:
        return self.capacity_gib >= self.required_gib

    @property
    def fast_enough(self) -> bool:
        return self.write_seconds <= self.target_seconds

    def to_json(self) -> dict:
        return {
            "model": self.model,
            "paramsBillion": round(self.params / 1e9, 3),
            "bytesPerParam": BYTES_PER_PARAM_CHECKPOINT,
            "checkpointBytes": round(self.checkpoint_bytes),
            "checkpointTB": round(self.checkpoint_bytes / 1e12, 3),
            "hfExportBytes": round(self.hf_export_bytes),
            "hfCacheBytes": round(self.hf_cache_bytes),
            "keepTopK": self.policy.keep_top_k,
            "keepTopKSource": self.policy.keep_top_k_source,
            "checkpointsOnDisk": self.policy.kept_checkpoints + 1,
            "requiredGib": self.required_gib,
            "lustre": {
                "capacityGib": self.capacity_gib,
                "perUnitStorageThroughput": self.tier,
                "aggregateThroughputMBps": round(self.throughput_mb_s, 1),
            },
            "writeSeconds": round(self.write_seconds, 1),
            "writeTargetSeconds": self.target_seconds,
            "fits": self.fits,
            "fastEnough": self.fast_enough,
            "suggestion": None
            if self.suggestion is None
            else {
                "capacityGib": self.suggestion.capacity_gib,
                "perUnitStorageThroughput": self.suggestion.tier,
                "writeSeconds": round(
                    checkpoint_write_seconds(self.checkpoint_bytes, self.suggestion.capacity_gib, self.suggestion.tier),
                    1,
                ),
                "monthlyUsd": None if self.suggestion.monthly_usd is None else round(self.suggestion.monthly_usd, 2),
            },
            "warnings": list(self.warnings),
        }


def checkpoint_bytes(params: float) -> float:
    return params * BYTES_PER_PARAM_CHECKPOINT


def bf16_bytes(params: float) -> float:
    return params * BYTES_PER_PARAM_BF16


def aggregate_throughput_mb_s(capacity_gib: float, tier: int) -> float:
    """Capacity in TiB x per-unit throughput (MB/s per TiB)."""
    return lustre_aggregate_mb_s(capacity_gib, tier)


def checkpoint_write_seconds(nbytes: float, capacity_gib: float, tier: int) -> float:
    return nbytes / (aggregate_throughput_mb_s(capacity_gib, tier) * MB)


def required_capacity_gib(checkpoint: float, kept: int, hf_cache: float) -> int:
    """(kept + 1 in flight) checkpoints + HF cache, with headroom, in whole GiB."""
    return math.ceil((checkpoint * (kept + 1) + hf_cache) * HEADROOM / GIB)


def suggest_lustre(
    required_gib: int,
    nbytes: float,
    target_seconds: float,
    monthly_price: Optional[Callable[[int], Optional[float]]] = None,
) -> Optional[LustreOption]:
    """The cheapest valid (capacity, tier) that holds `required_gib` and writes `nbytes` within
    `target_seconds`; without prices, the smallest capacity (ties: the faster tier)."""
    options: list[LustreOption] = []
    for tier, shape in LUSTRE_TIERS.items():
        for_throughput = nbytes / target_seconds / MB / tier * 1024  # GiB of capacity for that rate
        capacity = shape.round_up(max(required_gib, for_throughput))
        if capacity is None:
            continue
        per_gib = monthly_price(tier) if monthly_price else None
        options.append(LustreOption(capacity, tier, None if per_gib is None else capacity * per_gib))
    if not options:
        return None

    def rank(o: LustreOption) -> tuple:
        return (o.monthly_usd if o.monthly_usd is not None else 0.0, o.capacity_gib, -o.tier)

    return min(options, key=rank)


def estimate(
    *,
    model: str,
    params_billion: float,
    policy: CheckpointPolicy,
    capacity_gib: int,
    tier: int,
    target_seconds: int = DEFAULT_WRITE_TARGET_SECONDS,
    monthly_price: Optional[Callable[[int], Optional[float]]] = None,
) -> CheckpointEstimate:
    params = params_billion * 1e9
    est = CheckpointEstimate(
        model=model, params=params, policy=policy, capacity_gib=capacity_gib, tier=tier, target_seconds=target_seconds
    )
    est.checkpoint_bytes = checkpoint_bytes(params)
    est.hf_export_bytes = bf16_bytes(params)
    est.hf_cache_bytes = bf16_bytes(params) * HF_CACHE_FACTOR
    kept = policy.kept_checkpoints
    est.required_bytes = est.checkpoint_bytes * (kept + 1) + est.hf_cache_bytes
    est.required_gib = required_capacity_gib(est.checkpoint_bytes, kept, est.hf_cache_bytes)
    est.throughput_mb_s = aggregate_throughput_mb_s(capacity_gib, tier)
    est.write_seconds = checkpoint_write_seconds(est.checkpoint_bytes, capacity_gib, tier)
    est.suggestion = suggest_lustre(est.required_gib, est.checkpoint_bytes, target_seconds, monthly_price)
    if not est.fits:
        est.warnings.append(
            f"Lustre too small: {kept} kept + 1 in-flight checkpoint(s) of {est.checkpoint_bytes / 1e12:.2f} TB "
            f"plus the HF cache need {est.required_gib} GiB with headroom; the instance has {capacity_gib} GiB"
        )
    if not est.fast_enough:
        est.warnings.append(
            f"checkpoint write too slow: {est.write_seconds:.0f} s at {est.throughput_mb_s:.0f} MB/s, "
            f"target {target_seconds} s (cost.checkpointWriteTargetSeconds)"
        )
    return est


def format_bytes(nbytes: float) -> str:
    """Decimal units, as disk and cloud prices use them."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if nbytes >= size:
            return f"{nbytes / size:.2f} {unit}"
    return f"{nbytes:.0f} B"
