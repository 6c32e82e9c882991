"""What a job returned -> what Optuna is told.

    completed                 COMPLETE, values = the TrialResult values named by `objectives`
    oom, infeasible,          COMPLETE with a violated constraint (set_violation):
    unschedulable             TPE puts such trials in their own group, GP models the constraint, and
                              best_trial/best_trials skip them. Optuna needs values for a COMPLETE
                              trial; the placeholder is the worst feasible value seen so far (flagged
                              PLACEHOLDER_ATTR, never reported as a measurement).
    pruned                    PRUNED (its reported steps are the study's intermediate values)
    preempted                 FAIL, and its params re-enqueued once (the scheduler took the job away:
                              says nothing about the config; not counted as a failure in a row)
    anything else, exception  FAIL (never aborts the sweep; counts towards max_consecutive_failures)

Every trial gets the same constraint key, feasible or not: Optuna's GP sampler requires it of all
completed trials (optuna/samplers/_gp/sampler.py _get_constraint_vals_and_feasibility).

Where a constraint is stored: Optuna 5.1 keeps two forms and reads both into FrozenTrial.constraints
(optuna/study/_constrained_optimization.py): the list in system attr "constraints" (what its samplers'
constraints_func writes, optuna/samplers/_base.py; key "0") and "constraints:<key>" (trial.set_constraint).
optuna-dashboard 0.21 reads only the list (optuna_dashboard/_serializer.py), so with set_constraint it
showed an oom trial as a plain result with its placeholder value. A new study gets the list; a study
begun with the keyed form keeps it, so all of a study's trials keep one set of keys.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, fields
from typing import Any, TypeGuard

import optuna
from hydra.core.utils import JobReturn, JobStatus
from optuna.trial import TrialState

from verlsweep.common import optuna_private
from verlsweep.common.errors import ConfigError
from verlsweep.common.names import FAILURE_PHASE_ATTR, JOB_DIR_ATTR, PLACEHOLDER_ATTR, PREDICTED_ATTR
from verlsweep.common.result import CONSTRAINT_OUTCOMES, TrialResult
from verlsweep.reconcile import budget

# > 0: the trial did not fit (oom), was predicted not to (infeasible: HBM or Ray CPUs) or its Ray could
# not place it (unschedulable). One key for all: the name stays as stored in existing studies.
CONSTRAINT_KEY = "memory"
LIST_CONSTRAINTS = "constraints"     # optuna.study._constrained_optimization._CONSTRAINTS_KEY
NO_RESULT = "no_result"            # a job that returned nothing (dry run)
RERUN_OUTCOMES = frozenset({"preempted"})   # re-run once (budget.rerun_once)
_EXCERPT_CHARS = 2000


def violation(trial: optuna.trial.FrozenTrial) -> float:
    """How far a trial violated its constraint, in either stored form (0.0: feasible or none told)."""
    return max(trial.constraints.values(), default=0.0)


def _keyed_study(study: optuna.Study) -> bool:
    return any(k.startswith(f"{LIST_CONSTRAINTS}:") for t in study.get_trials(deepcopy=False)
               for k in t.system_attrs)


def set_violation(study: optuna.Study, trial: optuna.Trial, value: float) -> None:
    """Record the trial's constraint value in the form its study already uses (the list for a new one)."""
    if _keyed_study(study):
        trial.set_constraint(CONSTRAINT_KEY, value)
    else:
        optuna_private.set_trial_system_attr(trial, LIST_CONSTRAINTS, [float(value)])


@dataclass
class Told:
    number: int
    outcome: str
    state: TrialState
    values: list[float] | None
    excerpt: str | None = None
    refused_keys: tuple[str, ...] = ()      # TrialResult.refused_keys

    @property
    def failed(self) -> bool:
        """A failure in the max_consecutive_failures sense (OOM is a finding, not a failure)."""
        return self.state == TrialState.FAIL and self.outcome not in (NO_RESULT, *RERUN_OUTCOMES)


def _finite(x: Any) -> TypeGuard[numbers.Real]:
    # numbers.Real: numpy's scalars too, which other apps' tasks often return
    return isinstance(x, numbers.Real) and not isinstance(x, bool) and math.isfinite(x)


def result_of(ret: JobReturn | None, objectives: list[str], none_ok: bool = True) -> TrialResult | None:
    """The job's TrialResult; exceptions become config_error / crash, plain numbers `completed`. None:
    the job returned nothing (our task's dry run); with `none_ok` False (another app, whose task must
    return its objective, as hydra-optuna-sweeper requires) that is a crash."""
    if ret is None:
        return TrialResult(outcome="crash", excerpt="the launcher returned no result for this job")
    if ret.status != JobStatus.COMPLETED:
        exc = ret._return_value
        outcome = "config_error" if isinstance(exc, ConfigError) else "crash"
        return TrialResult(outcome=outcome, excerpt=f"{type(exc).__name__}: {exc}"[:_EXCERPT_CHARS])
    value = ret.return_value
    if value is None:
        return None if none_ok else TrialResult(
            outcome="crash", excerpt="the task returned None, not its objective (a number, or one per direction)")
    if isinstance(value, TrialResult):
        return value
    if isinstance(value, dict) and "outcome" in value:
        known = {f.name for f in fields(TrialResult)}
        return TrialResult(**{k: v for k, v in value.items() if k in known})
    if _finite(value):
        return TrialResult(outcome="completed", objective=float(value))
    if isinstance(value, (list, tuple)) and len(value) == len(objectives) and all(_finite(v) for v in value):
        return TrialResult(outcome="completed", objective=float(value[0]),
                           metrics={name: float(v) for name, v in zip(objectives, value)})
    return TrialResult(outcome="crash", excerpt=f"the task returned {type(value).__name__} {value!r:.200}, "
                                                "not a verlsweep.common.result.TrialResult")


