"""Calibrate the planner from the trials already measured on the same software stack.

Every launched trial's MLflow run carries its stack (tag `verlsweep.stack`, verlsweep.common.stack), its
planner inputs (tags sweep.hardware/model/algorithm, its knobs as params) and what it measured (the device
monitor's peak, verl's allocator peak, tokens/s): the tracking store is the record. What a stack does that
the planner does not model is the same on every device and model of that stack, so the terms those
measurements identify are refitted on all of them, from any experiment:

    device peak  -> runtime_context_gb (the runtime's and vLLM's non-KV reserve per process) and
                    fragmentation (allocator reserved / allocated)
    tokens/s     -> decode_bw_efficiency, train_mfu

with the one least-squares routine (least_squares.solve, relative residuals). A kind's terms are used only
if their held-out error beats the starting constants' on the same trials: leave-one-study-out when the
trials come from two or more studies, leave-one-trial-out within one. Too few trials, or no held-out gain:
the starting constants stay, and the line says why.

Each part of the veto's error band (verlsweep/plan/predictor/band.py) then comes from the held-out error of
its terms: the rollout part (rollout_band_error) from the device peaks' under the refitted terms, the
trainer part (trainer_band_error_traced / _analytic) from the allocator peaks' (verl's
max_memory_allocated_gb), which no term refitted here moves (verlsweep/plan/fit/trainer_band.py).
"""
from __future__ import annotations

import logging
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from verlsweep.common.stack import STACK_TAG, describe, digest, from_tags
from verlsweep.plan.fit import least_squares, trainer_band
from verlsweep.plan.fit.measured_fit import Sample, relative_errors
from verlsweep.plan.fit.measured_fit import predict_sample as _predict
from verlsweep.plan.predictor.calibration import Calibration, Constants

log = logging.getLogger(__name__)

# the constants each measured kind identifies, per stack (the allocator peak, kind "memory", measures the
# model's terms, logits and activations, which are fitted to traces instead: verlsweep/plan/fit/trace_fit.py;
# here it sets only the trainer band, verlsweep/plan/fit/trainer_band.py)
STACK_TERMS: dict[str, tuple[str, ...]] = {
    "device_memory": ("runtime_context_gb", "fragmentation"),
    "throughput": ("decode_bw_efficiency", "train_mfu"),
}
KIND_WORDS = {"device_memory": "peak", "throughput": "tokens/s"}
BAND_FLOOR = 0.05        # the least rollout_band_error / trainer band a calibration sets
MAX_RUNS = 300           # the latest trials of the stack: each is composed again (a Hydra compose apiece)
MIN_TRIALS = 3           # fewer: a fit of two terms per kind is not held out by anything


@dataclass(frozen=True)
class StackCalibration:
    """What the planner plans with, and the one line that says why."""

    calibration: Calibration
    stack: str                                   # the stack's parts, as the line names it
    trials: int = 0
    studies: int = 0
    held_out: dict[str, float] = field(default_factory=dict)    # kind -> mean |rel. error|, refitted terms
    packaged: dict[str, float] = field(default_factory=dict)    # kind -> the same, starting constants
    used: tuple[str, ...] = ()                                  # the kinds whose terms were adopted
    reason: str = ""                                            # why not (when nothing was adopted)
    trainer: trainer_band.TrainerBand = field(default_factory=trainer_band.TrainerBand)
    elsewhere: str = ""             # other stacks' trials in the store, when this stack has too few

    @property
    def calibrated(self) -> bool:
        return bool(self.used or self.trainer.bands)

    def line(self) -> str:
        if not self.calibrated:
            return (f"planner not calibrated on {self.stack}: {self.reason}; the packaged constants plan; "
                    f"{self.trainer.words()}{self.elsewhere}")
        errors = "; ".join(f"held-out {KIND_WORDS[k]} error {self.held_out[k]:.1%} "
                           f"(packaged constants {self.packaged[k]:.1%})" for k in self.used)
        terms = errors or f"the stack's terms stay packaged: {self.reason}"
        studies = f"{self.studies} stud{'y' if self.studies == 1 else 'ies'}"
        return (f"planner calibrated on {self.trials} trials of {studies} on {self.stack}; {terms}; "
                f"{self.trainer.words()}")


