"""What each trial's MLflow run carries so the runs table and its charts compare trials at a glance:

    knob params      the knobs that vary under the names the terminal and the run name use (`util`,
                     `tp`, `off`, `max_tok` ...: verlsweep.common.labels), read from the trial's label
    objective_rounded  the objective at 4 significant digits: MLflow's table prints metrics unrounded
    predicted_device_peak_gb  the planner's highest HBM per device over the phases of a step, and the
                     phase it is in (tag `plan.peak_phase`): unlike the trainer's allocator peak it moves
                     with the rollout's share (util) and the offload flags
    mlflow.runColor  one colour per outcome, so failed, pruned, infeasible, ruled-out and reused trials
                     stand apart in the table and in every chart (MLflow 3's UI reads this run tag)

verlsweep.tracking.shared_view names the same columns in the view a sweep opens on.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from verlsweep.common.labels import OFFLOAD_TOKEN, figure, knob_tokens, short_name
from verlsweep.common.outcome_colours import OTHER_COLOUR, OUTCOME_COLOURS
from verlsweep.common.predicted import device_peak

OBJECTIVE_ROUNDED = "objective_rounded"
PREDICTED_DEVICE_PEAK = "predicted_device_peak_gb"
PEAK_PHASE_TAG = "plan.peak_phase"
COLOUR_TAG = "mlflow.runColor"         # mlflow/server/js: the run colour the UI keeps per run

def colour(outcome: str, *, reused: bool = False, ruled_out: bool = False) -> dict[str, str]:
    """The run-colour tag of a trial's outcome; a reused or ruled-out trial (nothing launched) has its own."""
    key = "reused" if reused else "ruled out" if ruled_out else outcome
    return {COLOUR_TAG: OUTCOME_COLOURS.get(key, OTHER_COLOUR)}


def label_params(label: str | None) -> dict[str, str]:
    """{short name: value} from a trial's label (`util=0.90 tp=2 off=p,o`), at the label's precision."""
    out: dict[str, str] = {}
    last = None
    for token in (label or "").split():
        name, eq, value = token.partition("=")
        if eq and name:
            out[name] = value
            last = name
        elif last is not None:          # a value with a space in it
            out[last] += " " + token
    return out


def knob_names(keys: list[str]) -> list[str]:
    """The short names the labels of a sweep over `keys` use, in label order (the offload flags as one)."""
    return [token.partition("=")[0] for token in knob_tokens({k: 0 for k in keys})]


def knob_name(key: str, keys: list[str]) -> str:
    """The short name `key` goes by among `keys` in a label (an offload flag: the one `off`)."""
    name = short_name(key, keys)
    return OFFLOAD_TOKEN if name.startswith(f"{OFFLOAD_TOKEN}_") else name


def rounded(value: float) -> float:
    """The objective as the terminal and the report show it (labels.figure), as a number for MLflow."""
    return float(figure(value))


def derived(metrics: Mapping[str, Any]) -> tuple[dict[str, float], dict[str, str]]:
    """The readable objective and the predicted device peak (with its phase tag) from a run's metrics."""
    out: dict[str, float] = {}
    tags: dict[str, str] = {}
    objective = metrics.get("objective")
    if isinstance(objective, (int, float)) and _number(objective):
        out[OBJECTIVE_ROUNDED] = rounded(float(objective))
    peak = device_peak(metrics)
    if peak is not None:
        out[PREDICTED_DEVICE_PEAK] = round(peak[0], 2)
        tags[PEAK_PHASE_TAG] = peak[1]
    return out, tags


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
