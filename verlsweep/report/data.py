"""A sweep's trials as the report shows them, read back from its Optuna study."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from verlsweep.common.labels import knob_tokens, not_launched, short_name, show, step_of
from verlsweep.common.names import (
    FAILURE_PHASE_ATTR,
    N_TRIALS_ATTR,
    OBJECTIVES_ATTR,
    OVER_BUDGET_ATTR,
    PLACEHOLDER_ATTR,
    PREDICTED_ATTR,
    REUSED_FROM_ATTR,
    RULED_OUT_ATTR,
)
from verlsweep.common.predicted import device_peak
from verlsweep.reconcile import confirmations
from verlsweep.reconcile.budget import budget_trials

ESTIMATE = "estimate"               # TrialResult.backend of runner=estimate: its numbers are the planner's

UTIL_SUFFIX = "gpu_memory_utilization"
TP_SUFFIX = "tensor_model_parallel_size"
PREDICTED_PEAK = "plan/trainer_peak_gb"
PREDICTED_TOK_S = "plan/tok_s"


def outcome_of(t: FrozenTrial) -> str:
    """The trial's outcome; one failed without an outcome was left by a sweep process that died."""
    if t.state == TrialState.RUNNING:
        return "running"
    return str(t.user_attrs.get("outcome") or ("interrupted" if t.state == TrialState.FAIL else t.state.name.lower()))


def measured(t: FrozenTrial) -> bool:
    """A completed trial whose values are measurements (not an oom/infeasible placeholder)."""
    return (t.state == TrialState.COMPLETE and not t.user_attrs.get(PLACEHOLDER_ATTR)
            and all(v <= 0 for v in t.constraints.values()))


@dataclass
class Row:
    number: int
    outcome: str
    values: list[float] | None            # the objectives, measured trials only
    peak_gb: float | None
    duration_s: float | None
    params: dict[str, Any]
    knobs: str                            # `util=0.90 tp=2 off=p,o`
    predicted: dict[str, float]
    job_dir: str | None
    excerpt: str | None = None            # the lines that decided a failure
    phase: str | None = None              # where an oom happened, when the trial says
    ruled_out_by: int | None = None       # never launched: this trial's outcome proved it fails
    backend: str | None = None            # verl | script | estimate
    reused_from: int | None = None        # never launched: this trial's measurement told again
    metrics: dict[str, float] = field(default_factory=dict)   # verl metrics aggregated like the objective
    confirms: int | None = None           # a long-run confirmation: the trial it confirms
    long_run: str | None = None           # a confirmed trial: what its confirmation showed
    counted: bool = True                  # counts towards n_trials (not a stopped trial whose re-run does)

    @property
    def measured(self) -> list[float]:
        """The objectives of a measured trial; empty for any other."""
        return self.values or []

    @property
    def predicted_device_peak(self) -> tuple[float, str] | None:
        """The planner's highest HBM per device over the step's phases, and that phase."""
        return device_peak(self.predicted)

    @property
    def shown_outcome(self) -> str:
        note = not_launched(self.reused_from, self.ruled_out_by)
        return f"{self.outcome} ({note})" if note else self.outcome

    def param(self, suffix: str) -> Any:
        return next((v for k, v in self.params.items() if k.endswith(suffix)), None)


