"""The Sweeper class Hydra finds in the `hydra_plugins` namespace.

Kept thin: Hydra imports this module on every run while scanning plugins, so the implementation (and
optuna) is imported only when the sweeper is actually used (hydra-optuna-sweeper does the same).
"""
from typing import Any

from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

from hydra_plugins.verlsweep_sweeper import config as _registered  # noqa: F401  (registers the config groups)


class VerlSweepSweeper(Sweeper):
    def __init__(self, **kwargs: Any) -> None:
        from hydra_plugins.verlsweep_sweeper._impl import VerlSweepImpl, settings_from

        self._impl = VerlSweepImpl(settings_from(kwargs))

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self._impl.setup(hydra_context=hydra_context, task_function=task_function, config=config)

    def sweep(self, arguments: list[str]) -> Any:
        return self._impl.sweep(arguments)
