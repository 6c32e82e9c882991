"""The calibration file's known points as composed configs, plan inputs and fit samples."""
from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from omegaconf import DictConfig

from verlsweep.command.compose import compose_config
from verlsweep.plan.fit.measured_fit import Sample
from verlsweep.plan.predictor.calibration import Calibration, Point
from verlsweep.plan.predictor.inputs import from_cfg
from verlsweep.plan.predictor.trial_spec import PlanInputs


@lru_cache(maxsize=256)
def _compose(overrides: tuple[str, ...]) -> DictConfig:
    return compose_config(list(overrides))


def point_config(point: Point) -> DictConfig:
    """The sweep config that reproduces a known point (composed once per process)."""
    return _compose(tuple(point.compose_overrides()))


def point_inputs(point: Point) -> PlanInputs:
    return from_cfg(point_config(point))


def samples(cal: Calibration) -> list[Sample]:
    """Every reported number the points mark for fitting, planned with the analytic formula (whose
    constants the fit sets; traced terms would hide them)."""
    out: list[Sample] = []
    for point in cal.points:
        inputs = replace(point_inputs(point), trainer="analytic")
        if "throughput" in point.fit and point.tok_s:
            out.append(Sample(f"{point.id} tok/s", inputs, "throughput", float(point.tok_s)))
        if "memory" in point.fit and point.peak_gb:
            out.append(Sample(f"{point.id} peak", inputs, "memory", float(point.peak_gb)))
    return out
