"""The run's shape (the config facts the stand-in reads) and the deterministic performance / memory model
behind every metric: verl 0.9's metric names, insertion order and scalar types."""
from __future__ import annotations

import dataclasses
import math
import random
from typing import TYPE_CHECKING, Any

from tests.support.standin.knobs import Knobs
from tests.support.standin.lengths import DataOrder, response_fraction, trainer_peak

if TYPE_CHECKING:
    from tests.support.standin.truth_steps import TruthSteps


def _sel(cfg: Any, key: str, default: Any) -> Any:
    from omegaconf import OmegaConf

    value = OmegaConf.select(cfg, key, default=default, throw_on_missing=False)
    return default if value is None else value


@dataclasses.dataclass(frozen=True)
class RunShape:
    """The config facts the stand-in's models read."""

    project: str
    experiment: str
    loggers: tuple[str, ...]
    use_v1: bool
    n_gpus: int
    total_steps: int
    steps_per_epoch: int
    batch: int
    n: int
    max_prompt: int
    max_response: int
    util: float
    tp: int
    param_offload: bool
    optimizer_offload: bool
    use_kl_loss: bool
    use_ref: bool
    use_critic: bool
    free_cache_engine: bool
    val_before_train: bool
    test_freq: int
    ignore_eos: bool = False
    data: DataOrder = DataOrder(None, "prompt", True)
    truth: TruthSteps | None = None     # the hidden truth memory and tokens/s follow (truth_steps.py); None: knobs

    @classmethod
    def from_config(cls, cfg: Any, knobs: Knobs, truth: TruthSteps | None = None) -> RunShape:
        loggers = _sel(cfg, "trainer.logger", ["console"])
        if isinstance(loggers, str):
            loggers = [loggers]
        steps_per_epoch = max(1, int(knobs.steps_per_epoch))
        total = _sel(cfg, "trainer.total_training_steps", None)
        if total is None:
            total = int(_sel(cfg, "trainer.total_epochs", 1)) * steps_per_epoch
        use_kl_loss = bool(_sel(cfg, "actor_rollout_ref.actor.use_kl_loss", False))
        use_kl_in_reward = bool(_sel(cfg, "algorithm.use_kl_in_reward", False))
        return cls(
            project=str(_sel(cfg, "trainer.project_name", "verl_examples")),
            experiment=str(_sel(cfg, "trainer.experiment_name", "gsm8k")),
            loggers=tuple(str(x) for x in loggers),
            use_v1=bool(_sel(cfg, "trainer.use_v1", True)),
            n_gpus=max(0, int(_sel(cfg, "trainer.n_gpus_per_node", 8)) * int(_sel(cfg, "trainer.nnodes", 1))),
            total_steps=int(total),
            steps_per_epoch=steps_per_epoch,
            batch=max(1, int(_sel(cfg, "data.train_batch_size", 1024))),
            n=max(1, int(_sel(cfg, "actor_rollout_ref.rollout.n", 1))),
            max_prompt=max(1, int(_sel(cfg, "data.max_prompt_length", 512))),
            max_response=max(1, int(_sel(cfg, "data.max_response_length", 512))),
            util=float(_sel(cfg, "actor_rollout_ref.rollout.gpu_memory_utilization", 0.5)),
            tp=max(1, int(_sel(cfg, "actor_rollout_ref.rollout.tensor_model_parallel_size", 1))),
            param_offload=bool(_sel(cfg, "actor_rollout_ref.actor.fsdp_config.param_offload", False)),
            optimizer_offload=bool(_sel(cfg, "actor_rollout_ref.actor.fsdp_config.optimizer_offload", False)),
            use_kl_loss=use_kl_loss,
            use_ref=use_kl_loss or use_kl_in_reward,
            use_critic=str(_sel(cfg, "algorithm.adv_estimator", "gae")) == "gae",
            free_cache_engine=bool(_sel(cfg, "actor_rollout_ref.rollout.free_cache_engine", True)),
            val_before_train=bool(_sel(cfg, "trainer.val_before_train", True)),
            test_freq=int(_sel(cfg, "trainer.test_freq", -1)),
            ignore_eos=bool(_sel(cfg, "actor_rollout_ref.rollout.ignore_eos", False)),
            data=DataOrder.from_config(cfg),
            truth=truth,
        )


