"""The study's record of its trial budget: which trials count towards n_trials, and trials re-run once.

n_trials is the study's total over every sweep process and resume. A stale trial (its sweep died) or
a preempted one is failed and its params enqueued once more (optuna/storages/_callbacks.py
RetryHeartbeatStaleTrialCallback, `retry_history`); the retry then holds the slot. Shared by the
sweep (verlsweep.study) and `python -m verlsweep.report --status --repair` (verlsweep.report.status).
"""
from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterable, Iterator

import optuna
from optuna.storages import RetryHeartbeatStaleTrialCallback
from optuna.trial import FrozenTrial, TrialState

from verlsweep.common import optuna_private
from verlsweep.common.names import CONFIRMS_ATTR, OVER_BUDGET_ATTR

STALE_RETRIES = 1                      # a dead sweep's trial is re-run once, then counts as failed


@contextlib.contextmanager
def quiet_optuna() -> Iterator[None]:
    """Optuna warns that heartbeats are 'supposed to be used with Study.optimize'; we ask/tell."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        yield


def _replaced(trials: list[FrozenTrial]) -> set[int]:
    """Numbers of stale trials whose params were re-enqueued: their retry takes their budget slot."""
    return {n for t in trials for n in t.system_attrs.get("retry_history", [])}


def budget_trials(trials: list[FrozenTrial]) -> list[FrozenTrial]:
    """Trials that count towards n_trials: asked (or enqueued) ones, minus stale ones re-run, minus
    trials a racing sweep process asked beyond the budget and minus long-run confirmations
    (verlsweep.reconcile.confirmations)."""
    replaced = _replaced(trials)
    return [t for t in trials if t.number not in replaced and not t.system_attrs.get(OVER_BUDGET_ATTR)
            and t.user_attrs.get(CONFIRMS_ATTR) is None]


def remaining(study: optuna.Study, n_trials: int) -> int:
    trials = study.get_trials(deepcopy=False)
    used = sum(1 for t in budget_trials(trials) if t.state != TrialState.WAITING)
    return max(0, n_trials - used)


def complete(study: optuna.Study, n_trials: int) -> bool:
    """Every one of the n_trials slots is used and no trial is running or waiting to run."""
    trials = study.get_trials(deepcopy=False)
    return remaining(study, n_trials) == 0 and not any(
        t.state in (TrialState.RUNNING, TrialState.WAITING) for t in budget_trials(trials))


def over_budget(study: optuna.Study, number: int, n_trials: int) -> bool:
    """Whether the trial just asked lies beyond n_trials: two sweep processes may both see one slot
    left; trial numbers are handed out atomically by the storage, so the higher number yields."""
    trials = study.get_trials(deepcopy=False)
    return sum(1 for t in budget_trials(trials) if t.number <= number) > n_trials


def running_elsewhere(study: optuna.Study, mine: set[int]) -> list[int]:
    return [t.number for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
            if t.number not in mine]


def abandon(study: optuna.Study, trials: Iterable[optuna.Trial]) -> list[int]:
    """Trials this process can no longer finish (interrupted): FAIL and re-enqueue now, as a stale
    trial would be, so the next run does not wait for the heartbeat grace period. Their numbers.

    No `outcome` attr is set: a FAIL trial without one reads as `interrupted` (reconcile.check.outcome),
    and Optuna's retry copies the failed trial's user attrs to the waiting re-run, which is no interrupted
    trial."""
    with quiet_optuna():
        retry = RetryHeartbeatStaleTrialCallback(max_retry=STALE_RETRIES)
    storage = optuna_private.storage(study)
    numbers = []
    for trial in trials:
        with contextlib.suppress(Exception):
            trial_id = optuna_private.trial_id(trial)
            if storage.set_trial_state_values(trial_id, state=TrialState.FAIL):
                numbers.append(trial.number)
                with quiet_optuna():
                    retry(study, storage.get_trial(trial_id))
    return numbers


def rerun_once(study: optuna.Study, trial: optuna.Trial) -> None:
    """A told FAIL trial whose job the scheduler took away (preempted): its params enqueued again unless it
    already is a re-run; the retry takes its budget slot (`retry_history`, see budget_trials)."""
    with quiet_optuna():
        retry = RetryHeartbeatStaleTrialCallback(max_retry=STALE_RETRIES)
        retry(study, optuna_private.storage(study).get_trial(optuna_private.trial_id(trial)))
