"""verl's Ray CPU demand against the trial's CPUs (verlsweep/plan/predictor/ray_demand.py).

Every demand term is compared with the installed verl / TransferQueue / Ray source it is read from, so a
default that changes upstream fails here rather than silently mis-planning.
"""
from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import pytest
from omegaconf import OmegaConf

from verlsweep.command.compose import compose_config
from verlsweep.plan import blocks_launch, preflight
from verlsweep.plan.predictor import ray_demand
from verlsweep.plan.predictor.ray_demand import RAY_DEFAULTS

STORAGE = "verl.transfer_queue.backend.SimpleStorage.num_data_storage_units"


def source(module: str) -> tuple[Path, ast.Module]:
    """A module's installed file, found without importing it (verl's packages import torch)."""
    top, *rest = module.split(".")
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip(f"{top} is not installed")
    path = Path(next(iter(spec.submodule_search_locations))).joinpath(*rest).with_suffix(".py")
    return path, ast.parse(path.read_text())


def node_named(tree: ast.AST, kind: type, name: str) -> ast.AST:
    found = [n for n in ast.walk(tree) if isinstance(n, kind) and getattr(n, "name", None) == name]
    assert found, f"{name} not found"
    return found[0]


def remote_kwargs(module: str, cls: str) -> dict[str, object] | None:
    """The keyword arguments of `@ray.remote(...)` on `cls`; {} for a bare `@ray.remote`, None if absent."""
    _, tree = source(module)
    for deco in node_named(tree, ast.ClassDef, cls).decorator_list:
        if ast.unparse(deco) == "ray.remote":
            return {}
        if isinstance(deco, ast.Call) and ast.unparse(deco.func) == "ray.remote":
            return {k.arg: ast.literal_eval(k.value) for k in deco.keywords}
    return None


def cfg(*overrides: str):
    return compose_config(["hardware=a2_64g", "algorithm=grpo", "model=qwen3_8b", *overrides])


# ---- each term against the installed source

def test_config_defaults_read_are_those_of_the_installed_verl():
    verl_schema = pytest.importorskip("verlsweep.command.verl_schema")
    try:
        defaults = verl_schema.defaults()
    except verl_schema.VerlNotInstalled:
        pytest.skip("verl is not installed")
    differ = {k: (v, OmegaConf.select(defaults, k, default="<absent>")) for k, v in RAY_DEFAULTS.items()
              if OmegaConf.select(defaults, k, default="<absent>") != v}
    assert not differ


def test_taskrunners_are_default_actors_that_need_one_free_cpu_to_be_placed():
    assert remote_kwargs("verl.trainer.main_ppo", "TaskRunnerV1") == {}
    assert remote_kwargs("verl.trainer.main_ppo_v0", "TaskRunner") == {}
    from ray._private import ray_constants

    # ray/actor.py _remote: an actor without resources is placed with DEFAULT_ACTOR_METHOD_CPU_SIMPLE CPUs
    # and holds DEFAULT_ACTOR_CREATION_CPU_SIMPLE afterwards
    assert ray_constants.DEFAULT_ACTOR_METHOD_CPU_SIMPLE == ray_demand.DEFAULT_ACTOR_PLACEMENT_CPUS
    assert ray_constants.DEFAULT_ACTOR_CREATION_CPU_SIMPLE == 0


def test_reward_loop_workers_are_created_without_resources():
    _, tree = source("verl.experimental.reward_loop.reward_loop")
    init = ast.unparse(node_named(tree, ast.FunctionDef, "_init_reward_loop_workers"))
    assert "reward_loop_workers_class.options(" in init and "num_cpus" not in init
    assert "self.reward_loop_workers_class = ray.remote(RewardLoopWorker)" in ast.unparse(tree)


def test_transfer_queue_controller_holds_one_cpu():
    assert remote_kwargs("transfer_queue.controller", "TransferQueueController") == {
        "num_cpus": ray_demand.TQ_CONTROLLER_CPUS}


def test_simple_storage_asks_a_placement_group_of_one_cpu_per_unit():
    _, tree = source("transfer_queue.storage.bootstrap.simple_storage_bootstrap")
    init = node_named(tree, ast.FunctionDef, "initialize_simple_storage")
    (call,) = [n for n in ast.walk(init) if isinstance(n, ast.Call) and ast.unparse(n.func) == "get_placement_group"]
    assert ast.unparse(call.args[0]) == "num_data_storage_units"
    assert {k.arg: ast.literal_eval(k.value) for k in call.keywords} == {
        "num_cpus_per_actor": ray_demand.TQ_STORAGE_UNIT_CPUS}
    _, common = source("transfer_queue.utils.common")
    body = ast.unparse(node_named(common, ast.FunctionDef, "get_placement_group"))
    assert "bundle = {'CPU': num_cpus_per_actor}" in body and "ray.get(placement_group.ready())" in body


