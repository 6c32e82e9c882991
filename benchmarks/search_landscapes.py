"""The landscapes of benchmarks/search_efficiency.py: the search space (sweeps/rollout_memory.yaml on
a2_64g x qwen3_8b, 448 configs), the recipe every method runs first, and the truth each method races
on: hand-written shapes, the drawn ones (benchmarks/drawn_landscapes.json) and the planner's own model
with hidden calibration errors (see search_efficiency.py's docstring for each).
"""
from __future__ import annotations

import itertools
import json
import math
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from verlsweep.common.distributions import discrete_values
from verlsweep.common.result import PLAN_CHECK_PHASES
from verlsweep.plan.predictor.calibration import THROUGHPUT_CONSTANTS
from verlsweep.proofs.rules import KNOBS, OFFLOADS, TP, UTIL
from verlsweep.study import guide as _guide
from verlsweep.study import space as _space

P_OFF, O_OFF, R_OFF = OFFLOADS          # actor params, actor optimizer, ref params
SPACE_LINES = [f"{UTIL}=range(0.30,0.95,0.05)", f"{TP}=choice(1,2,4,8)", f"{P_OFF}=choice(true,false)",
               f"{O_OFF}=choice(true,false)", f"{R_OFF}=choice(true,false)"]
RECIPE = {UTIL: 0.6, TP: 2, P_OFF: True, O_OFF: True, R_OFF: True}      # docs/ascend.md, Seed recipe

# --- a trial's size ----------------------------------------------------------------------------------
WORLD = 8                      # devices of every trial (a2_64g: one node of 8)
STEPS = 5                      # trial.steps (conf/trial/default.yaml)
# hand-written landscapes: tokens per step of the seed recipe's report (381 tok/s x 145 s/step x 8
# devices; verl-ascend-recipe reports/remax/README.md, calibration.yaml remax_qwen3_8b_a2_report)
TOKENS_PER_STEP = 381 * 145 * WORLD

HBM = 60.96
WEIGHTS = 16.4                 # Qwen3-8B bf16


# --- landscapes --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Truth:
    tok_s: float | None        # None: OOM
    phase: str | None          # an OOM's verlsweep.common.result.FAILURE_PHASES (None: host memory)
    step_s: float

    @property
    def oom_at_start(self) -> bool:
        return self.phase in ("vllm_start", "kv_cache") or (self.tok_s is None and self.phase is None)


@dataclass
class Landscape:
    name: str
    truth: dict[tuple, Truth]
    planner: dict[tuple, _guide.Prediction] | None = None
    note: str = ""
    guide: _guide.Planned | None = None  # what our sweeper's planner guide predicts from
    mem_factor: float | None = None      # planner landscapes: the hidden factor on every predicted GiB
    # the space (sweep param lines), its params in key order and the recipe's config (trial 0); other
    # spaces than this module's are benchmarks/throughput_landscapes.py's
    space_lines: tuple[str, ...] = tuple(SPACE_LINES)
    knobs: tuple[str, ...] = KNOBS
    recipe: dict = field(default_factory=lambda: dict(RECIPE))
    # configs the trial rules refuse before launch (verlsweep.command.rules.check_rules), each with the
    # keys the rules name: not in `truth`
    refused: dict[tuple, tuple[str, ...]] = field(default_factory=dict)

    @property
    def best(self) -> float:
        return max(t.tok_s for t in self.truth.values() if t.tok_s is not None)

    def key(self, params: dict) -> tuple:
        return tuple(params[n] for n in self.knobs)

    def space(self) -> _space.SearchSpace:
        return _space.parse(list(self.space_lines), OverridesParser.create())


# Each landscape returns (tok/s or None for an OOM, the OOM's phase): vllm_start / kv_cache before the
# first step, rollout_wake (util-bound, in the first step), training (util-free, in the first step)


def _cliff(p: dict) -> tuple[float | None, str | None]:
    """More KV cache is always faster; the optimum sits at the OOM edge, which moves with the offloads."""
    util, tp = p[UTIL], p[TP]
    trainer = 3 + (0 if p[P_OFF] else 9) + (0 if p[O_OFF] else 14) + (0 if p[R_OFF] else 5)
    kv = util * HBM - WEIGHTS / tp
    if kv <= 1:
        return None, "kv_cache"
    if util * HBM + trainer > HBM:
        return None, "rollout_wake"
    return (1200 * (1 - math.exp(-kv / 12)) * {1: 0.8, 2: 1.0, 4: 0.9, 8: 0.7}[tp]
            * (0.8 if p[P_OFF] else 1) * (0.9 if p[O_OFF] else 1) * (0.96 if p[R_OFF] else 1)), None


