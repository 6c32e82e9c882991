"""trials.csv: every trial of the study (all sweep processes), one row each: params, outcome, values,
memory, where it came from. Written by the sweep after every batch (verlsweep.study.outputs) and by
`python -m verlsweep.report --status --repair` (verlsweep.report.status), which checks it against the
study (verlsweep.reconcile.check.csv_findings).
"""
from __future__ import annotations

import csv
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial

from verlsweep.common.files import write_atomic
from verlsweep.common.labels import clip
from verlsweep.common.names import FAILURE_PHASE_ATTR, OVER_BUDGET_ATTR, REUSED_FROM_ATTR, RULED_OUT_ATTR
from verlsweep.reconcile import confirmations
from verlsweep.reconcile.check import TRIALS_CSV, outcome


def reportable(trials: list[FrozenTrial]) -> list[FrozenTrial]:
    return [t for t in trials if not t.system_attrs.get(OVER_BUDGET_ATTR)]


_MEASURED = ("objective", "peak_memory_gb")


def _csv(study: optuna.Study, objectives: list[str], param_names: list[str], shown: Callable[[str, Any], Any]) -> str:
    extra = [o for o in objectives if o not in _MEASURED]     # other objectives: TrialResult.metrics
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(["number", "state", "outcome", *_MEASURED, *extra, "steps", "duration_s", *param_names,
                     "retry_of", "reused_from", RULED_OUT_ATTR, FAILURE_PHASE_ATTR, "run_id", "job_dir", "excerpt",
                     "confirms", "long_run", "worst_case_gb", "worst_case_risk"])
    trials = study.get_trials(deepcopy=False)
    found = confirmations.of_study(trials)
    for t in reportable(trials):
        metrics = t.user_attrs.get("metrics") or {}
        excerpt = (t.user_attrs.get("excerpt") or "").strip().splitlines()
        writer.writerow([t.number, t.state.name, outcome(t),
                         *[t.user_attrs.get(m) for m in _MEASURED], *[metrics.get(o) for o in extra],
                         t.user_attrs.get("steps"), t.user_attrs.get("duration_s"),
                         *[shown(p, t.params.get(p)) for p in param_names], t.system_attrs.get("failed_trial"),
                         t.user_attrs.get(REUSED_FROM_ATTR), t.user_attrs.get(RULED_OUT_ATTR),
                         t.user_attrs.get(FAILURE_PHASE_ATTR), t.user_attrs.get("run_id"), t.user_attrs.get("job_dir"),
                         clip(excerpt[-1], 300) if excerpt else None, *_long_run(t, found)])
    return buf.getvalue()


def _long_run(t: FrozenTrial, found: dict[int, confirmations.Confirmation]) -> list[Any]:
    """confirms, long_run (the confirmation's sentence, or `not confirmed`), the predicted worst case and
    whether it does not fit (a risk), for a measured ordinary trial."""
    if confirmations.confirms(t) is not None:
        return [confirmations.confirms(t), None, None, None]
    worst = confirmations.worst_case(t)
    said = found[t.number].sentence() if t.number in found else (
        confirmations.NOT_CONFIRMED if t.user_attrs.get("peak_memory_gb") is not None else None)
    return [None, said, round(worst.device_gb, 2) if worst else None, (not worst.fits) if worst else None]


def write_trials(sweep_dir: Path, study: optuna.Study, objectives: list[str], param_names: list[str] | None = None,
                 shown: Callable[[str, Any], Any] = lambda k, v: v) -> Path:
    """trials.csv from the study alone (`param_names` default: every param any trial has)."""
    if param_names is None:
        param_names = list(dict.fromkeys(p for t in study.get_trials(deepcopy=False) for p in t.params))
    sweep_dir.mkdir(parents=True, exist_ok=True)
    path = sweep_dir / TRIALS_CSV
    write_atomic(path, _csv(study, objectives, param_names, shown))
    return path
