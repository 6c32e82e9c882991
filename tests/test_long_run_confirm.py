"""The long-run confirmation stage's decisions, on in-memory studies: which trials it confirms and in
which order, what a confirmation proves and counts for, the worst case predicted per trial, and the
train file sorted longest prompt first."""
from __future__ import annotations

from pathlib import Path

import optuna
import pyarrow as pa
import pyarrow.parquet as pq
from optuna.distributions import FloatDistribution
from optuna.trial import TrialState, create_trial

from verlsweep.common.names import CONFIRMS_ATTR, PREDICTED_ATTR
from verlsweep.proofs.evidence import evidence, observed
from verlsweep.proofs.rules import OFFLOADS, TP, UTIL
from verlsweep.reconcile import budget, confirmations
from verlsweep.study import confirm
from verlsweep.study.outputs import best_trials

DIST = {"x": FloatDistribution(0.0, 1.0)}


def _study(values: list[float], predicted: dict[int, dict] | None = None) -> optuna.Study:
    study = optuna.create_study(direction="maximize")
    for i, v in enumerate(values):
        attrs = {"outcome": "completed", "peak_memory_gb": 30.0, PREDICTED_ATTR: (predicted or {}).get(i, {})}
        study.add_trial(create_trial(params={"x": i / 10}, distributions=DIST, values=[v], user_attrs=attrs))
    return study


def _confirmation(study: optuna.Study, of: int, outcome: str) -> None:
    state = TrialState.COMPLETE
    attrs = {CONFIRMS_ATTR: of, "outcome": outcome, "peak_memory_gb": 50.0 if outcome == "completed" else None}
    study.add_trial(create_trial(params={"x": of / 10}, distributions=DIST, state=state,
                                 values=[999.0] if outcome == "completed" else [0.0], user_attrs=attrs))


def test_the_top_k_are_confirmed_then_none_once_one_passed():
    study = _study([300, 500, 400, 100])
    assert [t.number for t in confirm.pick(study, 2)] == [1, 2]
    _confirmation(study, 1, "completed")
    _confirmation(study, 2, "oom")
    assert confirm.pick(study, 2) == []
    assert confirm.pick(study, 0) == []


def test_while_every_confirmed_config_failed_the_next_best_is_confirmed_and_becomes_the_best():
    study = _study([300, 500, 400, 100])
    _confirmation(study, 1, "oom")
    _confirmation(study, 2, "oom")
    assert [t.number for t in confirm.pick(study, 2)] == [0]
    # a config that failed its confirmation is never the best, and no confirmation is one
    assert best_trials(study)[0].number == 0
    _confirmation(study, 0, "completed")
    assert confirm.pick(study, 2) == []
    assert best_trials(study)[0].number == 0


def test_a_trial_whose_predicted_worst_case_does_not_fit_is_a_risk_and_confirmed_first(caplog):
    risky = {"plan/trainer_peak_gb": 30.0, "plan/worst_trainer_peak_gb": 50.0, "plan/capacity_gb": 60.0,
             "plan/peak_gb/actor_update": 58.0}
    safe = {**risky, "plan/worst_trainer_peak_gb": 35.0, "plan/peak_gb/actor_update": 45.0}
    study = _study([500, 400], predicted={0: safe, 1: {**risky}})
    trials = study.get_trials()
    # measured 30 = predicted 30: the worst case is the planner's; the risky one's training phase at max
    # lengths needs 58 GiB, within 60; scaled by a measured peak 10% over the prediction it does not fit
    assert confirmations.worst_case(trials[1]).fits
    study.add_trial(create_trial(params={"x": 0.5}, distributions=DIST, values=[450.0], user_attrs={
        "outcome": "completed", "peak_memory_gb": 33.0, PREDICTED_ATTR: risky}))
    worst = confirmations.worst_case(study.get_trials()[2])
    assert round(worst.peak_gb, 2) == 55.0 and round(worst.device_gb, 2) == 63.0 and not worst.fits
    assert [t.number for t in confirm.pick(study, 2)] == [2, 0]        # the risk first, then the best
    assert "trial 2 is a risk: its predicted worst case at the maximum lengths is 63.0 of 60.00 GiB" in caplog.text


def test_a_confirmation_counts_for_no_budget_slot_and_proves_nothing_about_ordinary_trials():
    study = optuna.create_study()

    dists = {UTIL: FloatDistribution(0.3, 0.95), TP: FloatDistribution(1, 8),
             **{k: FloatDistribution(0, 1) for k in OFFLOADS}}
    study.add_trial(create_trial(params={UTIL: 0.9, TP: 2, **{k: 0 for k in OFFLOADS}}, distributions=dists,
                                 values=[1.0], user_attrs={"outcome": "completed"}))
    study.add_trial(create_trial(params={UTIL: 0.9, TP: 2, **{k: 0 for k in OFFLOADS}}, distributions=dists,
                                 values=[0.0], user_attrs={"outcome": "oom", "failure_phase": "training",
                                                           CONFIRMS_ATTR: 0}))
    trials = study.get_trials()
    assert [t.number for t in budget.budget_trials(trials)] == [0]
    assert budget.remaining(study, 1) == 0
    assert observed(trials[1]) is None and observed(trials[0]) is not None


