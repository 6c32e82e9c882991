"""The trainer part of the veto's error band, from the allocator peaks measured on one software stack.

Every launched trial's run holds verl's allocator peak, actor/perf/max_memory_allocated_gb (verl's engine
worker logs torch's max_memory_allocated after the actor update, verl/workers/engine_workers.py; the
trainer renames it under `actor/`), which the planner predicts as memory_per_phase(...).trainer_peak_gb:
a "memory" sample (verlsweep/plan/fit/refit.py harvest_runs). The band's job is the favourable end of a
veto, how much less a config may need than predicted, so a stack's band is the worst over-prediction of
its allocator peaks, 1 - measured / predicted (a peak the planner under-predicts needs no lower end), at
least the floor (a peak measured on one config says little about another's phases) and never wider than
the packaged band of its source (band.TRAINER_ERROR).

Per source: a peak predicted with traced terms measures the traced band, one predicted with the analytic
formula (or a failed trace) the analytic band (band.trainer_source, read after the prediction, which is
when a trace fails); each moves only on at least `min_trials` trials of its own source, and the other
stays. harvest_runs composes every trial with plan.trainer=analytic (its fit sets the formula's
constants), so a tracking store's trials narrow the analytic band; stack_calibration.calibrate predicts
each peak with traced terms too when the planner traces (plan.trainer=traced), for the traced band.

No hold-out: the trainer peak reads none of the terms a stack calibration refits (runtime_context_gb and
fragmentation lie outside the allocator's bytes, decode_bw_efficiency and train_mfu are throughput;
tests/test_plan_trainer_band.py checks it), and the trainer's own terms are fitted to traces, never to
these trials, so every peak is already out of sample for them.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from verlsweep.common.names import PEAK_MEMORY_METRIC
from verlsweep.plan.fit.measured_fit import Sample, predict_sample
from verlsweep.plan.predictor import band, traced_terms
from verlsweep.plan.predictor.calibration import Constants

SOURCES = ("traced", "analytic")


@dataclass(frozen=True)
class TrainerBand:
    """The trainer bands a stack's allocator peaks set, and the words the calibration line uses."""

    bands: dict[str, float] = field(default_factory=dict)     # source -> the band set
    worst: dict[str, float] = field(default_factory=dict)     # source -> its worst over-prediction
    trials: dict[str, int] = field(default_factory=dict)      # source -> trials with an allocator peak
    reason: str = ""                                          # why no band moved

    def constants(self, c: Constants) -> Constants:
        """`c` with the bands set."""
        return replace(c, **{f"trainer_band_error_{s}": b for s, b in self.bands.items()})

    def words(self) -> str:
        if not self.bands:
            packaged = ", ".join(f"{s} ±{band.TRAINER_ERROR[s]:.1%}" for s in SOURCES)
            return f"the trainer band stays packaged ({packaged}): {self.reason}"
        out = [f"trainer band ±{b:.1%} for {s} terms (worst over-prediction {self.worst[s]:.1%} of "
               f"{self.trials[s]} trials' allocator peaks; packaged ±{band.TRAINER_ERROR[s]:.1%})"
               for s, b in self.bands.items()]
        out += [f"{s} stays ±{band.TRAINER_ERROR[s]:.1%}" for s in SOURCES if s not in self.bands]
        return ", ".join(out)


def calibrate(c: Constants, samples: Sequence[Sample], runs: Sequence[str], *, min_trials: int,
              floor: float) -> TrainerBand:
    """The trainer bands of the "memory" samples among `samples` (`runs`: each sample's run id) under `c`."""
    peaks = [(s, r) for s, r in zip(samples, runs, strict=True) if s.kind == "memory"]
    if not peaks:
        return TrainerBand(reason=f"no allocator peak ({PEAK_MEMORY_METRIC}) among its trials")
    by_source: dict[str, list[tuple[float, str]]] = {}       # source -> (measured / predicted, run)
    for s, r in peaks:
        ratio = s.measured / predict_sample(s, c)          # first: a trace that fails here is analytic
        by_source.setdefault(band.trainer_source(traced_terms.source(s.inputs)), []).append((ratio, r))
    trials = {source: len({r for _, r in got}) for source, got in by_source.items()}
    bands: dict[str, float] = {}
    worst: dict[str, float] = {}
    for source, got in by_source.items():
        if trials[source] < min_trials:
            continue
        worst[source] = max(1 - ratio for ratio, _ in got)
        bands[source] = min(band.TRAINER_ERROR[source], max(floor, worst[source]))
    few = ", ".join(f"{s} {n} of the {min_trials} needed" for s, n in trials.items() if s not in bands)
    return TrainerBand(bands, worst, trials, "" if bands else f"too few trials with an allocator peak ({few})")
