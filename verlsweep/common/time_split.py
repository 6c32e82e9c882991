"""Where a step's time goes, in verl's own phase names: measured from a trial's `timing_s/*` metrics and
predicted from the planner's step components, so the report can put the two side by side.

verl times each phase of a step with marked_timer (verl/trainer/ppo/ray_trainer.py fit: gen, reward,
old_log_prob, ref, values, adv, update_critic, update_actor, update_weights, inside `step`) and logs
them as timing_s/<phase> (verl/trainer/ppo/metric_utils.py compute_timing_metrics).
"""
from __future__ import annotations

from collections.abc import Mapping

# the phases a colocated step spends real time in, in step order; the rest (reward, adv, ...) is "other"
PHASES = ("gen", "old_log_prob", "ref", "values", "update_critic", "update_actor", "update_weights")
OTHER = "other"
METRIC = "timing_s/"
PREDICTED = "plan/time_s/"
# planner components (verlsweep.plan.predictor.throughput) that verl counts inside one of its phases: ReMax's
# greedy baseline generation is part of gen, host-side Adam part of the actor update
_INSIDE = {"gen_baseline": "gen", "host_adam": "update_actor"}


def predicted_split(time_s: Mapping[str, float]) -> dict[str, float]:
    """The planner's step components as verl's phases; offload traffic and fixed overhead, which verl
    spreads over its phases, are "other"."""
    out = {p: 0.0 for p in (*PHASES, OTHER)}
    for part, seconds in time_s.items():
        phase = _INSIDE.get(part, part)
        out[phase if phase in PHASES else OTHER] += float(seconds)
    return {k: v for k, v in out.items() if v > 0}


def measured_split(metrics: Mapping[str, float]) -> dict[str, float]:
    """verl's timing_s/<phase> (aggregated over a trial's steps) as phases; "other" is the step's rest."""
    out = {p: float(metrics[METRIC + p]) for p in PHASES if metrics.get(METRIC + p) is not None}
    step = metrics.get(METRIC + "step")
    if step is not None and float(step) > sum(out.values()):
        out[OTHER] = float(step) - sum(out.values())
    return {k: v for k, v in out.items() if v > 0}


def predicted_metrics(time_s: Mapping[str, float]) -> dict[str, float]:
    """The predicted split as flat `plan/time_s/<phase>` numbers (the trial's predicted record)."""
    return {PREDICTED + k: v for k, v in predicted_split(time_s).items()}


def from_predicted(predicted: Mapping[str, float]) -> dict[str, float]:
    """A trial's recorded `plan/time_s/<phase>` back as a split."""
    return {k[len(PREDICTED):]: float(v) for k, v in predicted.items() if k.startswith(PREDICTED)}
