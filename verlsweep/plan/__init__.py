"""Memory and throughput planner for colocated verl (FSDP trainer + vLLM rollout on each device).

    verdict = preflight(cfg)          # Verdict | None, before a trial launches
    if blocks_launch(cfg, verdict):   # infeasible beyond plan.margin_gb and plan.enforce
        ...                           # outcome `infeasible`, nothing launched

Modules: inputs (config -> numbers), memory (HBM per phase, host RAM), throughput (roofline),
calibration (constants + known points, one YAML), verdict (the prediction), table / detect / refit
(the `python -m verlsweep.plan` subcommands).
"""
from verlsweep.plan.detect import register_resolver
from verlsweep.plan.inputs import NotPlannable, PlanInputs, from_cfg
from verlsweep.plan.verdict import Verdict, blocks_launch, load_calibration, plan, plan_cfg, preflight

# conf/hardware/auto.yaml resolves to an explanation; importing the planner (task.py does) makes that
# resolver known to the sweep process before its config is resolved.
register_resolver()

__all__ = ["NotPlannable", "PlanInputs", "Verdict", "blocks_launch", "from_cfg", "load_calibration",
           "plan", "plan_cfg", "preflight"]
