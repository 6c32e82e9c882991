"""The Ray CPUs verl 0.9.1 asks for before its first step, against the CPUs the trial's Ray will have.

Ray never says a placement group cannot be satisfied: `placement_group.ready()` just waits. A trial whose
Ray has fewer CPUs than verl reserves therefore sits silent until `runner.startup_timeout`. Each term below
is read in the installed sources (the unit tests compare every default with them):

* TaskRunner / TaskRunnerV1 (verl/trainer/main_ppo.py, main_ppo_v0.py: bare `@ray.remote`) and the
  actors verl creates after its placement groups with no resources (RewardLoopWorker in
  verl/experimental/reward_loop/reward_loop.py `_init_reward_loop_workers`, AgentLoopWorker,
  vLLMHttpServer) hold no CPU but need one free to be placed: ray/actor.py `_remote` gives such actors
  placement resources of DEFAULT_ACTOR_METHOD_CPU_SIMPLE (1) CPU (ray/_private/ray_constants.py).
* v1 only (`trainer.use_v1`): TaskRunnerV1.run calls `transfer_queue.init`, which starts the
  TransferQueueController (transfer_queue/controller.py, `@ray.remote(num_cpus=1)`) and, for the
  SimpleStorage backend, a placement group of `num_data_storage_units` bundles of one CPU
  (transfer_queue/storage/bootstrap/simple_storage_bootstrap.py `initialize_simple_storage` ->
  transfer_queue/utils/common.py `get_placement_group`), then waits on it without a timeout.
* Worker groups: one placement group per node of `n_gpus_per_node` bundles `{"CPU": max_colocate_count,
  device: 1}` (verl/single_controller/ray/base.py `RayResourcePool.get_placement_groups`), with
  `ResourcePoolManager.max_colocate_count` = 3, for the global pool, the reward-model pool when
  `reward.reward_model.enable_resource_pool` and the teacher pool when `distillation.enabled`
  (verl/trainer/ppo/v1/trainer_base.py `_setup`, verl/trainer/main_ppo_v0.py `init_resource_pool_mgr`).
* `reward.reward_manager.name=remote`: every reward loop worker starts `reward.num_workers`
  RewardComputeWorker actors of one CPU each (verl/experimental/reward_loop/reward_manager/remote.py).

The CPUs: `ray_kwargs.ray_init.num_cpus` when set (verl passes ray_init to `ray.init`; Ray's CPUs are
logical and may exceed the cores), else `hardware.cpus` (a profile for a node other than this one), else
what this process may use: the smallest of its CPU affinity, its cgroup quota and SLURM_CPUS_ON_NODE
(Ray itself counts os.cpu_count() capped by the cgroup quota, ray/_private/utils.py `get_num_cpus`, and
would oversubscribe an affinity-limited job). Each is per node, times `trainer.nnodes`.
"""
from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verlsweep.common.errors import ConfigError, Problem
from verlsweep.plan.predictor.verl_config import VerlValues

# verl 0.9.1 defaults of the keys read here (verl/trainer/config/ppo_trainer.yaml and its groups).
RAY_DEFAULTS: dict[str, Any] = {
    "trainer.use_v1": True,
    "trainer.n_gpus_per_node": 8,
    "trainer.nnodes": 1,
    "transfer_queue.backend.storage_backend": "SimpleStorage",
    "transfer_queue.backend.SimpleStorage.num_data_storage_units": 8,
    "reward.num_workers": 8,
    "reward.reward_manager.name": "naive",
    "reward.reward_model.enable_resource_pool": False,
    "reward.reward_model.n_gpus_per_node": 8,
    "reward.reward_model.nnodes": 0,
    "distillation.enabled": False,
    "distillation.n_gpus_per_node": 8,
    "distillation.nnodes": 0,
    "ray_kwargs.ray_init.num_cpus": None,
}
# Constants of the installed code (not config keys); tests/test_ray_demand.py reads each from its source.
TQ_CONTROLLER_CPUS = 1          # transfer_queue/controller.py TransferQueueController
TQ_STORAGE_UNIT_CPUS = 1        # simple_storage_bootstrap.py get_placement_group(..., num_cpus_per_actor=1)
MAX_COLOCATE_COUNT = 3          # verl/single_controller/ray/base.py ResourcePoolManager.max_colocate_count
REMOTE_REWARD_WORKER_CPUS = 1   # reward_manager/remote.py RewardComputeWorker
DEFAULT_ACTOR_PLACEMENT_CPUS = 1  # ray/_private/ray_constants.py DEFAULT_ACTOR_METHOD_CPU_SIMPLE

