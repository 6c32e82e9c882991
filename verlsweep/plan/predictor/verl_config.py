"""verl's side of a sweep config: verl 0.9.1's defaults of the keys the planner reads (VERL_DEFAULTS) and
cfg.verl read by key path with those defaults behind it (VerlValues), so the planner needs neither verl
nor torch. tests/test_plan_model.py checks VERL_DEFAULTS against the installed verl."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from verlsweep.common.vllm_graphs import default_capture_sizes  # noqa: F401 - the planner's name for it

# verl 0.9.1 defaults of the keys read here (verl/trainer/config/_generated_ppo_trainer.yaml).
VERL_DEFAULTS: dict[str, Any] = {
    "data.train_batch_size": 1024,
    "data.max_prompt_length": 512,
    "data.max_response_length": 512,
    "actor_rollout_ref.rollout.ignore_eos": False,
    "data.shuffle": True,
    "algorithm.adv_estimator": "gae",
    "algorithm.use_kl_in_reward": False,
    "critic.enable": None,
    "critic.strategy": "fsdp",
    "critic.fsdp.param_offload": False,
    "critic.fsdp.optimizer_offload": False,
    "critic.fsdp.offload_policy": False,
    "critic.fsdp.model_dtype": "fp32",
    "critic.fsdp.fsdp_size": -1,
    "critic.ulysses_sequence_parallel_size": 1,
    "critic.ppo_micro_batch_size_per_gpu": None,
    "critic.ppo_max_token_len_per_gpu": 32768,
    "critic.ppo_epochs": 1,
    "critic.model.enable_gradient_checkpointing": True,
    "actor_rollout_ref.model.enable_gradient_checkpointing": True,
    "actor_rollout_ref.model.use_remove_padding": True,
    "actor_rollout_ref.model.lora_rank": 0,
    "actor_rollout_ref.actor.strategy": "fsdp",
    "actor_rollout_ref.actor.ppo_mini_batch_size": 256,
    "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu": None,
    "actor_rollout_ref.actor.use_dynamic_bsz": False,
    "actor_rollout_ref.actor.ppo_max_token_len_per_gpu": 16384,
    "actor_rollout_ref.actor.ppo_epochs": 1,
    "actor_rollout_ref.actor.use_kl_loss": False,
    "actor_rollout_ref.actor.entropy_coeff": 0,
    "actor_rollout_ref.actor.calculate_entropy": False,
    "actor_rollout_ref.actor.ulysses_sequence_parallel_size": 1,
    "actor_rollout_ref.actor.entropy_from_logits_with_chunking": False,
    "actor_rollout_ref.actor.entropy_from_logits_chunk_size": 2048,
    "actor_rollout_ref.actor.entropy_checkpointing": False,
    "actor_rollout_ref.actor.fsdp_config.param_offload": False,
    "actor_rollout_ref.actor.fsdp_config.optimizer_offload": False,
    "actor_rollout_ref.actor.fsdp_config.offload_policy": False,
    "actor_rollout_ref.actor.fsdp_config.model_dtype": "fp32",
    "actor_rollout_ref.actor.fsdp_config.fsdp_size": -1,
    "actor_rollout_ref.actor.fsdp_config.ulysses_sequence_parallel_size": 1,
    "actor_rollout_ref.ref.fsdp_config.model_dtype": "fp32",
    "actor_rollout_ref.ref.fsdp_config.ulysses_sequence_parallel_size": 1,
    "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": None,
    "actor_rollout_ref.rollout.tensor_model_parallel_size": 2,
    "actor_rollout_ref.rollout.gpu_memory_utilization": 0.5,
    "actor_rollout_ref.rollout.n": 1,
    "actor_rollout_ref.rollout.max_num_seqs": 256,
    "actor_rollout_ref.rollout.max_num_batched_tokens": 8192,
    "actor_rollout_ref.rollout.max_model_len": None,
    "actor_rollout_ref.rollout.enforce_eager": False,
    "actor_rollout_ref.rollout.free_cache_engine": True,
    "actor_rollout_ref.rollout.enable_chunked_prefill": True,
    "actor_rollout_ref.rollout.cudagraph_capture_sizes": None,
    "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu": None,
    "trainer.use_v1": True,
}

# verl's vLLM server default when no compilation_config.cudagraph_mode is given
# (verl/workers/rollout/vllm_rollout/vllm_async_server.py).
DEFAULT_CUDAGRAPH_MODE = "FULL_AND_PIECEWISE"


class VerlValues:
    """cfg.verl values by verl key path, falling back to verl's defaults (`defaults`, VERL_DEFAULTS). `cfg` is
    a config tree whose `verl` node is nested (the composed config, its plain tree_of) or flat by dotted key
    (verlsweep.config.TaskConfig.verl); verl's own keys have no dots."""

    def __init__(self, cfg: Mapping[str, Any], defaults: dict[str, Any] | None = None):
        node = cfg.get("verl")
        self.node: Mapping[str, Any] = {} if node is None else node
        self.defaults = VERL_DEFAULTS if defaults is None else defaults

    def _value(self, path: str) -> Any:
        if path in self.node:               # flat
            return self.node[path]
        value: Any = self.node
        for part in path.split("."):
            if not isinstance(value, Mapping):
                return None
            value = value.get(part)
        return value

    def has(self, path: str) -> bool:
        return self._value(path) is not None

    def get(self, path: str, default: Any = None) -> Any:
        value = self._value(path)
        if value is not None:
            return value
        if self.defaults.get(path) is not None:
            return self.defaults[path]
        return default

    def first(self, *paths: str, default: Any = None) -> Any:
        for path in paths:
            if self.has(path):
                return self.get(path)
        return self.get(paths[-1], default)
