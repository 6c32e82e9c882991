"""How long the planner guide takes at a sweep's start, beside the straightforward way of computing the
same ranking, in one run.

    python benchmarks/guide_speed.py [--recipes a2_64g:remax a3_64g:grpo h100_80g:ppo] [--draws 32]

For each hardware:algorithm (Qwen3-8B, the default rollout_memory space with every TP size: 14 utils x
4 TP x 2 x 2 x 2 offloads = 448 configs) it times

  guide       verlsweep.study.guide.guide as the sweeper calls it: the config read once into a plain
              tree, only the swept keys and the interpolations that follow them resolved again per
              candidate, and each error draw rerunning only the throughput model (tok_s_under);
  reference   the same ranking computed the plain way: each candidate's keys set on the config with
              OmegaConf.update and read with from_cfg, each error draw a whole predict().

Both must pick the same configs with the same shares of the draws (checked). Prints seconds and the
ratio reference / guide.
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf

from verlsweep.command.compose import compose_config
from verlsweep.config.study import study_config
from verlsweep.plan import from_cfg, load_calibration, predict
from verlsweep.study import guide as _guide
from verlsweep.study import space as _space

KEYS = ("verl.actor_rollout_ref.rollout.gpu_memory_utilization=range(0.30,0.95,0.05)",
        "verl.actor_rollout_ref.rollout.tensor_model_parallel_size=choice(1,2,4,8)",
        "verl.actor_rollout_ref.actor.fsdp_config.param_offload=choice(true,false)",
        "verl.actor_rollout_ref.actor.fsdp_config.optimizer_offload=choice(true,false)",
        "verl.actor_rollout_ref.ref.fsdp_config.param_offload=choice(true,false)")


def reference(cfg, sp: _space.SearchSpace, draws: int, error: float, seed: int) -> list[_guide.Prediction]:
    """predict_all without its shortcuts: a config update and from_cfg per candidate, predict() per draw."""
    params_list = _guide.candidates(sp, seed)
    base = OmegaConf.create(OmegaConf.to_container(cfg, resolve=False))
    inputs = []
    for params in params_list:
        for name, value in params.items():
            OmegaConf.update(base, name, sp.value(name, value), force_add=True)
        inputs.append(from_cfg(base))
    cal = load_calibration(base)
    out = [_guide.Prediction(p, v.status, v.tok_s) for p, v in zip(params_list, (predict(i, cal) for i in inputs))]
    feasible = _guide.ranked(out)
    wins: Counter[int] = Counter()
    wins[min(feasible, key=lambda i: _guide._order(out[i], out[i].tok_s))] += 1
    for drawn in _guide.error_draws(cal, draws - 1, error, seed):
        tok_s = {i: predict(inputs[i], drawn).tok_s for i in feasible}
        wins[min(feasible, key=lambda i: _guide._order(out[i], tok_s[i]))] += 1
    return [_guide.Prediction(p.params, p.status, p.tok_s, wins[i] / draws) for i, p in enumerate(out)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--recipes", nargs="+", default=["a2_64g:remax", "a3_64g:grpo", "h100_80g:ppo"])
    guide = study_config(compose_config([])).guide       # the sweep's own settings (conf/study/default.yaml)
    ap.add_argument("--draws", type=int, default=guide.draws)
    args = ap.parse_args()
    sp = _space.parse(list(KEYS), OverridesParser.create())
    print(f"{'recipe':<18} {'configs':>7} {'guide s':>8} {'reference s':>11} {'ratio':>6}  same picks")
    for recipe in args.recipes:
        hardware, algorithm = recipe.split(":")
        cfg = compose_config([f"hardware={hardware}", f"algorithm={algorithm}", "model=qwen3_8b"])
        t0 = time.perf_counter()
        ours = _guide.predict_all(cfg, sp, _guide.candidates(sp), draws=args.draws, error=guide.error)
        t1 = time.perf_counter()
        ref = reference(cfg, sp, args.draws, guide.error, 0)
        t2 = time.perf_counter()
        same = ([(p.params, p.status, p.tok_s, p.p_best) for p in ours]
                == [(p.params, p.status, p.tok_s, p.p_best) for p in ref])
        print(f"{recipe:<18} {len(ours):>7} {t1 - t0:>8.1f} {t2 - t1:>11.1f} {(t2 - t1) / (t1 - t0):>6.1f}  {same}")


if __name__ == "__main__":
    main()