STORAGE_KEY = "verl.transfer_queue.backend.SimpleStorage.num_data_storage_units"
NUM_CPUS_KEY = "verl.ray_kwargs.ray_init.num_cpus"
CGROUP_ROOT = Path("/sys/fs/cgroup")


@dataclass(frozen=True)
class Term:
    """CPUs one part of verl reserves in Ray for the whole run."""

    name: str
    cpus: float
    key: str | None = None          # the config key that changes it, if any

    def describe(self) -> str:
        return f"{self.name} {self.cpus:g}" + (f" ({self.key})" if self.key else "")


@dataclass(frozen=True)
class Demand:
    terms: tuple[Term, ...]
    per_node: float                 # the largest single-node reservation (a STRICT_PACK worker group)

    @property
    def total(self) -> float:
        return sum(t.cpus for t in self.terms)


@dataclass(frozen=True)
class Supply:
    per_node: float
    nnodes: int
    source: str                     # where the figure came from, for the message
    key: str                        # the key that sets it

    @property
    def total(self) -> float:
        return self.per_node * self.nnodes


@dataclass(frozen=True)
class CpuCheck:
    demand: Demand
    supply: Supply

    @property
    def ok(self) -> bool:
        return self.demand.total <= self.supply.total and self.demand.per_node <= self.supply.per_node

    def brief(self) -> str:
        """The counts alone: `verl asks for 25 Ray CPUs, the trial's Ray has 2 (2 = CPU affinity ...)`."""
        return (f"verl asks for {self.demand.total:g} Ray CPUs, the trial's Ray has {self.supply.total:g} "
                f"({self.supply.source})")

    def message(self) -> str:
        d, s = self.demand, self.supply
        head = (f"Ray CPUs: verl asks for {d.total:g} before its first step but the trial's Ray has "
                f"{s.total:g} ({s.source}"
                + (f" x {s.nnodes} nodes" if s.nnodes > 1 else "") + ")")
        parts = "; ".join(t.describe() for t in d.terms if t.cpus)
        if self.ok:
            return f"{head}: {parts}"
        keys = [t.key for t in d.terms if t.key and t.cpus]
        fix = (f"lower {' or '.join(keys)}, or " if keys else "") + f"give Ray more CPUs with {NUM_CPUS_KEY}"
        if s.key != NUM_CPUS_KEY:
            fix += f" (logical CPUs; may exceed the cores) or {s.key}"
        return f"{head}: {parts}. Ray would wait for them forever; {fix}"


