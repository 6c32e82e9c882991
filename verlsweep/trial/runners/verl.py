"""runner=verl: the composed `python -m verl.trainer.main_ppo <overrides>` as a supervised process."""
from __future__ import annotations

from verlsweep.trial.runners.base import RunSpec
from verlsweep.trial.runners.process import ProcessRunner, resolve_entrypoint


class VerlRunner(ProcessRunner):
    name = "verl"

    def command(self, spec: RunSpec) -> tuple[list[str], dict[str, str]]:
        return resolve_entrypoint(spec.command.argv, spec.command.entrypoint_len), {}
