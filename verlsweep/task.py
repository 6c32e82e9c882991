"""The job Hydra runs for every trial: compose -> (dry run | plan -> run -> track)."""
from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from verlsweep.compose import build_trial
from verlsweep.errors import ConfigError

log = logging.getLogger("verlsweep")


def output_dir() -> Path:
    """The job's own output dir (hydra.run.dir, or the sweep subdir of this trial)."""
    return Path(HydraConfig.get().runtime.output_dir)


def dry_run(cfg: DictConfig) -> None:
    """Print the trial as bash and write command.json; launch nothing."""
    trial = build_trial(cfg, require_paths=False)
    for warning in trial.warnings:
        log.warning("dry run: %s", warning)
    path = trial.write(output_dir())
    sys.stdout.write(f"# verlsweep dry run: {path}\n{trial.to_bash()}")
    sys.stdout.flush()


def run(cfg: DictConfig) -> Any:
    """Entry of sweep.py. Returns the trial's measurement to the sweeper (None for a dry run)."""
    if cfg.dry_run:
        dry_run(cfg)
        return None
    trial = build_trial(cfg)
    trial.write(output_dir())
    raise NotImplementedError("launching trials arrives with the trial runner (runner=verl)")


def is_multirun() -> bool:
    return HydraConfig.get().mode == RunMode.MULTIRUN


def exit_on_config_error(exc: ConfigError) -> None:
    """A single run ends with the message alone (exit 2), no traceback: it is the user's input."""
    sys.stderr.write(f"verlsweep: {exc}\n")
    raise SystemExit(2)