def stack_runs(client: Any, stack_digest: str, *, other: bool = False) -> list[Any]:
    """The completed trial runs of this stack (`other`: of every other stack), in every experiment of the
    store, the latest MAX_RUNS."""
    experiments = [e.experiment_id for e in client.search_experiments(max_results=50_000)]
    if not experiments:
        return []
    where = f"tags.`{STACK_TAG}` {'!=' if other else '='} '{stack_digest}' and tags.`trial.outcome` = 'completed'"
    return list(client.search_runs(experiments, filter_string=where, max_results=MAX_RUNS,
                                   order_by=["attributes.start_time DESC"]))


def fit_terms(cal: Calibration, start: Constants, samples: Sequence[Sample]) -> Constants:
    """`start` with the stack terms of the samples' kinds fitted to them."""
    names = [n for kind in STACK_TERMS if any(s.kind == kind for s in samples) for n in STACK_TERMS[kind]]
    if not names:
        return start
    return least_squares.solve(start, names, samples, _predict, lambda s: s.measured, bounds=cal.bounds,
                               default_bounds=(1e-6, float("inf")))


def held_out_errors(cal: Calibration, samples: Sequence[Sample],
                    groups: Sequence[str]) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Per kind, the |relative error| of each group's samples under terms fitted to the other groups'
    samples, and under the starting constants."""
    refit: dict[str, list[float]] = {}
    start: dict[str, list[float]] = {}
    for group in dict.fromkeys(groups):
        train = [s for s, g in zip(samples, groups) if g != group]
        test = [s for s, g in zip(samples, groups) if g == group]
        fitted = fit_terms(cal, cal.constants, train)
        for s, e_fit, e_start in zip(test, relative_errors(test, fitted), relative_errors(test, cal.constants)):
            if any(t.kind == s.kind for t in train):       # a kind the others did not measure is not held out
                refit.setdefault(s.kind, []).append(abs(e_fit))
                start.setdefault(s.kind, []).append(abs(e_start))
    return refit, start


def calibrate_samples(cal: Calibration, samples: Sequence[Sample], runs: Sequence[str], studies: dict[str, str],
                      stack: dict[str, str]) -> StackCalibration:
    """The decision on these samples (`runs`: each sample's run id; `studies`: run id -> study): the stack's
    terms refitted to its device peaks and tokens/s, then the trainer band set from its allocator peaks."""
    pairs = list(zip(samples, runs, strict=True))
    named = [r for s, r in pairs if s.kind in STACK_TERMS or s.kind == "memory"]
    out = _refit_terms(cal, [s for s, _ in pairs if s.kind in STACK_TERMS],
                       [r for s, r in pairs if s.kind in STACK_TERMS], studies, stack)
    # the trainer peak reads none of the refitted terms: every allocator peak is out of sample for it,
    # with no hold-out (verlsweep/plan/fit/trainer_band.py)
    got = trainer_band.calibrate(out.calibration.constants, samples, runs, min_trials=MIN_TRIALS, floor=BAND_FLOOR)
    constants = got.constants(out.calibration.constants)
    return replace(out, calibration=replace(out.calibration, constants=constants), trainer=got,
                   trials=len(set(named)), studies=len({studies.get(r, r) for r in named}))


def _refit_terms(cal: Calibration, samples: Sequence[Sample], runs: Sequence[str], studies: dict[str, str],
                 stack: dict[str, str]) -> StackCalibration:
    """The STACK_TERMS kinds' decision (samples of those kinds only)."""
    name = f"stack {digest(stack)} ({describe(stack)})"
    trials = len(set(runs))
    n_studies = len({studies.get(r, r) for r in runs})
    out = StackCalibration(cal, name, trials, n_studies)
    if trials < MIN_TRIALS:
        return replace(out, reason=f"too few trials ({trials} of the {MIN_TRIALS} needed)")
    # hold out whole studies when there are several; within one, each trial
    groups = [studies.get(r, r) for r in runs] if n_studies >= 2 else list(runs)
    errors, start_errors = held_out_errors(cal, samples, groups)
    held = {k: statistics.fmean(v) for k, v in errors.items()}
    packaged = {k: statistics.fmean(v) for k, v in start_errors.items()}
    used = tuple(k for k in STACK_TERMS if k in held and held[k] < packaged[k])
    if not used:
        gains = ", ".join(f"{KIND_WORDS[k]} {held[k]:.1%} vs {packaged[k]:.1%}" for k in held)
        return replace(out, held_out=held, packaged=packaged, reason=f"no held-out gain ({gains or 'none held out'})")
    fitted = fit_terms(cal, cal.constants, [s for s in samples if s.kind in used])
    if "device_memory" in used:
        # the veto's band around the refitted non-trainer terms: their worst held-out device-peak error, with a
        # floor, as a peak measured on one trial says little about another phase of a config not yet run
        band = max(BAND_FLOOR, max(errors["device_memory"]))
        fitted = replace(fitted, rollout_band_error=min(band, cal.constants.rollout_band_error))
    return replace(out, calibration=replace(cal, constants=fitted), held_out=held, packaged=packaged, used=used)


def calibrate(tracking_uri: str, cal: Calibration, stack: dict[str, str], *, warmup_steps: int = 1,
              trainer: str = "analytic") -> StackCalibration:
    """`cal` refitted to the completed trials of `stack` in the store at `tracking_uri` (StackCalibration);
    `trainer`: how the planner gets its trainer terms (plan.trainer), whose band the allocator peaks set."""
    from mlflow.tracking import MlflowClient

    from verlsweep.plan.fit.refit import harvest_runs

    client = MlflowClient(tracking_uri=tracking_uri)
    runs = stack_runs(client, digest(stack))
    got = harvest_runs(client, runs, warmup_steps=warmup_steps)
    studies = {r.info.run_id: r.data.tags.get("sweep.study") or r.info.experiment_id for r in runs}
    for rid, why in got.skipped.items():
        log.info("stack calibration: run %s not used: %s", rid, why)
    samples, sample_runs = list(got.samples), list(got.sample_runs)
    if trainer == "traced":
        # harvest_runs predicts with the analytic formula (the refit sets its constants); the traced band is
        # measured by the same allocator peaks predicted with traced terms (traced once per shape, cached)
        peaks = [(s, r) for s, r in zip(samples, sample_runs) if s.kind == "memory"]
        samples += [replace(s, inputs=replace(s.inputs, trainer="traced")) for s, _ in peaks]
        sample_runs += [r for _, r in peaks]
    got_cal = calibrate_samples(cal, samples, sample_runs, studies, stack)
    if got_cal.trials < MIN_TRIALS:
        got_cal = replace(got_cal, elsewhere=other_stacks(client, digest(stack)))
    return got_cal


def other_stacks(client: Any, own: str) -> str:
    """Where the store's completed trials of other stacks are, for the line: a sweep that reads its stack
    on a login node while its trials run on compute nodes (Slurm) finds none of its own."""
    counts: dict[str, tuple[int, str]] = {}
    for run in stack_runs(client, own, other=True):
        key = run.data.tags.get(STACK_TAG)
        if key:
            n, words = counts.get(key, (0, describe(from_tags(run.data.tags))))
            counts[key] = (n + 1, words)
    if not counts:
        return ""
    ranked = sorted(counts.items(), key=lambda kv: -kv[1][0])
    found = ", ".join(f"{n} on stack {key} ({words})" for key, (n, words) in ranked)
    return (f". The store has completed trials of other stacks: {found}; if the trials run where this process "
            f"does not (a Slurm node), state their stack with VERLSWEEP_STACK=part=version,...")


def store_exists(uri: str) -> bool:
    """Whether the store at `uri` can hold trials already: a sqlite or file store whose path is missing
    has none (and opening it would create one where the user only asked for a plan)."""
    from urllib.parse import urlparse

    parsed = urlparse(uri)
    if parsed.scheme == "sqlite":
        return Path(uri[len("sqlite:///"):]).is_file()
    if parsed.scheme in ("", "file"):
        return Path(parsed.path or uri).exists()
    return True


def for_config(cfg: Any) -> StackCalibration | None:
    """The stack calibration a composed config asks for (plan.calibrate, tracking.uri, plan.calibration
    as the start), read in this process's stack; None when off or there is no store to read."""
    from omegaconf import OmegaConf

    from verlsweep.common.stack import read_stack
    from verlsweep.plan.predictor.verdict import load_calibration

    if not OmegaConf.select(cfg, "plan.calibrate", default=True):
        return None
    if not OmegaConf.select(cfg, "tracking.enabled", default=False):
        return None
    uri = str(OmegaConf.select(cfg, "tracking.uri"))
    if not store_exists(uri):
        return None
    return calibrate(uri, load_calibration(cfg), read_stack(),
                     trainer=str(OmegaConf.select(cfg, "plan.trainer", default="analytic")))
