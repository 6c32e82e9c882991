"""Fit the planner's `fit: true` constants to measured points (relative least squares).

A sample is one measured number of one configuration: its tokens/s (perf/throughput), its trainer
peak (actor/perf/max_memory_allocated_gb) or its device peak (peak_device_hbm_gb: the most HBM in use on
any device as npu-smi / NVML report it, vLLM's pool and HCCL buffers included). Residuals are
log(predicted / measured), so a 10 % miss weighs the same at 60 tok/s and at 600 (least_squares). Bounds
keep constants physical (calibration.yaml `bounds`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from verlsweep.plan.fit import least_squares
from verlsweep.plan.predictor.calibration import Calibration, Constants
from verlsweep.plan.predictor.lengths import expected_lengths
from verlsweep.plan.predictor.memory import memory_per_phase
from verlsweep.plan.predictor.throughput import step_throughput
from verlsweep.plan.predictor.trial_spec import PlanInputs

KINDS = ("throughput", "memory", "device_memory")


@dataclass(frozen=True)
class Sample:
    label: str
    inputs: PlanInputs
    kind: str            # throughput | memory | device_memory
    measured: float


def predict_sample(sample: Sample, c: Constants) -> float:
    lengths = expected_lengths(sample.inputs, c)
    if sample.kind == "memory":
        return memory_per_phase(sample.inputs, c, lengths=lengths).trainer_peak_gb
    if sample.kind == "device_memory":
        return max(memory_per_phase(sample.inputs, c, lengths=lengths).phases.values())
    kv_tokens = memory_per_phase(sample.inputs, c).kv_tokens
    return step_throughput(sample.inputs, c, lengths, kv_tokens).tok_s


def relative_errors(samples: list[Sample], c: Constants) -> list[float]:
    return [predict_sample(s, c) / s.measured - 1.0 for s in samples]


@dataclass
class FitResult:
    constants: Constants
    before: list[float]           # relative errors with the starting constants
    after: list[float]
    changed: dict[str, tuple[float, float]]

    def worst(self, which: str = "after") -> float:
        errors = getattr(self, which)
        return max((abs(e) for e in errors), default=0.0)


def fit(cal: Calibration, samples: list[Sample], start: Constants | None = None) -> FitResult:
    """Least-squares fit of cal.fitted constants that the samples can inform.

    A constant only moves if some sample's kind depends on it (memory samples inform logits_bytes,
    throughput samples the efficiencies), so a memory-only data set leaves the throughput constants alone.
    """
    start = start or cal.constants
    kinds = {s.kind for s in samples}
    names = informed(cal, kinds)
    before = relative_errors(samples, start)
    if not names or not samples:
        return FitResult(start, before, before, {})
    fitted = least_squares.solve(start, names, samples, predict_sample, lambda s: s.measured, bounds=cal.bounds,
                                 default_bounds=(1e-6, math.inf))
    return FitResult(fitted, before, relative_errors(samples, fitted),
                     {n: (getattr(start, n), getattr(fitted, n)) for n in names})


_MEMORY_CONSTANTS = {"logits_bytes", "forward_logits_bytes", "activation_factor", "fragmentation",
                     "prompt_tokens", "response_mean_tokens", "response_shape"}


def informed(cal: Calibration, kinds: set[str] | tuple[str, ...]) -> list[str]:
    """The fitted constants samples of these kinds can move."""
    return [n for n in cal.fitted if _informed(n, set(kinds))]


def _informed(name: str, kinds: set[str]) -> bool:
    if "throughput" in kinds:
        return True                     # throughput depends on lengths and memory (KV) too
    return name in _MEMORY_CONSTANTS