@dataclasses.dataclass(frozen=True)
class MemoryModel:
    """Coarse colocated FSDP + vLLM(-Ascend) memory budget of one device, in GiB."""

    capacity: float
    train_peak: float
    resident_at_rollout_start: float
    free_at_rollout_start: float
    rollout_request: float
    kv_cache: float
    train_need: float

    @classmethod
    def build(cls, shape: RunShape, knobs: Knobs) -> MemoryModel:
        capacity = knobs.device_memory_gib
        peak = knobs.peak_memory_gb * (0.6 if shape.param_offload else 1.0) * (0.65 if shape.optimizer_offload else 1.0)
        resident = peak * 0.5 * (0.25 if shape.param_offload else 1.0) * (0.5 if shape.optimizer_offload else 1.0)
        driver_reserved = 3.3  # idle HBM the Ascend driver keeps (npu-smi in vllm-ascend#1903)
        free = capacity - driver_reserved - resident
        request = shape.util * capacity
        kv = request - knobs.model_weights_gib / shape.tp - 2.0
        need = peak + driver_reserved + (0.0 if shape.free_cache_engine else request)
        return cls(capacity, peak, resident, free, request, kv, need)

    def step_need(self, shape: RunShape, knobs: Knobs, step: int) -> float:
        """What training needs at `step`, its lengths' growth included (lengths.py)."""
        prompt, response = step_lengths(shape, knobs, step)
        grown = trainer_peak(self.train_peak, knobs, prompt, response, shape.max_prompt, shape.max_response)
        return self.train_need - self.train_peak + grown

    def verdict(self) -> str:
        if self.rollout_request > self.free_at_rollout_start:
            return "vllm_startup_oom"
        if self.kv_cache <= 0:
            return "vllm_cache_oom"
        if self.train_need > self.capacity:
            return "oom"
        return "ok"


def _noise(seed: int, step: int, salt: str) -> float:
    """Deterministic value in [-1, 1] (string seeds hash with SHA-512, independent of PYTHONHASHSEED)."""
    return random.Random(f"{seed}:{step}:{salt}").uniform(-1.0, 1.0)


def step_lengths(shape: RunShape, knobs: Knobs, step: int) -> tuple[float, float]:
    """The step's mean prompt and response lengths (tokens), noise included (lengths.py)."""
    prompt = (shape.max_prompt * shape.data.prompt_fraction(step, shape.batch)
              * (1.0 + 0.02 * _noise(knobs.seed, step, "plen")))
    response = shape.max_response * response_fraction(step, shape.ignore_eos)
    if not shape.ignore_eos:
        response *= 1.0 + 0.04 * _noise(knobs.seed, step, "rlen")
    return min(prompt, float(shape.max_prompt)), response


def throughput_per_device(shape: RunShape, knobs: Knobs, step: int) -> float:
    """tokens/s/device: more KV cache helps with diminishing returns, TP=2 is the sweet spot, offload costs."""
    util = min(max(shape.util, 0.05), 0.99)
    f_util = 1.0 - 0.55 * math.exp(-(util - 0.05) / 0.22)
    f_tp = 1.0 / (1.0 + 0.15 * (math.log2(shape.tp) - 1.0) ** 2)
    f_off = (0.82 if shape.param_offload else 1.0) * (0.9 if shape.optimizer_offload else 1.0)
    warmup = 0.85 if step == 1 else 1.0
    return knobs.throughput * f_util * f_tp * f_off * warmup * (1.0 + 0.03 * _noise(knobs.seed, step, "tput"))


