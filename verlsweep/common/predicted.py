"""The planner's numbers as a trial records them (`plan/...`, verlsweep.plan.predictor.verdict.Verdict.metrics),
read back the one way every view reads them."""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

PHASE_PEAK_PREFIX = "plan/peak_gb/"     # + a phase: the predicted HBM per device in that phase


def device_peak(predicted: Mapping[str, Any]) -> tuple[float, str] | None:
    """The highest predicted HBM per device over a step's phases, and that phase: what util, TP and offload
    move (the trainer's allocator peak, plan/trainer_peak_gb, does not move with util). None: no phases."""
    phases = {k[len(PHASE_PEAK_PREFIX):]: float(v) for k, v in predicted.items()
              if k.startswith(PHASE_PEAK_PREFIX) and isinstance(v, (int, float)) and not isinstance(v, bool)
              and math.isfinite(v)}
    if not phases:
        return None
    phase = max(phases, key=lambda p: phases[p])
    return phases[phase], phase
