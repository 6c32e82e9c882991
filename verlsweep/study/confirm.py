"""The long-run confirmation stage (its record: verlsweep.reconcile.confirmations): which finished trials
to confirm, the confirmation trial itself, and the train file sorted longest prompt first.

Which: the `k` best feasible ordinary trials (study.long_run.confirm), a trial whose predicted worst case
does not fit (a risk) first; while none of those passes, the next best one too, so the best declared
is one that passed whenever any config can. Proofs are kept per length regime: what a failed
confirmation proves (verlsweep/proofs/rules.py, read at the maximum lengths: a training OOM fails every
util with the same TP and the same or fewer offloads) settles the others it covers as failing there,
recorded as their confirmation with the proving trial, and nothing is launched for them.
"""
from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from verlsweep.command.overrides import format_value
from verlsweep.common import optuna_private
from verlsweep.common.names import CONFIRM_AT_ATTR, CONFIRMS_ATTR, FAILURE_PHASE_ATTR, OVERRIDES_ATTR, RULED_OUT_ATTR
from verlsweep.proofs.evidence import proof_of_failure
from verlsweep.proofs.rules import Decided
from verlsweep.reconcile import confirmations
from verlsweep.study import outputs as _outputs
from verlsweep.study.hooks import TaskHooks
from verlsweep.study.progress import Progress
from verlsweep.study.space import SearchSpace

log = logging.getLogger(__name__)

LONGEST_FIRST = "train_longest_first.parquet"


def _ranked(study: optuna.Study) -> list[FrozenTrial]:
    """The feasible ordinary trials, best first (the Pareto front's order for several objectives)."""
    trials = _outputs.feasible(study.get_trials(deepcopy=False))
    signs = [1.0 if d == optuna.study.StudyDirection.MAXIMIZE else -1.0 for d in study.directions]
    return sorted(trials, key=lambda t: tuple(-s * v for s, v in zip(signs, t.values)))


def pick(study: optuna.Study, k: int, proofs: bool = True) -> list[FrozenTrial]:
    """The trials to confirm now, risks first ([]: the stage is done); with `proofs`, those a failed
    confirmation proves to fail at the maximum lengths are settled first (rule_out) and not returned."""
    if k <= 0:
        return []
    while True:
        todo, ranked = _todo(study, k)
        trials = study.get_trials(deepcopy=False)
        settled = [(t, d) for t in todo
                   if proofs and (d := proof_of_failure(trials, t.params, max_lengths=True)) is not None]
        if not settled:
            break
        for t, d in settled:
            rule_out(study, t, d)
    for t in todo:
        worst = confirmations.worst_case(t)
        if worst is not None and not worst.fits:
            log.warning("verlsweep: trial %d is a risk: its predicted worst case at the maximum lengths is "
                        "%.1f of %.2f GiB (measured peak %.1f GiB scaled by the planner); confirmed first",
                        t.number, worst.device_gb, worst.capacity_gb, t.user_attrs.get("peak_memory_gb"))
    return sorted(todo, key=lambda t: (_fits(t), ranked.index(t)))


def _todo(study: optuna.Study, k: int) -> tuple[list[FrozenTrial], list[FrozenTrial]]:
    """The trials left to confirm (the top `k`, then the next while none passed) and the ranking."""
    trials = study.get_trials(deepcopy=False)
    found = {n: c for n, c in confirmations.of_study(trials).items() if c.status != confirmations.RUNNING}
    # a failed one left feasible() already; what is ranked here has passed or is not confirmed yet
    ranked = _ranked(study)
    examined = sum(1 for c in found.values() if c.status == confirmations.FAILS)   # failed top configs
    passed, todo = False, []
    for t in ranked:
        if t.number in found:                  # passed (a failed one is not ranked)
            passed = True
            examined += 1
        elif examined < k:
            todo.append(t)
            examined += 1
        else:                                  # beyond the top k: the next one while none passed
            if not passed and not todo:
                todo.append(t)
            break
    return todo, ranked


