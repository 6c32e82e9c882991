"""OmegaConf resolvers a search space may use.

`${verlsweep.tp_choices:}` expands, in the sweeper's process, to `choice(...)` over the rollout TP
sizes the composed hardware x model can run (verlsweep.command.topology.tp_choices: divisors of the device
count that split the attention heads), so a search space never proposes a TP the validator rejects.
"""
from __future__ import annotations

from typing import Any

from omegaconf import OmegaConf

TP_CHOICES = "verlsweep.tp_choices"


def tp_choices(*, _root_: Any) -> str:
    from verlsweep.command.topology import tp_choices as allowed

    return "choice(" + ",".join(str(tp) for tp in allowed(_root_)) + ")"


def register() -> None:
    from verlsweep.command import argv

    # replace=True: Hydra's plugin scan may execute this module more than once in a process
    OmegaConf.register_new_resolver(TP_CHOICES, tp_choices, replace=True)
    argv.register_resolvers()    # `python sweep.py --help` lists the groups through it
