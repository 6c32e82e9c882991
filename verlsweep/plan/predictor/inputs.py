"""What the planner needs of one trial, made once into plain dataclasses (verlsweep.plan.predictor.trial_spec)
from the trial's typed config (verlsweep.config), one part of the step at a time (the functions below).

    inputs_of(hardware, model, plan, verl, env)   # the typed entry: what verlsweep.prepare hands over
    from_task(task)                               # the same from a whole TaskConfig
    from_cfg(cfg)                                 # a composed config, read once by verlsweep.config.read
    from_tree(tree_of(cfg))                       # the guide's fast path: a plain tree of a config that has
                                                  # been read once already (hundreds of candidates, no checks)

A verl key the config leaves unset takes verl 0.9.1's own default (verlsweep.plan.predictor.verl_config
VERL_DEFAULTS), so the planner needs neither verl nor torch and plans a grid of variants without
composing anything again (`dataclasses.replace`).
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from verlsweep.common.names import PLAN_TRAINERS
from verlsweep.config import Hardware, ModelConfig, PlanConfig, TaskConfig, from_plain, plain, read
from verlsweep.plan.predictor.trial_spec import ModelShapes, NotPlannable, PlanInputs, Role, Rollout
from verlsweep.plan.predictor.verl_config import DEFAULT_CUDAGRAPH_MODE, VerlValues, default_capture_sizes

_DTYPE_BYTES = {"fp32": 4, "float32": 4, "bf16": 2, "bfloat16": 2, "fp16": 2, "float16": 2}
_VLLM = "actor_rollout_ref.rollout.engine_kwargs.vllm.compilation_config"
_ACTOR = "actor_rollout_ref.actor"


def _dtype_bytes(value: Any, key: str) -> int:
    try:
        return _DTYPE_BYTES[str(value).lower()]
    except KeyError:
        raise NotPlannable(f"{key}={value!r}: the planner knows {', '.join(sorted(_DTYPE_BYTES))}") from None


def _sizes(value: Any) -> tuple[int, ...] | None:
    if value is None:
        return None
    if isinstance(value, str):      # recipes pass them as a string, e.g. "[4, 8, 12]"
        value = yaml.safe_load(value)
    return tuple(sorted(int(v) for v in value))



def _need_ref(v: VerlValues) -> bool:
    # verl/trainer/ppo/utils.py need_reference_policy
    return bool(v.get("algorithm.use_kl_in_reward")) or bool(v.get("actor_rollout_ref.actor.use_kl_loss"))


def _need_critic(v: VerlValues) -> bool:
    # verl/trainer/ppo/utils.py need_critic: explicit critic.enable wins, else GAE needs one
    enable = v.get("critic.enable")
    if enable is not None:
        return bool(enable)
    return v.get("algorithm.adv_estimator") == "gae"


def _shard(fsdp_size: int, world: int) -> int:
    return world if fsdp_size in (-1, None) or fsdp_size > world else int(fsdp_size)


def _actor_sp(v: VerlValues) -> int:
    # the deprecated actor.ulysses_sequence_parallel_size is copied into fsdp_config when > 1
    # (verl/workers/config/actor.py FSDPActorConfig.__post_init__)
    old = int(v.get("actor_rollout_ref.actor.ulysses_sequence_parallel_size") or 1)
    new = int(v.get("actor_rollout_ref.actor.fsdp_config.ulysses_sequence_parallel_size") or 1)
    return old if old > 1 else new


# The config.json fields (model.config) the planner's shapes need; head_dim may be derived (_head_dim).
_SHAPES = ("num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "intermediate_size",
           "vocab_size", "tie_word_embeddings")


def _head_dim(config: Mapping[str, Any]) -> int:
    # transformers' default where config.json states none (modeling_qwen2.py Qwen2Attention)
    return int(config.get("head_dim") or int(config["hidden_size"]) // int(config["num_attention_heads"]))


def params_b(config: Mapping[str, Any]) -> float:
    """Billions of parameters of a decoder-only model from its config.json fields, to the million as the
    model cards give it (a model under half a million keeps its exact count): the embeddings; per layer
    the attention (q/k/v/o, q/k/v biases for qwen2 or with attention_bias, q/k norms for qwen3), the MLP
    (dense, or num_experts experts and their router on the layers decoder_sparse_step and mlp_only_layers
    leave sparse, as transformers' modeling_qwen3_moe.py) and two norms; the final norm; an untied head.
    transformers builds the same count (tests/test_trainer_trace.py)."""
    hidden, layers = int(config["hidden_size"]), int(config["num_hidden_layers"])
    heads, kv, head_dim = int(config["num_attention_heads"]), int(config["num_key_value_heads"]), _head_dim(config)
    model_type, bias = str(config.get("model_type")), bool(config.get("attention_bias"))
    attention = hidden * head_dim * 2 * (heads + kv)
    attention += head_dim * (heads + 2 * kv) if bias or model_type == "qwen2" else 0
    attention += hidden if bias else 0                                  # o_proj's bias
    attention += 2 * head_dim if model_type in ("qwen3", "qwen3_moe") else 0
    experts, step = int(config.get("num_experts") or 0), int(config.get("decoder_sparse_step") or 1)
    dense_only = set(config.get("mlp_only_layers") or [])
    moe = experts * (3 * hidden * int(config.get("moe_intermediate_size") or 0) + hidden)
    mlp = sum(moe if experts and i not in dense_only and (i + 1) % step == 0
              else 3 * hidden * int(config["intermediate_size"]) for i in range(layers))
    embedding = int(config["vocab_size"]) * hidden
    total = embedding * (1 if config["tie_word_embeddings"] else 2) + layers * (attention + 2 * hidden) + mlp + hidden
    return round(total / 1e9, 3) or total / 1e9


def _shapes(model: ModelConfig) -> ModelShapes:
    """The planner's shapes of a model option (model.name, model.path, model.config)."""
    config = model.config
    if not config:      # a recipe script's model that is neither a local checkpoint nor a known option
        raise NotPlannable(f"unknown model {model.path or model.name!r}: no config.json under it and no model "
                           "option (conf/model) with its hub id")
    missing = [f"model.config.{k}" for k in _SHAPES if config.get(k) is None]
    if missing:
        raise NotPlannable(f"model {model.name!r} lacks {', '.join(missing)} (its config.json's fields)")
    positions = config.get("max_position_embeddings")
    return ModelShapes(
        name=model.name, params=params_b(config) * 1e9,
        num_layers=int(config["num_hidden_layers"]), hidden_size=int(config["hidden_size"]),
        num_attention_heads=int(config["num_attention_heads"]),
        num_key_value_heads=int(config["num_key_value_heads"]), head_dim=_head_dim(config),
        intermediate_size=int(config["intermediate_size"]), vocab_size=int(config["vocab_size"]),
        tie_word_embeddings=bool(config["tie_word_embeddings"]),
        max_position_embeddings=int(positions) if positions is not None else None,
        hf_config=_hf_config(model),
    )


def _hf_config(model: ModelConfig) -> str | None:
    """The model's Hugging Face config as JSON: the checkpoint's config.json when model.path holds one,
    else the group's model.config; None when neither names a model_type."""
    path = model.path
    if path and (Path(path) / "config.json").is_file():
        try:
            return json.dumps(json.loads((Path(path) / "config.json").read_text()), sort_keys=True)
        except (OSError, ValueError):
            pass        # unreadable: the group's model.config below
    return json.dumps(dict(model.config), sort_keys=True) if model.config.get("model_type") else None


# the nodes of a sweep config the planner reads
READ = ("verl", "hardware", "model", "plan", "env")


def tree_of(cfg: Mapping[str, Any]) -> dict[str, Any]:
    """The nodes the planner reads (READ), resolved into plain containers: reading a plain dict costs
    nothing, where every read of the composed config parses its interpolations again (the guide reads
    hundreds of candidates)."""
    return {k: plain(cfg.get(k)) for k in READ}


def from_cfg(cfg: Mapping[str, Any]) -> PlanInputs:
    """A composed sweep config (or its TaskConfig), read once (verlsweep.config.read; ConfigError on a
    value of the wrong type), then from_task."""
    return from_task(read(cfg))


def from_task(task: TaskConfig) -> PlanInputs:
    """A trial's TaskConfig: its hardware, model and plan nodes and its flat verl values (verlsweep.prepare)."""
    return inputs_of(task.hardware, task.model, task.plan, VerlValues(task), task.env)


def from_tree(cfg: Mapping[str, Any]) -> PlanInputs:
    """A tree_of of a config that has been read once already (its nodes are made without the checks of
    verlsweep.config.read), then inputs_of."""
    hw_node, model_node = cfg.get("hardware"), cfg.get("model")
    if hw_node is None or model_node is None:
        raise NotPlannable("the config has no hardware/model node")
    return inputs_of(from_plain(Hardware, hw_node), from_plain(ModelConfig, model_node),
                     from_plain(PlanConfig, cfg.get("plan") or {}), VerlValues(cfg), cfg.get("env") or {})


def inputs_of(hardware: Hardware, model: ModelConfig, plan: PlanConfig, v: VerlValues,
              env: Mapping[str, Any]) -> PlanInputs:
    """The planner's inputs of one trial. Raises NotPlannable for what the model does not cover (another
    rollout or training engine, an unknown dtype, a hardware profile or model missing a number it needs)."""
    _check_numbers(hardware)
    strategy = _engines(v)
    shapes = _shapes(model)
    prompt_len, response_len = int(v.get("data.max_prompt_length")), int(v.get("data.max_response_length"))
    actor = _actor(v, shapes, hardware.world, strategy)
    worst_case = bool(v.get("actor_rollout_ref.rollout.ignore_eos")) and not v.get("data.shuffle")
    return PlanInputs(
        hardware=hardware, model=shapes, rollout=_rollout(v, shapes, prompt_len, response_len), actor=actor,
        ref=_ref(v, actor, hardware.world), critic=_critic(v, shapes, actor, hardware.world),
        algorithm=str(v.get("algorithm.adv_estimator")),
        train_batch_size=int(v.get("data.train_batch_size")),
        mini_batch_size=int(v.get(f"{_ACTOR}.ppo_mini_batch_size")),
        max_prompt_length=prompt_len, max_response_length=response_len,
        # the long-run confirmation's worst case (verlsweep.study.confirm): ignore_eos runs every response
        # to max_response_length (vLLM's sampling params, verl/workers/rollout/vllm_rollout/
        # vllm_async_server.py), and with data.shuffle=false the sorted file's longest prompts come first
        prompt_tokens=(float(prompt_len) if worst_case else float(plan.prompt_tokens) if plan.prompt_tokens
                       else None),
        response_tokens=(float(response_len) if v.get("actor_rollout_ref.rollout.ignore_eos")
                         else float(plan.response_tokens) if plan.response_tokens else None),
        hccl_buffsize_mb=_hccl_buffsize_mb(env, hardware), margin_gb=float(plan.margin_gb),
        legacy_trainer=not bool(v.get("trainer.use_v1")),
        trainer=_trainer(plan.trainer), trace_limit_s=float(plan.trace_limit_s),
    )


# The hardware numbers the planner needs; a profile may leave them out (verlsweep.config.Hardware).
NUMBERS = ("devices_per_node", "nnodes", "hbm_total_gb", "hbm_usable_gb", "idle_reserved_gb", "bf16_tflops",
           "hbm_bandwidth_gbs", "host_link_gbs", "host_memory_gb")


def _check_numbers(hardware: Hardware) -> None:
    """Every number the planner needs is stated, or NotPlannable naming the missing ones."""
    missing = [f"hardware.{k}" for k in NUMBERS if getattr(hardware, k) is None]
    if missing:
        raise NotPlannable(f"hardware profile {hardware.name!r} lacks {', '.join(missing)}: add them to its file "
                           f"(conf/hardware/<name>.yaml; `python -m verlsweep.plan detect` writes them)")


def _engines(v: VerlValues) -> str:
    """The training strategy, once the rollout and training engines are ones the planner models."""
    rollout_name = v.get("actor_rollout_ref.rollout.name", "vllm")
    if rollout_name != "vllm":
        raise NotPlannable(f"verl.actor_rollout_ref.rollout.name={rollout_name!r}: the planner models vLLM only")
    strategy = str(v.get("actor_rollout_ref.actor.strategy"))
    if strategy not in ("fsdp", "fsdp2"):
        raise NotPlannable(f"verl.actor_rollout_ref.actor.strategy={strategy!r}: the planner models fsdp/fsdp2")
    return strategy



def _rollout(v: VerlValues, model: ModelShapes, prompt_len: int, response_len: int) -> Rollout:
    """vLLM's engine: its share of HBM, batch limits, graph capture."""
    max_num_seqs = int(v.get("actor_rollout_ref.rollout.max_num_seqs"))
    sizes = _sizes(v.get(f"{_VLLM}.cudagraph_capture_sizes")) or _sizes(
        v.get("actor_rollout_ref.rollout.cudagraph_capture_sizes")) or default_capture_sizes(max_num_seqs)
    # verl leaves max_model_len to vLLM, which takes the model's max_position_embeddings
    # (vllm_async_server.py _validate_configs); without that number, prompt + response is assumed.
    max_model_len = v.get("actor_rollout_ref.rollout.max_model_len") or model.max_position_embeddings \
        or prompt_len + response_len
    return Rollout(
        tp=int(v.get("actor_rollout_ref.rollout.tensor_model_parallel_size")),
        util=float(v.get("actor_rollout_ref.rollout.gpu_memory_utilization")),
        n=int(v.get("actor_rollout_ref.rollout.n")),
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=int(v.get("actor_rollout_ref.rollout.max_num_batched_tokens")),
        max_model_len=int(max_model_len),
        enforce_eager=bool(v.get("actor_rollout_ref.rollout.enforce_eager")),
        free_cache_engine=bool(v.get("actor_rollout_ref.rollout.free_cache_engine")),
        cudagraph_mode=str(v.get(f"{_VLLM}.cudagraph_mode", DEFAULT_CUDAGRAPH_MODE)).upper(),
        capture_sizes=sizes,
    )


def _actor(v: VerlValues, model: ModelShapes, world: int, strategy: str) -> Role:
    """The actor's FSDP role: its update, and the old log-prob it computes with the rollout's budget."""
    a = _ACTOR
    return Role(
        name="actor", params=model.params,
        dtype_bytes=_dtype_bytes(v.get(f"{a}.fsdp_config.model_dtype"), f"verl.{a}.fsdp_config.model_dtype"),
        shard=_shard(v.get(f"{a}.fsdp_config.fsdp_size"), world), strategy=strategy,
        param_offload=bool(v.get(f"{a}.fsdp_config.param_offload")),
        optimizer_offload=bool(v.get(f"{a}.fsdp_config.optimizer_offload")),
        # CPUOffloadPolicy is FSDP2-only (verl/workers/engine/fsdp/transformer_impl.py)
        offload_policy=strategy == "fsdp2" and bool(v.get(f"{a}.fsdp_config.offload_policy")),
        trains=True, sp=_actor_sp(v), dynamic_bsz=bool(v.get(f"{a}.use_dynamic_bsz")),
        max_token_len=int(v.get(f"{a}.ppo_max_token_len_per_gpu")),
        micro_batch=v.get(f"{a}.ppo_micro_batch_size_per_gpu"),
        forward_max_token_len=int(v.first("actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu",
                                          f"{a}.ppo_max_token_len_per_gpu")),
        forward_micro_batch=v.get("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu"),
        grad_ckpt=bool(v.get("actor_rollout_ref.model.enable_gradient_checkpointing")),
        vocab_head=True,
        entropy_in_update=bool(v.get(f"{a}.calculate_entropy")) or float(v.get(f"{a}.entropy_coeff") or 0) != 0,
        epochs=int(v.get(f"{a}.ppo_epochs")), lora=int(v.get("actor_rollout_ref.model.lora_rank") or 0) > 0,
        entropy_chunking=bool(v.get(f"{a}.entropy_from_logits_with_chunking")),
        entropy_checkpointing=bool(v.get(f"{a}.entropy_checkpointing")),
        entropy_chunk=int(v.get(f"{a}.entropy_from_logits_chunk_size")),
    )


def _ref(v: VerlValues, actor: Role, world: int) -> Role | None:
    """The reference policy when the algorithm needs one: the actor's model, forward only."""
    if not _need_ref(v) or actor.lora:   # with LoRA the ref is the actor with adapters disabled
        return None
    r = "actor_rollout_ref.ref"
    ref_strategy = str(v.get(f"{r}.strategy", actor.strategy))
    ref_sp = int(v.get(f"{r}.fsdp_config.ulysses_sequence_parallel_size") or 1)
    return replace(
        actor, name="ref",
        dtype_bytes=_dtype_bytes(v.get(f"{r}.fsdp_config.model_dtype"), f"verl.{r}.fsdp_config.model_dtype"),
        shard=_shard(v.get(f"{r}.fsdp_config.fsdp_size", -1), world), strategy=ref_strategy,
        # verl 0.9.1 always keeps a forward-only model on the host (FSDP1 CPUOffload / FSDP2
        # CPUOffloadPolicy, transformer_impl.py), whatever ref.fsdp_config.param_offload says.
        param_offload=True, optimizer_offload=True, offload_policy=True, trains=False,
        sp=ref_sp if ref_sp > 1 else actor.sp,
        forward_max_token_len=int(v.first(f"{r}.log_prob_max_token_len_per_gpu",
                                          "actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu",
                                          f"{_ACTOR}.ppo_max_token_len_per_gpu")),
        forward_micro_batch=v.get(f"{r}.log_prob_micro_batch_size_per_gpu"),
        entropy_chunking=bool(v.get(f"{r}.entropy_from_logits_with_chunking", actor.entropy_chunking)),
    )


def _critic(v: VerlValues, model: ModelShapes, actor: Role, world: int) -> Role | None:
    """The PPO critic when the algorithm needs one: the model without its vocabulary head, a value head."""
    if not _need_critic(v):
        return None
    c = "critic"
    c_strategy = str(v.get(f"{c}.strategy", actor.strategy))
    c_max_tok = int(v.get(f"{c}.ppo_max_token_len_per_gpu"))
    return Role(
        name="critic", params=model.params - model.head_params, shard=_shard(v.get(f"{c}.fsdp.fsdp_size"), world),
        dtype_bytes=_dtype_bytes(v.get(f"{c}.fsdp.model_dtype"), "verl.critic.fsdp.model_dtype"),
        strategy=c_strategy,
        param_offload=bool(v.get(f"{c}.fsdp.param_offload")),
        optimizer_offload=bool(v.get(f"{c}.fsdp.optimizer_offload")),
        offload_policy=c_strategy == "fsdp2" and bool(v.get(f"{c}.fsdp.offload_policy")),
        trains=True, sp=int(v.get(f"{c}.ulysses_sequence_parallel_size") or 1),
        dynamic_bsz=bool(v.get(f"{c}.use_dynamic_bsz", actor.dynamic_bsz)), max_token_len=c_max_tok,
        micro_batch=v.get(f"{c}.ppo_micro_batch_size_per_gpu"),
        forward_max_token_len=int(v.get(f"{c}.forward_max_token_len_per_gpu", c_max_tok)),
        forward_micro_batch=v.get(f"{c}.forward_micro_batch_size_per_gpu",
                                  v.get(f"{c}.ppo_micro_batch_size_per_gpu")),
        grad_ckpt=bool(v.get(f"{c}.model.enable_gradient_checkpointing")), vocab_head=False,
        entropy_chunking=False, entropy_checkpointing=False, entropy_chunk=0, entropy_in_update=False,
        epochs=int(v.get(f"{c}.ppo_epochs")),
    )


def _hccl_buffsize_mb(env: Mapping[str, Any], hardware: Hardware) -> float:
    # HCCL_BUFFSIZE default 200 MB (CANN env reference); NCCL's buffers are a few MB
    hccl = env.get("HCCL_BUFFSIZE") if hardware.device == "npu" else None
    return float(hccl) if hccl is not None else (200.0 if hardware.device == "npu" else 4.0)


def _trainer(trainer: str) -> str:
    if trainer not in PLAN_TRAINERS:
        raise ValueError(f"plan.trainer={trainer!r}: allowed values are {', '.join(PLAN_TRAINERS)}")
    return trainer
