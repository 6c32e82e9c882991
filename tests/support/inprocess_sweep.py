"""The verlsweep sweeper, run in the test's own process over tests/support/sweeper_app.py's landscape.

For tests whose claim needs many trials (what a sampler learns from 30 of them): a subprocess sweep
pays a Hydra compose per job, most of a synthetic trial's cost. Here everything but the launcher is
real: Hydra's compose API builds the sweep's config (its `hydra` node included), Hydra's plugin
registry instantiates the verlsweep sweeper, whose own code parses and checks the space and runs the
study loop (ask, tell, trials.csv, the study in its sqlite storage). The launcher composes no job: it
sets each job's overrides on the one composed config and calls the app's task with it. For plain keys
(the swept params, the trial's `+trial.*` links) that is the config Hydra's compose would give, as
every job sets the same keys (checked: a copy of the config costs as much as a compose); a group
override other than the composed choice is refused, as composing it needs Hydra.
"""
from __future__ import annotations

import copy
import os
from collections.abc import Sequence
from pathlib import Path

import yaml
from hydra import compose, initialize_config_dir
from hydra._internal.callbacks import Callbacks
from hydra.core.global_hydra import GlobalHydra
from hydra.core.hydra_config import HydraConfig
from hydra.core.plugins import Plugins
from hydra.core.utils import JobReturn, JobStatus
from hydra.types import HydraContext
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from tests.support import sweeper_app

CONF = Path(__file__).resolve().parents[2] / "conf"


class ConfigCopyLauncher:
    """launch(batch, initial_job_idx) as Hydra's launchers answer it, one job after another."""

    def __init__(self, config: DictConfig) -> None:
        self.cfg = copy.deepcopy(config)
        with read_write(self.cfg), open_dict(self.cfg):
            self.choices = dict(self.cfg.hydra.runtime.choices)
            del self.cfg["hydra"]
        self.keys: set[str] | None = None         # what the first job set: every job sets the same

    def launch(self, batch: Sequence[Sequence[str]], initial_job_idx: int) -> list[JobReturn]:
        return [self._run(list(overrides)) for overrides in batch]

    def _run(self, overrides: list[str]) -> JobReturn:
        cfg, keys = self.cfg, set()
        with read_write(cfg), open_dict(cfg):
            for item in overrides:
                key, value = item.split("=", 1)
                key = key.lstrip("+")
                if key.startswith("hydra."):
                    continue
                if key in self.choices:
                    if str(self.choices[key]) != value:
                        raise ValueError(f"{item}: a config group choice needs Hydra's compose")
                    continue
                OmegaConf.update(cfg, key, yaml.safe_load(value), force_add=True)
                keys.add(key)
        if self.keys is None:
            self.keys = keys
        assert keys == self.keys, f"a job sets {sorted(keys ^ self.keys)} unlike the first: it needs a compose"
        ret = JobReturn(overrides=overrides, cfg=cfg, task_name="sweeper_app")
        try:
            ret.return_value = sweeper_app.main.__wrapped__(cfg)
            ret.status = JobStatus.COMPLETED
        except Exception as exc:  # noqa: BLE001 - the job's failure, as Hydra's run_job records it
            ret.return_value, ret.status = exc, JobStatus.FAILED
        return ret


def sweep(sweep_dir: Path, overrides: Sequence[str]) -> None:
    """`python tests/support/sweeper_app.py -m <overrides>` run in sweep_dir's parent (where the default
    storage is), with the job launcher above; raises what the sweep raises (SystemExit for a refused
    space)."""
    cwd = os.getcwd()
    os.chdir(sweep_dir.parent)
    try:
        _sweep(sweep_dir, overrides)
    finally:
        os.chdir(cwd)
        HydraConfig.instance().cfg = None       # a later test in this worker is outside any Hydra job
        GlobalHydra.instance().clear()


def _sweep(sweep_dir: Path, overrides: Sequence[str]) -> None:
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3", job_name="sweeper_app"):
        config = compose("sweep", overrides=[*overrides, f"hydra.sweep.dir={sweep_dir}"], return_hydra_config=True)
        HydraConfig.instance().set_config(config)
        context = HydraContext(config_loader=GlobalHydra.instance().config_loader(), callbacks=Callbacks(config))
        sweeper = Plugins.instance().instantiate_sweeper(config=config, hydra_context=context,
                                                         task_function=sweeper_app.main.__wrapped__)
        sweeper._impl.launcher = ConfigCopyLauncher(config)     # the registered class wraps the implementation
        sweeper.sweep(arguments=[a for a in overrides if not a.startswith(("hydra.", "hydra/"))])