def _measured(result: TrialResult, name: str) -> float | None:
    value = result.value(name)
    if value is None and name in result.metrics:
        value = result.metrics[name]
    return float(value) if _finite(value) else None


def _placeholders(study: optuna.Study, result: TrialResult, objectives: list[str]) -> list[float]:
    feasible = [t for t in study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
                if not t.user_attrs.get(PLACEHOLDER_ATTR) and all(v <= 0 for v in t.constraints.values())]
    out = []
    for i, (name, direction) in enumerate(zip(objectives, study.directions)):
        seen = [t.values[i] for t in feasible]
        if seen:
            out.append(min(seen) if direction == optuna.study.StudyDirection.MAXIMIZE else max(seen))
        else:
            own = _measured(result, name)
            out.append(own if own is not None else 0.0)
    return out


def _job_dir(ret: JobReturn | None) -> str | None:
    """The job's Hydra output dir (where the runner writes the trial's files)."""
    try:
        return str(ret.hydra_cfg.hydra.runtime.output_dir)  # type: ignore[union-attr]
    except Exception:  # noqa: BLE001 - no job config (never launched)
        return getattr(ret, "working_dir", None)


def _record(trial: optuna.Trial, result: TrialResult, ret: JobReturn | None) -> None:
    attrs: dict[str, Any] = {
        "outcome": result.outcome,
        "objective": result.objective if _finite(result.objective) else None,
        "peak_memory_gb": result.peak_memory_gb if _finite(result.peak_memory_gb) else None,
        "steps": result.steps,
        "duration_s": round(float(result.duration_s or 0.0), 3),
        "backend": result.backend,
        "run_id": result.run_id,
        "excerpt": (result.excerpt or "")[-_EXCERPT_CHARS:] or None,
        "metrics": {k: float(v) for k, v in (result.metrics or {}).items() if _finite(v)},
        # where an oom struck: what it proves about untried configs (verlsweep.proofs.evidence)
        FAILURE_PHASE_ATTR: result.failure_phase,
        JOB_DIR_ATTR: _job_dir(ret),
        PREDICTED_ATTR: {k: float(v) for k, v in (result.predicted or {}).items() if _finite(v)},
    }
    for key, value in attrs.items():
        if key == JOB_DIR_ATTR and value is None:
            continue          # told from the trial's own files: the task recorded its dir already
        trial.set_user_attr(key, value)


def tell(study: optuna.Study, trial: optuna.Trial, ret: JobReturn | None, objectives: list[str],
         result: TrialResult | None = None, none_ok: bool = True) -> Told:
    """Tell `trial`'s outcome: from the job's return, or `result` when the job never ran (`none_ok`:
    result_of's)."""
    if result is None:
        result = result_of(ret, objectives, none_ok)
    if result is None:
        trial.set_user_attr("outcome", NO_RESULT)
        trial.set_user_attr(JOB_DIR_ATTR, _job_dir(ret))
        tell_state(study, trial, state=TrialState.FAIL)
        return Told(trial.number, NO_RESULT, TrialState.FAIL, None)
    _record(trial, result, ret)

    if result.outcome == "completed":
        measured = {name: _measured(result, name) for name in objectives}
        values = [v for v in measured.values() if v is not None]
        if len(values) < len(objectives):
            missing = [n for n, v in measured.items() if v is None]
            excerpt = f"completed without a finite value for {', '.join(missing)}"
            trial.set_user_attr("outcome", "crash")
            trial.set_user_attr("excerpt", excerpt)
            tell_state(study, trial, state=TrialState.FAIL)
            return Told(trial.number, "crash", TrialState.FAIL, None, excerpt)
        set_violation(study, trial, 0.0)
        return _tell(study, trial, values, result, TrialState.COMPLETE)

    if result.outcome in CONSTRAINT_OUTCOMES:
        set_violation(study, trial, 1.0)
        trial.set_user_attr(PLACEHOLDER_ATTR, True)
        return _tell(study, trial, _placeholders(study, result, objectives), result, TrialState.COMPLETE)

    if result.outcome == "pruned":
        set_violation(study, trial, 0.0)
        tell_state(study, trial, state=TrialState.PRUNED)
        return Told(trial.number, "pruned", TrialState.PRUNED, None, result.excerpt)

    tell_state(study, trial, state=TrialState.FAIL)
    if result.outcome in RERUN_OUTCOMES:
        budget.rerun_once(study, trial)
    return Told(trial.number, result.outcome, TrialState.FAIL, None, result.excerpt, tuple(result.refused_keys))


def _tell(study: optuna.Study, trial: optuna.Trial, values: list[float], result: TrialResult,
          state: TrialState) -> Told:
    tell_state(study, trial, values=values)
    return Told(trial.number, result.outcome, state, values, result.excerpt)


def tell_state(study: optuna.Study, trial: optuna.Trial, **kwargs: Any) -> None:
    try:
        study.tell(trial, **kwargs)
    except RuntimeError as exc:
        # GridSampler calls study.stop() once every grid point was asked, which only works inside
        # study.optimize; the trial is stored as told by then (optuna/samplers/_grid.py after_trial).
        if "Study.stop" not in str(exc):
            raise
