"""Our rules on the throughput knobs (sweeps/throughput.yaml): token budgets, Ulysses SP, vLLM batching
and graph capture. verl accepts each of these alone and fails later, inside a worker, on a bad
combination; checked before launch, every problem names the key and what is allowed.

Called by verlsweep.command.rules.check_rules once the basic integers are known to be sane.
"""
from __future__ import annotations

from typing import Any

import yaml
from omegaconf import DictConfig, OmegaConf

from verlsweep.command.topology import sp_choices, world_size
from verlsweep.common.errors import Problem

ROLLOUT = "verl.actor_rollout_ref.rollout"
ACTOR = "verl.actor_rollout_ref.actor"
REF = "verl.actor_rollout_ref.ref"
# the deprecated actor key is the one verl's ref inherits (ref.yaml oc.select) and the actor copies into
# fsdp_config (verl/workers/config/actor.py FSDPActorConfig.__post_init__); either may be set
SP_KEYS = (f"{ACTOR}.ulysses_sequence_parallel_size", f"{ACTOR}.fsdp_config.ulysses_sequence_parallel_size")
CAPTURE_KEYS = (f"{ROLLOUT}.cudagraph_capture_sizes",
                f"{ROLLOUT}.engine_kwargs.vllm.compilation_config.cudagraph_capture_sizes")
FACTOR_KEY = "validate.token_budget_factor"


def _get(cfg: DictConfig, key: str) -> Any:
    return OmegaConf.select(cfg, key, default=None)


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


def actor_sp(cfg: DictConfig) -> tuple[str, int]:
    """(the key that sets the actor's Ulysses SP, its value): the deprecated key wins when > 1, as in verl."""
    old, new = (_get(cfg, k) for k in SP_KEYS)
    if _positive_int(old) and old > 1:
        return SP_KEYS[0], old
    return (SP_KEYS[1], new) if new is not None else (SP_KEYS[0], old if old is not None else 1)


def _sizes(value: Any) -> Any:
    if isinstance(value, str):          # recipes pass them as a string, e.g. "[4, 8, 12]"
        value = yaml.safe_load(value)
    return OmegaConf.to_container(value) if OmegaConf.is_config(value) else value


def check_sp(cfg: DictConfig) -> list[Problem]:
    key, sp = actor_sp(cfg)
    allowed = sp_choices(cfg)
    if not _positive_int(sp) or sp not in allowed:
        shapes = cfg.model.config
        return [Problem(key, sp, f"one of {allowed} (divides the {world_size(cfg)} devices of {cfg.hardware.name}; "
                                 f"verl's Ulysses attention needs the {shapes.num_attention_heads} attention heads "
                                 f"divisible by SP and the {shapes.num_key_value_heads} KV heads divisible by "
                                 "SP or SP by them)")]
    return []


def check_token_budgets(cfg: DictConfig, sp: int) -> list[Problem]:
    """Dynamic-bsz token budgets per device x SP >= factor x (prompt + response). verl itself asserts
    factor 1 (verl/utils/seqlen_balancing.py: max_token_len >= the longest sequence); its tuning guide
    asks for at least 2 (docs/perf/perf_tuning.rst, Dynamic Batch Size Tuning tips), which the
    throughput space sets as validate.token_budget_factor. The actor's factor-1 rule is rules.py's."""
    factor = _get(cfg, FACTOR_KEY)
    if not isinstance(factor, (int, float)) or isinstance(factor, bool) or factor < 1:
        return [Problem(FACTOR_KEY, factor, "a number >= 1 (1: verl's own assert; 2: its tuning guide)")]
    seq = _get(cfg, "verl.data.max_prompt_length") + _get(cfg, "verl.data.max_response_length")
    need = -(-int(factor * seq) // sp)
    budgets = [(f"{ROLLOUT}.log_prob_max_token_len_per_gpu", f"{ROLLOUT}.log_prob_use_dynamic_bsz"),
               (f"{REF}.log_prob_max_token_len_per_gpu", f"{REF}.log_prob_use_dynamic_bsz")]
    if factor > 1:
        budgets.insert(0, (f"{ACTOR}.ppo_max_token_len_per_gpu", f"{ACTOR}.use_dynamic_bsz"))
    problems = []
    for key, switch in budgets:
        value = _get(cfg, key)
        if not _get(cfg, switch) or value is None:
            continue
        if not _positive_int(value) or value * sp < factor * seq:
            problems.append(Problem(key, value, f"an integer >= {factor:g} x (max_prompt_length + max_response_length) "
                                                f"/ SP = {need} ({FACTOR_KEY}={factor:g})"))
    return problems


def check_micro_batches(cfg: DictConfig, sp: int) -> list[Problem]:
    """Without dynamic bsz a micro batch must split the per-rank mini-batch (verl/workers/config/actor.py
    ActorConfig.validate; dp_actor splits mini x n / dp sequences into micro batches)."""
    if _get(cfg, f"{ACTOR}.use_dynamic_bsz"):
        return []
    key = f"{ACTOR}.ppo_micro_batch_size_per_gpu"
    micro = _get(cfg, key)
    if micro is None:
        return []
    per_rank = _get(cfg, f"{ACTOR}.ppo_mini_batch_size") * _get(cfg, f"{ROLLOUT}.n") // max(1, world_size(cfg) // sp)
    if not _positive_int(micro) or per_rank % micro:
        return [Problem(key, micro, f"a positive divisor of the {per_rank} sequences of one rank's mini-batch")]
    return []


def check_engine(cfg: DictConfig) -> list[Problem]:
    """vLLM's scheduler limits and graph capture sizes."""
    problems = []
    seqs_key, tokens_key = f"{ROLLOUT}.max_num_seqs", f"{ROLLOUT}.max_num_batched_tokens"
    seqs, tokens = _get(cfg, seqs_key), _get(cfg, tokens_key)
    for key, value in ((seqs_key, seqs), (tokens_key, tokens)):
        if value is not None and not _positive_int(value):
            problems.append(Problem(key, value, "a positive integer"))
    if problems:
        return problems
    if seqs is not None and tokens is not None and tokens < seqs:
        # vllm/config/scheduler.py SchedulerConfig._verify_args: every running sequence needs a token slot
        problems.append(Problem(tokens_key, tokens, f"an integer >= max_num_seqs={seqs} (vLLM's scheduler check)"))
    for key in CAPTURE_KEYS:      # (with enforce_eager=true vLLM captures nothing and ignores them)
        sizes = _sizes(_get(cfg, key))
        if sizes is None:
            continue
        if not isinstance(sizes, list) or not sizes or not all(_positive_int(s) for s in sizes):
            problems.append(Problem(key, sizes, "a non-empty list of positive integers"))
        elif seqs is not None and max(sizes) > seqs:
            problems.append(Problem(key, sizes, f"sizes <= max_num_seqs={seqs}: a larger decode batch never runs, "
                                                "its graph only takes memory"))
    return problems


def check_throughput_rules(cfg: DictConfig) -> list[Problem]:
    """All rules of this module; SP first, since the token budgets are per SP group."""
    problems = check_sp(cfg)
    problems += check_engine(cfg)
    if problems:
        return problems
    sp = actor_sp(cfg)[1]
    return check_token_budgets(cfg, sp) + check_micro_batches(cfg, sp)
