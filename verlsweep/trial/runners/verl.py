"""runner=verl: the composed `python -m verl.trainer.main_ppo <overrides>` as a supervised process."""
from __future__ import annotations

from omegaconf import DictConfig

from verlsweep.command.compose import Command
from verlsweep.trial.runners.process import ProcessRunner, resolve_entrypoint


class VerlRunner(ProcessRunner):
    name = "verl"

    def command(self, cfg: DictConfig, trial: Command) -> tuple[list[str], dict[str, str]]:
        return resolve_entrypoint(trial.argv, trial.entrypoint_len), {}