def step_metrics(shape: RunShape, knobs: Knobs, step: int, np: Any) -> dict[str, Any]:
    """One step's metrics with verl 0.9's names, insertion order and scalar types."""
    legacy = not shape.use_v1
    rnd = lambda salt: _noise(knobs.seed, step, salt)  # noqa: E731 - local shorthand
    actor_num = (lambda v: np.float64(v)) if legacy else float  # legacy reduce_metrics -> numpy scalars
    epoch = (step - 1) // shape.steps_per_epoch
    n_seq = shape.batch * shape.n
    prompt_mean, resp_mean = step_lengths(shape, knobs, step)
    total_tokens = int(n_seq * (prompt_mean + resp_mean))
    true = shape.truth.at(prompt_mean, resp_mean) if shape.truth is not None else None
    tput = true.tok_s if true is not None else throughput_per_device(shape, knobs, step)
    t_step = total_tokens / (tput * max(1, shape.n_gpus))
    if true is not None:           # the truth's allocator peak at the step's lengths, as it is
        alloc = true.trainer_peak_gb
    else:
        mem = MemoryModel.build(shape, knobs)
        grown = trainer_peak(mem.train_peak, knobs, prompt_mean, resp_mean, shape.max_prompt, shape.max_response)
        alloc = grown * (1.0 + 0.01 * rnd("mem"))
    score = 0.2 + 0.5 * (1.0 - math.exp(-step / 15.0)) + 0.02 * rnd("score")

    timing: dict[str, float] = {"gen": 0.55 * t_step, "old_log_prob": 0.07 * t_step}
    if shape.use_ref:
        timing["ref"] = 0.06 * t_step
    if shape.use_critic:
        timing["values"] = 0.05 * t_step
    timing["adv"] = 0.004 * t_step
    if shape.use_critic:
        timing["update_critic"] = 0.1 * t_step
    timing["update_actor"] = 0.22 * t_step
    timing["update_weights"] = 0.03 * t_step
    timing["step"] = t_step

    m: dict[str, Any] = {}
    m["actor/pg_loss"] = actor_num(-0.01 + 0.02 * rnd("pg"))
    m["actor/pg_clipfrac"] = actor_num(0.002 + 0.001 * rnd("clip"))
    m["actor/ppo_kl"] = actor_num(0.0005 * (1.0 + rnd("kl")))
    m["actor/pg_clipfrac_lower"] = actor_num(0.0)
    if shape.use_kl_loss:
        m["actor/kl_loss"] = actor_num(0.001 * step * (1.0 + 0.1 * rnd("kll")))
        m["actor/kl_coef"] = actor_num(0.001)
    m["actor/grad_norm"] = actor_num(0.3 + 0.05 * rnd("gn"))
    m["actor/lr"] = actor_num(1e-6)
    m["actor/perf/max_memory_allocated_gb"] = actor_num(round(alloc, 4))
    m["actor/perf/max_memory_reserved_gb"] = actor_num(round(alloc * 1.06 + 0.4, 4))
    m["actor/perf/cpu_memory_used_gb"] = actor_num(
        round(120.0 + (30.0 if shape.param_offload else 0.0) + (40.0 if shape.optimizer_offload else 0.0), 3)
    )
    m["perf/mfu/actor"] = actor_num(0.28 * tput / max(knobs.throughput, 1e-9))
    m["actor/entropy"] = 0.55 - 0.004 * step + 0.01 * rnd("ent")
    if shape.use_critic:
        m["critic/vf_loss"] = 0.05 + 0.01 * rnd("vf")
        m["critic/vf_clipfrac"] = 0.01 + 0.005 * rnd("vfc")
        m["critic/grad_norm"] = 0.6 + 0.1 * rnd("cgn")
    m["training/global_step"] = step
    m["training/epoch"] = epoch
    m["critic/score/mean"] = score
    m["critic/score/max"] = 1.0
    m["critic/score/min"] = 0.0
    m["critic/rewards/mean"] = score
    m["critic/rewards/max"] = 1.0
    m["critic/rewards/min"] = 0.0
    m["critic/advantages/mean"] = 0.001 * rnd("adv")
    m["critic/advantages/max"] = 2.5
    m["critic/advantages/min"] = -2.5
    m["critic/returns/mean"] = score * 0.9
    m["critic/returns/max"] = 1.0
    m["critic/returns/min"] = 0.0
    m["response_length/mean"] = resp_mean
    m["response_length/max"] = float(shape.max_response)
    m["response_length/min"] = float(shape.max_response if shape.ignore_eos else max(1, int(resp_mean * 0.1)))
    m["response_length/clip_ratio"] = 1.0 if shape.ignore_eos else max(0.0, 0.02 + 0.01 * rnd("clipr"))
    m["response_length_non_aborted/mean"] = resp_mean
    m["response/aborted_ratio"] = 0.0
    m["prompt_length/mean"] = prompt_mean
    m["prompt_length/max"] = float(shape.max_prompt)
    m["prompt_length/min"] = float(max(1, int(prompt_mean * 0.3)))
    m["prompt_length/clip_ratio"] = 0.0
    n_resp_tokens = n_seq * resp_mean
    for name, seconds in timing.items():
        m[f"timing_s/{name}"] = seconds
    for name in ("gen", "ref", "values", "adv", "update_critic", "update_actor"):
        if name in timing:
            tokens = n_resp_tokens if name == "gen" else total_tokens
            m[f"timing_per_token_ms/{name}"] = timing[name] * 1000 / tokens
    m["perf/total_num_tokens"] = total_tokens
    m["perf/time_per_step"] = t_step
    m["perf/throughput"] = total_tokens / (t_step * max(1, shape.n_gpus))
    turns = np.ones(8, dtype=np.int64)
    m["training/num_turns/mean"] = turns.mean()
    m["training/num_turns/max"] = turns.max()
    m["training/num_turns/min"] = turns.min()
    spans = np.ones(8, dtype=int)
    stale = np.zeros(8, dtype=int)
    off_policy = (("trajectory_spans", spans), ("trajectory_staleness", stale), ("trajectory_staleness_worst", stale))
    for key, arr in off_policy:
        m[f"training/off_policy/{key}/mean"] = arr.mean()
        m[f"training/off_policy/{key}/max"] = arr.max()
        m[f"training/off_policy/{key}/min"] = arr.min()
    return m


def val_metrics(knobs: Knobs, step: int, np: Any) -> dict[str, Any]:
    """Validation metrics as ``_val_metrics_update`` names them (gsm8k data source, one sample)."""
    acc = np.float64(round(0.2 + 0.5 * (1.0 - math.exp(-step / 15.0)) + 0.01 * _noise(knobs.seed, step, "val"), 6))
    turns = np.ones(16, dtype=np.int64)
    return {
        "val-core/openai/gsm8k/acc/mean@1": acc,
        "val-aux/openai/gsm8k/reward/mean@1": acc,
        "val-aux/openai/gsm8k/score/mean@1": acc,
        "val-aux/num_turns/min": turns.min(),
        "val-aux/num_turns/max": turns.max(),
        "val-aux/num_turns/mean": turns.mean(),
    }


def _numpy() -> Any:
    import numpy

    return numpy
