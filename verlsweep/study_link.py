"""The link between a trial process and the Optuna study its sweep runs.

The sweep (verlsweep.study, run by hydra_plugins/verlsweep_sweeper) owns the study: it asks, launches
and tells. The trial task only needs two things from it, and both live here so sweep and task open the
study the same way: `open_storage(url)` (one storage setup for every process that writes the study) and
`reporter(number, storage, study_name)` (a trial's typed trial.* fields; `reporter_for(cfg)` reads them from
any Hydra app's config), the per-step pruning hook the runner calls (verlsweep.common.result.StepReporter).

The sweep passes `trial.number`, `trial.study_name` and `trial.storage` as overrides of every job,
and stores its pruner's spec in the study's user attrs (`PRUNER_ATTR`), so a trial process rebuilds
exactly the pruner the sweep was configured with.
"""
from __future__ import annotations

import functools
import importlib
import logging
import math
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

from verlsweep.common.result import NullReporter, StepReporter

if TYPE_CHECKING:  # optuna costs ~0.3 s to import; single runs never need it
    import optuna

log = logging.getLogger(__name__)

PRUNER_ATTR = "verlsweep.pruner"
# Seconds a writer waits for sqlite's lock before failing. Several sweep processes and every running
# trial write the same file; Python's default (5 s) is too short when one of them reads all trials
# (benchmarks/storage_concurrency.py).
SQLITE_LOCK_WAIT_S = 60
_CREATE_ATTEMPTS = 5


def absolute_storage_url(url: str, base: Path) -> str:
    """Make a relative sqlite URL absolute, so jobs running in other directories find the same file."""
    prefix = "sqlite:///"
    if url.startswith(prefix) and not url.startswith("sqlite:////"):
        path = url[len(prefix):]
        if path and path != ":memory:":
            return prefix + str((base / path).resolve())
    return url


def open_storage(url: str, *, heartbeat_interval: int | None = None, grace_period: int | None = None,
                 stale_trial_callback: Any = None) -> optuna.storages.RDBStorage:
    """The RDB storage behind `url` (sqlite by default; MySQL/PostgreSQL URLs work the same way).

    Only the sweeper passes a heartbeat: it records one for each trial it has in flight, so a sweep
    that dies leaves trials Optuna can recognise as stale (optuna/storages/_heartbeat.py).
    """
    import optuna
    from sqlalchemy.exc import SQLAlchemyError

    engine_kwargs: dict[str, Any] = {}
    if url.startswith("sqlite:"):
        engine_kwargs["connect_args"] = {"timeout": SQLITE_LOCK_WAIT_S}
    for attempt in range(_CREATE_ATTEMPTS):
        try:
            with warnings.catch_warnings():  # heartbeat_interval is flagged experimental since optuna 2.x
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return optuna.storages.RDBStorage(
                    url,
                    engine_kwargs=engine_kwargs,
                    heartbeat_interval=heartbeat_interval,
                    grace_period=grace_period,
                    heartbeat_stale_trial_callback=stale_trial_callback,
                )
        except SQLAlchemyError as exc:
            # Two processes creating a new storage at once race on its schema (alembic_version
            # "UNIQUE constraint failed"); the loser finds the winner's tables on the next try.
            if attempt == _CREATE_ATTEMPTS - 1:
                raise
            log.debug("storage %s not ready (%s), retrying", url, exc)
            time.sleep(0.2 * (attempt + 1))
    raise AssertionError("unreachable")


@functools.lru_cache(maxsize=4)
def _trial_storage(url: str) -> optuna.storages.RDBStorage:
    """One storage (engine, connection pool) per URL and process: with Hydra's basic launcher every
    trial of a sweep runs in the sweep's process."""
    return open_storage(url)


