"""The Ray cluster of a multi-node trial (verlsweep/trial/ray_cluster.py): which trial gets one and what it
spans. Starting one for real (head and worker under `srun -w <host>`, every device registered, not one Ray
process left after `stop()`) is tests/e2e/test_ray_cluster_processes.py. `srun` and `scontrol` are faked by
tests/support/fake_slurm/.
"""
from __future__ import annotations

import os

from tests.support.trial_helpers import REPO
from verlsweep.trial import ray_cluster

FAKE_BIN = REPO / "tests" / "support" / "fake_slurm"


def test_only_a_multi_node_trial_inside_an_allocation_gets_a_cluster():
    inside = {"SLURM_JOB_NODELIST": "n[1-2]"}
    assert ray_cluster.wanted(2, inside, None)
    assert not ray_cluster.wanted(1, inside, None)          # single node: its private local Ray
    assert not ray_cluster.wanted(2, {}, None)               # no allocation to span
    assert not ray_cluster.wanted(2, inside, "10.0.0.1:6379")  # the user's own cluster


def test_a_two_node_trial_in_an_allocation_spans_its_nodes_with_the_hardware_groups_devices(tmp_path):
    from verlsweep.command.compose import compose_config
    from verlsweep.config import read
    from verlsweep.trial.runners.process import multi_node_cluster

    env = {**os.environ, "PATH": f"{FAKE_BIN}:{os.environ['PATH']}", "SLURM_JOB_NODELIST": "nodeA,nodeB",
           "SLURM_CPUS_PER_TASK": "48"}
    cluster = multi_node_cluster(read(compose_config(["hardware=a2_64g", "hardware.nnodes=2"])).hardware, None, env,
                                 tmp_path)
    assert cluster is not None
    assert (cluster.spec.hosts, cluster.spec.resource, cluster.spec.expected_devices, cluster.spec.cpus_per_node) == \
        (["nodeA", "nodeB"], "NPU", 16, 48)
    assert multi_node_cluster(read(compose_config(["hardware=a2_64g"])).hardware, None, env, tmp_path) is None
