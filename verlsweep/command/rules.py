"""Our own rules on a composed sweep config: what verl accepts but the hardware cannot run.

verl composes `gpu_memory_utilization=1.5`, and `tensor_model_parallel_size=3` on 8 devices only fails
deep inside Ray (verl/workers/rollout/llm_server.py makes world // TP replicas with no guard), so these
are checked before launch; every problem names the key and what is allowed.
"""
from __future__ import annotations

from typing import Any

from omegaconf import DictConfig, OmegaConf

from verlsweep.command.throughput_rules import actor_sp, check_throughput_rules
from verlsweep.command.topology import tp_choices, world_size
from verlsweep.common.errors import Problem
from verlsweep.common.names import PLAN_TRAINERS

DEVICES = ("npu", "cuda")
ROLLOUT = "verl.actor_rollout_ref.rollout"
ACTOR = "verl.actor_rollout_ref.actor"
OFFLOAD_FLAGS = (
    f"{ACTOR}.fsdp_config.param_offload",
    f"{ACTOR}.fsdp_config.optimizer_offload",
    f"{ACTOR}.fsdp_config.offload_policy",
    "verl.actor_rollout_ref.ref.fsdp_config.param_offload",
    "verl.critic.fsdp.param_offload",
    "verl.critic.fsdp.optimizer_offload",
)


def _get(cfg: DictConfig, key: str) -> Any:
    return OmegaConf.select(cfg, key, default=None)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_rules(cfg: DictConfig) -> list[Problem]:
    """Our own rules on a composed sweep config; every problem names the key and what is allowed."""
    problems: list[Problem] = []

    device = _get(cfg, "hardware.device")
    if device not in DEVICES:
        problems.append(Problem("hardware.device", device, f"one of {', '.join(DEVICES)}"))

    trainer = _get(cfg, "plan.trainer")
    if trainer is not None and trainer not in PLAN_TRAINERS:
        problems.append(Problem("plan.trainer", trainer, f"one of {', '.join(PLAN_TRAINERS)}"))

    util = _get(cfg, f"{ROLLOUT}.gpu_memory_utilization")
    if not _is_number(util) or not 0 < util <= 1:
        problems.append(Problem(f"{ROLLOUT}.gpu_memory_utilization", util, "a number in (0, 1]"))

    tp = _get(cfg, f"{ROLLOUT}.tensor_model_parallel_size")
    allowed_tp = tp_choices(cfg)
    if not _is_int(tp) or tp not in allowed_tp:
        problems.append(
            Problem(
                f"{ROLLOUT}.tensor_model_parallel_size",
                tp,
                f"one of {allowed_tp} (divides the {world_size(cfg)} devices of {cfg.hardware.name} "
                f"and the {_get(cfg, 'model.config.num_attention_heads')} attention heads of {cfg.model.name})",
            )
        )

    for key in (f"{ROLLOUT}.n", "verl.data.train_batch_size", f"{ACTOR}.ppo_mini_batch_size",
                "verl.data.max_prompt_length", "verl.data.max_response_length",
                "verl.trainer.total_training_steps", "trial.steps"):
        value = _get(cfg, key)
        if value is None and key.endswith("total_training_steps") and "recipe" in cfg:
            continue        # a recipe script that cannot take it trains for its own epochs (said before launch)
        if not _is_int(value) or value < 1:
            problems.append(Problem(key, value, "a positive integer"))

    for key in OFFLOAD_FLAGS:
        value = _get(cfg, key)
        if value is not None and not isinstance(value, bool):
            problems.append(Problem(key, value, "true or false"))

    if problems:  # the arithmetic below needs the values above to be sane
        return problems

    n = _get(cfg, f"{ROLLOUT}.n")
    batch = _get(cfg, "verl.data.train_batch_size")
    mini = _get(cfg, f"{ACTOR}.ppo_mini_batch_size")
    sp = actor_sp(cfg)[1]
    if not isinstance(sp, int) or sp < 1:
        sp = 1          # check_throughput_rules names the key
    world = world_size(cfg)
    if batch % mini:
        problems.append(Problem(f"{ACTOR}.ppo_mini_batch_size", mini,
                                f"a divisor of verl.data.train_batch_size={batch}"))
    dp = world // sp
    if (mini * n) % dp:
        # verl splits ppo_mini_batch_size * n over the data-parallel ranks (dp_actor.py)
        problems.append(Problem(f"{ACTOR}.ppo_mini_batch_size", mini,
                                f"mini-batch x rollout.n ({mini}x{n}) divisible by the {dp} data-parallel ranks"))
    if (batch * n) % world:
        problems.append(Problem("verl.data.train_batch_size", batch,
                                f"train_batch_size x rollout.n ({batch}x{n}) divisible by the {world} devices"))
    if _get(cfg, f"{ACTOR}.use_dynamic_bsz"):
        max_tok = _get(cfg, f"{ACTOR}.ppo_max_token_len_per_gpu")
        seq = _get(cfg, "verl.data.max_prompt_length") + _get(cfg, "verl.data.max_response_length")
        if not _is_int(max_tok) or max_tok * sp < seq:
            problems.append(Problem(f"{ACTOR}.ppo_max_token_len_per_gpu", max_tok,
                                    f"an integer >= (max_prompt_length + max_response_length) / SP = {-(-seq // sp)}"))
    # token budgets beyond verl's minimum, SP, vLLM batching and graph capture (command/throughput_rules.py)
    problems += check_throughput_rules(cfg)
    return problems
