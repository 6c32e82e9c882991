"""verlsweep.study.subsets: device groups of one node for concurrent trials, and the requests refused."""
from __future__ import annotations

import optuna
from omegaconf import OmegaConf

from verlsweep.study import subsets

NODE = OmegaConf.create({"hardware": {"devices_per_node": 8, "nnodes": 1,
                                      "visible_devices_env": "ASCEND_RT_VISIBLE_DEVICES"},
                         "verl": {"actor_rollout_ref": {"rollout": {"tensor_model_parallel_size": 2}}}})
TP_SPACE = {subsets.TP: optuna.distributions.CategoricalDistribution([1, 2, 4])}


def test_groups_are_disjoint_and_each_slot_gets_its_devices_its_ports_and_the_world_size():
    groups, problems = subsets.device_groups(NODE, 4, 2, TP_SPACE, "async")
    assert problems == [] and groups.groups == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert groups.shared() == ["hardware.devices_per_node=4"]
    assert groups.slot(1) == ["++env.ASCEND_RT_VISIBLE_DEVICES='4,5,6,7'", "++env.HCCL_IF_BASE_PORT=60064"]


def test_a_group_size_that_does_not_divide_the_node_is_refused_naming_the_key():
    _, (problem,) = subsets.device_groups(NODE, 3, 2, {}, "async")
    assert problem.key == subsets.KEY and "1, 2, 4" in problem.allowed


def test_more_trials_than_groups_a_tp_the_group_cannot_hold_and_batches_are_refused():
    _, problems = subsets.device_groups(NODE, 2, 5, TP_SPACE, "batch")
    assert {p.key: p.value for p in problems} == {"hydra.sweeper.n_jobs": 5, "hydra.sweeper.schedule": "batch",
                                                  subsets.TP: [4]}


def test_the_fixed_tp_counts_when_the_space_does_not_sweep_it():
    _, (problem,) = subsets.device_groups(NODE, 1, 4, {}, "async")
    assert (problem.key, problem.value) == (subsets.TP, [2])


def test_no_request_no_groups():
    assert subsets.device_groups(NODE, None, 4, TP_SPACE, "async") == (None, [])
