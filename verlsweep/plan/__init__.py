"""Plan (docs/architecture.md, stage 6, in prepare): predicted HBM per phase and tokens/s of colocated verl
(FSDP trainer + vLLM rollout on each device), before a trial launches.

    verdict = preflight(cfg)          # Preflight: HBM Verdict | None and Ray CPU check, before launch
    if blocks_launch(cfg, verdict):   # infeasible (memory beyond plan.margin_gb, or Ray CPUs) and plan.enforce
        ...                           # outcome `infeasible`, nothing launched

Subpackages, one per mechanism; each imports only the ones before it (tests/test_layout.py checks it):

    trace      the trainer's memory traced from the transformers model on fake tensors, cached on disk
    predictor  config -> numbers (inputs), HBM per phase, tokens/s, Ray CPUs, the verdict; the constants
               (calibration.yaml beside this file); asks trace for the trainer's terms
    fit        the constants fitted to measurements (known points, MLflow trials) and to traces
    cli        `python -m verlsweep.plan`: the table, detect, refit

May import: verlsweep.common, verlsweep.config (the typed nodes), verlsweep.command (to compose a config).
Never the trial process, tracking or the sweeper.
"""
from verlsweep.plan.predictor import (
                                      NotPlannable,
                                      PlanInputs,
                                      Preflight,
                                      Verdict,
                                      blocks_launch,
                                      from_cfg,
                                      load_calibration,
                                      predict,
                                      predict_cfg,
                                      preflight,
)

__all__ = ["NotPlannable", "PlanInputs", "Preflight", "Verdict", "blocks_launch", "from_cfg", "load_calibration",
           "predict", "predict_cfg", "preflight"]
