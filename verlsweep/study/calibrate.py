"""Before a sweep plans: the planner calibrated on the trials already measured on this software stack
(verlsweep.plan.fit.stack_calibration), written into the sweep dir as calibration.yaml so every trial's
preflight plans with the constants the guide ranked with, and said in one line.

`plan.calibrate=false` turns it off; `plan.calibration=FILE` (one exported with
`python -m verlsweep.plan calibrate --out FILE`) is the starting point it refits, or, off, what plans.
"""
from __future__ import annotations

import logging
from pathlib import Path

from omegaconf import DictConfig

from verlsweep.plan import load_calibration
from verlsweep.plan.fit import calibration_file
from verlsweep.plan.fit.stack_calibration import StackCalibration, for_config

log = logging.getLogger("verlsweep.study.calibrate")

FILE_NAME = "calibration.yaml"


def for_sweep(config: DictConfig, sweep_dir: Path) -> tuple[StackCalibration | None, Path | None]:
    """The stack calibration the sweep plans with (None: off, or no tracking store to read), and the
    calibration file written into `sweep_dir` when its constants changed."""
    try:
        result = for_config(config)
    except Exception as exc:  # noqa: BLE001 - an unreadable store must not stop the sweep: plan as packaged
        log.warning("planner not calibrated: the tracking store could not be read (%s)", exc)
        return None, None
    if result is None:          # plan.calibrate=false, tracking off, or no store yet
        return None, None
    log.info("%s", result.line())
    if not result.calibrated:
        return result, None
    path = calibration_file.write(load_calibration(config), result.calibration.constants, Path(sweep_dir) / FILE_NAME,
                                  note=result.line())
    return result, path
