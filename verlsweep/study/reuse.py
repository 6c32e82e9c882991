"""No config measured twice by accident: a proposal equal to a trial already measured in this study
is told that trial's result again and launches nothing (`hydra.sweeper.remeasure=false`, the default).

Samplers re-propose measured configs often in a discrete space (TPE's candidates are drawn from the
good group's own values), and every repeat would cost a whole trial of device time for a number the
study already has. A reused trial keeps its place in the study (it is a trial of the budget, so a
sampler that only re-proposes cannot loop for ever) and is recorded as such:

    user attr REUSED_FROM_ATTR  the number of the trial whose measurement it repeats
    user attr "outcome" etc.    copied from that trial; duration_s 0 (nothing ran)
    user attr REUSED_RUN_ATTR   that trial's MLflow run id (the reused trial has no run of its own)

Only measurements are reused: completed, oom, infeasible and pruned trials. A crash, hang or
timeout says more about the environment than about the config, so those configs are measured again.
"""
from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from verlsweep.common.names import (
    CONFIRMS_ATTR,
    FAILURE_PHASE_ATTR,
    PREDICTED_ATTR,
    REUSED_FROM_ATTR,
    REUSED_RUN_ATTR,
)
from verlsweep.reconcile.results import PLACEHOLDER_ATTR, Told, set_violation, tell_state, violation

log = logging.getLogger(__name__)

REUSABLE = ("completed", "oom", "infeasible", "pruned")
# copied from the measured trial, so outputs and trackers show the reused trial like the measured one
_COPIED = ("outcome", "objective", "peak_memory_gb", "steps", "backend", "excerpt", "metrics", FAILURE_PHASE_ATTR,
           PREDICTED_ATTR)


def _key(params: dict[str, Any], shown: Callable[[str, Any], Any]) -> tuple:
    """Params as the command line has them: 0.7 and 0.7000000000000001 are one config."""
    def norm(name: str, value: Any) -> Any:
        value = shown(name, value)
        return round(value, 9) if isinstance(value, float) and math.isfinite(value) else value
    return tuple(sorted((name, norm(name, value)) for name, value in params.items()))


def is_reused(trial: FrozenTrial) -> bool:
    return trial.user_attrs.get(REUSED_FROM_ATTR) is not None


def measured_match(study: optuna.Study, params: dict[str, Any], shown: Callable[[str, Any], Any],
                   number: int) -> FrozenTrial | None:
    """The earliest measured trial of `study` (not `number`, not itself a reuse) with these params."""
    key = _key(params, shown)
    states = (TrialState.COMPLETE, TrialState.PRUNED)
    for t in study.get_trials(deepcopy=False, states=states):
        if (t.number == number or is_reused(t) or t.user_attrs.get("outcome") not in REUSABLE
                or t.user_attrs.get(CONFIRMS_ATTR) is not None):      # ran at other lengths
            continue
        if set(t.params) == set(params) and _key(t.params, shown) == key:
            return t
    return None


def tell_reused(study: optuna.Study, trial: optuna.Trial, source: FrozenTrial) -> Told:
    """Tell `trial` the measurement of `source`, in the same state, values and constraint."""
    for name in _COPIED:
        if name in source.user_attrs:
            trial.set_user_attr(name, source.user_attrs[name])
    trial.set_user_attr("duration_s", 0.0)
    trial.set_user_attr(REUSED_FROM_ATTR, source.number)
    if source.user_attrs.get("run_id"):
        trial.set_user_attr(REUSED_RUN_ATTR, source.user_attrs["run_id"])
    if source.user_attrs.get(PLACEHOLDER_ATTR):
        trial.set_user_attr(PLACEHOLDER_ATTR, True)
    outcome = str(source.user_attrs.get("outcome"))
    set_violation(study, trial, violation(source))
    if source.state == TrialState.PRUNED:
        # the pruner and TPE rank a pruned trial by its steps: give them the same ones
        for step, value in sorted(source.intermediate_values.items()):
            trial.report(value, step)
        tell_state(study, trial, state=TrialState.PRUNED)
        return Told(trial.number, outcome, TrialState.PRUNED, None, source.user_attrs.get("excerpt"))
    values = list(source.values)
    tell_state(study, trial, values=values)
    return Told(trial.number, outcome, TrialState.COMPLETE, values, source.user_attrs.get("excerpt"))


def count(trials: list[FrozenTrial]) -> int:
    return sum(1 for t in trials if is_reused(t))