@dataclass
class Sweep:
    study: optuna.Study
    rows: list[Row]
    objectives: list[str]
    n_trials: int | None
    param_names: list[str]
    steps: dict[str, Any] = field(default_factory=dict)
    distributions: dict[str, Any] = field(default_factory=dict)

    @property
    def maximize(self) -> bool:
        return self.study.directions[0] == optuna.study.StudyDirection.MAXIMIZE

    def best(self) -> Row | None:
        # never a confirmation, nor a config that failed its own (verlsweep.reconcile.confirmations)
        done = [r for r in self.rows if r.measured and r.confirms is None
                and not (r.long_run or "").startswith(confirmations.FAILS)]
        if not done:
            return None
        key = (lambda r: r.measured[0]) if self.maximize else (lambda r: -r.measured[0])
        return max(done, key=key)

    def outcomes(self, rows: list[Row] | None = None) -> dict[str, int]:
        counts: dict[str, int] = {}
        for r in self.rows if rows is None else rows:
            counts[r.outcome] = counts.get(r.outcome, 0) + 1
        return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))

    def finished(self) -> list[Row]:
        """The trials done of the n_trials: a stopped trial whose re-run takes its place is not one."""
        return [r for r in self.rows if r.counted and r.outcome not in ("running", "waiting")]

    def short(self, name: str) -> str:
        return short_name(name, self.param_names)

    def shown(self, name: str, value: Any) -> str:
        return show(value, self.steps.get(name))

    def measured_study(self) -> optuna.Study:
        """An in-memory copy with only the measured trials: Optuna's plots then never draw a placeholder."""
        copy = optuna.create_study(directions=self.study.directions)
        for t in self.study.get_trials(deepcopy=False):
            # the others stay as FAIL so trial numbers match; params under their short names: Optuna's
            # axes cut long names off
            ok = measured(t)
            copy.add_trial(optuna.trial.create_trial(
                state=TrialState.COMPLETE if ok else TrialState.FAIL, values=t.values if ok else None,
                params={self.short(k): v for k, v in t.params.items()},
                distributions={self.short(k): d for k, d in t.distributions.items()}))
        return copy

    def util_param(self) -> str | None:
        return next((n for n in self.param_names if n.endswith(UTIL_SUFFIX)), None)

    def estimated(self) -> bool:
        """Every trial that has numbers got them from runner=estimate: its "measured" peak and objective
        are the planner's prediction (verlsweep/trial/runners/estimate.py)."""
        backends = {r.backend for r in self.rows if r.backend}
        return backends == {ESTIMATE}

    def sweep_dir(self) -> Path | None:
        """Where the sweep wrote its outputs: the parent of a trial's job dir."""
        for r in self.rows:
            if r.job_dir:
                return Path(r.job_dir).parent
        return None


def load(study: optuna.Study, objectives: list[str] | None = None) -> Sweep:
    trials = [t for t in study.get_trials(deepcopy=False) if not t.system_attrs.get(OVER_BUDGET_ATTR)]
    counted = {t.number for t in budget_trials(trials)}
    names: list[str] = []
    steps: dict[str, Any] = {}
    dists: dict[str, Any] = {}
    for t in trials:
        for name, dist in t.distributions.items():
            if name not in names:
                names.append(name)
                steps[name] = step_of(dist)
                dists[name] = dist
    rows = []
    found = confirmations.of_study(trials)
    for t in trials:
        params = {n: t.params[n] for n in names if n in t.params}
        rows.append(Row(
            number=t.number, outcome=outcome_of(t), values=list(t.values) if measured(t) and t.values else None,
            peak_gb=t.user_attrs.get("peak_memory_gb"), duration_s=t.user_attrs.get("duration_s"),
            params=params, knobs=" ".join(knob_tokens(params, steps)),
            predicted=dict(t.user_attrs.get(PREDICTED_ATTR) or {}), job_dir=t.user_attrs.get("job_dir"),
            excerpt=t.user_attrs.get("excerpt"), phase=t.user_attrs.get(FAILURE_PHASE_ATTR) or None,
            ruled_out_by=_int(t.user_attrs.get(RULED_OUT_ATTR)), backend=t.user_attrs.get("backend"),
            reused_from=_int(t.user_attrs.get(REUSED_FROM_ATTR)),
            metrics=dict(t.user_attrs.get("metrics") or {}), confirms=confirmations.confirms(t),
            long_run=found[t.number].sentence() if t.number in found else None,
            counted=t.number in counted))
    n_objectives = len(study.directions)
    objectives = list(objectives or study.user_attrs.get(OBJECTIVES_ATTR) or ["objective"])[:n_objectives]
    objectives += [f"objective_{i}" for i in range(len(objectives), n_objectives)]
    total = study.user_attrs.get(N_TRIALS_ATTR)
    return Sweep(study, rows, objectives, int(total) if total is not None else None, names, steps, dists)


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None and value != "" else None
    except (TypeError, ValueError):
        return None