def demand(cfg: Mapping[str, Any]) -> Demand:
    """What verl 0.9.1 reserves in Ray for a trial (`cfg`: its TaskConfig, the composed config or a plain
    tree of it)."""
    v = VerlValues(cfg, RAY_DEFAULTS)
    per_node_devices = int(v.get("trainer.n_gpus_per_node"))
    nnodes = int(v.get("trainer.nnodes"))
    terms = [Term("one free CPU for TaskRunner and the reward/agent loop workers", DEFAULT_ACTOR_PLACEMENT_CPUS)]
    if bool(v.get("trainer.use_v1")):
        terms.append(Term("TransferQueue controller", TQ_CONTROLLER_CPUS))
        if v.get("transfer_queue.backend.storage_backend") == "SimpleStorage":
            units = int(v.get("transfer_queue.backend.SimpleStorage.num_data_storage_units"))
            terms.append(Term(f"TransferQueue SimpleStorage placement group ({units} units)",
                              units * TQ_STORAGE_UNIT_CPUS, STORAGE_KEY))
    pools = [("worker groups", per_node_devices, nnodes, "trainer.n_gpus_per_node")]
    if bool(v.get("reward.reward_model.enable_resource_pool")):
        pools.append(("reward model pool", int(v.get("reward.reward_model.n_gpus_per_node")),
                      int(v.get("reward.reward_model.nnodes")), "reward.reward_model.n_gpus_per_node"))
    if bool(v.get("distillation.enabled")):
        pools.append(("teacher pool", int(v.get("distillation.n_gpus_per_node")),
                      int(v.get("distillation.nnodes")), "distillation.n_gpus_per_node"))
    for name, devices, nodes, key in pools:
        # fixed by the devices the trial uses, so no key to lower is offered for it
        terms.append(Term(f"{name} ({nodes}x{devices} devices from verl.{key} x {MAX_COLOCATE_COUNT})",
                          float(devices * nodes * MAX_COLOCATE_COUNT)))
    if v.get("reward.reward_manager.name") == "remote":
        workers = int(v.get("reward.num_workers"))
        terms.append(Term(f"remote reward manager ({workers} loop workers x {workers})",
                          float(workers * workers * REMOTE_REWARD_WORKER_CPUS), "verl.reward.num_workers"))
    per_node = max([d * MAX_COLOCATE_COUNT for _, d, _, _ in pools] or [0])
    return Demand(tuple(terms), float(per_node))


def supply(cfg: Mapping[str, Any], *, local: bool = True, env: Mapping[str, str] | None = None) -> Supply | None:
    """The CPUs the trial's Ray will have, or None when unknown (`local=False` and nothing stated)."""
    v = VerlValues(cfg, RAY_DEFAULTS)
    nnodes = max(1, int(v.get("trainer.nnodes")))
    num_cpus = v.get("ray_kwargs.ray_init.num_cpus")
    if num_cpus is not None:
        return Supply(_count(NUM_CPUS_KEY, num_cpus), nnodes, f"{NUM_CPUS_KEY}={num_cpus}", NUM_CPUS_KEY)
    stated = (cfg.get("hardware") or {}).get("cpus")
    if stated is not None:
        return Supply(_count("hardware.cpus", stated), nnodes, f"hardware.cpus={stated}", "hardware.cpus")
    if not local:
        return None
    cpus, source = local_cpus(os.environ if env is None else env)
    return Supply(cpus, nnodes, source, "hardware.cpus")


def _count(key: str, value: Any) -> float:
    try:
        cpus = float(value)
    except (TypeError, ValueError):
        cpus = -1.0
    if isinstance(value, bool) or cpus <= 0:
        raise ConfigError([Problem(key, value, "a positive number of CPUs (or null)")])
    return cpus


def local_cpus(env: Mapping[str, str]) -> tuple[float, str]:
    """The CPUs this process may use and what limits them."""
    found = [(float(len(os.sched_getaffinity(0))), "CPU affinity of this process")]
    quota = cgroup_quota()
    if quota is not None:
        found.append((quota, "cgroup CPU quota"))
    slurm = env.get("SLURM_CPUS_ON_NODE", "").strip()
    if slurm.isdigit():
        found.append((float(slurm), "SLURM_CPUS_ON_NODE"))
    cpus, source = min(found)
    return cpus, f"{cpus:g} = {source}"


def cgroup_quota(root: Path = CGROUP_ROOT) -> float | None:
    """CPUs allowed by the cgroup quota (v2 cpu.max, else v1 cfs quota/period), floored like Ray does."""
    try:
        quota, period = (root / "cpu.max").read_text().split()[:2]
        if quota == "max":
            return None
        return float(max(1, math.floor(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    try:
        quota_us = int((root / "cpu" / "cpu.cfs_quota_us").read_text())
        period_us = int((root / "cpu" / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return None if quota_us <= 0 else float(max(1, math.floor(quota_us / period_us)))


def check(cfg: Mapping[str, Any], *, local: bool = True, env: Mapping[str, str] | None = None) -> CpuCheck | None:
    """Demand against supply, or None when the supply is unknown."""
    found = supply(cfg, local=local, env=env)
    return None if found is None else CpuCheck(demand(cfg), found)
