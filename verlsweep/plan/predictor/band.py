"""The uncertainty band of a predicted need: how much less a config may need than predicted, per term.

A veto is only as good as the prediction behind it, and the best rollout config is usually at the
memory edge, so the planner vetoes a config only when it cannot fit even at the favourable end of the
band (verlsweep.plan.predictor.memory.Check.status); one inside the band is launched as an edge probe. Each part of
a check's need is one of:

* counted: bytes the planner counts rather than models (vLLM's reservation, util x total, is what vLLM
  asks for; bf16 weights / TP, the KV of one max_model_len sequence, HCCL buffers from HCCL_BUFFSIZE,
  offloaded states, the model load, vLLM's sleep copies): no band;
* trainer: everything the trainer process allocates (params at vLLM's start, the residency during
  rollout, each phase's peak). Its error is the worst measured against the published peaks
  (actor/perf/max_memory_allocated_gb, benchmarks/planner_accuracy.py): traced +6.8% / -2.5%
  (ppo_qwen3_8b_a2_nightly / gspo_qwen3_8b_a2_nightly), so 6.8%. The analytic formula, whose
  constants are fitted to traces (verlsweep/plan/fit/trace_fit.py) and so to no published peak, is +9.3%
  off ppo_qwen3_8b_a2_nightly (out of sample), and its pass peak is within -14.8% / +15.6% of the
  traced one on every model group held out of the fit (qwen3_0_6b / qwen3_32b, docs/benchmarks.md);
  the traces themselves are up to 6.8% off the published peaks. 20% is kept: no tighter than any of
  these, and it allows for the last two to add up (it was the worst leave-one-out error, +20.0%,
  when the formula was fitted to the published peaks). They are the calibration's
  trainer_band_error_traced / trainer_band_error_analytic: a calibration on a stack's measured allocator
  peaks narrows the one its samples were predicted with to their worst over-prediction, never wider than
  these (verlsweep/plan/fit/trainer_band.py);
* rollout: the rest, modelled from priors (device contexts, graph pools, vLLM's profiled activation
  peak, host worker processes). The one published measurement of them, vllm-ascend#6611's OOM line
  (1.38 GiB of non-PyTorch use on a 910B with two processes, calibration.yaml runtime_context_gb),
  is 27.5% off the modelled 1.0 GiB (|1.0 / 1.38 - 1|); that size is used both ways. It is the
  calibration's rollout_band_error: a calibration refitted to a stack's measured device peaks sets it to
  their worst held-out error (verlsweep/plan/fit/stack_calibration.py).
"""
from __future__ import annotations

from collections.abc import Mapping

from verlsweep.plan.predictor import calibration

_PACKAGED = calibration.load().constants
# the packaged calibration's (vllm-ascend#6611: modelled 1.0 GiB of device contexts, measured 1.38)
ROLLOUT_ERROR = _PACKAGED.rollout_band_error
COUNTED = frozenset({"vLLM reservation", "vLLM asleep", "weights/TP", "KV of one max_model_len", "comm buffers",
                     "offloaded states", "model load", "vLLM sleep copies"})
TRAINER = frozenset({"trainer", "trainer params", "trainer residency"})


def trainer_source(source: str) -> str:
    """Which band a traced_terms.source belongs to, traced or analytic (a failed trace falls back to the
    analytic formula, and so does its band)."""
    return "traced" if source == "traced" else "analytic"


def trainer_error(source: str, c: calibration.Constants | None = None) -> float:
    """The trainer terms' error for where they come from, under `c` (None: the packaged calibration's):
    its constant trainer_band_error_<traced|analytic>."""
    return float(getattr(c or _PACKAGED, f"trainer_band_error_{trainer_source(source)}"))


# the packaged calibration's: |predicted / published - 1|, worst over the published trainer peaks (see above)
TRAINER_ERROR = {source: trainer_error(source) for source in ("traced", "analytic")}


def part_error(part: str, trainer: float, rollout: float = ROLLOUT_ERROR) -> float:
    """The relative error of one named part of a check's need."""
    if part in COUNTED:
        return 0.0
    return trainer if part in TRAINER else rollout


def favourable(parts: Mapping[str, float], trainer: float, rollout: float = ROLLOUT_ERROR) -> float:
    """The least the parts may add up to: each modelled part at the low end of its error (`rollout`: the
    calibration's rollout_band_error)."""
    return sum(v * (1 - part_error(k, trainer, rollout)) for k, v in parts.items())
