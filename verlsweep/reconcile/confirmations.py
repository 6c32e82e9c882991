"""The long-run confirmation's record: which trials confirm which, what each confirmation showed, and
each finished trial's predicted worst case.

A trial runs verl for a few steps at the lengths its policy writes then; the long run reaches the
maximum ones. After the ordinary trials the sweep runs the top configs once more at the worst case (every
response to max_response_length: `actor_rollout_ref.rollout.ignore_eos`; the longest prompts first:
a copy of the train file sorted by prompt length with `data.shuffle=false`, which verl samples in order,
verl/trainer/ppo/utils.py create_rl_sampler). Such a confirmation is a trial of the same study with user
attr CONFIRMS_ATTR (the trial it confirms); it never counts towards n_trials, never proves anything about
ordinary trials (verlsweep.proofs), and a trial whose confirmation failed is never the best
(verlsweep.study.outputs). Read by the sweep, trials.csv, `--status`, the report and best_launch.sh.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from optuna.trial import FrozenTrial, TrialState

from verlsweep.common.names import CONFIRM_AT_ATTR, CONFIRMS_ATTR, PREDICTED_ATTR, RULED_OUT_ATTR
from verlsweep.common.result import PLAN_CHECK_PHASES

CONFIRMED = "confirmed"
FAILS = "fails at max lengths"
NOT_CONFIRMED = "not confirmed"
RUNNING = "being confirmed"


def confirms(trial: FrozenTrial) -> int | None:
    """The trial number `trial` confirms; None for an ordinary trial."""
    value = trial.user_attrs.get(CONFIRMS_ATTR)
    return int(value) if value is not None else None


def ordinary(trials: list[FrozenTrial]) -> list[FrozenTrial]:
    return [t for t in trials if confirms(t) is None]


@dataclass(frozen=True)
class Confirmation:
    """What one confirmation trial showed about the trial it confirms."""

    trial: int                    # the confirmation's own number
    confirms: int
    status: str                   # CONFIRMED | FAILS | RUNNING
    outcome: str
    failure_phase: str | None
    peak_gb: float | None
    capacity_gb: float | None
    prompt: int | None            # the lengths it ran at (max prompt / max response tokens)
    response: int | None
    proven_by: int | None = None  # a failed confirmation whose outcome proves this one fails (none launched)

    def sentence(self) -> str:
        """`confirmed at prompt 1024 / response 2048 by trial 12: peak 41.2 of 60.96 GiB`."""
        at = f" at prompt {self.prompt} / response {self.response}" if self.prompt and self.response else ""
        peak = (f": peak {self.peak_gb:.1f}" + (f" of {self.capacity_gb:.2f} GiB" if self.capacity_gb else " GiB")
                if self.peak_gb is not None else "")
        if self.status == CONFIRMED:
            return f"confirmed{at} by trial {self.trial}{peak}"
        if self.status == RUNNING:
            return f"being confirmed{at} by trial {self.trial}"
        phase = f" in {self.failure_phase}" if self.failure_phase else ""
        if self.proven_by is not None:
            return f"fails at max lengths{at}: proven by trial {self.proven_by} ({self.outcome}{phase}), not launched"
        return f"fails at max lengths{at}: trial {self.trial} ended {self.outcome}{phase}{peak}"


def _status(t: FrozenTrial) -> str:
    if t.state in (TrialState.RUNNING, TrialState.WAITING):
        return RUNNING
    outcome = t.user_attrs.get("outcome")
    return CONFIRMED if t.state == TrialState.COMPLETE and outcome in (None, "completed") else FAILS


def _capacity(t: FrozenTrial) -> float | None:
    value = (t.user_attrs.get(PREDICTED_ATTR) or {}).get("plan/capacity_gb")
    return float(value) if isinstance(value, (int, float)) else None


def of_study(trials: list[FrozenTrial]) -> dict[int, Confirmation]:
    """Each confirmed trial's latest confirmation, by the confirmed trial's number."""
    out: dict[int, Confirmation] = {}
    for t in sorted(trials, key=lambda t: t.number):
        target = confirms(t)
        if target is None or t.user_attrs.get("outcome") == "interrupted":
            continue          # an interrupted confirmation showed nothing: it runs again
        at = t.user_attrs.get(CONFIRM_AT_ATTR) or [None, None]
        peak = t.user_attrs.get("peak_memory_gb")
        prover = t.user_attrs.get(RULED_OUT_ATTR)
        out[target] = Confirmation(t.number, target, _status(t), str(t.user_attrs.get("outcome") or t.state.name),
                                   t.user_attrs.get("failure_phase"),
                                   float(peak) if isinstance(peak, (int, float)) else None, _capacity(t),
                                   at[0], at[1], int(prover) if prover is not None else None)
    return out


def label(number: int, found: dict[int, Confirmation]) -> str:
    """A finished trial's word on the long run (the MLflow tag, trials.csv)."""
    c = found.get(number)
    return c.status if c is not None else NOT_CONFIRMED


@dataclass(frozen=True)
class WorstCase:
    """The planner's peak at the maximum lengths, scaled by the trial's measured / predicted peak."""

    peak_gb: float                # predicted actor/perf/max_memory_allocated_gb at max lengths, scaled
    device_gb: float              # the binding training phase's device total at max lengths, scaled
    capacity_gb: float

    @property
    def fits(self) -> bool:
        return self.device_gb <= self.capacity_gb


def worst_case(t: FrozenTrial) -> WorstCase | None:
    return worst_case_of(t.user_attrs)


def worst_case_of(attrs: Mapping[str, Any]) -> WorstCase | None:
    """A trial's WorstCase from its user attrs: None without a measured peak or the planner's numbers
    (an unplannable config, an older trial). The ratio is taken at the planner's expected lengths
    (prompt/response means of its length model), which stand for the lengths the trial held; with
    use_dynamic_bsz the trainer's peak is bounded by its token budget per device rather than by the
    lengths, so this over-states it there."""
    predicted = attrs.get(PREDICTED_ATTR) or {}
    values = [attrs.get("peak_memory_gb"), predicted.get("plan/trainer_peak_gb"),
              predicted.get("plan/worst_trainer_peak_gb"), predicted.get("plan/capacity_gb")]
    numbers = [float(x) for x in values if isinstance(x, (int, float)) and x > 0]
    if len(numbers) < len(values):
        return None
    measured, expected, worst, capacity = numbers
    ratio = measured / expected
    training = [float(v) for k, v in predicted.items() if k.startswith("plan/peak_gb/")
                and PLAN_CHECK_PHASES.get(k.rsplit("/", 1)[1]) == "training"]
    device = max(training, default=worst) + worst * (ratio - 1.0)
    return WorstCase(worst * ratio, device, capacity)
