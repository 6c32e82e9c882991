"""The trainer's memory traced from the real model code: the transformers model verl would load, run on
torch's fake tensors the way verl's FSDP workers run one micro batch, its live storages counted
(trainer_trace), each result cached on disk by everything that changes it (cache).

It knows a Hugging Face config and a pass (PassSpec), nothing of the planner's dataclasses: the
predictor turns a role's pass into a PassSpec (verlsweep.plan.predictor.traced_terms).

May import: verlsweep.common (torch and transformers only inside the functions that trace).
"""
from verlsweep.plan.trace.trainer_trace import (
                                                DEFAULT_LIMIT_S,
                                                PassSpec,
                                                PassTrace,
                                                StatesTrace,
                                                TraceError,
                                                trace_pass,
                                                trace_states,
)

__all__ = ["DEFAULT_LIMIT_S", "PassSpec", "PassTrace", "StatesTrace", "TraceError", "trace_pass", "trace_states"]
