"""MLflow run joining and the file logger: verl's own ``Tracking`` (``verl/utils/tracking.py``, executed from
the installed file) built at fit start, fed each step's metrics and finished where verl finishes it."""
from __future__ import annotations

import sys
from typing import Any

from tests.support.standin.console import _emit, concat_dict_to_str
from tests.support.standin.ray_actors import ray_task_error
from tests.support.standin.sources import _load_verl_tracking


class TrackingMixin:
    """StandinRun's tracking (it provides ``shape``, ``_runner_text``, ``_with_actor_streams`` and ``say``)."""

    # -- tracking ----------------------------------------------------------------------------------------------
    def _start_tracking(self, config: Any, OmegaConf: Any) -> BaseException | None:
        shape = self.shape
        module = _load_verl_tracking()
        supported = list(module.Tracking.supported_backend)
        bad = [b for b in shape.loggers if b != "tracking" and b not in supported]
        if bad:
            text = self._runner_text("tracking", f"AssertionError: {bad[0]} is not supported")
            return ray_task_error("AssertionError", text)
        simulated = [b for b in shape.loggers if b in ("mlflow", "file")]
        for other in shape.loggers:
            if other not in ("mlflow", "file", "console"):
                _emit(sys.stderr, f"[verl-standin] logger backend {other!r} is not simulated; skipped")
        self.console = "console" in shape.loggers
        container = OmegaConf.to_container(config, resolve=True)
        self.tracking = self._with_actor_streams(
            lambda: module.Tracking(
                project_name=shape.project,
                experiment_name=shape.experiment,
                default_backend=simulated,
                config=container,
            )
        )
        return None

    def log(self, data: dict[str, Any], step: int) -> None:
        if self.console:
            self.say(concat_dict_to_str(data, step))
        if self.tracking is not None:
            self._with_actor_streams(lambda: self.tracking.log(data=data, step=step))

    def finish(self, exit_code: int) -> None:
        if self.tracking is not None:
            self._with_actor_streams(lambda: self.tracking.finish(exit_code=exit_code))