def test_the_sentence_names_the_lengths_the_trial_and_the_peak_of_the_capacity():
    study = _study([500])
    study.add_trial(create_trial(params={"x": 0.0}, distributions=DIST, values=[1.0], user_attrs={
        CONFIRMS_ATTR: 0, "outcome": "completed", "peak_memory_gb": 41.23, "verlsweep.confirm_at": [1024, 2048],
        PREDICTED_ATTR: {"plan/capacity_gb": 60.96}}))
    found = confirmations.of_study(study.get_trials())
    assert found[0].sentence() == "confirmed at prompt 1024 / response 2048 by trial 1: peak 41.2 of 60.96 GiB"
    assert confirmations.label(0, found) == confirmations.CONFIRMED


def test_an_interrupted_confirmation_is_run_again():
    study = _study([500])
    study.add_trial(create_trial(params={"x": 0.0}, distributions=DIST, state=TrialState.FAIL,
                                 user_attrs={CONFIRMS_ATTR: 0, "outcome": "interrupted"}))
    assert [t.number for t in confirm.pick(study, 1)] == [0]


def test_the_train_file_is_copied_longest_prompt_first(tmp_path: Path):
    rows = [{"prompt": [{"role": "user", "content": "x" * n}], "i": n} for n in (5, 50, 20)]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "train.parquet")
    longest = confirm.longest_first(tmp_path / "train.parquet", tmp_path / "out" / "sorted.parquet", "prompt")
    assert longest == 50
    assert pq.read_table(tmp_path / "out" / "sorted.parquet").column("i").to_pylist() == [50, 20, 5]
    assert confirm.longest_first(tmp_path / "missing.parquet", tmp_path / "x.parquet", "prompt") is None


def test_a_new_confirmation_trial_has_the_confirmed_params_and_is_not_an_ordinary_trial():
    study = _study([500, 400])
    trial = confirm.new_trial(study, study.get_trials()[1])
    assert trial.params == {"x": 0.1} and trial.user_attrs[CONFIRMS_ATTR] == 1
    assert confirmations.ordinary(study.get_trials()) == study.get_trials()[:2]


def _knob_study(configs: list[tuple[float, bool, float]]) -> optuna.Study:
    """Completed ordinary trials of (util, actor param offload, tokens/s), TP 4, other offloads off."""
    dists = {UTIL: FloatDistribution(0.3, 0.9), TP: optuna.distributions.CategoricalDistribution([2, 4]),
             **{k: optuna.distributions.CategoricalDistribution([False, True]) for k in OFFLOADS}}
    study = optuna.create_study(direction="maximize")
    for util, offload, tok_s in configs:
        params = {UTIL: util, TP: 4, OFFLOADS[0]: offload, OFFLOADS[1]: False, OFFLOADS[2]: False}
        study.add_trial(create_trial(params=params, distributions=dists, values=[tok_s],
                                     user_attrs={"outcome": "completed"}))
    return study


def _failed_confirmation(study: optuna.Study, of: int, phase: str) -> None:
    confirmed = study.trials[of]
    study.add_trial(create_trial(params=confirmed.params, distributions=confirmed.distributions,
                                 state=TrialState.FAIL, user_attrs={CONFIRMS_ATTR: of, "outcome": "oom",
                                                                    "failure_phase": phase}))


def test_a_training_oom_at_max_lengths_settles_the_next_config_it_covers_without_a_launch():
    # trial 0 (util 0.8, no offload) failed at max lengths in training (its confirmation: trial 3);
    # trial 1 (util 0.6, no offload, same TP) needs as much for training at every util: it fails there
    # too, proven, so trial 2 (param offload on) is the one launched
    study = _knob_study([(0.8, False, 500), (0.6, False, 450), (0.6, True, 400)])
    _failed_confirmation(study, 0, "training")
    assert [t.number for t in confirm.pick(study, 1)] == [2]
    found = confirmations.of_study(study.trials)
    assert found[1].status == confirmations.FAILS and found[1].proven_by == 3      # trial 0's confirmation
    assert found[1].sentence() == "fails at max lengths: proven by trial 3 (oom in training), not launched"
    assert best_trials(study)[0].number == 2
    # and it is no evidence itself: a proof stands on confirmations that ran
    assert [o.number for o in evidence(study.trials, max_lengths=True)] == [3]


def test_without_proofs_or_with_a_phase_no_rule_covers_the_next_config_is_launched():
    study = _knob_study([(0.8, False, 500), (0.6, False, 450), (0.6, True, 400)])
    _failed_confirmation(study, 0, "training")
    assert [t.number for t in confirm.pick(study, 1, proofs=False)] == [1]
    other = _knob_study([(0.8, False, 500), (0.6, False, 450)])
    _failed_confirmation(other, 0, "crash")
    assert [t.number for t in confirm.pick(other, 1)] == [1]


def test_a_trials_line_says_what_it_confirms_or_that_its_worst_case_is_a_risk():
    risky = {"plan/trainer_peak_gb": 30.0, "plan/worst_trainer_peak_gb": 50.0, "plan/capacity_gb": 60.0,
             "plan/peak_gb/actor_update": 58.0}
    assert confirm.trial_note({CONFIRMS_ATTR: 3}) == "confirms t03 at max lengths"
    # measured 1.2x the predicted peak: 58 + 50 x 0.2 GiB at the maximum lengths
    assert confirm.trial_note({"peak_memory_gb": 36.0, PREDICTED_ATTR: risky}) == (
        "risk at max lengths: 68.0 of 60.0 GiB predicted")
    safe = {**risky, "plan/worst_trainer_peak_gb": 31.0, "plan/peak_gb/actor_update": 45.0}
    assert confirm.trial_note({"peak_memory_gb": 36.0, PREDICTED_ATTR: safe}) == ""
    assert confirm.trial_note({"outcome": "oom"}) == ""
