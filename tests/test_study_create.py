"""The sweeper's study side, in-process: outcome -> Optuna, budget and stale trials, the trial's
reporter (verlsweep.study_link), study names, outputs."""
from __future__ import annotations

import time
from pathlib import Path

import optuna
import pytest
import yaml
from hydra.core.utils import JobReturn, JobStatus
from omegaconf import OmegaConf
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.trial import TrialState

from verlsweep.common import optuna_private
from verlsweep.common.errors import ConfigError, Problem
from verlsweep.common.result import NullReporter, TrialResult
from verlsweep.reconcile import budget
from verlsweep.reconcile import results as _results
from verlsweep.reconcile import trials as reconcile_trials
from verlsweep.study import create
from verlsweep.study import outputs as _outputs
from verlsweep.study.space import SearchSpace, SearchSpaceError
from verlsweep.study_link import PRUNER_ATTR, OptunaReporter, absolute_storage_url, open_storage, reporter_for

optuna.logging.set_verbosity(optuna.logging.WARNING)
# the tests ask/tell by hand on heartbeat-enabled storages, as the sweeper does
pytestmark = pytest.mark.filterwarnings("ignore:Heartbeat of storage is supposed to be used")
SPACE = {"x": FloatDistribution(0.0, 1.0), "k": CategoricalDistribution(["a", "b"])}


def ok(value) -> JobReturn:
    ret = JobReturn(status=JobStatus.COMPLETED)
    ret.return_value = value
    return ret


def raised(exc: Exception) -> JobReturn:
    ret = JobReturn(status=JobStatus.FAILED)
    ret.return_value = exc
    return ret


def tell(study, ret, objectives=("objective",), result=None):
    trial = study.ask(fixed_distributions=SPACE)
    return trial, _results.tell(study, trial, ret, list(objectives), result=result)


def test_each_outcome_is_told_to_optuna_as_the_issue_specifies():
    study = optuna.create_study(direction="maximize")
    _, done = tell(study, ok(TrialResult("completed", objective=100.0, peak_memory_gb=40.0)))
    _, oom = tell(study, ok(TrialResult("oom", peak_memory_gb=64.0, excerpt="NPU out of memory")))
    _, infeasible = tell(study, ok(TrialResult("infeasible", excerpt="predicted 70 GB")))
    _, pruned = tell(study, ok(TrialResult("pruned", objective=10.0)))
    _, crash = tell(study, ok(TrialResult("crash", excerpt="Segmentation fault")))
    _, exc = tell(study, raised(RuntimeError("boom")))
    _, cfg_err = tell(study, raised(ConfigError([Problem("k", 1, "nope")])))
    _, empty = tell(study, ok(TrialResult("completed", objective=float("nan"))))

    trials = study.get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.COMPLETE, TrialState.COMPLETE,
                                         TrialState.PRUNED, TrialState.FAIL, TrialState.FAIL, TrialState.FAIL,
                                         TrialState.FAIL]
    assert [t.user_attrs["outcome"] for t in trials] == ["completed", "oom", "infeasible", "pruned", "crash",
                                                           "crash", "config_error", "crash"]
    # a new study stores constraints as the list optuna-dashboard reads (results.set_violation)
    assert trials[0].system_attrs["constraints"] == [0.0] and trials[0].values == [100.0]
    # constraint violations: infeasible for Optuna, placeholder value = worst feasible so far
    assert trials[1].constraints == {"0": 1.0} and trials[1].values == [100.0]
    assert trials[1].user_attrs[_results.PLACEHOLDER_ATTR] is True
    assert _results.violation(trials[2]) == 1.0
    assert study.best_trial.number == 0
    assert "RuntimeError: boom" in trials[5].user_attrs["excerpt"]
    assert [t.failed for t in (done, oom, infeasible, pruned, crash, exc, cfg_err, empty)] == [
        False, False, False, False, True, True, True, True]


def test_plain_numbers_and_dicts_are_results_and_none_fails_only_another_apps_trial():
    assert _results.result_of(ok(3.5), ["objective"]).objective == 3.5
    assert _results.result_of(ok({"outcome": "oom", "peak_memory_gb": 60}), ["objective"]).outcome == "oom"
    two = _results.result_of(ok([1.0, 2.0]), ["objective", "peak_memory_gb"])
    assert two.metrics == {"objective": 1.0, "peak_memory_gb": 2.0}
    assert _results.result_of(ok("nonsense"), ["objective"]).outcome == "crash"
    assert _results.result_of(ok(None), ["objective"]) is None
    # another app's task must return its objective, as with hydra-optuna-sweeper: None is a failed trial
    nothing = _results.result_of(ok(None), ["objective"], none_ok=False)
    assert nothing.outcome == "crash" and "returned None" in nothing.excerpt


