"""runner=script: the user's recipe script, run as it is with the trial's knobs set the way it takes them.

verlsweep.command.recipe_config made the trial's config the script's own and found, by capture, how
each knob reaches it (an environment variable it reads, else an override appended where it passes
"$@" on); the prepared Command carries that launch. This runner starts `bash <script> <args>` under
those variables, the verl argv it launches being the one recorded (and planned) for the trial.
"""
from __future__ import annotations

from verlsweep.command.recipe_capture import script_path
from verlsweep.common.errors import ConfigError, Problem
from verlsweep.config import ScriptRunnerConfig
from verlsweep.trial.runners.base import RunSpec
from verlsweep.trial.runners.process import ProcessRunner


class ScriptRunner(ProcessRunner):
    name = "script"

    def problems(self, spec: RunSpec) -> list[Problem]:
        runner = spec.options
        assert isinstance(runner, ScriptRunnerConfig)
        try:
            script_path(runner.script)
        except ConfigError as exc:
            return exc.problems
        return []

    def command(self, spec: RunSpec) -> tuple[list[str], dict[str, str]]:
        launch = spec.command.script
        if launch is None:
            raise ConfigError([Problem("runner.script", None, "a recipe script, prepared by verlsweep.prepare "
                                       "(recipe=path/to/run.sh)")])
        return ["bash", str(launch["script"]), *launch["args"]], dict(launch["env"])
