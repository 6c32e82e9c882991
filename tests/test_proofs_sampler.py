"""verlsweep.proofs.sampler.BoundarySampler driven by a real in-memory Optuna study."""
from __future__ import annotations

import optuna
import pytest

from verlsweep.proofs.evidence import PHASE_ATTR, observed
from verlsweep.proofs.rules import OFFLOADS, TP, UTIL, Observed, decide
from verlsweep.proofs.sampler import BoundarySampler

DISTS = {UTIL: optuna.distributions.FloatDistribution(0.3, 0.95, step=0.05),
         TP: optuna.distributions.CategoricalDistribution((1, 2, 4, 8)),
         **{n: optuna.distributions.CategoricalDistribution((True, False)) for n in OFFLOADS}}
RECIPE = {UTIL: 0.6, TP: 2, OFFLOADS[0]: True, OFFLOADS[1]: True, OFFLOADS[2]: True}


def truth(p: dict) -> tuple[float | None, str | None]:
    """OOM at vLLM start above util 0.8 at TP 2 with every offload; the actor's params OOM in training."""
    if not p[OFFLOADS[0]]:
        return None, "training"
    if p[UTIL] > 0.8 - 0.1 * (not p[OFFLOADS[1]]):
        return None, "vllm_start"
    return 100 * p[UTIL] * {1: 0.5, 2: 1.0, 4: 0.9, 8: 0.7}[p[TP]], None


def run(study: optuna.Study, n: int) -> list[dict]:
    asked = []
    for _ in range(n):
        trial = study.ask(fixed_distributions=DISTS)
        p = {k: (round(v, 2) if k == UTIL else v) for k, v in trial.params.items()}
        asked.append(p)
        tok, phase = truth(p)
        if tok is None:
            trial.set_user_attr("outcome", "oom")
            trial.set_user_attr(PHASE_ATTR, phase)
            study.tell(trial, 0.0)
        else:
            trial.set_user_attr("outcome", "completed")
            study.tell(trial, tok)
    return asked


def test_never_proposes_a_config_proven_to_fail_nor_one_already_tried():
    study = optuna.create_study(direction="maximize", sampler=BoundarySampler(seed=0))
    study.enqueue_trial(RECIPE)
    asked = run(study, 25)
    seen = []
    for number, p in enumerate(asked):
        obs = [o for t in study.trials[:number] if (o := observed(t)) is not None]
        assert decide(obs, p).verdict != "fail", (number, p)
        assert p not in seen
        seen.append(p)


def test_bisects_the_util_band_above_the_recipe_and_finds_the_best():
    study = optuna.create_study(direction="maximize", sampler=BoundarySampler(seed=0))
    study.enqueue_trial(RECIPE)
    asked = run(study, 12)
    assert asked[1][TP] == 2 and asked[1][UTIL] > 0.6           # up the band of the recipe's combination
    assert study.best_value == pytest.approx(80.0)               # util 0.8, TP 2, the edge


def test_an_enqueued_config_runs_as_given_even_if_proven_to_fail():
    study = optuna.create_study(direction="maximize", sampler=BoundarySampler(seed=0))
    study.enqueue_trial({**RECIPE, UTIL: 0.9})
    study.enqueue_trial({**RECIPE, UTIL: 0.95})
    asked = run(study, 2)
    assert asked[1][UTIL] == 0.95


def test_params_it_does_not_know_go_to_the_inner_sampler():
    study = optuna.create_study(sampler=BoundarySampler(seed=0))
    study.optimize(lambda t: t.suggest_float("x", -1, 1) ** 2, n_trials=5)
    assert len({t.params["x"] for t in study.trials}) == 5


def test_the_observed_trial_reads_a_pruned_trial_as_a_fit():
    study = optuna.create_study(direction="maximize", sampler=BoundarySampler(seed=0))
    trial = study.ask(fixed_distributions=DISTS)
    study.tell(trial, state=optuna.trial.TrialState.PRUNED)
    assert observed(study.trials[0]) == Observed(0, study.trials[0].params, "completed", None)


def _tell_fit(study: optuna.Study, params: dict, value: float) -> None:
    study.enqueue_trial(params)
    trial = study.ask(fixed_distributions=DISTS)
    trial.set_user_attr("outcome", "completed")
    study.tell(trial, value)


@pytest.mark.parametrize("prior, expected", [
    # the planner ranks this combo first: the measurements say tok/s fell from util 0.3 to 0.65, so the
    # peak lies between them; the middle of 0.35-0.6 next
    (lambda p: 100.0 if p[TP] == 2 and all(p[n] for n in OFFLOADS) else 50.0, 0.45),
    # no prior: nothing says this combo is worth refining; the band above its highest fit, as before
    (None, 0.8)])
def test_a_combo_whose_tok_s_fell_with_util_is_searched_around_its_best_util_when_the_prior_ranks_it_first(
        prior, expected):
    study = optuna.create_study(direction="maximize", sampler=BoundarySampler(seed=0, prior=prior))
    _tell_fit(study, {**RECIPE, UTIL: 0.3}, 100.0)
    _tell_fit(study, {**RECIPE, UTIL: 0.65}, 90.0)
    trial = study.ask(fixed_distributions=DISTS)
    assert (trial.params[TP], round(trial.params[UTIL], 2)) == (2, expected)


def test_a_dip_within_the_tolerance_keeps_the_band_bisected_upwards():
    study = optuna.create_study(direction="maximize", sampler=BoundarySampler(seed=0, prior=lambda p: 100.0))
    _tell_fit(study, {**RECIPE, UTIL: 0.3}, 100.0)
    _tell_fit(study, {**RECIPE, UTIL: 0.65}, 99.5)            # 0.5%: noise, not a refuted prior
    trial = study.ask(fixed_distributions=DISTS)
    assert (trial.params[TP], round(trial.params[UTIL], 2)) == (2, 0.8)
