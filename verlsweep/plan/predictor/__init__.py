"""The planner's prediction for one trial, pure arithmetic on CPU: a trial's typed config made into plain
dataclasses (inputs; trial_spec's dataclasses, verl_config's verl defaults), HBM per phase and host RAM
(memory; trainer_memory: one FSDP role's share, traced_terms: the same from traces, lengths: the tokens
a step holds), tokens/s (throughput, knob_costs), the error band of a veto (band), verl's Ray CPUs
(ray_demand), the constants and known points (calibration, read from verlsweep/plan/calibration.yaml)
and the verdict on a trial (verdict: predict, predict_cfg, preflight).

May import: verlsweep.common, verlsweep.config (the typed nodes it reads) and verlsweep.plan.trace (the
tracer, for the trainer's traced terms).
Its modules import each other's names from the module (verlsweep.plan.predictor.memory), never from this
__init__, which imports them all.
"""
from verlsweep.plan.predictor.calibration import THROUGHPUT_CONSTANTS, Calibration, Constants, Point
from verlsweep.plan.predictor.inputs import from_cfg, from_task, from_tree, inputs_of, tree_of
from verlsweep.plan.predictor.lengths import Lengths, expected_lengths, worst_lengths
from verlsweep.plan.predictor.memory import MEANING, ORDER, Check, MemoryPrediction, memory_per_phase
from verlsweep.plan.predictor.ray_demand import CpuCheck
from verlsweep.plan.predictor.throughput import Throughput, step_throughput
from verlsweep.plan.predictor.trial_spec import ModelShapes, NotPlannable, PlanInputs, Role, Rollout
from verlsweep.plan.predictor.verdict import (
                                              FITS,
                                              STATUSES,
                                              Preflight,
                                              Verdict,
                                              blocks_launch,
                                              load_calibration,
                                              predict,
                                              predict_cfg,
                                              preflight,
                                              tok_s_under,
)

__all__ = ["FITS", "MEANING", "ORDER", "STATUSES", "THROUGHPUT_CONSTANTS", "Calibration", "Check", "Constants",
           "CpuCheck", "Lengths", "MemoryPrediction", "ModelShapes", "NotPlannable", "PlanInputs", "Point",
           "Preflight", "Role", "Rollout", "Throughput", "Verdict", "blocks_launch", "expected_lengths", "from_cfg",
           "from_task", "from_tree", "inputs_of", "load_calibration", "memory_per_phase", "predict", "predict_cfg",
           "preflight", "step_throughput", "tok_s_under", "tree_of", "worst_lengths"]
