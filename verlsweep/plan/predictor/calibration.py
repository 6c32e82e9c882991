"""The planner's constants and the known points they are fitted to, kept in one data file.

verlsweep/plan/calibration.yaml holds both, each with its source. `plan.calibration` (a path) points the
planner at another file, e.g. one written by `python -m verlsweep.plan refit`
(verlsweep.plan.fit.calibration_file writes them).
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

DEFAULT_PATH = Path(__file__).parents[1] / "calibration.yaml"      # verlsweep/plan/calibration.yaml


@dataclass(frozen=True)
class Constants:
    """Every tunable number of the memory and throughput models (values live in the YAML)."""

    # expected sequence lengths (when plan.prompt_tokens / plan.response_tokens are unset)
    prompt_tokens: float
    response_mean_tokens: float      # mean of the unclipped response-length distribution
    response_shape: float            # its gamma shape
    # memory
    runtime_context_gb: float        # per process holding a device context (trainer, vLLM worker)
    graph_pool_base_gb: float
    graph_pool_per_size_gb: float
    piecewise_graph_factor: float    # PIECEWISE modes capture per layer piece: bigger pools
    logits_bytes: float              # bytes live per token x vocab in an update micro batch
    forward_logits_bytes: float      # the same in a no-grad log-prob pass
    activation_factor: float         # scales the per-layer activation estimate
    fragmentation: float             # allocator reserved / allocated on the trainer side
    rollout_band_error: float        # relative error of the modelled non-trainer terms (band.py)
    trainer_band_error_traced: float   # relative error of the trainer terms, traced (band.py)
    trainer_band_error_analytic: float  # the same, the analytic formula (or a failed trace)
    host_process_gb: float           # host RAM per device for Ray/vLLM worker processes
    # throughput
    decode_bw_efficiency: float      # achieved / peak HBM bandwidth while decoding
    train_mfu: float                 # achieved / peak bf16 FLOPs in training passes
    prefill_mfu: float
    graph_step_overhead_ms: float    # per decode step when the batch fits a captured graph
    eager_step_overhead_ms: float    # per decode step otherwise (kernel launches)
    decode_tail: float               # extra decode steps at the end, as a fraction of max response
    tp_allreduce_us: float           # one TP all-reduce of a decode step (two per layer when TP > 1)
    step_overhead_s: float           # per training step: reward, advantage, Ray/dispatch
    host_link_efficiency: float
    weight_sync_gbs: float           # trainer -> vLLM weight update, per device
    cpu_adam_params_per_s: float     # host optimizer step (FSDP2 offload_policy), per rank
    # throughput knobs (verlsweep.plan.predictor.knob_costs; priors, not fitted)
    micro_batch_half_tokens: float   # tokens per device per micro batch at which a pass reaches half its MFU
    micro_batch_ref_tokens: float    # the micro batch train_mfu was fitted at (the seed recipe's budget)
    ulysses_a2a_gbs: float           # Ulysses all-to-all bandwidth per device inside a node


# the constants of the throughput model (the section above): what a calibration error in tokens/s is made of
THROUGHPUT_CONSTANTS = ("decode_bw_efficiency", "train_mfu", "prefill_mfu", "graph_step_overhead_ms",
                        "eager_step_overhead_ms", "decode_tail", "tp_allreduce_us", "step_overhead_s",
                        "host_link_efficiency", "weight_sync_gbs", "cpu_adam_params_per_s")


@dataclass(frozen=True)
class Point:
    """A configuration with a reported outcome: a recipe that ran, or one reported to fail."""

    id: str
    source: str
    hardware: str
    model: str
    algorithm: str
    data: str = "gsm8k"
    overrides: tuple[str, ...] = ()
    feasible: bool = True
    binding: str | None = None          # the constraint a failing point is reported to hit
    peak_gb: float | None = None        # actor/perf/max_memory_allocated_gb
    tok_s: float | None = None          # perf/throughput (tokens/s per device)
    tok_s_range: tuple[float, float] | None = None
    step_s: float | None = None
    fit: tuple[str, ...] = ()           # which reported numbers the fit uses: throughput, memory
    note: str = ""
    # a published number kept out of every fit, so it measures the planner on data it never saw
    held_out: bool = False
    # a failure derived from the planner's own rules (e.g. vLLM's start check), not a report: the
    # planner agreeing with it is no evidence, so accuracy figures do not count it
    derived: bool = False

    def compose_overrides(self) -> list[str]:
        """Overrides for our conf/ that reproduce the point."""
        return [f"hardware={self.hardware}", f"model={self.model}", f"algorithm={self.algorithm}",
                f"data={self.data}", *self.overrides]


@dataclass(frozen=True)
class Calibration:
    constants: Constants
    points: tuple[Point, ...]
    fitted: tuple[str, ...]              # names of the constants a fit may change
    bounds: dict[str, tuple[float, float]] = field(default_factory=dict)   # of the fitted ones
    sources: dict[str, str] = field(default_factory=dict)
    path: Path | None = None

    def point(self, point_id: str) -> Point:
        for p in self.points:
            if p.id == point_id:
                return p
        raise KeyError(point_id)


def _point(raw: dict[str, Any]) -> Point:
    reported = raw.get("reported") or {}
    rng = reported.get("tok_s_range")
    return Point(
        id=str(raw["id"]), source=str(raw.get("source", "")), hardware=str(raw["hardware"]),
        model=str(raw["model"]), algorithm=str(raw["algorithm"]), data=str(raw.get("data", "gsm8k")),
        overrides=tuple(str(o) for o in raw.get("overrides") or ()),
        feasible=bool(reported.get("feasible", True)), binding=reported.get("binding"),
        peak_gb=reported.get("peak_gb"), tok_s=reported.get("tok_s"),
        tok_s_range=tuple(rng) if rng else None, step_s=reported.get("step_s"),
        fit=tuple(raw.get("fit") or ()), note=str(raw.get("note", "")),
        held_out=bool(raw.get("held_out", False)), derived=bool(raw.get("derived", False)),
    )


def _pair(raw: Any) -> tuple[float, float]:
    low, high = raw
    return float(low), float(high)


# the veto's band, not the model: a calibration file written before they existed keeps the packaged ones
BAND_CONSTANTS = ("rollout_band_error", "trainer_band_error_traced", "trainer_band_error_analytic")


def parse(raw: dict[str, Any], path: Path | None = None) -> Calibration:
    consts = dict(raw.get("constants") or {})
    names = [f.name for f in fields(Constants)]
    if path != DEFAULT_PATH and any(n not in consts for n in BAND_CONSTANTS):
        packaged = yaml.safe_load(DEFAULT_PATH.read_text())["constants"]
        consts.update({n: packaged[n] for n in BAND_CONSTANTS if n not in consts})
    missing = [n for n in names if n not in consts]
    unknown = [n for n in consts if n not in names]
    if missing or unknown:
        raise ValueError(f"calibration {path}: missing constants {missing}, unknown constants {unknown}")
    values = {n: float(consts[n]["value"]) for n in names}
    both = [str(p.get("id")) for p in raw.get("points") or () if p.get("held_out") and p.get("fit")]
    if both:
        raise ValueError(f"calibration {path}: points {both} are held_out but name reported numbers under `fit`")
    return Calibration(
        constants=Constants(**values),
        points=tuple(_point(p) for p in raw.get("points") or ()),
        fitted=tuple(n for n in names if consts[n].get("fit")),
        bounds={n: _pair(consts[n]["bounds"]) for n in names if consts[n].get("bounds")},
        sources={n: str(consts[n].get("source", "")) for n in names},
        path=path,
    )


@lru_cache(maxsize=8)
def _load(path: Path, mtime: float) -> Calibration:
    return parse(yaml.safe_load(path.read_text()), path)


def load(path: str | Path | None = None) -> Calibration:
    """The calibration at `path` (default: the packaged calibration.yaml), cached per file version."""
    p = Path(path).expanduser() if path else DEFAULT_PATH
    return _load(p, p.stat().st_mtime)
