"""What a hardware x model combination can run: its device count and the rollout TP sizes that fit.

Used by our rules, by the sweeper's `${verlsweep.tp_choices:}` and by the planner's table.
"""
from __future__ import annotations

from omegaconf import DictConfig, OmegaConf


def world_size(cfg: DictConfig) -> int:
    return int(cfg.hardware.devices_per_node) * int(cfg.hardware.nnodes)


def tp_choices(cfg: DictConfig) -> list[int]:
    """Rollout TP sizes the hardware x model can run.

    TP must divide the device count (verl makes world // TP replicas with no guard,
    verl/workers/rollout/llm_server.py) and the attention heads; KV heads are split when TP <= KV
    heads and replicated when TP is a multiple of them (vLLM's rule for GQA models).
    """
    world = world_size(cfg)
    heads = OmegaConf.select(cfg, "model.config.num_attention_heads", default=None)
    kv = OmegaConf.select(cfg, "model.config.num_key_value_heads", default=None)
    if heads is None or kv is None:     # a model of unknown shape (a recipe script's): the devices alone
        return [tp for tp in range(1, world + 1) if world % tp == 0]
    heads, kv = int(heads), int(kv)
    return [
        tp
        for tp in range(1, world + 1)
        if world % tp == 0 and heads % tp == 0 and (kv % tp == 0 if tp <= kv else tp % kv == 0)
    ]


def sp_choices(cfg: DictConfig) -> list[int]:
    """Ulysses SP sizes the hardware x model can run: the same rule as TP. verl asserts that SP divides
    the attention heads and that KV heads divide by SP or SP by them (verl/models/transformers/
    monkey_patch.py, the Ulysses attention patch), and the data-parallel size is world // SP."""
    return tp_choices(cfg)
