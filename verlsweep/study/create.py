"""The study: its name, storage, sampler and pruner, what is enqueued, and the heartbeat of its trials.

Storage is an Optuna RDB storage, sqlite in the working directory by default. Both sqlite and
JournalFileBackend survived 16 processes x 15 trials x 10 reported steps on one study without a lost
or doubled trial (benchmarks/storage_concurrency.py); only RDB storages have Optuna's heartbeat, which
(with the sweep sessions of verlsweep/reconcile) is how a restarted sweep tells a trial of a dead
sweep from one another live sweep is running; a dead sweep's trial is re-run once
(optuna/storages/_callbacks.py RetryHeartbeatStaleTrialCallback). Which trials count towards
n_trials: verlsweep.reconcile.budget.
"""
from __future__ import annotations

import copy
import hashlib
import importlib
import json
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import optuna
from omegaconf import DictConfig, OmegaConf
from optuna.storages import RetryHeartbeatStaleTrialCallback

from verlsweep.command import recipe_config
from verlsweep.common import optuna_private
from verlsweep.common.errors import Problem
from verlsweep.config import plain
from verlsweep.reconcile.budget import STALE_RETRIES, budget_trials, complete, quiet_optuna
from verlsweep.study.space import SearchSpace, SearchSpaceError, describe
from verlsweep.study_link import PRUNER_ATTR, open_storage, pruner_from_spec

log = logging.getLogger(__name__)

SPACE_ATTR = "verlsweep.space"
DIRECTIONS = ("minimize", "maximize")
# command-line overrides that do not change what a trial measures, so do not split the study
_NAME_NEUTRAL = ("hydra", "trial.", "paths.", "tracking.", "validate.", "dry_run", "space", "hardware", "model",
                 "algorithm", "study")


def directions_and_objectives(direction: Any, objectives_for: Callable[[list[str]], Iterable[str]]
                              ) -> tuple[list[str], list[str]]:
    """hydra.sweeper.direction as a list, and the TrialResult values they apply to (the app's hooks name them)."""
    dirs = [str(d) for d in (list(direction) if OmegaConf.is_list(direction) or isinstance(direction, (list, tuple))
                             else [direction])]
    objs = [str(o) for o in objectives_for(dirs)]
    problems = [Problem("hydra.sweeper.direction", d, f"one of {', '.join(DIRECTIONS)}") for d in dirs
                if d not in DIRECTIONS]
    if len(dirs) != len(objs):
        problems.append(Problem("study.objectives", objs,
                                f"one TrialResult value per direction ({len(dirs)}: {dirs})"))
    if problems:
        raise SearchSpaceError(problems)
    return dirs, objs


def _name_neutral(key: str) -> bool:
    return key.lstrip("+~").startswith(_NAME_NEUTRAL)


def signature(space: SearchSpace) -> dict[str, dict[str, str]]:
    """What makes two sweeps the same search: the swept params and the fixed overrides that change
    what a trial measures. Stored with the study; its hash is part of the default name."""
    return {"params": {name: describe(dist) for name, dist in sorted(space.distributions.items())},
            "fixed": {name: value for name, value in sorted(space.fixed.items())
                      if not _name_neutral(name) and name not in space.distributions}}


def default_study_name(config: DictConfig, space: SearchSpace) -> str:
    """<sweep>.<hardware>.<model>.<algorithm>.<hash>: a swept group shown as `x`, the hash of the
    search space and the fixed overrides (signature), so another space or another batch size is
    another study, never a resume of this one."""
    choices = OmegaConf.select(config, "hydra.runtime.choices", default={}) or {}
    swept = {name.lstrip("+~") for name in space.distributions}

    def part(group: str, fallback_key: str) -> str:
        if group in swept:
            return "x"
        return str(choices.get(group) or OmegaConf.select(config, fallback_key, default=None) or "none")

    recipe = recipe_config.study_part(config)     # a recipe script: its name and its config's digest
    name = ".".join([part("space", "space.name"), part("hardware", "hardware.name"),
                     *([recipe] if recipe else [part("model", "model.name"), part("algorithm", "algorithm.name")])])
    digest = hashlib.sha1(json.dumps(signature(space), sort_keys=True).encode()).hexdigest()[:8]
    return f"{name}.{digest}"