def _interior(p: dict) -> tuple[float | None, str | None]:
    """A peak at a middle utilization that grows with TP; TP 4 best; optimizer offload nearly free."""
    util, tp = p[UTIL], p[TP]
    trainer = 4 + (0 if p[P_OFF] else 8) + (0 if p[O_OFF] else 12) + (0 if p[R_OFF] else 4)
    if util * HBM + trainer + WEIGHTS / tp * 0.5 > HBM:
        return None, "rollout_wake"
    shape = max(0.2, 1 - ((util - (0.5 + 0.05 * math.log2(tp))) / 0.35) ** 2)
    return (900 * shape * {1: 0.6, 2: 0.85, 4: 1.0, 8: 0.8}[tp]
            * (0.75 if p[P_OFF] else 1) * (0.99 if p[O_OFF] else 1) * (0.9 if p[R_OFF] else 1)), None


def _plateaus(p: dict) -> tuple[float | None, str | None]:
    """Steps set by TP and the offloads, util only tilts them; a diagonal OOM edge."""
    util, tp = p[UTIL], p[TP]
    if util > 0.45 + 0.1 * math.log2(tp) - (0.15 if not p[O_OFF] else 0) - (0.1 if not p[P_OFF] else 0):
        return None, "vllm_start"
    plateau = {1: 300, 2: 520, 4: 610, 8: 560}[tp] * (0.7 if p[P_OFF] else 1) * (0.85 if p[R_OFF] else 1)
    return plateau * (1 + 0.15 * util) * (0.97 if p[O_OFF] else 1), None


def _ridge(p: dict) -> tuple[float | None, str | None]:
    """Adversarial: mediocre everywhere but one narrow ridge at the OOM edge (TP 8, actor params on device)."""
    util, tp = p[UTIL], p[TP]
    trainer = 2 + (0 if p[P_OFF] else 10) + (0 if p[O_OFF] else 16) + (0 if p[R_OFF] else 6)
    limit = HBM - trainer - WEIGHTS / tp
    if util * HBM > limit:
        return None, "rollout_wake"
    headroom = (limit - util * HBM) / HBM
    ridge = 700 * math.exp(-(headroom / 0.04) ** 2) if tp == 8 and not p[P_OFF] else 0
    return 400 + 100 * util + ridge - (60 if p[R_OFF] else 0), None


def _drawn(d: dict) -> Callable[[dict], tuple[float | None, str | None]]:
    """A landscape drawn by benchmarks/draw_landscapes.py (never tuned on): vLLM starts next to the
    actor's and ref's params, wakes next to everything the trainer keeps, training peaks with util-free
    activations; throughput saturates with the KV cache, bent by a util peak, slowed by each offload."""
    def f(p: dict) -> tuple[float | None, str | None]:
        util, tp, offs = p[UTIL], p[TP], (p[P_OFF], p[O_OFF], p[R_OFF])
        params = (0 if offs[0] else d["actor_param_gib"]) + (0 if offs[2] else d["ref_param_gib"])
        resident = d["base_gib"] + params + (0 if offs[1] else d["optimizer_gib"])
        kv = util * HBM - WEIGHTS / tp - d["vllm_overhead_gib"]
        if util * HBM > HBM - d["base_gib"] - params:
            return None, "vllm_start"
        if kv < d["kv_min_gib"]:
            return None, "kv_cache"
        if resident + d["activation_gib"] + d["actor_param_gib"] > HBM:
            return None, "training"
        if util * HBM + resident > HBM:
            return None, "rollout_wake"
        slow = math.prod(s for s, on in zip(d["offload_slowdown"], offs) if on)
        bend = max(0.1, 1 - d["util_bend"] * (util - d["util_peak"]) ** 2)
        return d["tok_s"] * d["tp_factor"][str(tp)] * (1 - math.exp(-kv / d["kv_saturation_gib"])) * slow * bend, None
    return f


HAND_WRITTEN: dict[str, Callable[[dict], tuple[float | None, str | None]]] = {
    "cliff at the edge": _cliff, "interior peak": _interior, "TP plateaus": _plateaus, "narrow ridge (adv.)": _ridge,
    **{name: _drawn(d)
       for name, d in json.loads((Path(__file__).parent / "drawn_landscapes.json").read_text()).items()},
}
# planner landscapes: a recipe composed with our config groups (+ overrides) and a seed for its hidden errors
PLANNER_BASES = {
    "planner: remax 8B A2": (["hardware=a2_64g", "model=qwen3_8b", "algorithm=remax"], 1),
    "planner: grpo 8B A3": (["hardware=a3_64g", "model=qwen3_8b", "algorithm=grpo"], 2),
    "planner: ppo 14B A2": (["hardware=a2_64g", "model=qwen3_14b", "algorithm=ppo"], 3),
    "planner: ppo 8B H100": (["hardware=h100_80g", "model=qwen3_8b", "algorithm=ppo"], 4),
    "planner: ppo 14B H100": (["hardware=h100_80g", "model=qwen3_14b", "algorithm=ppo"], 5),
}

def space() -> _space.SearchSpace:
    return _space.parse(SPACE_LINES, OverridesParser.create())


def key(params: dict) -> tuple:
    return tuple(params[n] for n in KNOBS)


