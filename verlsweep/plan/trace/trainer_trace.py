"""The trainer's memory traced from the real model code: the Hugging Face model verl would load, built
under torch's FakeTensorMode (shapes and dtypes, no storage, no arithmetic) and run through what verl
0.9.1's FSDP workers run for one micro batch, with every tensor storage that comes alive counted.

What is traced, one device, world size 1 (the planner divides the sharded states by the FSDP group
analytically, verlsweep.plan.predictor.trainer_memory; collectives and Ulysses' all-to-all are not traced):

* a pass (`trace_pass`): the model in its compute dtype, bf16, as FSDP's MixedPrecision hands it to the
  forward (param_dtype bf16 by default: verl/workers/fsdp_workers.py _build_model_optimizer,
  `mixed_precision_config.get("param_dtype", "bf16")`); one packed sequence of the micro batch's tokens,
  as remove-padding feeds it (verl/workers/actor/dp_actor.py _forward_micro_batch, use_remove_padding:
  input_ids (1, total_nnz) with position_ids); gradient checkpointing non-reentrant, as verl enables it
  (`gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})`); log-probs
  through a fused cross-entropy that keeps the bf16 logits for its backward and writes the gradient in
  place when no entropy is computed (verl/utils/torch_functional.py logprobs_from_logits ->
  logprobs_from_logits_flash_attn, `inplace_backward=not calculate_entropy` in dp_actor.py); entropy as
  verl computes it (entropy_from_logits, entropy_from_logits_with_chunking, or under
  torch.utils.checkpoint when entropy_checkpointing). A forward-only pass (old / ref log-prob, critic
  values) runs under no_grad. A mixture-of-experts layer runs transformers' default experts
  implementation (grouped_mm for Qwen3-MoE in transformers 5), routing every token. The critic is
  AutoModelForTokenClassification with one label (fsdp_workers.py CriticWorker:
  `critic_model_config.num_labels = 1`, load_valuehead_model).
  The figure is the peak of everything but the parameters and accumulated gradients: activations,
  logits and temporaries.
* the states (`trace_states`): the model in fsdp_config.model_dtype (fp32 by default:
  verl/trainer/config/engine/fsdp.yaml `model_dtype: fp32`), a gradient per parameter, then verl's
  step: clip_grad_norm_ and torch.optim.AdamW (verl/workers/config/optimizer.py build_optimizer:
  weight_decay 0.01, betas (0.9, 0.999)) with foreach=True, torch's choice on CUDA/NPU devices. The
  figures are the parameter, gradient and Adam-state bytes and the step's temporaries above them.

A trace runs under a time limit (`limit_s`, checked on every operator): one that exceeds it, or a
model whose code cannot run on fake tensors, raises TraceError and the planner falls back to its
analytic formula. Results are cached on disk (verlsweep.plan.trace.cache).
"""
from __future__ import annotations

import functools
import json
import time
import weakref
from collections.abc import Mapping
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from typing import Any

from verlsweep.plan.trace import cache as trace_cache

TRACER_VERSION = 1
DEFAULT_LIMIT_S = 120.0
_ROWS = 128            # rows of logits one fused cross-entropy block works on (an fp32 temporary)
_DTYPES = {"fp32": "float32", "float32": "float32", "bf16": "bfloat16", "bfloat16": "bfloat16",
           "fp16": "float16", "float16": "float16"}
ENTROPY = ("none", "full", "chunked", "checkpointed")


class TraceError(RuntimeError):
    """The trace could not run (model code, unknown dtype) or ran past its time limit."""


@dataclass(frozen=True)
class PassSpec:
    """One micro batch of one role's pass."""

    tokens: int                   # tokens of the packed micro batch on this device (after the SP split)
    update: bool                  # forward + backward (a training pass) or forward under no_grad
    grad_ckpt: bool = False
    vocab_head: bool = True       # log-probs over the vocabulary (actor, ref); False: value head (critic)
    entropy: str = "none"         # none | full | chunked | checkpointed
    entropy_chunk: int = 2048


@dataclass(frozen=True)
class PassTrace:
    params_bytes: int             # the compute copy the pass runs on
    grads_bytes: int              # gradients accumulated by the backward
    work_bytes: int               # peak of activations, logits and temporaries
    peak_at: str                  # forward | loss | backward
    seconds: float
    cached: bool = False


@dataclass(frozen=True)
class StatesTrace:
    params_bytes: int
    grads_bytes: int
    optimizer_bytes: int          # Adam's two moments and its per-tensor step counters
    step_bytes: int               # temporaries of clip_grad_norm_ + the AdamW step above the states
    seconds: float
    cached: bool = False


# ---- the counter --------------------------------------------------------------------------------

