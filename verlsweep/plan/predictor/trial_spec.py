"""One trial as the planner models it, in plain frozen dataclasses: the model's shapes, the rollout, each
FSDP role (actor, ref, critic) and the whole (PlanInputs, with the config's typed Hardware).
verlsweep.plan.predictor.inputs makes them from a trial's typed config; `PlanInputs.with_knobs` makes the
table's grid of variants without composing again."""
from __future__ import annotations

from dataclasses import dataclass, replace

from verlsweep.config import Hardware


class NotPlannable(ValueError):
    """The config is outside what the planner models (e.g. a Megatron engine, SGLang rollout)."""


@dataclass(frozen=True)
class ModelShapes:
    """What the planner derives from a model option's config.json fields (verlsweep.config.ModelConfig)."""

    name: str
    params: float                 # parameter count
    num_layers: int
    hidden_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    tie_word_embeddings: bool
    max_position_embeddings: int | None
    hf_config: str | None = None  # its Hugging Face config as JSON, for the trainer trace (plan.trainer=traced)

    @property
    def embedding_params(self) -> float:
        return float(self.vocab_size * self.hidden_size)

    @property
    def head_params(self) -> float:
        """lm_head parameters that are not shared with the embedding."""
        return 0.0 if self.tie_word_embeddings else self.embedding_params

    @property
    def layer_params(self) -> float:
        return (self.params - self.embedding_params - self.head_params) / self.num_layers

    def kv_bytes_per_token(self, tp: int, dtype_bytes: int = 2) -> float:
        """K and V of every layer for one token on one TP rank; KV heads are replicated when TP
        exceeds them (vLLM's GQA rule), hence at least one head per rank."""
        heads = max(1, self.num_key_value_heads // tp) if tp <= self.num_key_value_heads else 1
        return 2.0 * self.num_layers * heads * self.head_dim * dtype_bytes


@dataclass(frozen=True)
class Role:
    """One FSDP worker role on the trainer side: actor, ref or critic."""

    name: str
    params: float
    dtype_bytes: int              # fsdp_config.model_dtype: the dtype FSDP stores params/grads/Adam in
    shard: int                    # FSDP shard group size
    strategy: str                 # fsdp | fsdp2
    param_offload: bool
    optimizer_offload: bool
    offload_policy: bool          # params/grads/optimizer live on the host the whole time
    trains: bool
    sp: int
    dynamic_bsz: bool
    max_token_len: int            # per device (before the SP split verl multiplies it by SP)
    micro_batch: int | None       # sequences per micro batch when not dynamic
    forward_max_token_len: int
    forward_micro_batch: int | None
    grad_ckpt: bool
    vocab_head: bool              # computes logits over the vocabulary (not the critic)
    entropy_chunking: bool
    entropy_checkpointing: bool
    entropy_chunk: int
    entropy_in_update: bool
    epochs: int
    lora: bool = False


@dataclass(frozen=True)
class Rollout:
    tp: int
    util: float
    n: int
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    enforce_eager: bool
    free_cache_engine: bool
    cudagraph_mode: str
    capture_sizes: tuple[int, ...]


@dataclass(frozen=True)
class PlanInputs:
    hardware: Hardware
    model: ModelShapes
    rollout: Rollout
    actor: Role
    ref: Role | None
    critic: Role | None
    algorithm: str                # verl adv_estimator
    train_batch_size: int
    mini_batch_size: int
    max_prompt_length: int
    max_response_length: int
    prompt_tokens: float | None   # expected mean prompt length; None: the calibration's `lengths`
    response_tokens: float | None  # expected mean response length; None: the calibration's length model
    hccl_buffsize_mb: float
    margin_gb: float
    legacy_trainer: bool
    trainer: str                  # plan.trainer: traced | analytic (verlsweep.plan.predictor.traced_terms)
    trace_limit_s: float          # plan.trace_limit_s: one trace past this falls back to analytic

    @property
    def extra_generations_per_prompt(self) -> int:
        """ReMax generates one greedy response per prompt for its baseline (verl ray_trainer.py)."""
        return 1 if self.algorithm == "remax" else 0

    def with_knobs(self, *, util: float | None = None, tp: int | None = None,
                   param_offload: bool | None = None, optimizer_offload: bool | None = None) -> PlanInputs:
        """The same trial with other rollout/offload knobs (the table's grid)."""
        rollout = replace(self.rollout, util=self.rollout.util if util is None else util,
                          tp=self.rollout.tp if tp is None else tp)

        def offloaded(role: Role) -> Role:
            return replace(role, param_offload=role.param_offload if param_offload is None else param_offload,
                           optimizer_offload=role.optimizer_offload if optimizer_offload is None
                           else optimizer_offload)

        actor = offloaded(self.actor)
        critic = offloaded(self.critic) if self.critic is not None else None
        return replace(self, rollout=rollout, actor=actor, critic=critic)
