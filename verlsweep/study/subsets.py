"""Device subsets of one node (`study.devices_per_trial=K`): concurrent trials on disjoint devices.

An 8-device node runs 8/K trials at once, each on its own K devices: the trial's visible-devices
variable (`hardware.visible_devices_env`: ASCEND_RT_VISIBLE_DEVICES, CUDA_VISIBLE_DEVICES) names its
group, `hardware.devices_per_node=K` sizes everything that follows from it (verl's
trainer.n_gpus_per_node, the planner's world size, the batch-divisibility checks), and HCCL's host
ports (HCCL_IF_BASE_PORT takes 32 ports from its base, CANN's environment variable reference) get a
range of their own per group. Each trial's verl starts its own local Ray, as a whole-node trial does.
A group is held by one trial from its start to its end (verlsweep.study.inflight.InFlight).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from omegaconf import DictConfig, OmegaConf

from verlsweep.command.overrides import format_value
from verlsweep.common.distributions import discrete_values
from verlsweep.common.errors import Problem

KEY = "study.devices_per_trial"
TP = "verl.actor_rollout_ref.rollout.tensor_model_parallel_size"
HCCL_BASE_PORT = 60000          # HCCL's own default base
HCCL_PORTS = 64                 # per group: HCCL takes 32 from its base; twice that leaves room


@dataclass(frozen=True)
class Subsets:
    per_trial: int
    groups: list[list[int]]
    visible_env: str

    def shared(self) -> list[str]:
        """Every trial's overrides (validated with it: a TP the subset cannot hold is a config_error)."""
        return [f"hardware.devices_per_node={self.per_trial}"]

    def slot(self, i: int) -> list[str]:
        """The overrides of the trial that holds group `i`."""
        devices = ",".join(map(str, self.groups[i]))
        return [f"++env.{self.visible_env}={format_value(devices)}",
                f"++env.HCCL_IF_BASE_PORT={HCCL_BASE_PORT + i * HCCL_PORTS}"]


def device_groups(config: DictConfig, per_trial: int | None, n_jobs: int, distributions: dict[str, Any],
                  schedule: str) -> tuple[Subsets | None, list[Problem]]:
    """The node's groups for `per_trial` devices each, or the problems with the request."""
    if per_trial is None:
        return None, []
    node = int(OmegaConf.select(config, "hardware.devices_per_node", default=0) or 0)
    problems = []
    divisors = [d for d in range(1, node + 1) if node % d == 0]
    if per_trial not in divisors or per_trial == node:
        problems.append(Problem(KEY, per_trial, f"a divisor of hardware.devices_per_node={node} below it: "
                                + ", ".join(map(str, divisors[:-1])) + " (null: whole-node trials)"))
        return None, problems
    if int(OmegaConf.select(config, "hardware.nnodes", default=1) or 1) != 1:
        problems.append(Problem(KEY, per_trial, "null with hardware.nnodes > 1: device subsets are of one node"))
    env = OmegaConf.select(config, "hardware.visible_devices_env", default=None)
    if not env:
        problems.append(Problem("hardware.visible_devices_env", env, "the variable that limits a trial's devices "
                                "(ASCEND_RT_VISIBLE_DEVICES, CUDA_VISIBLE_DEVICES)"))
    count = node // per_trial
    if n_jobs > count:
        problems.append(Problem("hydra.sweeper.n_jobs", n_jobs, f"at most {count}: {node} devices in groups of "
                                f"{KEY}={per_trial}"))
    if schedule != "async":
        problems.append(Problem("hydra.sweeper.schedule", schedule, f"async (or auto with n_jobs > 1) with {KEY}: "
                                "each trial holds its device group from its start to its end"))
    dist = distributions.get(TP)
    tps = discrete_values(dist) if dist is not None else [OmegaConf.select(config, TP, default=1)]
    bad = [v for v in tps or [] if v is not None and (int(per_trial) % int(v) != 0)]
    if bad:
        fits = [d for d in divisors if per_trial % d == 0]
        problems.append(Problem(TP, bad, f"values {KEY}={per_trial} devices can hold (a divisor of it: "
                                + ", ".join(map(str, fits)) + ")"))
    groups = [list(range(i * per_trial, (i + 1) * per_trial)) for i in range(count)]
    return (None if problems else Subsets(per_trial, groups, str(env))), problems
