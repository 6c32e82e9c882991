"""The planner's verdict on one trial: feasible or not, the binding constraint, per-phase peaks, predicted tokens/s."""
from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from verlsweep.common.names import (
    EDGE_PROBE,
    EDGE_PROBE_METRIC,
    FITS,  # re-exported (__all__): the statuses predicted to fit
)
from verlsweep.common.predicted import PHASE_PEAK_PREFIX
from verlsweep.common.time_split import predicted_metrics
from verlsweep.config import read
from verlsweep.plan.predictor import band, ray_demand, traced_terms
from verlsweep.plan.predictor import calibration as calibration_mod
from verlsweep.plan.predictor.calibration import Calibration
from verlsweep.plan.predictor.inputs import from_cfg
from verlsweep.plan.predictor.lengths import expected_lengths
from verlsweep.plan.predictor.memory import MEANING, Check, concurrency, memory_per_phase
from verlsweep.plan.predictor.throughput import step_throughput
from verlsweep.plan.predictor.trial_spec import NotPlannable, PlanInputs

log = logging.getLogger(__name__)

STATUSES = ("ok", "tight", "edge", "infeasible")


@dataclass
class Verdict:
    """The planner's prediction for one trial (GiB per device unless named otherwise)."""

    # ok | tight (fits only without plan.margin_gb) | edge (fits only at the favourable end of the
    # planner's error band, verlsweep.plan.predictor.band: launched as an edge probe) | infeasible (not even there)
    status: str
    binding: str                      # the constraint a run hits first, else the tightest one
    reason: str                       # that constraint in one line, with its numbers
    phases: dict[str, float]          # device total per phase, every sequence at its max length
    phases_low: dict[str, float]      # the same at the favourable end of the band
    headroom: dict[str, float]        # per constraint, after the margin (negative: does not fit)
    capacity_gb: float
    host_gb: float                    # host RAM per node
    trainer_peak_gb: float            # expected actor/perf/max_memory_allocated_gb (mean lengths)
    tok_s: float                      # expected perf/throughput (tokens/s per device)
    step_s: float
    time_s: dict[str, float]          # step time by component
    kv_tokens: float                  # KV-cache tokens per vLLM TP rank
    concurrency: float                # sequences a vLLM replica decodes at once
    world: int                        # devices of the trial (perf/throughput divides by them)
    prompt_tokens: float              # expected mean lengths the predictions assume
    response_tokens: float
    checks: dict[str, Check] = field(default_factory=dict, repr=False)
    trainer: str = "analytic"         # where the trainer's activation terms come from (traced_terms.source)
    trainer_error: float = 0.0        # the trainer terms' relative error (band.trainer_error)
    worst_trainer_peak_gb: float = 0.0  # actor/perf/max_memory_allocated_gb with every sequence at its max

    @property
    def feasible(self) -> bool:
        """False only when it cannot fit even at the favourable end of its band: the planner's veto
        (under plan.enforce). An edge probe is feasible."""
        return self.status != "infeasible"

    @property
    def fits(self) -> bool:
        """Predicted to fit (without the margin): what runner=estimate measures."""
        return self.status in FITS

    @property
    def edge_probe(self) -> bool:
        """Launched although predicted not to fit, because it fits inside the planner's error band."""
        return self.status == "edge"

    @property
    def trainer_peak_band_gb(self) -> tuple[float, float]:
        """The trainer peak's band: what verl's max_memory_allocated_gb may be, given the measured error."""
        return self.trainer_peak_gb * (1 - self.trainer_error), self.trainer_peak_gb * (1 + self.trainer_error)

    @property
    def predicted_peak_gb(self) -> float:
        """The prediction of what verl would log as actor/perf/max_memory_allocated_gb."""
        return self.trainer_peak_gb

    def summary(self) -> str:
        trainer = "" if self.trainer == "analytic" else f"trainer memory {self.trainer}; "
        status = f"{self.status} ({EDGE_PROBE})" if self.edge_probe else self.status
        return (f"{status}: binding {self.binding}; {self.tok_s:.0f} tok/s/device predicted; "
                f"{trainer}{self.reason}")

    def metrics(self) -> dict[str, float]:
        """Flat numbers for trackers (`plan/...`)."""
        out = {"plan/tok_s": self.tok_s, "plan/step_s": self.step_s,
               "plan/trainer_peak_gb": self.trainer_peak_gb, "plan/host_gb": self.host_gb,
               "plan/feasible": float(self.feasible), EDGE_PROBE_METRIC: float(self.edge_probe),
               "plan/trainer_peak_gb_low": self.trainer_peak_band_gb[0],
               "plan/trainer_peak_gb_high": self.trainer_peak_band_gb[1],
               "plan/worst_trainer_peak_gb": self.worst_trainer_peak_gb, "plan/capacity_gb": self.capacity_gb}
        out.update({f"{PHASE_PEAK_PREFIX}{k}": v for k, v in self.phases.items()})
        out.update(predicted_metrics(self.time_s))      # the step's predicted split, plan/time_s/<phase>
        return out

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if k != "checks"} | {"feasible": self.feasible}