def all_configs(sp: _space.SearchSpace) -> list[dict]:
    """Hydra's BasicSweeper order: the cartesian product, first param outermost."""
    names = list(sp.distributions)
    values = [discrete_values(sp.distributions[n], sp.decimals.get(n)) for n in names]
    values = [discrete_values(sp.distributions[n], sp.decimals.get(n)) for n in names]
    return [dict(zip(names, combo)) for combo in itertools.product(*values)]


def hand_written(name: str, f: Callable, configs: list[dict]) -> Landscape:
    truth = {}
    for p in configs:
        tok_s, phase = f(p)
        step_s = TOKENS_PER_STEP / ((tok_s or 381.0) * WORLD)
        truth[key(p)] = Truth(tok_s, phase, step_s)
    return Landscape(name, truth)


# the planner's checks (verlsweep.plan.predictor.memory.ORDER) -> the phase an OOM there shows
# (common.result.PLAN_CHECK_PHASES); host memory has none (more offloads use more host RAM: the rules
# say nothing about it)
def true_verdict(inp, cal, mem_factor: float) -> Truth:
    """The hidden truth of one config: the perturbed constants' plan, every predicted GiB x mem_factor."""
    from verlsweep.plan import predict
    from verlsweep.plan.predictor.memory import ORDER

    v = predict(inp, cal)
    for name in ORDER:
        check = v.checks.get(name)
        if check is None:
            continue
        exact = check.parts.get("vLLM reservation", 0.0)       # what vLLM asked for: no model error
        if exact + (check.need - exact) * mem_factor > check.limit:
            return Truth(None, PLAN_CHECK_PHASES.get(name), v.step_s)
    return Truth(v.tok_s, None, v.step_s)


def hidden_errors(cal, seed: int, tok_error: float, mem_error: float) -> tuple[object, float, str]:
    """A planner landscape's hidden calibration (every throughput constant x U(1-tok_error, 1+tok_error)),
    its factor on every predicted GiB (U(1-mem_error, 1+mem_error)), both drawn from `seed`, and a note."""
    rng = random.Random(seed)
    errors = {n: rng.uniform(1 - tok_error, 1 + tok_error) for n in THROUGHPUT_CONSTANTS}
    mem_factor = rng.uniform(1 - mem_error, 1 + mem_error)
    hidden = replace(cal, constants=replace(cal.constants, **{n: getattr(cal.constants, n) * f
                                                              for n, f in errors.items()}))
    worst = max(errors.items(), key=lambda kv: abs(kv[1] - 1))
    return hidden, mem_factor, f"memory x{mem_factor:.3f}, largest throughput error {worst[0]} x{worst[1]:.2f}"


def planner_landscape(name: str, overrides: list[str], seed: int, sp: _space.SearchSpace,
                      configs: list[dict], tok_error: float = 0.2, mem_error: float = 0.1) -> Landscape:
    from verlsweep.command.compose import compose_config
    from verlsweep.plan import load_calibration
    from verlsweep.plan.predictor.inputs import from_cfg

    cfg = compose_config(overrides)
    cal = load_calibration(cfg)
    hidden, mem_factor, note = hidden_errors(cal, seed, tok_error, mem_error)
    guide = _guide.plan_inputs(cfg, sp, configs)                  # what our sweeper sees
    predictions = _guide.predict(guide)
    truth = {}
    for p in configs:
        for n, value in p.items():
            OmegaConf.update(cfg, n, value, force_add=True)
        truth[key(p)] = true_verdict(from_cfg(cfg), hidden, mem_factor)
    return Landscape(name, truth, {key(pr.params): pr for pr in predictions}, note, guide, mem_factor)



# --- the long run (search_efficiency.py --long-run) ----------------------------------------------------
# A trial runs STEPS steps at the lengths its policy writes then (about half of max_response_length);
# the long run reaches the maximum lengths. What a config must hold there, on top of its 5-step truth
# (written before any result and never tuned): the trainer's resident state (the cliff's sizes: 3 GiB
# base, actor params 9, optimizer 14, ref params 5 when not offloaded), the activations of a batch at
# maximum lengths (ACT_MAX_GIB) and vLLM's sleeping weights (WEIGHTS / TP: vllm-ascend's sleep mode
# level 1 keeps a copy), within HBM less what the driver keeps (DRIVER_GIB).
ACT_MAX_GIB = 22.0
DRIVER_GIB = 3.3               # idle HBM the Ascend driver keeps (npu-smi in vllm-ascend#1903)
# a step at maximum lengths holds (max prompt + max response) / (the 5-step means: 0.45 + 0.5 of them)
LONG_STEP_FACTOR = 2.0 / 0.95


def survives_long_run(p: dict) -> bool:
    """Whether a config that completes its 5 steps also trains at the maximum lengths."""
    resident = 3 + (0 if p[P_OFF] else 9) + (0 if p[O_OFF] else 14) + (0 if p[R_OFF] else 5)
    return resident + ACT_MAX_GIB + WEIGHTS / p[TP] <= HBM - DRIVER_GIB
