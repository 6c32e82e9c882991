"""Every use of Optuna's private API, one function per need (Optuna 5.1).

verlsweep drives the study with ask/tell and records its own facts next to Optuna's (sweep sessions,
a trial's sweep process, the trial budget), which needs a few handles Optuna keeps private. Each one is
here, with why no public call does the same, so an Optuna upgrade is checked in one file; where a public
call exists it is used instead. tests/test_layout.py fails on a private Optuna attribute anywhere else
in verlsweep/, hydra_plugins/, sweep.py and benchmarks/.

Lives in `common` because both the sweep (verlsweep.study) and verlsweep.reconcile need it. Imports
optuna only inside its functions: `common` is imported by every trial process.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import optuna
    from optuna.trial import FrozenTrial


def storage(study: optuna.Study) -> Any:
    """The storage object the study writes through.

    Private: optuna.Study has no public accessor for it (optuna/study/study.py keeps `self._storage`).
    optuna.storages.get_storage(url) is public but opens another storage: not the one with this sweep's
    heartbeat and stale-trial callback, and for an in-memory study not the same data at all.
    """
    return study._storage


def study_id(study: optuna.Study) -> int:
    """The study's id in its storage, for the storage's per-study calls (sessions in study system attrs).

    Public: BaseStorage.get_study_id_from_name (Study._study_id holds the same id, privately)."""
    return storage(study).get_study_id_from_name(study.study_name)


def trial_id(trial: optuna.Trial | FrozenTrial) -> int:
    """The storage's id of a trial (Trial or FrozenTrial), for the storage's per-trial calls.

    Private: `_trial_id` (optuna/trial/_trial.py, _frozen.py). The public route,
    get_study_id_from_name + get_trial_id_from_study_id_trial_number, costs two storage queries per
    trial, and the sweep asks for ids of every trial of the study after each batch (reconcile.trials)."""
    return trial._trial_id


def trial_of(study: optuna.Study, frozen: FrozenTrial) -> optuna.Trial:
    """A live handle on a stored trial, to tell it (a dead sweep's trial, told as the sweep tells one).
    optuna.Trial(study, trial_id) is public; only the id is not (trial_id)."""
    import optuna

    return optuna.Trial(study, trial_id(frozen))


def stale_trial_ids(raw_storage: Any, study_id_: int) -> set[int]:
    """Ids of the study's RUNNING trials whose heartbeat is older than the storage's grace period.

    Private: BaseHeartbeat._get_stale_trial_ids (optuna/storages/_heartbeat.py). The public
    optuna.storages.fail_stale_trials(study) fails such trials at once and runs the retry callback;
    verlsweep first checks whether the trial's sweep process is really gone (verlsweep.reconcile.trials)."""
    return set(raw_storage._get_stale_trial_ids(study_id_))


def heartbeat_enabled(raw_storage: Any) -> bool:
    """Whether the storage records heartbeats (an RDBStorage opened with heartbeat_interval).

    Public: BaseHeartbeat.get_heartbeat_interval, the test optuna.storages._heartbeat.is_heartbeat_enabled
    makes (privately)."""
    interval = getattr(raw_storage, "get_heartbeat_interval", None)
    return interval is not None and interval() is not None


def should_skip_enqueue(study: optuna.Study, params: Mapping[str, Any]) -> bool:
    """Whether `params` is a config the study already asked, queued or measured (Optuna's own test).

    Private: Study._should_skip_enqueue (optuna/study/study.py). The public
    study.enqueue_trial(params, skip_if_exists=True) applies it but does not say whether it skipped,
    and the sweep counts what it enqueued against the trial budget (verlsweep.study.create.enqueue)."""
    return study._should_skip_enqueue(dict(params))


def set_trial_system_attr(trial: optuna.Trial, key: str, value: Any) -> None:
    """Write a trial's system attr (verlsweep.reconcile.results: its constraint in the list form).

    Private: Trial.set_system_attr was removed from Optuna's public API (deprecated in 3.1); the storage
    call needs the trial's id (trial_id). `trial.storage` is the public handle on the trial's storage."""
    trial.storage.set_trial_system_attr(trial_id(trial), key, value)
