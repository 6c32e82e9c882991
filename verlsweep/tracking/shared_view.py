"""The view of a sweep's experiment that the address a sweep prints opens on (MLflow 3.17's shared view,
kept in the experiment tag `mlflow.sharedViewState.<key>`, verlsweep.tracking.store).

What the UI takes from that tag (mlflow/server/js, the runs page's shared-view hook): the search facets
(`searchFilter`, `orderByKey`, `orderByAsc`, ...) and the UI state keys `selectedColumns`, `columnOrder`,
`columnWidths`, `runsHiddenMode`, `compareRunCharts`, `compareRunSections`, `isAccordionReordered`,
`hideEmptyCharts` and a few more; it drops `runsExpanded`, `runsPinned`, `runsHidden` and
`runsVisibilityMap`. The table/chart switch is the URL's `compareRunsMode` (TABLE or CHART), not state,
so the same view answers both addresses (store.ui_path).

A sweep's view (`for_sweep`): its trials best first; the outcome, the readable objective and every knob
the sweep varies (by the names the run names use) as the first columns, then the memory figures; the
chart view opens on objective and predicted device peak against the main knob and a parallel-coordinates
chart over the knobs and the objective, each trial in its outcome's colour (run_columns).
What the view cannot hold: a scatter coloured or split by a param (objective against util per TP), so
that picture is the parent run's artifact plots/util_by_tp.png (verlsweep.report.plots).
"""
from __future__ import annotations

from typing import Any

from verlsweep.tracking.run_columns import OBJECTIVE_ROUNDED, PEAK_PHASE_TAG, PREDICTED_DEVICE_PEAK

TRIALS_FILTER = "tags.`trial.number` != ''"
OUTCOME_COLUMN = "tags.`trial.outcome`"
OBJECTIVE = "objective"
TRAINER_PEAK = "peak_memory_gb"            # verl's allocator peak (verlsweep.tracking.mlflow_runs)
DEVICE_PEAK = "peak_device_hbm_gb"         # measured device HBM (verlsweep.tracking.system_metrics)
RUN_NAME_COLUMN = "attributes.`Run Name`"
CREATED_COLUMN = "runDateAndNestInfo"      # the runs table's own id of its Created column (mlflow/server/js)
KNOB_WIDTH = 76
SECTION_UUID = "verlsweep-sweep-charts"
SECTION_NAME = "verlsweep: objective and memory by knob"
MAIN_KNOB = "util"                         # the default space's knob the others are read against
# the view's table shows all trials' runs in the charts too (MLflow's default is the first 10)
SHOW_ALL = "SHOW_ALL"

# a view without a sweep (a single run's experiment): the trials, best first, with their outcome
BASE_VIEW: dict[str, Any] = {
    "selectedColumns": [OUTCOME_COLUMN, "metrics.`objective`", "metrics.`peak_memory_gb`", "attributes.`Duration`"],
    "columnWidths": {"attributes.`Run Name`": 300},
    "searchFilter": TRIALS_FILTER, "orderByKey": "metrics.`objective`", "orderByAsc": False}


def param(name: str) -> str:
    return f"params.`{name}`"


def metric(name: str) -> str:
    return f"metrics.`{name}`"


def main_knob(knobs: list[str], numeric: list[str]) -> str | None:
    """The knob the charts put on their x axis: util when swept, else the first numeric knob, else the first."""
    if MAIN_KNOB in knobs:
        return MAIN_KNOB
    return next((k for k in knobs if k in numeric), knobs[0] if knobs else None)


def _scatter(uuid: str, x: str, y: str, title: str) -> dict[str, Any]:
    return {"uuid": uuid, "type": "SCATTER", "metricSectionId": SECTION_UUID, "isGenerated": False,
            "deleted": False, "runsCountToCompare": 1000, "displayName": title,
            "xaxis": {"key": x, "type": "PARAM"}, "yaxis": {"key": y, "type": "METRIC"}}


def charts(knobs: list[str], main: str | None, measured: bool) -> list[dict[str, Any]]:
    """Objective and memory against the main knob, and the parallel coordinates of knobs and objective."""
    out: list[dict[str, Any]] = []
    if main is not None:
        out.append(_scatter("verlsweep-objective", main, OBJECTIVE, f"objective by {main}"))
        out.append(_scatter("verlsweep-predicted-peak", main, PREDICTED_DEVICE_PEAK,
                            f"predicted device peak (GB) by {main}"))
        if measured:
            out.append(_scatter("verlsweep-device-peak", main, DEVICE_PEAK, f"measured device peak (GB) by {main}"))
    if knobs:
        out.append({"uuid": "verlsweep-parallel", "type": "PARALLEL", "metricSectionId": SECTION_UUID,
                    "isGenerated": False, "deleted": False, "runsCountToCompare": 1000, "showAllRuns": True,
                    "displayName": "knobs and objective", "selectedParams": list(knobs),
                    "selectedMetrics": [OBJECTIVE]})
    return out


def for_sweep(knobs: list[str], numeric: list[str] | None = None, *, measured: bool = True,
              device_peak: bool | None = None) -> dict[str, Any]:
    """The shared view of a sweep over `knobs` (short names, run_columns.knob_names; `numeric`: those
    with numeric values); `measured`: its trials run (not runner=estimate, whose duration is its own
    milliseconds); `device_peak`: they read the devices' HBM (default: when measured)."""
    main = main_knob(knobs, list(numeric or []))
    device_peak = measured if device_peak is None else device_peak
    columns = [OUTCOME_COLUMN, metric(OBJECTIVE_ROUNDED), *map(param, knobs)]
    columns += [metric(DEVICE_PEAK)] if device_peak else []
    columns += [metric(PREDICTED_DEVICE_PEAK), f"tags.`{PEAK_PHASE_TAG}`", metric(TRAINER_PEAK)]
    columns += ["attributes.`Duration`"] if measured else []
    # the run name repeats the knobs the columns show: narrow, so the knobs start within view
    order = [RUN_NAME_COLUMN, CREATED_COLUMN, *columns]
    widths = {RUN_NAME_COLUMN: 140, CREATED_COLUMN: 110, OUTCOME_COLUMN: 90, metric(OBJECTIVE_ROUNDED): 120,
              **{param(k): KNOB_WIDTH for k in knobs}}
    return {
        "searchFilter": TRIALS_FILTER, "orderByKey": metric(OBJECTIVE), "orderByAsc": False,
        "selectedColumns": columns, "columnOrder": order, "columnWidths": widths,
        # a chart with nothing to draw yet (no completed trial, no device reading) stays out of the way
        "runsHiddenMode": SHOW_ALL, "hideEmptyCharts": True, "isAccordionReordered": True,
        "compareRunCharts": charts(knobs, main, device_peak),
        "compareRunSections": [{"uuid": SECTION_UUID, "name": SECTION_NAME, "display": True,
                                "isReordered": False, "deleted": False, "isGenerated": False}],
    }