def load_calibration(cfg: Mapping[str, Any] | None) -> Calibration:
    """plan.calibration of a config (composed, its TaskConfig or a plain tree); None: the packaged one."""
    plan = cfg.get("plan") if cfg is not None else None
    return calibration_mod.load(plan.get("calibration") if plan is not None else None)


def predict(inp: PlanInputs, cal: Calibration) -> Verdict:
    """Predict one trial from its inputs (pure arithmetic: microseconds)."""
    c = cal.constants
    worst = memory_per_phase(inp, c)
    lengths = expected_lengths(inp, c)
    expected = memory_per_phase(inp, c, lengths=lengths)
    tp = step_throughput(inp, c, lengths, worst.kv_tokens)
    binding = worst.binding
    status = {"ok": "ok", "tight": "tight", "edge": "edge", "fail": "infeasible"}[worst.status]
    trainer = traced_terms.source(inp)
    return Verdict(
        status=status, binding=binding.name, reason=binding.message(),
        phases=worst.phases, phases_low=worst.phases_low, headroom={k: ch.headroom for k, ch in worst.checks.items()},
        capacity_gb=inp.hardware.capacity_gb, host_gb=worst.host_gb,
        trainer_peak_gb=expected.trainer_peak_gb, tok_s=tp.tok_s, step_s=tp.step_s, time_s=tp.parts,
        kv_tokens=worst.kv_tokens, concurrency=concurrency(inp, worst.kv_tokens, lengths),
        world=inp.hardware.world, prompt_tokens=lengths.prompt, response_tokens=lengths.response,
        checks=worst.checks, trainer=trainer, trainer_error=band.trainer_error(trainer, c),
        worst_trainer_peak_gb=worst.trainer_peak_gb,
    )


def tok_s_under(inp: PlanInputs, verdict: Verdict, cal: Calibration) -> float:
    """`verdict`'s tokens/s under another calibration that differs from its own only in THROUGHPUT_CONSTANTS
    (calibration.py): the memory prediction, the KV cache and the expected lengths read none of them, so only
    the throughput model runs again (the guide's error draws: predict() would give the same number)."""
    c = cal.constants
    return step_throughput(inp, c, expected_lengths(inp, c), verdict.kv_tokens).tok_s


def predict_cfg(cfg: Mapping[str, Any], cal: Calibration | None = None) -> Verdict:
    """Predict the trial a composed sweep config (or its TaskConfig) would launch. Raises NotPlannable."""
    return predict(from_cfg(cfg), cal or load_calibration(cfg))


@dataclass(frozen=True)
class Preflight:
    """Everything the planner says before a trial launches: the HBM verdict (None outside what it
    models) and verl's Ray CPU demand against the trial's CPUs (None when those are unknown)."""

    memory: Verdict | None
    cpus: ray_demand.CpuCheck | None = None

    @property
    def feasible(self) -> bool:
        return (self.memory is None or self.memory.feasible) and (self.cpus is None or self.cpus.ok)

    @property
    def reason(self) -> str:
        """Why it is infeasible, one line per failed check (memory first), else the summary."""
        failed = [*([self.memory.reason] if self.memory is not None and not self.memory.feasible else []),
                  *([self.cpus.message()] if self.cpus is not None and not self.cpus.ok else [])]
        if failed:
            return "\n".join(failed)
        return "; ".join(line for line in self.lines())

    @property
    def predicted_peak_gb(self) -> float | None:
        return self.memory.predicted_peak_gb if self.memory is not None else None

    def lines(self) -> list[str]:
        """One line per check, for a dry run."""
        out = [f"memory: {self.memory.summary()}" if self.memory is not None
               else "memory: no prediction (outside what the planner models)"]
        if self.cpus is not None:
            out.append(("ok: " if self.cpus.ok else "infeasible: ") + self.cpus.message())
        return out


def preflight(cfg: Mapping[str, Any], *, local: bool = True) -> Preflight:
    """The planner's verdict on a trial before it launches. `local`: the trial's Ray runs on this
    machine, so its CPUs count when neither ray_init.num_cpus nor hardware.cpus states them."""
    task = read(cfg)
    verdict: Verdict | None
    try:
        verdict = predict_cfg(task)
        log.info("planner: %s", verdict.summary())
    except NotPlannable as exc:
        log.info("planner: no prediction (%s)", exc)
        verdict = None
    cpus = ray_demand.check(task, local=local)
    if cpus is not None:
        log.info("planner: %s", cpus.message())
    return Preflight(verdict, cpus)


def blocks_launch(cfg: Mapping[str, Any], verdict: Verdict | Preflight | None) -> bool:
    """Whether a verdict stops the trial: predicted infeasible (memory that does not fit even at the
    favourable end of the planner's error band, or too few Ray CPUs) and plan.enforce set."""
    return verdict is not None and not verdict.feasible and bool(cfg["plan"]["enforce"])


__all__ = ["FITS", "MEANING", "STATUSES", "Preflight", "Verdict", "blocks_launch", "load_calibration", "predict",
           "predict_cfg", "preflight", "tok_s_under"]