def test_multi_objective_values_come_from_the_named_trial_result_fields():
    study = optuna.create_study(directions=["maximize", "minimize"])
    tell(study, ok(TrialResult("completed", objective=10.0, peak_memory_gb=30.0)), ("objective", "peak_memory_gb"))
    _, told = tell(study, ok(TrialResult("completed", objective=10.0)), ("objective", "peak_memory_gb"))
    assert study.get_trials()[0].values == [10.0, 30.0]
    assert told.outcome == "crash" and "peak_memory_gb" in told.excerpt


@pytest.mark.parametrize("sampler", [optuna.samplers.TPESampler(n_startup_trials=2, seed=0),
                                     optuna.samplers.GPSampler(n_startup_trials=2, seed=0),
                                     optuna.samplers.NSGAIISampler(population_size=4, seed=0)],
                         ids=["tpe", "gp", "nsgaii"])
def test_constraint_aware_samplers_accept_a_mix_of_feasible_and_violating_trials(sampler):
    study = optuna.create_study(direction="maximize", sampler=sampler)
    for _ in range(8):
        trial = study.ask(fixed_distributions=SPACE)
        x = trial.params["x"]
        result = TrialResult("oom") if x > 0.6 else TrialResult("completed", objective=x)
        _results.tell(study, trial, ok(result), ["objective"])
    assert len(study.get_trials(states=(TrialState.COMPLETE,))) == 8
    assert study.best_trial.params["x"] <= 0.6


def test_a_study_begun_with_keyed_constraints_keeps_them_so_gp_sees_one_set_of_keys():
    """A study written before set_violation (trial.set_constraint("memory", v)) is resumed in its own form."""
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.GPSampler(n_startup_trials=2, seed=0))
    for x in (0.2, 0.9):                                  # as the sweeper of the previous release told them
        trial = study.ask(fixed_distributions=SPACE)
        trial.set_constraint(_results.CONSTRAINT_KEY, 1.0 if x > 0.6 else 0.0)
        study.tell(trial, x)
    for _ in range(4):
        trial = study.ask(fixed_distributions=SPACE)
        x = trial.params["x"]
        _results.tell(study, trial, ok(TrialResult("oom") if x > 0.6 else TrialResult("completed", objective=x)),
                      ["objective"])
    assert {tuple(t.constraints) for t in study.get_trials()} == {(_results.CONSTRAINT_KEY,)}
    assert all("constraints" not in t.system_attrs for t in study.get_trials())


def test_tpe_puts_violating_trials_in_their_own_group():
    from optuna.samplers._tpe.sampler import _split_trials

    study = optuna.create_study(direction="maximize")
    for value, outcome in ((1.0, "completed"), (2.0, "completed"), (None, "oom")):
        tell(study, ok(TrialResult(outcome, objective=value)))
    below, above = _split_trials(study, study.get_trials(deepcopy=False), 1)
    assert [t.user_attrs["outcome"] for t in below] == ["completed"]
    assert "oom" in [t.user_attrs["outcome"] for t in above]


# --- storage, budget, stale trials ------------------------------------------------------------


@pytest.fixture()
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'study.db'}"


def open_test_study(url: str, name: str = "s", **kw) -> tuple[optuna.Study, object]:
    space = SearchSpace(distributions=dict(SPACE))
    return create.open_study(url, name, ["maximize"], optuna.samplers.RandomSampler(seed=0),
                             {"_target_": "optuna.pruners.NopPruner"}, kw.get("hb", 1), kw.get("grace", 1), space)


def test_relative_sqlite_urls_become_absolute(tmp_path):
    assert absolute_storage_url("sqlite:///x.db", tmp_path) == f"sqlite:///{tmp_path / 'x.db'}"
    assert absolute_storage_url("sqlite:////abs/x.db", tmp_path) == "sqlite:////abs/x.db"
    assert absolute_storage_url("postgresql://h/db", tmp_path) == "postgresql://h/db"


