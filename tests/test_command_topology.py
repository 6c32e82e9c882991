"""verlsweep.command.topology: the device count and the rollout TP sizes a hardware x model can run
(used by the rules, by the sweeper's ${verlsweep.tp_choices:} and by the planner's table)."""
from __future__ import annotations

import pytest
from omegaconf import OmegaConf

from verlsweep.command.topology import tp_choices, world_size


def _cfg(per_node: int, nnodes: int, heads: int, kv: int):
    return OmegaConf.create({"hardware": {"devices_per_node": per_node, "nnodes": nnodes},
                             "model": {"config": {"num_attention_heads": heads, "num_key_value_heads": kv}}})


def test_the_world_is_devices_per_node_times_nodes():
    assert world_size(_cfg(8, 4, 32, 8)) == 32


@pytest.mark.parametrize("per_node, nnodes, heads, kv, allowed", [
    (8, 1, 32, 8, [1, 2, 4, 8]),            # qwen3_8b on one 8-device node
    (16, 1, 40, 8, [1, 2, 4, 8]),           # qwen3_14b on an A3 node: 16 does not divide 40 heads
    (16, 1, 32, 4, [1, 2, 4, 8, 16]),       # TP beyond 4 KV heads replicates them: a multiple of 4 is fine
    (8, 1, 24, 6, [1, 2]),                  # 4 neither divides 6 KV heads nor is a multiple of them
    (6, 1, 32, 8, [1, 2]),                  # TP must divide the 6 devices too
])
def test_tp_divides_devices_and_heads_and_splits_or_replicates_kv_heads_whole(per_node, nnodes, heads, kv,
                                                                               allowed):
    assert tp_choices(_cfg(per_node, nnodes, heads, kv)) == allowed
