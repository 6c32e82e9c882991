"""Plan (docs/architecture.md, stage 6, in prepare): predicted HBM per phase and tokens/s of colocated verl
(FSDP trainer + vLLM rollout on each device), before a trial launches.

    verdict = preflight(cfg)          # Preflight: HBM Verdict | None and Ray CPU check, before launch
    if blocks_launch(cfg, verdict):   # infeasible (memory beyond plan.margin_gb, or Ray CPUs) and plan.enforce
        ...                           # outcome `infeasible`, nothing launched

Modules: inputs (config -> numbers: trial_spec's dataclasses, verl_config's verl defaults), memory
(HBM per phase, host RAM; trainer_memory: one FSDP role's share), ray_demand (verl's Ray CPUs),
throughput (roofline), calibration (constants + known points, one YAML), verdict (the prediction),
table / detect / refit (the `python -m verlsweep.plan` subcommands).

May import: verlsweep.common, verlsweep.command (to compose a config). Never the trial process,
tracking or the sweeper.
"""
from verlsweep.plan.inputs import from_cfg
from verlsweep.plan.trial_spec import NotPlannable, PlanInputs
from verlsweep.plan.verdict import Preflight, Verdict, blocks_launch, load_calibration, plan, plan_cfg, preflight


__all__ = ["NotPlannable", "PlanInputs", "Preflight", "Verdict", "blocks_launch", "from_cfg", "load_calibration",
           "plan", "plan_cfg", "preflight"]