def settle_stale(study) -> None:
    retry = optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=budget.STALE_RETRIES)
    for t in reconcile_trials.stale(study, 1.0):
        reconcile_trials.settle(study, t, stop_grace_s=1.0, tell=None, retry=retry)


def test_a_dead_sweeps_running_trial_is_failed_and_rerun_once_and_keeps_its_budget_slot(sqlite_url):
    study, raw = open_test_study(sqlite_url)
    done = study.ask(fixed_distributions=SPACE)
    study.tell(done, 1.0)
    dead = study.ask(fixed_distributions=SPACE)
    raw.record_heartbeat(optuna_private.trial_id(dead))          # its sweep beat once, then died
    assert budget.remaining(study, 3) == 1
    time.sleep(2.2)                               # > grace period (1 s) at sqlite's 1 s resolution
    settle_stale(study)
    trials = study.get_trials()
    assert trials[1].state == TrialState.FAIL
    assert trials[2].state == TrialState.WAITING and trials[2].params == trials[1].params
    assert budget.remaining(study, 3) == 2        # the stale trial no longer counts; its retry will
    retry = study.ask(fixed_distributions=SPACE)
    assert retry.number == 2 and retry.params == trials[1].params
    raw.record_heartbeat(optuna_private.trial_id(retry))
    time.sleep(2.2)
    settle_stale(study)                           # dies again: max one re-run, so no third copy
    assert [t.state for t in study.get_trials()] == [TrialState.COMPLETE, TrialState.FAIL, TrialState.FAIL]
    assert [t.user_attrs.get("outcome") for t in study.get_trials()[1:]] == ["orphaned", "orphaned"]
    assert budget.remaining(study, 3) == 1


def test_a_trial_asked_beyond_n_trials_by_a_racing_process_is_over_budget(sqlite_url):
    study, _ = open_test_study(sqlite_url)
    first = study.ask()
    second = study.ask()                          # both processes saw one slot left
    assert not budget.over_budget(study, first.number, 1)
    assert budget.over_budget(study, second.number, 1)


def test_reopening_a_study_with_other_directions_is_refused(sqlite_url):
    open_test_study(sqlite_url)
    with pytest.raises(SearchSpaceError, match="directions study 's' was created with"):
        create.open_study(sqlite_url, "s", ["minimize"], optuna.samplers.RandomSampler(),
                          {"_target_": "optuna.pruners.NopPruner"}, 1, 1, SearchSpace(dict(SPACE)))


def test_default_study_name_joins_sweep_hardware_model_algorithm_and_hashes_space_and_fixed_overrides():
    cfg = OmegaConf.create({"hydra": {"runtime": {"choices": {"space": "rollout_memory", "hardware": "a2_64g",
                                                              "model": "qwen3_8b", "algorithm": "grpo"}}}})
    space = SearchSpace(distributions={"verl.a": CategoricalDistribution([1, 2])})
    name = create.default_study_name(cfg, space)
    base, digest = name.rsplit(".", 1)
    assert base == "rollout_memory.a2_64g.qwen3_8b.grpo" and len(digest) == 8
    # overrides that do not change what a trial measures keep the name
    neutral = SearchSpace(distributions=dict(space.distributions), fixed={"hardware": "a2_64g", "trial.steps": "3"})
    assert create.default_study_name(cfg, neutral) == name
    # another fixed override, another space: another study
    batch = SearchSpace(distributions=dict(space.distributions), fixed={"verl.data.train_batch_size": "128"})
    wider = SearchSpace(distributions={"verl.a": CategoricalDistribution([1, 2, 3])})
    assert len({name, create.default_study_name(cfg, batch), create.default_study_name(cfg, wider)}) == 3
    swept = SearchSpace(distributions={"algorithm": CategoricalDistribution(["grpo", "remax"])})
    assert create.default_study_name(cfg, swept).startswith("rollout_memory.a2_64g.qwen3_8b.x.")


def test_a_study_keeps_its_search_space_and_refuses_another_under_the_same_name(sqlite_url):
    def open_with(space):
        return create.open_study(sqlite_url, "s", ["maximize"], optuna.samplers.RandomSampler(),
                                 {"_target_": "optuna.pruners.NopPruner"}, 1, 1, space)

    first = SearchSpace(dict(SPACE))
    study, _ = open_with(first)
    stored = study.user_attrs[create.SPACE_ATTR]
    with pytest.raises(SearchSpaceError, match="it was created with x=interval"):
        open_with(SearchSpace({"x": FloatDistribution(0.0, 2.0), "k": SPACE["k"]}))
    again, _ = open_with(SearchSpace(dict(SPACE), fixed={"verl.data.train_batch_size": "64"}))
    assert again.user_attrs[create.SPACE_ATTR] == stored        # never overwritten


