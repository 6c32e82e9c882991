"""One colour per way a trial ends, the same in report.html's plots (verlsweep.report.plots) and in the
MLflow UI, where a run's colour (tag `mlflow.runColor`, verlsweep.tracking.run_columns) colours its row and
its points in every chart."""
from __future__ import annotations

OUTCOME_COLOURS: dict[str, str] = {
    "completed": "#2b8a3e", "pruned": "#868e96", "oom": "#e03131", "infeasible": "#f08c00",
    "hccl_timeout": "#7048e8", "hang": "#1971c2", "timeout": "#1098ad", "crash": "#000000",
    "config_error": "#c2255c", "no_devices": "#5c940d", "ruled out": "#ae3ec9",
    "unschedulable": "#e8590c",
    # never launched: a measurement of this study told again (its source is `completed`)
    "reused": "#8ce99a",
    "running": "#ced4da",
}
# any other outcome (preempted, interrupted, orphaned ...)
OTHER_COLOUR = "#495057"
