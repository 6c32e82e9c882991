"""The long-run confirmation stage (its record: verlsweep.reconcile.confirmations): which finished trials
to confirm, the confirmation trial itself, and the train file sorted longest prompt first.

Which: the `k` best feasible ordinary trials (study.long_run.confirm), a trial whose predicted worst case
does not fit (a risk) first; while none of those passes, the next best one too, so the best declared
is one that passed whenever any config can.
"""
from __future__ import annotations

import logging
from pathlib import Path

import optuna
from optuna.trial import FrozenTrial, TrialState

from verlsweep.command.overrides import format_value
from verlsweep.common import optuna_private
from verlsweep.common.names import CONFIRMS_ATTR, OVERRIDES_ATTR
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


def pick(study: optuna.Study, k: int) -> list[FrozenTrial]:
    """The trials to confirm now, risks first ([]: the stage is done)."""
    if k <= 0:
        return []
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
    for t in todo:
        worst = confirmations.worst_case(t)
        if worst is not None and not worst.fits:
            log.warning("verlsweep: trial %d is a risk: its predicted worst case at the maximum lengths is "
                        "%.1f of %.2f GiB (measured peak %.1f GiB scaled by the planner); confirmed first",
                        t.number, worst.device_gb, worst.capacity_gb, t.user_attrs.get("peak_memory_gb"))
    return sorted(todo, key=lambda t: (_fits(t), ranked.index(t)))


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
