"""A study's finished trials as evidence (rules.Observed), and what they prove about one proposal.

Read from each trial's user attrs as the sweeper records them (hydra_plugins/verlsweep_sweeper/
_results.py): OUTCOME_ATTR (TrialResult.outcome) and PHASE_ATTR (TrialResult.failure_phase). A
pruned trial ran steps, so it fit; a trial ruled out by a proof carries no evidence of its own
(RULED_OUT_ATTR: it never ran); a long-run confirmation (CONFIRMS_ATTR) is evidence of another length
regime only: `max_lengths=True` reads the confirmations alone (verlsweep.study.confirm), never the
few-step trials.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from optuna.trial import FrozenTrial, TrialState

from verlsweep.common.names import CONFIRMS_ATTR, FAILURE_PHASE_ATTR, RULED_OUT_ATTR
from verlsweep.proofs.rules import KNOBS, Decided, Observed, decide

PHASE_ATTR = FAILURE_PHASE_ATTR
OUTCOME_ATTR = "outcome"          # trial user attr: TrialResult.outcome


def observed(trial: FrozenTrial, max_lengths: bool = False) -> Observed | None:
    """A finished trial as the rules read it (None: nothing to learn from it); `max_lengths`: the length
    regime read, the few-step trials' or the long-run confirmations'."""
    if not all(k in trial.params for k in KNOBS) or trial.user_attrs.get(RULED_OUT_ATTR) is not None:
        return None
    if (trial.user_attrs.get(CONFIRMS_ATTR) is not None) != max_lengths:
        # a long-run confirmation ran at the maximum lengths: what it shows holds for that length regime
        # alone, not for the few-step trials these rules compare it with (and the other way round)
        return None
    outcome = trial.user_attrs.get(OUTCOME_ATTR)
    if trial.state == TrialState.PRUNED:
        outcome = "completed"            # it ran steps: it fit
    elif trial.state == TrialState.COMPLETE and outcome is None:
        violated = any(v > 0 for v in trial.constraints.values())      # either form Optuna stores
        outcome = "oom" if violated else "completed"
    if outcome is None:
        return None
    return Observed(trial.number, trial.params, outcome, trial.user_attrs.get(PHASE_ATTR))


def evidence(trials: Iterable[FrozenTrial], max_lengths: bool = False) -> list[Observed]:
    return [o for t in trials if t.state.is_finished() and (o := observed(t, max_lengths)) is not None]


def proof(trials: Iterable[FrozenTrial], params: Mapping[str, Any], max_lengths: bool = False) -> Decided | None:
    """What the finished trials prove about `params` (in the length regime `max_lengths` names): fail or
    fit, by the earliest trial that proves it (None: nothing, or the space lacks one of the knobs the
    rules read)."""
    if not all(k in params for k in KNOBS):
        return None
    found = decide(evidence(trials, max_lengths), params)
    return None if found.verdict == "unknown" else found


def proof_of_failure(trials: Iterable[FrozenTrial], params: Mapping[str, Any],
                     max_lengths: bool = False) -> Decided | None:
    found = proof(trials, params, max_lengths)
    return found if found is not None and found.verdict == "fail" else None
