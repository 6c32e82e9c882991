"""runner=script: an existing recipe script, its knobs set through its environment variables.

The script (runner.script) is run as `<runner.entrypoint> <script> <overrides>`. Knobs listed in
runner.env_map go to the variables the script reads (`ROLLOUT_TP=${ROLLOUT_TP:-2}` style); the trial's
other overridden verl values, plus runner.always, are appended as Hydra overrides, which the script
forwards to verl with "$@".
"""
from __future__ import annotations

from pathlib import Path

from verlsweep.command.compose import Command
from verlsweep.command.overrides import format_value
from verlsweep.common.errors import ConfigError, Problem
from verlsweep.config import ScriptRunnerConfig
from verlsweep.trial.runners.base import RunSpec
from verlsweep.trial.runners.process import ProcessRunner, resolve_entrypoint

FORWARD_MODES = ("overrides", "all")


class ScriptRunner(ProcessRunner):
    name = "script"

    def problems(self, spec: RunSpec) -> list[Problem]:
        runner = spec.options
        assert isinstance(runner, ScriptRunnerConfig)
        found = []
        if not runner.script or not Path(runner.script).is_file():
            found.append(Problem("runner.script", runner.script, "path of an existing recipe script: "
                                 "runner.script=/path/to/run_recipe.sh (or set VERLSWEEP_RECIPE_SCRIPT)"))
        if runner.forward not in FORWARD_MODES:
            found.append(Problem("runner.forward", runner.forward, f"one of {', '.join(FORWARD_MODES)}"))
        return found

    def command(self, spec: RunSpec) -> tuple[list[str], dict[str, str]]:
        runner = spec.options
        assert isinstance(runner, ScriptRunnerConfig)
        if found := self.problems(spec):
            raise ConfigError(found)
        script, mode = runner.script, runner.forward
        assert script is not None

        env_map = runner.env_map
        composed = spec.verl
        env = {var: format_env(composed[key]) for var, key in env_map.items() if key in composed}

        mapped = set(env_map.values())
        if mode == "all":
            keys = list(composed)
        else:
            keys = [*spec.knobs, *runner.always]
        forwarded = _overrides_by_key(spec.command)
        args = [forwarded[k] for k in dict.fromkeys(keys) if k not in mapped and k in forwarded]
        entry = list(runner.entrypoint)
        argv = resolve_entrypoint([*entry, str(Path(script).resolve())], len(entry))
        return [*argv, *args], env


def _overrides_by_key(trial: Command) -> dict[str, str]:
    """The composed trial's own override strings (with their `+` where verl needs it), by key."""
    out = {}
    for override in trial.overrides:
        key = override.split("=", 1)[0].lstrip("+")
        out[key] = override
    return out


def format_env(value: object) -> str:
    """Env values as a recipe script splices them into `key=$VAR`: strings raw, the rest in verl's
    override syntax (True/False, [a,b])."""
    return value if isinstance(value, str) else format_value(value)