# --- the trial's reporter -----------------------------------------------------------------------


def test_a_single_run_gets_a_null_reporter():
    assert isinstance(reporter_for(OmegaConf.create({"trial": {"number": None}})), NullReporter)


def test_the_reporter_records_steps_and_stops_a_trial_the_pruner_prunes(sqlite_url):
    study = optuna.create_study(storage=open_storage(sqlite_url), study_name="p", direction="maximize")
    study.set_user_attr(PRUNER_ATTR, {"_target_": "optuna.pruners.MedianPruner", "n_startup_trials": 1,
                                      "n_warmup_steps": 2})
    good = study.ask()
    for step in (1, 2, 3):
        good.report(100.0, step)
    study.tell(good, 100.0)
    bad = study.ask()
    cfg = OmegaConf.create({"trial": {"number": bad.number, "study_name": "p", "storage": sqlite_url}})
    reporter = reporter_for(cfg)
    assert isinstance(reporter, OptunaReporter)
    assert reporter.report(1, 10.0) is False      # step 1 is warm-up: never pruned
    assert reporter.report(2, 10.0) is True       # below the median of finished trials at step 2
    assert study.get_trials()[1].intermediate_values == {1: 10.0, 2: 10.0}
    study.tell(bad, state=TrialState.FAIL)        # e.g. a restarted sweep failed it as stale
    assert reporter.report(3, 500.0) is True


def test_a_multi_objective_study_is_never_pruned(sqlite_url):
    study = optuna.create_study(storage=open_storage(sqlite_url), study_name="m", directions=["maximize", "minimize"])
    trial = study.ask()
    reporter = OptunaReporter(sqlite_url, "m", trial.number)
    assert reporter.report(1, 1.0) is False and reporter.report(2, 1.0) is False


# --- outputs ------------------------------------------------------------------------------------


def test_outputs_write_the_pareto_front_without_dominated_or_infeasible_trials(tmp_path):
    study = optuna.create_study(directions=["maximize", "minimize"])
    objectives = ["objective", "peak_memory_gb"]
    for tput, peak, outcome in ((100, 40, "completed"), (120, 50, "completed"), (90, 45, "completed"),
                                (200, 64, "oom")):
        tell(study, ok(TrialResult(outcome, objective=tput, peak_memory_gb=peak)), objectives)
    out = _outputs.Outputs(tmp_path, objectives, list(SPACE), lambda ov: "python -m verl.trainer.main_ppo\n", None,
                           lambda k, v: v)
    best = out.write(study)
    assert sorted(t.number for t in best) == [0, 1]
    doc = yaml.safe_load((tmp_path / "best.yaml").read_text())
    assert [e["trial_number"] for e in doc["pareto_front"]] == [1, 0]
    assert doc["launch_trial"] == 1
    rows = (tmp_path / "trials.csv").read_text().splitlines()
    assert len(rows) == 5 and rows[4].split(",")[2] == "oom"
    assert (tmp_path / "best_launch.sh").read_text().startswith("#!/usr/bin/env bash")


def test_enqueued_configs_beyond_the_budget_are_left_out_so_the_study_can_complete():
    study = optuna.create_study()
    trial = study.ask(SPACE)
    study.tell(trial, 1.0)
    measured = dict(trial.params)
    entries = [measured, {"x": 0.1, "k": "a"}, {"x": 0.2, "k": "b"}, {"x": 0.3, "k": "a"}]
    # 3 trials in all, one done: the measured config costs no slot, two of the three new ones fit
    assert create.enqueue(study, entries, n_trials=3) == 2
    waiting = [t for t in study.get_trials() if t.state == TrialState.WAITING]
    assert [t.system_attrs["fixed_params"]["x"] for t in waiting] == [0.1, 0.2]
    assert create.enqueue(study, entries, n_trials=3) == 0        # a resumed sweep adds nothing again
    for _ in range(2):
        t = study.ask(SPACE)
        study.tell(t, 0.5)
    assert budget.complete(study, 3)