def rule_out(study: optuna.Study, candidate: FrozenTrial, decided: Decided) -> None:
    """Record `candidate`'s confirmation as failing by `decided`'s proof: a finished trial of the study
    (so trials.csv, `--status`, the report and MLflow's tag show it) that never launched."""
    prover = next(t for t in study.get_trials(deepcopy=False) if t.number == decided.trial)
    attrs = {CONFIRMS_ATTR: candidate.number, RULED_OUT_ATTR: decided.trial,
             "outcome": prover.user_attrs.get("outcome"),
             FAILURE_PHASE_ATTR: prover.user_attrs.get(FAILURE_PHASE_ATTR),
             CONFIRM_AT_ATTR: prover.user_attrs.get(CONFIRM_AT_ATTR)}
    template = optuna.trial.create_trial(state=TrialState.FAIL, params=dict(candidate.params),
                                         distributions=dict(candidate.distributions),
                                         user_attrs={k: v for k, v in attrs.items() if v is not None})
    optuna_private.storage(study).create_new_trial(optuna_private.study_id(study), template_trial=template)
    log.warning("verlsweep: trial %d fails at the maximum lengths without a launch: %s", candidate.number, decided)


def trial_note(attrs: Mapping[str, Any]) -> str:
    """What a trial's line says about the long run: the trial it confirms, or that its predicted worst
    case at the maximum lengths does not fit (a risk: confirmed first)."""
    confirms = attrs.get(CONFIRMS_ATTR)
    if confirms is not None:
        return f"confirms t{int(confirms):02d} at max lengths"
    worst = confirmations.worst_case_of(attrs)
    if worst is not None and not worst.fits:
        return f"risk at max lengths: {worst.device_gb:.1f} of {worst.capacity_gb:.1f} GiB predicted"
    return ""


def _fits(t: FrozenTrial) -> bool:
    worst = confirmations.worst_case(t)
    return worst is None or worst.fits


def new_trial(study: optuna.Study, confirmed: FrozenTrial) -> optuna.Trial:
    """A running trial of `study` with `confirmed`'s params, marked as its confirmation: study.ask would
    hand out a waiting (enqueued) ordinary trial or sample new params."""
    storage = optuna_private.storage(study)
    template = optuna.trial.create_trial(state=TrialState.RUNNING, params=dict(confirmed.params),
                                         distributions=dict(confirmed.distributions),
                                         user_attrs={CONFIRMS_ATTR: confirmed.number})
    trial_id = storage.create_new_trial(optuna_private.study_id(study), template_trial=template)
    return optuna.Trial(study, trial_id)


def job(study: optuna.Study, confirmed: FrozenTrial, hooks: TaskHooks, space: SearchSpace,
        progress: Progress | None) -> tuple[optuna.Trial, list[str]]:
    """The confirmation trial of `confirmed` and its job's overrides (recorded as any trial's are)."""
    trial = new_trial(study, confirmed)
    knobs = progress.label({k: space.value(k, v) for k, v in trial.params.items()}) if progress else ""
    overrides = hooks.job_overrides(trial, space, knobs)
    overrides += hooks.confirm_overrides(confirmed, trial, overrides)
    trial.set_user_attr(OVERRIDES_ATTR, overrides)
    return trial, overrides + hooks.trial_overrides + (hooks.slot_overrides or [[]])[0]


def worst_case_overrides(train_file: Path | None) -> list[str]:
    """What makes a trial run at the long run's worst case (`++`: the keys are verl's, whether or not the
    composed `verl` node sets them): every response to max_response_length and, with a sorted copy of the
    train file, its longest prompts first (verl's SequentialSampler when data.shuffle is false)."""
    out = ["++verl.actor_rollout_ref.rollout.ignore_eos=true", "++verl.data.shuffle=false"]
    return out + ([f"verl.data.train_files={format_value(str(train_file))}"] if train_file is not None else [])


def prompt_chars(prompt: object) -> int:
    """A prompt's length in characters: a chat list's contents (verl's prompt_key column), else its text.
    Characters stand for tokens here (no tokenizer is loaded in the sweep): the order is what counts."""
    if isinstance(prompt, list):
        return sum(len(str(m.get("content", ""))) if isinstance(m, dict) else len(str(m)) for m in prompt)
    return len(str(prompt))


def longest_first(src: Path, dst: Path, prompt_key: str) -> int | None:
    """`src` (a parquet train file) copied to `dst` with its rows sorted longest prompt first; the longest
    prompt's characters (None: `src` cannot be read, nothing written)."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq

        table = pq.read_table(src)
        lengths = [prompt_chars(p) for p in table.column(prompt_key).to_pylist()]
    except Exception as exc:  # noqa: BLE001 - no copy: the confirmation keeps the file's own order
        log.warning("verlsweep: cannot sort %s by prompt length (%s): the confirmation reads it in order", src, exc)
        return None
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    dst.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table.take(pa.array(order, type=pa.int64())), dst)
    return max(lengths, default=0)