def _locate(target: str, package: str, *more: str) -> type:
    module_name, _, cls_name = target.rpartition(".")
    if not module_name.startswith((package, *more)):
        raise SearchSpaceError([Problem("_target_", target, f"a class of {' or '.join((package, *more))}")])
    return getattr(importlib.import_module(module_name), cls_name)


def _plain(cfg: Mapping[str, Any]) -> dict[str, Any]:
    return plain(cfg) if OmegaConf.is_config(cfg) else copy.deepcopy(dict(cfg))


def build_sampler(cfg: Mapping[str, Any], space: SearchSpace, seed_offset: int = 0) -> optuna.samplers.BaseSampler:
    """The configured sampler. `seed_offset` shifts a set seed, so a resumed study or a second sweep
    process does not replay the first one's random draws."""
    spec = _plain(cfg)
    cls = _locate(str(spec.pop("_target_")), "optuna.samplers", "verlsweep.proofs.")
    if spec.get("seed") is not None:
        spec["seed"] = (int(spec["seed"]) + seed_offset) % 2**32
    if isinstance(spec.get("inner"), Mapping):      # a sampler that wraps another (BoundarySampler)
        inner = dict(spec["inner"])
        own_seed = inner.get("seed") is not None
        if not own_seed:
            inner["seed"] = spec.get("seed")         # offset already
        spec["inner"] = build_sampler(inner, space, seed_offset if own_seed else 0)
    if cls is optuna.samplers.GridSampler:
        return cls(space.grid(), seed=spec.get("seed"))
    with quiet_optuna():
        return cls(**spec)


def pruner_spec(cfg: Mapping[str, Any]) -> dict[str, Any]:
    spec = _plain(cfg)
    _locate(str(spec["_target_"]), "optuna.pruners")
    return spec


def open_study(url: str | None, name: str, directions: list[str], sampler: optuna.samplers.BaseSampler,
               pruner: dict[str, Any], heartbeat_interval: int, grace_period: int | None,
               space: SearchSpace) -> tuple[optuna.Study, Any]:
    """Create or load the study; returns (study, raw RDB storage or None for in-memory)."""
    raw = None
    storage: Any = None
    if url:
        with quiet_optuna():
            retry = RetryHeartbeatStaleTrialCallback(max_retry=STALE_RETRIES)
        raw = open_storage(url, heartbeat_interval=heartbeat_interval,
                           grace_period=grace_period or 3 * heartbeat_interval, stale_trial_callback=retry)
        storage = raw
    try:
        study = optuna.create_study(storage=storage, study_name=name, sampler=sampler,
                                    pruner=pruner_from_spec(pruner), load_if_exists=True,
                                    directions=[optuna.study.StudyDirection[d.upper()] for d in directions])
    except ValueError as exc:
        raise SearchSpaceError([Problem("hydra.sweeper.study_name", name,
                                        f"a study this sweep can join ({exc})")]) from None
    existing = [d.name.lower() for d in study.directions]
    if existing != directions:
        raise SearchSpaceError([Problem("hydra.sweeper.direction", directions,
                                        f"the directions study {name!r} was created with: {existing} "
                                        f"(or another hydra.sweeper.study_name)")])
    stored = study.user_attrs.get(SPACE_ATTR)
    wanted = signature(space)
    if isinstance(stored, dict) and set(stored) == {"params", "fixed"}:
        before, now = stored["params"], wanted["params"]
        if before != now:
            # joining would mix two searches in one model; the stored space stays as it was
            changed = sorted(k for k in {*before, *now} if before.get(k) != now.get(k))
            raise SearchSpaceError([Problem("hydra.sweeper.study_name", name, (
                "a study of this search space; it was created with "
                + ", ".join(f"{k}={before.get(k, '(not swept)')}" for k in changed)
                + ": sweep the same params or pick another hydra.sweeper.study_name"))])
        if stored["fixed"] != wanted["fixed"]:
            log.warning("study %s: its earlier trials ran with other fixed overrides: %s", name, stored["fixed"])
    study.set_user_attr(PRUNER_ATTR, pruner)
    if stored is None:
        study.set_user_attr(SPACE_ATTR, wanted)
    return study, raw