def _counter(deadline: float):
    """A dispatch mode that counts the bytes of live tensor storages and their peak. A storage is
    counted when an operator first returns it and released when Python frees it (a weak reference),
    so views and in-place results cost nothing, as in the caching allocator."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_leaves

    class LiveBytes(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.live = 0
            self.excluded = 0          # params and gradients: what `work` leaves out
            self.peak_work = 0
            self.peak_total = 0
            self.peak_at = ""
            self.stage = "build"
            self._alive: dict[int, Any] = {}     # id(storage) -> a weak reference that releases it

        def _on_freed(self, key: int, nbytes: int, _ref: Any) -> None:
            """A counted storage was freed (its weak reference's callback)."""
            self._alive.pop(key, None)
            self.live -= nbytes

        def count(self, t: Any) -> int:
            if not isinstance(t, torch.Tensor):
                return 0
            st = t.untyped_storage()
            key = id(st)
            if key in self._alive:
                return 0
            nbytes = st.nbytes()
            self._alive[key] = weakref.ref(st, functools.partial(self._on_freed, key, nbytes))
            self.live += nbytes
            return nbytes

        def reset_peak(self) -> None:
            self.peak_work, self.peak_total, self.peak_at = 0, self.live, ""

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if time.perf_counter() > deadline:
                raise TraceError("the trace ran past its time limit")
            out = func(*args, **(kwargs or {}))
            for t in tree_leaves(out):
                self.count(t)
            work = self.live - self.excluded
            if work > self.peak_work:
                self.peak_work, self.peak_at = work, self.stage
            self.peak_total = max(self.peak_total, self.live)
            return out

    return LiveBytes()


def _storage_bytes(tensors: Any) -> int:
    seen: dict[int, int] = {}
    for t in tensors:
        st = t.untyped_storage()
        seen[id(st)] = st.nbytes()
    return sum(seen.values())


# ---- the model ----------------------------------------------------------------------------------

def _build(hf_config: Mapping[str, Any], dtype: str, *, value_head: bool):
    """The transformers model verl loads, with this config, in this dtype, on fake tensors."""
    import torch
    import transformers

    cfg = dict(hf_config)
    model_type = cfg.pop("model_type", None)
    if not model_type:
        raise TraceError("the model's config has no model_type")
    for key in ("architectures", "torch_dtype", "dtype", "transformers_version", "auto_map"):
        cfg.pop(key, None)
    try:
        config = transformers.AutoConfig.for_model(model_type, **cfg)
    except ValueError as exc:
        raise TraceError(f"transformers does not know model_type {model_type!r}: {exc}") from None
    config.use_cache = False
    # verl loads with flash_attention_2 (varlen over the packed sequence); on fake CPU tensors sdpa takes
    # torch's flash kernel, which likewise keeps no seq x seq matrix.
    config._attn_implementation = "sdpa"
    torch_dtype = getattr(torch, _DTYPES[dtype])
    if value_head:
        config.num_labels = 1
        config.classifier_dropout = 0.0
        return transformers.AutoModelForTokenClassification.from_config(config, dtype=torch_dtype)
    return transformers.AutoModelForCausalLM.from_config(config, dtype=torch_dtype)


def _fused_logprobs():
    """A cross-entropy with flash-attn's memory behaviour (flash_attn.ops.triton.cross_entropy, which
    verl's logprobs_from_logits uses when installed): the forward keeps the logits and one float per
    row; the backward writes softmax - onehot into the saved logits when allowed (inplace_backward),
    else into a new tensor. Rows are processed a block at a time, as the kernel does."""
    import torch

    class FusedLogProbs(torch.autograd.Function):
        @staticmethod
        def forward(ctx, logits, labels, inplace):
            lse = torch.cat([torch.logsumexp(logits[i:i + _ROWS].float(), dim=-1)
                             for i in range(0, logits.shape[0], _ROWS)])
            picked = logits.gather(-1, labels.unsqueeze(-1)).squeeze(-1).float()
            ctx.save_for_backward(logits, labels, lse)
            ctx.inplace = inplace
            return picked - lse

        @staticmethod
        def backward(ctx, grad):
            logits, labels, lse = ctx.saved_tensors
            out = logits if ctx.inplace else torch.empty_like(logits)
            for i in range(0, logits.shape[0], _ROWS):
                block = torch.exp(logits[i:i + _ROWS].float() - lse[i:i + _ROWS, None])
                out[i:i + _ROWS] = (block * -grad[i:i + _ROWS, None]).to(out.dtype)
            return out, None, None

    return FusedLogProbs.apply


def _entropy(logits: Any, how: str, chunk: int) -> Any:
    """verl/utils/torch_functional.py: entropy_from_logits (softmax and a product in the logits' dtype),
    the chunked variant (fp32, one chunk at a time) or the plain one under checkpoint."""
    import torch

    def full(x: Any) -> Any:
        pd = torch.softmax(x, dim=-1)
        return torch.logsumexp(x, dim=-1) - (pd * x).sum(dim=-1)

    if how == "full":
        return full(logits)
    if how == "checkpointed":
        return torch.utils.checkpoint.checkpoint(full, logits, use_reentrant=False)
    return torch.cat([full(logits[i:i + chunk].float()) for i in range(0, logits.shape[0], chunk)])


# ---- the traces ---------------------------------------------------------------------------------

def _run_pass(hf_config: Mapping[str, Any], spec: PassSpec, limit_s: float) -> PassTrace:
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    start = time.perf_counter()
    counter = _counter(start + limit_s)
    with FakeTensorMode(), counter:
        model = _build(hf_config, "bf16", value_head=not spec.vocab_head)
        params = list(model.parameters())
        if spec.update:
            model.train()
            if spec.grad_ckpt:
                model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
            def accumulated(q: Any) -> None:     # a gradient stops counting as work once accumulated
                counter.count(q.grad)
                counter.excluded += q.grad.untyped_storage().nbytes()

            for p in params:
                p.register_post_accumulate_grad_hook(accumulated)
        else:
            model.eval()
        counter.excluded = counter.live        # params, buffers: the compute copy
        counter.reset_peak()
        ids = torch.zeros(1, spec.tokens, dtype=torch.long)
        positions = torch.arange(spec.tokens).unsqueeze(0)
        counter.stage = "forward"
        with nullcontext() if spec.update else torch.no_grad():
            out = model(input_ids=ids, position_ids=positions, use_cache=False)
            counter.stage = "loss"
            if spec.vocab_head:
                logits = out.logits.squeeze(0)
                loss = _fused_logprobs()(logits, ids.squeeze(0), spec.entropy == "none").sum()
                if spec.entropy != "none":
                    loss = loss + _entropy(logits, spec.entropy, spec.entropy_chunk).sum()
            else:
                loss = out.logits.squeeze(0)[:, 0].float().sum()
            del out
            if spec.update:
                counter.stage = "backward"
                loss.backward()
        grads = _storage_bytes(p.grad for p in params if p.grad is not None)
        result = PassTrace(params_bytes=_storage_bytes(params), grads_bytes=grads,
                           work_bytes=counter.peak_work, peak_at=counter.peak_at,
                           seconds=time.perf_counter() - start)
    return result


def _run_states(hf_config: Mapping[str, Any], model_dtype: str, value_head: bool, limit_s: float) -> StatesTrace:
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode

    start = time.perf_counter()
    counter = _counter(start + limit_s)
    with FakeTensorMode(), counter:
        model = _build(hf_config, model_dtype, value_head=value_head)
        params = list(model.parameters())
        params_bytes = _storage_bytes(params)
        before = counter.live
        for p in params:
            p.grad = torch.zeros_like(p)
        grads_bytes = counter.live - before
        optimizer = torch.optim.AdamW(params, lr=1e-6, betas=(0.9, 0.999), weight_decay=0.01, foreach=True)
        before = counter.live
        counter.excluded = counter.live
        counter.reset_peak()
        counter.stage = "step"
        torch.nn.utils.clip_grad_norm_(params, max_norm=1.0, foreach=True)
        optimizer.step()
        after = counter.live
        result = StatesTrace(params_bytes=params_bytes, grads_bytes=grads_bytes,
                             optimizer_bytes=after - before, step_bytes=max(0, counter.peak_total - after),
                             seconds=time.perf_counter() - start)
        del optimizer
    return result


def _cached(kind: str, payload: dict[str, Any], run, cls):
    name = trace_cache.key(kind, payload, TRACER_VERSION)
    hit = trace_cache.load(name)
    if hit is not None:
        return cls(**{**hit, "cached": True})
    try:
        result = run()
    except TraceError:
        raise
    except Exception as exc:    # model code that fake tensors cannot run (e.g. data-dependent shapes)
        raise TraceError(f"{type(exc).__name__}: {exc}") from exc
    trace_cache.store(name, {k: v for k, v in asdict(result).items() if k != "cached"})
    return result


def _config_payload(hf_config: Mapping[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(dict(hf_config), sort_keys=True, default=str))


def trace_pass(hf_config: Mapping[str, Any], spec: PassSpec, *, limit_s: float = DEFAULT_LIMIT_S) -> PassTrace:
    """One micro batch of one pass (see the module docstring), from the disk cache when traced before."""
    if spec.entropy not in ENTROPY:
        raise ValueError(f"entropy={spec.entropy!r}: one of {', '.join(ENTROPY)}")
    payload = {"config": _config_payload(hf_config), "spec": asdict(spec)}
    return _cached("pass", payload, lambda: _run_pass(hf_config, spec, limit_s), PassTrace)


def trace_states(hf_config: Mapping[str, Any], model_dtype: str = "fp32", *, value_head: bool = False,
                 limit_s: float = DEFAULT_LIMIT_S) -> StatesTrace:
    """Params, grads and AdamW states in model_dtype and the step's temporaries, unsharded."""
    if model_dtype not in _DTYPES:
        raise TraceError(f"model_dtype={model_dtype!r}: the tracer knows {', '.join(sorted(_DTYPES))}")
    payload = {"config": _config_payload(hf_config), "dtype": model_dtype, "value_head": value_head}
    return _cached("states", payload, lambda: _run_states(hf_config, model_dtype, value_head, limit_s),
                   StatesTrace)
