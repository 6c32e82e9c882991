"""The planner's prediction for one trial, pure arithmetic on CPU: a composed config read into plain
dataclasses (inputs; trial_spec's dataclasses, verl_config's verl defaults), HBM per phase and host RAM
(memory; trainer_memory: one FSDP role's share, traced_terms: the same from traces, lengths: the tokens
a step holds), tokens/s (throughput, knob_costs), the error band of a veto (band), verl's Ray CPUs
(ray_demand), the constants and known points (calibration, read from verlsweep/plan/calibration.yaml)
and the verdict on a trial (verdict).

May import: verlsweep.common and verlsweep.plan.trace (the tracer, for the trainer's traced terms).
"""
from verlsweep.plan.predictor.calibration import THROUGHPUT_CONSTANTS, Calibration, Constants, Point
from verlsweep.plan.predictor.inputs import from_cfg, from_tree, tree_of
from verlsweep.plan.predictor.trial_spec import Hardware, Model, NotPlannable, PlanInputs, Role, Rollout
from verlsweep.plan.predictor.verdict import (FITS, STATUSES, Preflight, Verdict, blocks_launch, load_calibration,
                                              predict, predict_cfg, preflight, tok_s_under)

__all__ = ["FITS", "STATUSES", "THROUGHPUT_CONSTANTS", "Calibration", "Constants", "Hardware", "Model", "NotPlannable",
           "PlanInputs", "Point", "Preflight", "Role", "Rollout", "Verdict", "blocks_launch", "from_cfg", "from_tree",
           "load_calibration", "predict", "predict_cfg", "preflight", "tok_s_under", "tree_of"]
