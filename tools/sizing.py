"""Checkpoint sizing: how big a NeMo-RL checkpoint is, how long Lustre takes to write it, and whether the
stack's Managed Lustre instance is big and fast enough.

Mixed-precision Adam keeps 16 bytes/parameter (ZeRO, Rajbhandari et al. 2020, section 3.1); a saved `step_N`
holds 14 of them plus state and the DTensor path keeps fp32 parameters, so 16 is the round, slightly
conservative size. Capacity = (keep_top_k + 1) checkpoints (NeMo-RL writes `tmp_step_N`, then renames it) + the HF
cache, times `HEADROOM` (Lustre slows when nearly full); `keep_top_k` is NeMo-RL's default 3
(examples/configs/grpo_math_1B.yaml) unless overridden, `null` keeps all. Write time = bytes / (TiB x the tier's
MB/s per TiB, https://cloud.google.com/managed-lustre/docs/performance-tiers; MB = 10^6): the best case.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Callable, Iterable, Optional

from infra.lustre_catalogue import LUSTRE_TIERS, lustre_aggregate_mb_s
from infra.run_plan import CHECKPOINT_BYTES_PER_PARAM, NEMO_RL_DEFAULT_SAVE_PERIOD
from workloads.overrides import parse_override

BYTES_PER_PARAM_CHECKPOINT = CHECKPOINT_BYTES_PER_PARAM  # the job builder's save period uses the same figure
BYTES_PER_PARAM_BF16 = 2  # a bf16 copy of the weights: the HF export and the HF model download
HF_CACHE_FACTOR = 1.5  # HF cache = bf16 weights x this (tokenizer, configs, datasets cache, a duplicate format)
HEADROOM = 1.10  # keep 10% of the instance free
NEMO_RL_DEFAULT_KEEP_TOP_K = 3  # `checkpointing.keep_top_k` in NeMo-RL's examples/configs/grpo_math_1B.yaml
GIB = 1024**3
MB = 10**6


def last_int_override(overrides: Iterable[str], key: str) -> tuple[bool, Optional[int]]:
    """(found, value) of the last `key=value` / `+key=` / `++key=` / `~key` in `overrides`: a deletion (`~key`, or
    `~key=value`, which Hydra also deletes by) and `null` are found with None; a value not an integer is not found."""
    found, value = False, None
    for override in overrides:
        parsed = parse_override(override.strip())
        if parsed.key == key and (parsed.deletes or parsed.assigns):
            found, value = True, None if parsed.deletes else parsed.value
    if value is None or value.lower() in ("null", "none", "~", ""):
        return found, None
    return (True, int(value)) if re.fullmatch(r"\d+", value) else (False, None)


@dataclass(frozen=True)
class CheckpointPolicy:
    """What the run keeps: from the recipe's overrides then the user's."""

    keep_top_k: Optional[int]  # None keeps every checkpoint
    save_period: int
    max_num_steps: int
    keep_top_k_source: str

    @property
    def saves(self) -> int:
        return math.ceil(self.max_num_steps / max(1, self.save_period))

    @property
    def kept_checkpoints(self) -> int:
        return max(1, self.saves if self.keep_top_k is None else min(self.keep_top_k, self.saves))

    @classmethod
    def from_overrides(cls, overrides: Iterable[str], max_num_steps: int) -> "CheckpointPolicy":
        overrides = list(overrides)
        found, keep = last_int_override(overrides, "checkpointing.keep_top_k")
        save_period = last_int_override(overrides, "checkpointing.save_period")[1]
        return cls(
            keep_top_k=keep if found else NEMO_RL_DEFAULT_KEEP_TOP_K,
            save_period=save_period or NEMO_RL_DEFAULT_SAVE_PERIOD,
            max_num_steps=max_num_steps,
            keep_top_k_source="from the overrides" if found else "NeMo-RL's default",
        )


@dataclass(frozen=True)
class LustreOption:
    """A valid Managed Lustre shape."""

    capacity_gib: int
    tier: int  # perUnitStorageThroughput, MB/s per TiB
    write_seconds: float  # of the checkpoint it was chosen for
    monthly_usd: Optional[float] = None


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
                "writeSeconds": round(self.suggestion.write_seconds, 1),
                "monthlyUsd": None if self.suggestion.monthly_usd is None else round(self.suggestion.monthly_usd, 2),
            },
            "warnings": list(self.warnings),
        }


def checkpoint_write_seconds(nbytes: float, capacity_gib: float, tier: int) -> float:
    return nbytes / (lustre_aggregate_mb_s(capacity_gib, tier) * MB)


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
        seconds = checkpoint_write_seconds(nbytes, capacity, tier)
        options.append(LustreOption(capacity, tier, seconds, None if per_gib is None else capacity * per_gib))
    return min(options, key=lambda o: (o.monthly_usd or 0.0, o.capacity_gib, -o.tier), default=None)


def estimate(
    *,
    model: str,
    params_billion: float,
    policy: CheckpointPolicy,
    capacity_gib: int,
    tier: int,
    target_seconds: int = 300,
    monthly_price: Optional[Callable[[int], Optional[float]]] = None,
) -> CheckpointEstimate:
    params = params_billion * 1e9
    nbytes, kept = params * BYTES_PER_PARAM_CHECKPOINT, policy.kept_checkpoints
    hf_cache = params * BYTES_PER_PARAM_BF16 * HF_CACHE_FACTOR
    required_gib = required_capacity_gib(nbytes, kept, hf_cache)
    est = CheckpointEstimate(
        model=model,
        params=params,
        policy=policy,
        capacity_gib=capacity_gib,
        tier=tier,
        target_seconds=target_seconds,
        checkpoint_bytes=nbytes,
        hf_export_bytes=params * BYTES_PER_PARAM_BF16,
        hf_cache_bytes=hf_cache,
        required_bytes=nbytes * (kept + 1) + hf_cache,
        required_gib=required_gib,
        throughput_mb_s=lustre_aggregate_mb_s(capacity_gib, tier),
        write_seconds=checkpoint_write_seconds(nbytes, capacity_gib, tier),
        suggestion=suggest_lustre(required_gib, nbytes, target_seconds, monthly_price),
    )
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
