"""A study's trials as evidence (verlsweep.proofs.evidence): what the sweeper reads before it launches."""
from __future__ import annotations

import optuna
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.trial import TrialState, create_trial

from verlsweep.common.names import RULED_OUT_ATTR
from verlsweep.proofs.evidence import observed, proof, proof_of_failure
from verlsweep.proofs.rules import OFFLOADS, TP, UTIL

DISTS = {UTIL: FloatDistribution(0.3, 0.95, step=0.05), TP: CategoricalDistribution([1, 2, 4]),
         **{o: CategoricalDistribution([True, False]) for o in OFFLOADS}}


def _params(util: float, offloads: tuple[bool, bool, bool] = (False, False, False)) -> dict:
    return {UTIL: util, TP: 2, **dict(zip(OFFLOADS, offloads))}


def _trial(number: int, util: float, outcome: str, phase: str | None = None, state: TrialState = TrialState.COMPLETE,
           offloads: tuple[bool, bool, bool] = (False, False, False), **attrs) -> optuna.trial.FrozenTrial:
    t = create_trial(state=state, value=1.0 if state == TrialState.COMPLETE else None, params=_params(util, offloads),
                     distributions=DISTS, user_attrs={"outcome": outcome, "failure_phase": phase, **attrs})
    t.number = number
    return t


def test_a_proposal_above_a_vllm_start_oom_is_proven_to_fail_by_that_trial():
    trials = [_trial(0, 0.5, "completed"), _trial(1, 0.8, "oom", "vllm_start")]
    found = proof_of_failure(trials, _params(0.9))
    assert (found.verdict, found.trial) == ("fail", 1)
    assert proof_of_failure(trials, _params(0.75)) is None


def test_a_fit_proves_the_same_util_with_more_offload_fits_and_a_pruned_trial_counts_as_a_fit():
    trials = [_trial(0, 0.6, "pruned", state=TrialState.PRUNED)]
    found = proof(trials, _params(0.6, (True, False, False)))
    assert (found.verdict, found.trial) == ("fit", 0)
    assert proof(trials, _params(0.65, (True, False, False))) is None


def test_an_oom_without_a_phase_or_a_ruled_out_trial_proves_nothing():
    unknown = [_trial(0, 0.8, "oom")]
    assert proof(unknown, _params(0.9)) is None
    ruled = _trial(1, 0.8, "oom", "vllm_start", **{RULED_OUT_ATTR: 0})   # never ran: no evidence of its own
    assert observed(ruled) is None
    assert proof([ruled], _params(0.9)) is None


def test_a_space_without_the_rollout_memory_knobs_has_no_proofs():
    assert proof([_trial(0, 0.8, "oom", "vllm_start")], {UTIL: 0.9}) is None