def load_complete(url: str | None, name: str, n_trials: int, space: SearchSpace) -> optuna.Study | None:
    """The stored study `name` of this search space when all its n_trials are done, else None.
    Creates no storage file and no study: a sweep with nothing left to run leaves nothing behind."""
    if url is None:
        return None
    if url.startswith("sqlite:///") and not Path(url[len("sqlite:///"):]).is_file():
        return None
    try:
        with quiet_optuna():
            study = optuna.load_study(study_name=name, storage=open_storage(url),
                                      sampler=optuna.samplers.RandomSampler())
    except KeyError:                  # no such study yet
        return None
    stored = study.user_attrs.get(SPACE_ATTR)
    if not isinstance(stored, dict) or stored.get("params") != signature(space)["params"]:
        return None                   # another search: open_study says why it cannot be joined
    return study if complete(study, n_trials) else None


def enqueue(study: optuna.Study, entries: Iterable[dict[str, Any]], n_trials: int) -> int:
    """Enqueue `entries` in order (one already in the study is skipped), as many as the budget has
    slots for: a WAITING trial beyond n_trials would never run, and would keep the study from ever
    counting as complete. Returns how many were added."""
    # every budget trial, run or still WAITING, holds a slot
    room = n_trials - len(budget_trials(study.get_trials(deepcopy=False)))
    added, left_out = 0, []
    for params in entries:
        # Optuna's own skip_if_exists test: a config already asked, queued or measured is not new
        if not params or optuna_private.should_skip_enqueue(study, params):
            continue
        if added >= room:
            left_out.append(params)
            continue
        with quiet_optuna():
            study.enqueue_trial(dict(params))
        added += 1
    if left_out:
        log.info("verlsweep: %d enqueued config(s) left out, no trial of n_trials=%d left for them: %s",
                 len(left_out), n_trials, left_out)
    return added


class Heartbeat:
    """Records a heartbeat for each trial this process has in flight, every `interval` seconds, and
    calls `also` (the sweep session's own beat, verlsweep.reconcile.sessions) as often."""

    def __init__(self, storage: Any, interval: int, also: Callable[[], None] | None = None) -> None:
        self.storage = storage
        self.interval = interval
        self.also = also
        self._ids: set[int] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _beat(self, ids: Iterable[int]) -> None:
        if self.storage is None:  # in-memory study: nobody else could take its trials over
            return
        for trial_id in ids:
            try:
                self.storage.record_heartbeat(trial_id)
            except Exception as exc:  # noqa: BLE001 - a missed beat only risks a late stale check
                log.debug("heartbeat of trial id %s failed: %s", trial_id, exc)

    def add(self, trial_ids: Iterable[int]) -> None:
        ids = list(trial_ids)
        with self._lock:
            self._ids.update(ids)
        self._beat(ids)

    def remove(self, trial_ids: Iterable[int]) -> None:
        with self._lock:
            self._ids.difference_update(trial_ids)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            with self._lock:
                ids = list(self._ids)
            self._beat(ids)
            if self.also is not None:
                try:
                    self.also()
                except Exception as exc:  # noqa: BLE001 - as a missed trial beat
                    log.debug("session heartbeat failed: %s", exc)

    def __enter__(self) -> Heartbeat:
        if self.storage is not None:
            self._thread = threading.Thread(target=self._run, name="verlsweep-heartbeat", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
