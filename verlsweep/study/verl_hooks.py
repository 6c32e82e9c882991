"""verlsweep's own trial task's side of a sweep (verlsweep.study.hooks.TaskHooks), from the task's `study`
node (conf/study/default.yaml, typed by verlsweep.config.study.StudyConfig):

    params          a chained sweep's source (study.from_study, verlsweep.study.chain)
    check           device subsets of one node (study.devices_per_trial, verlsweep.study.subsets)
    before_study    the fixed part of the config checked once, as a trial would be
    enqueue         the recipe's own values (study.enqueue_recipe), then hydra.sweeper.enqueue, then the
                    planner-guided picks (study.guide, verlsweep.study.guide)
    start           the study's MLflow sweep run (verlsweep.tracking.sweep_run), the chain's record
    job_overrides   `trial.*` and the parent run id: what ties a job to its trial, pruning and MLflow run
    decide          a proposal a finished trial proves to fail (study.proofs, verlsweep.proofs) or that
                    does not compose is told without a launch
    launch          best_launch.sh with study.long_run
    summary         the table with peak memory; finish: the sweep run ended, where to look at it

What only Hydra has (composing a job's config) comes in as callables (`Hydra`), from the sweeper plugin.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import optuna
from omegaconf import DictConfig, ListConfig, OmegaConf
from optuna.trial import FrozenTrial

from verlsweep.command import recipe_config
from verlsweep.command.overrides import format_value
from verlsweep.common.errors import Problem
from verlsweep.common.labels import not_launched, path_safe, trial_label
from verlsweep.common.names import (
    CONFIRM_AT_ATTR,
    CONFIRMATION_TAG,
    CONFIRMS_TAG,
    PROVEN_FIT_ATTR,
    RECIPE_ATTR,
    RULED_OUT_ATTR,
    RULED_OUT_RULE_ATTR,
    TRACKING_ATTR,
)
from verlsweep.common.result import TrialResult
from verlsweep.config.study import study_config
from verlsweep.proofs.evidence import proof
from verlsweep.proofs.sampler import BoundarySampler
from verlsweep.reconcile import confirmations
from verlsweep.study import calibrate as _calibrate
from verlsweep.study import chain, confirm, job_dirs, peer_compat, subsets
from verlsweep.study import enqueue as _enqueue
from verlsweep.study import guide as _guide
from verlsweep.study import outputs as _outputs
from verlsweep.study import progress as _progress
from verlsweep.study import space as _space
from verlsweep.study.create import default_study_name
from verlsweep.study.hooks import AppHooks, sampler_config
from verlsweep.study.session import SweepSession
from verlsweep.tracking import run_columns, shared_view, study_runs, sweep_run
from verlsweep.tracking.sweep_run import Tracking

log = logging.getLogger(__name__)
OWN_POPULATION = 10     # NSGA-II: a 30-trial verl sweep with Optuna's 50 would be pure random


@dataclass(frozen=True)
class Hydra:
    """What the verl hooks ask of Hydra; the sweeper plugin (hydra_plugins/verlsweep_sweeper/_impl.py) gives it.

    validate(overrides) raises when a job with these overrides cannot compose (the trial's config_error)
    compose_trial(overrides) -> the config a job with these overrides gets (the planner guide's)
    compose_launch(overrides) -> best_launch.sh's command for a job with these overrides
    check_fixed(space, params_fixed, dry_run) raises when every trial would fail the same way
    """
    validate: Callable[[list[str]], None]
    compose_trial: Callable[[list[str]], DictConfig]
    compose_launch: Callable[[list[str]], str]
    check_fixed: Callable[[_space.SearchSpace, list[str], bool], None]


def compose_shape(overrides: list[str], choices: Mapping[str, Any]) -> tuple[str, ...]:
    """What decides whether a job's overrides compose: the keys, and the values of config groups
    (`choices`: hydra.runtime.choices), of added or deleted keys (+/~) and of Hydra's own typed nodes
    (but its job dir). Another value of an existing plain key composes as the first did: space.check
    found every swept key in the config, and a YAML node takes any value. So a trial composes before
    its launch (a compose error is its config_error, not the batch's crash) only when no earlier
    trial of the sweep composed with its shape: a Hydra compose costs seconds, as much as a
    runner=estimate trial."""
    out = []
    for item in overrides:
        key = item.split("=", 1)[0]
        plain = key.split("@", 1)[0]
        by_value = (plain.startswith(("+", "~")) or plain in choices
                    or (plain.startswith("hydra.") and plain != job_dirs.SUBDIR_KEY))
        out.append(item if by_value else key)
    return tuple(out)


class VerlHooks(AppHooks):
    none_ok = True        # our task returns None only from a dry run, which has no result

    def __init__(self, config: DictConfig, sweep_dir: Path, hydra: Hydra) -> None:
        super().__init__(config, sweep_dir)
        self.hydra = hydra
        self.settings = study_config(config)
        self.dry_run = bool(OmegaConf.select(config, "dry_run", default=False))
        self.report = self.settings.report
        self.launch = self._launch
        self._quiet = _progress.job_console_quiet(config)
        self._chained_from: dict[str, Any] | None = None
        self._links: dict[str, Any] = {}
        self._calibration: dict[str, str] = {}      # plan.calibration: the sweep's stack calibration file
        self._tracking: Tracking | None = None
        self._composed: set[tuple[str, ...]] = set()    # override shapes a trial composed with (compose_shape)

    def params(self, storage: str | None, cwd: Path) -> dict[str, str]:
        """The source's best params first: this sweep's params and command line win."""
        if not self.settings.from_study:
            return {}
        link = chain.resolve(str(self.settings.from_study), storage, cwd)
        self._chained_from = link.to_attr()
        return link.overrides()

    def check(self, space: _space.SearchSpace, n_jobs: int, schedule: str) -> list[Problem]:
        groups, refused = subsets.device_groups(self.config, self.settings.devices_per_trial, n_jobs,
                                                space.distributions, schedule)
        if groups is not None:
            self.trial_overrides, self.slot_overrides = groups.shared(), [groups.slot(i) for i in range(n_jobs)]
        return refused

    def study_name(self, space: _space.SearchSpace) -> str:
        return default_study_name(self.config, space)

    def objectives(self, directions: list[str]) -> list[str]:
        """study.objectives: our task names the TrialResult value of each direction."""
        return [str(o) for o in self.settings.objectives]

    def sampler(self, cfg: Mapping[str, Any]) -> dict[str, Any]:
        return sampler_config(cfg, OWN_POPULATION)

    def before_study(self, space: _space.SearchSpace, params_fixed: list[str]) -> None:
        self.hydra.check_fixed(space, params_fixed, self.dry_run)
        if not self.dry_run:      # a server that is down stops the sweep before its study has trials
            sweep_run.check_store(self.config)

    def enqueue(self, study: optuna.Study, space: _space.SearchSpace, sampler: Mapping[str, Any],
                entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = _enqueue.entries(recipe_config.own_config(self.config), space, entries, self.settings.enqueue_recipe)
        if isinstance(study.sampler, optuna.samplers.GridSampler):       # a grid runs every config anyway
            return out
        guide = self.settings.guide
        calibrated, path = _calibrate.for_sweep(self.config, self.sweep_dir)
        if path is not None:            # every trial's preflight plans with what the guide ranked with
            self._calibration = {"plan.calibration": str(path)}
        guided, predictions = _guide.guide(
            self.config, space, guide.top_k, seed=int(sampler.get("seed") or 0),
            compose=lambda o: self.hydra.compose_trial([*o, *self.trial_overrides]), draws=guide.draws,
            error=guide.error, calibration=calibrated.calibration if calibrated else None)
        if predictions and isinstance(study.sampler, BoundarySampler):
            study.sampler.prior = _guide.prior(predictions, space)   # ranks the combinations it opens
        return out + guided

    def start(self, study: optuna.Study, name: str, url: str | None, space: _space.SearchSpace,
              session: SweepSession) -> str | None:
        if not self.dry_run:
            self._tracking = sweep_run.open_sweep_run(
                self.config, name, space.describe(), sampler=type(study.sampler).__name__,
                sweep_name=OmegaConf.select(self.config, "hydra.runtime.choices.space", default=None),
                session=session.label, others_alive=bool(session.others()), view=self._view(space))
        session.tracking = self._tracking
        parent = self._tracking.parent if self._tracking else None
        if self._tracking is not None and url is not None:
            study.set_user_attr(TRACKING_ATTR, sweep_run.where(self.config, name))
        if not self.dry_run:
            chain.record(study, self._chained_from, parent, self.config)
            if (recipe := recipe_config.script_identity(self.config)) is not None:
                study.set_user_attr(RECIPE_ATTR, recipe)      # the report names the script it swept
        # what ties a job to its trial (study_link.reporter_for) and sweep (the MLflow parent)
        self._links = {"trial.study_name": name, **({"trial.storage": url} if url else {}),
                       **({sweep_run.PARENT_RUN_KEY: parent} if parent else {})}
        return parent

    def _view(self, space: _space.SearchSpace) -> dict[str, Any]:
        """The experiment's shared view for this space: its knobs by their label names; the duration unless
        runner=estimate, the device peak where the monitor reads devices (verlsweep.trial.devices)."""
        keys = list(space.distributions)
        numeric = [run_columns.knob_name(k, keys) for k, d in space.distributions.items() if _space.numeric(d)]
        measured = OmegaConf.select(self.config, "runner.name", default=None) != "estimate"
        devices = measured and bool(OmegaConf.select(self.config, "monitor.enabled", default=True))
        return shared_view.for_sweep(run_columns.knob_names(keys), numeric, measured=measured, device_peak=devices)

    def job_overrides(self, trial: optuna.Trial, space: _space.SearchSpace, knobs: str) -> list[str]:
        out = space.overrides(trial.params)
        # the MLflow run's name (`t07 util=0.90 tp=2 off=p,o`, + its outcome when known) and verl's
        # trainer.experiment_name say the same
        label = {"trial.label": knobs, "trial.name": path_safe(trial_label(trial.number, None, knobs))} if knobs else {}
        for key, value in {"trial.number": trial.number, **label, **self._links, **self._calibration}.items():
            plus = "" if OmegaConf.select(self.config, key, default="__missing__") != "__missing__" else "+"
            out.append(f"{plus}{key}={format_value(value)}")
        sub = job_dirs.subdir(self.sweep_dir, trial.number, str(self._links.get("trial.study_name", "")))
        return out + [job_dirs.override(sub)] + self._quiet

    def decide(self, study: optuna.Study, trial: optuna.Trial,
               overrides: list[str]) -> tuple[TrialResult, str] | None:
        proven = proof(study.get_trials(deepcopy=False), trial.params) if self.settings.proofs else None
        if proven is not None and proven.verdict == "fail":
            # like a planner veto: infeasible, nothing launched
            trial.set_user_attr(RULED_OUT_ATTR, proven.trial)
            trial.set_user_attr(RULED_OUT_RULE_ATTR, proven.rule)
            return (TrialResult("infeasible", excerpt=f"ruled out by trial {proven.trial}: {proven.rule} "
                                                      "(verlsweep.proofs.rules); nothing launched"),
                    not_launched(None, proven.trial))
        if proven is not None:        # launched all the same: it measures the throughput
            trial.set_user_attr(PROVEN_FIT_ATTR, proven.trial)
        try:
            shape = compose_shape(overrides, _space.group_choices(self.config))
            if shape not in self._composed:
                self.hydra.validate(overrides)
                self._composed.add(shape)
        except Exception as exc:  # noqa: BLE001 - a trial that cannot compose is this trial's outcome
            return TrialResult("config_error", excerpt=f"{type(exc).__name__}: {exc}"), ""
        return None

    def confirmations(self, study: optuna.Study) -> list[FrozenTrial]:
        """study.long_run.confirm: the finished trials to confirm at the long run's worst case
        (verlsweep.study.confirm); the confirmations so far tagged in MLflow first."""
        if self.dry_run:
            return []
        self._tag_confirmations(study)
        return confirm.pick(study, self.settings.long_run.confirm, self.settings.proofs)

    def confirm_overrides(self, confirmed: FrozenTrial, trial: optuna.Trial, overrides: list[str]) -> list[str]:
        """A few steps with every response at max_response_length and the longest prompts first."""
        long = self.settings.long_run
        lengths = [OmegaConf.select(self.config, f"verl.data.max_{k}_length", default=None)
                   for k in ("prompt", "response")]
        trial.set_user_attr(CONFIRM_AT_ATTR, lengths)
        sorted_copy = None
        src = OmegaConf.select(self.config, "verl.data.train_files", default=None)
        src = src[0] if isinstance(src, (list, ListConfig)) and len(src) == 1 else src
        sub = job_dirs.subdir_of(overrides)
        if isinstance(src, str) and sub and Path(src).expanduser().is_file():
            dst = self.sweep_dir / sub / confirm.LONGEST_FIRST
            key = str(OmegaConf.select(self.config, "verl.data.prompt_key", default="prompt") or "prompt")
            if confirm.longest_first(Path(src).expanduser(), dst, key) is not None:
                sorted_copy = dst.resolve()
        return [f"trial.steps={long.confirm_steps}", *confirm.worst_case_overrides(sorted_copy)]

    def _tag_confirmations(self, study: optuna.Study) -> None:
        """Each confirmation's run names the trial it confirms; the confirmed trial's run says how it went."""
        if self._tracking is None:
            return
        trials = study.get_trials(deepcopy=False)
        runs = {t.number: t.user_attrs.get("run_id") for t in trials}
        done = confirmations.of_study(trials)
        best = _outputs.best_trials(study)
        if best and best[0].number not in done and runs.get(best[0].number):   # the best so far, unconfirmed
            study_runs.set_tags(self._tracking.client, str(runs[best[0].number]),
                                {CONFIRMATION_TAG: confirmations.NOT_CONFIRMED})
        for number, found in done.items():
            try:
                mine, theirs = runs.get(found.trial), runs.get(number)
                if mine:
                    study_runs.set_tags(self._tracking.client, str(mine), {CONFIRMS_TAG: str(number)})
                if theirs:
                    study_runs.set_tags(self._tracking.client, str(theirs), {CONFIRMATION_TAG: found.sentence()})
            except Exception as exc:  # noqa: BLE001 - tracking must not end the sweep
                log.warning("verlsweep: could not tag the confirmation of trial %d: %s", number, exc)

    def _launch(self, overrides: list[str]) -> str:
        """best_launch.sh: the trial's overrides with the long run's."""
        long = self.settings.long_run
        return self.hydra.compose_launch([*overrides, *long.overrides, f"trial.steps={long.steps}"])

    def summary(self, study: optuna.Study, best: list[Any], objectives: list[str], space: _space.SearchSpace,
                console: Any) -> None:
        _outputs.summary(study, objectives, list(space.distributions), best, self.sweep_dir, space.value, console,
                         verl=True)
        peer_compat.write_results(study, best, self.sweep_dir, space.value, say=False)   # the summary said it

    def finish(self, status: str, others_alive: bool, console: Any) -> None:
        sweep_run.close_sweep_run(self._tracking, status, others_alive)
        if self._tracking is not None and self._tracking.parent:
            console.print(sweep_run.ui_hint(self.config, self._tracking.parent), highlight=False, soft_wrap=True)