def pruner_from_spec(spec: dict[str, Any] | None) -> optuna.pruners.BasePruner:
    """Build a pruner from `{"_target_": "optuna.pruners.X", **kwargs}` (only optuna's own pruners)."""
    import optuna

    if not spec:
        return optuna.pruners.NopPruner()
    kwargs = dict(spec)
    target = str(kwargs.pop("_target_"))
    module_name, _, cls_name = target.rpartition(".")
    if not module_name.startswith("optuna.pruners"):
        raise ValueError(f"pruner _target_ {target!r}: only optuna.pruners.* classes are allowed")
    cls = getattr(importlib.import_module(module_name), cls_name)
    return optuna.pruners.NopPruner() if cls is optuna.pruners.NopPruner else cls(**kwargs)


class OptunaReporter:
    """Reports each step's value to the trial's study and asks its pruner whether to stop.

    A storage hiccup never stops a trial (the step is logged and skipped); a trial that the study
    already finished (a sweep that restarted marked it stale) is stopped, since its result would be
    discarded anyway.
    """

    def __init__(self, storage_url: str, study_name: str, number: int) -> None:
        self.storage_url = storage_url
        self.study_name = study_name
        self.number = number
        self._trial: optuna.Trial | None = None
        self._disabled = False

    def _load(self) -> optuna.Trial:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        storage = _trial_storage(self.storage_url)
        study_id = storage.get_study_id_from_name(self.study_name)
        if len(storage.get_study_directions(study_id)) > 1:
            log.info("study %s is multi-objective: Optuna cannot prune it, steps are not reported",
                     self.study_name)
            self._disabled = True
        pruner = pruner_from_spec(storage.get_study_user_attrs(study_id).get(PRUNER_ATTR))
        study = optuna.load_study(study_name=self.study_name, storage=storage, pruner=pruner,
                                  sampler=optuna.samplers.RandomSampler())
        trial_id = storage.get_trial_id_from_study_id_trial_number(study_id, self.number)
        return optuna.Trial(study, trial_id)

    def record(self, key: str, value: Any) -> None:
        """A fact about the running trial as a user attr of its Optuna trial (never fails the trial)."""
        try:
            if self._trial is None:
                self._trial = self._load()
            self._trial.set_user_attr(key, value)
        except Exception as exc:  # noqa: BLE001 - the trial dir keeps the same record
            log.debug("could not record %s of trial %d: %s", key, self.number, exc)

    def report(self, step: int, value: float) -> bool:
        import optuna

        if self._disabled or value is None or not math.isfinite(value):
            return False
        try:
            if self._trial is None:
                self._trial = self._load()
            if self._disabled:
                return False
            self._trial.report(float(value), int(step))
            # a long-run confirmation runs at the maximum lengths: other trials' steps are no yardstick
            return "verlsweep.confirms" not in self._trial.user_attrs and bool(self._trial.should_prune())
        except optuna.exceptions.UpdateFinishedTrialError:
            log.warning("trial %d of study %s is already finished in the study: stopping it",
                        self.number, self.study_name)
            return True
        except Exception as exc:  # noqa: BLE001 - the measurement matters more than pruning
            log.warning("could not report step %s of trial %d to study %s: %s",
                        step, self.number, self.study_name, exc)
            return False


def reporter_for(cfg: DictConfig) -> StepReporter:
    """The step reporter of a job of any Hydra app whose config has trial.number/storage/study_name (the
    sweeper's links): Optuna-backed in a sweep, a no-op for a single run."""
    return reporter(OmegaConf.select(cfg, "trial.number", default=None),
                    OmegaConf.select(cfg, "trial.storage", default=None),
                    OmegaConf.select(cfg, "trial.study_name", default=None))


def reporter(number: int | None, storage: str | None, study_name: str | None) -> StepReporter:
    """The step reporter of trial `number` of `study_name` in `storage` (a trial's TrialConfig holds the
    three); a no-op when any is missing (a single run)."""
    if number is None or not storage or not study_name:
        return NullReporter()
    return OptunaReporter(str(storage), str(study_name), int(number))