def test_only_the_v1_trainer_starts_transfer_queue():
    _, v1 = source("verl.trainer.main_ppo")
    assert "tq.init(config.transfer_queue)" in ast.unparse(node_named(v1, ast.ClassDef, "TaskRunnerV1"))
    path, _ = source("verl.trainer.main_ppo_v0")
    assert "tq.init" not in path.read_text()


def test_worker_groups_reserve_max_colocate_count_cpus_per_device():
    _, tree = source("verl.single_controller.ray.base")
    manager = node_named(tree, ast.ClassDef, "ResourcePoolManager")
    (field,) = [n for n in manager.body
                if isinstance(n, ast.AnnAssign) and ast.unparse(n.target) == "max_colocate_count"]
    assert ast.literal_eval(field.value) == ray_demand.MAX_COLOCATE_COUNT
    pgs = ast.unparse(node_named(tree, ast.FunctionDef, "get_placement_groups"))
    assert "bundle = {'CPU': self.max_colocate_count}" in pgs
    for module in ("verl.trainer.ppo.v1.trainer_base", "verl.trainer.main_ppo_v0"):
        path, _ = source(module)
        text = path.read_text()
        assert "ResourcePoolManager(resource_pool_spec=resource_pool_spec, mapping=" in text
        assert "max_colocate_count" not in text       # the dataclass default applies


def test_the_remote_reward_manager_starts_one_cpu_workers_per_reward_loop_worker():
    assert remote_kwargs("verl.experimental.reward_loop.reward_manager.remote", "RewardComputeWorker") == {
        "num_cpus": ray_demand.REMOTE_REWARD_WORKER_CPUS}
    path, _ = source("verl.experimental.reward_loop.reward_manager.remote")
    assert "for _ in range(num_reward_workers)" in path.read_text()


# ---- the arithmetic and the verdict

def test_v1_demand_is_controller_storage_units_worker_groups_and_one_free_cpu():
    d = ray_demand.demand(cfg())
    assert d.total == 1 + 1 + 8 + 8 * 3
    assert ray_demand.demand(cfg(f"{STORAGE}=2")).total == d.total - 6


def test_the_legacy_trainer_has_no_transfer_queue():
    assert ray_demand.demand(cfg("algorithm=remax")).total == 1 + 8 * 3


def test_cpus_come_from_ray_init_then_the_profile_then_this_process(monkeypatch):
    assert ray_demand.supply(cfg("+verl.ray_kwargs.ray_init.num_cpus=40", "hardware.cpus=8")).total == 40
    assert ray_demand.supply(cfg("hardware.cpus=8")).total == 8
    assert ray_demand.supply(cfg("hardware.cpus=8", "hardware.nnodes=2")).total == 16
    assert ray_demand.supply(cfg(), local=False) is None
    here = ray_demand.supply(cfg(), env={"SLURM_CPUS_ON_NODE": "1"})
    assert here.total == 1 and "SLURM_CPUS_ON_NODE" in here.source


def test_cgroup_v2_quota_is_read_and_max_means_none(tmp_path):
    (tmp_path / "cpu.max").write_text("250000 100000\n")
    assert ray_demand.cgroup_quota(tmp_path) == 2
    (tmp_path / "cpu.max").write_text("max 100000\n")
    assert ray_demand.cgroup_quota(tmp_path) is None


def test_too_few_cpus_make_the_trial_infeasible_naming_demand_cpus_and_key():
    enforced = cfg("hardware.cpus=16")
    verdict = preflight(enforced)
    assert not verdict.feasible and blocks_launch(enforced, verdict)
    assert "asks for 34" in verdict.reason and "has 16" in verdict.reason
    assert STORAGE in verdict.reason and ray_demand.NUM_CPUS_KEY in verdict.reason
    assert not blocks_launch(cfg("hardware.cpus=16", "plan.enforce=false"), verdict)
    assert preflight(cfg("hardware.cpus=34")).feasible


def test_the_cpu_check_applies_where_the_memory_model_has_no_opinion():
    verdict = preflight(cfg("verl.actor_rollout_ref.rollout.name=sglang", "hardware.cpus=4"))
    assert verdict.memory is None and not verdict.feasible


def test_a_cpu_count_that_is_not_a_positive_number_names_the_key():
    from verlsweep.common.errors import ConfigError

    with pytest.raises(ConfigError, match="hardware.cpus"):
        ray_demand.supply(cfg("hardware.cpus=lots"))
    with pytest.raises(ConfigError, match="ray_init.num_cpus"):
        ray_demand.supply(cfg("verl.ray_kwargs.ray_init.num_cpus=0"))
