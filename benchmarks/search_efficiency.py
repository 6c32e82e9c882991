"""A race in device time: how many device-hours until a sweep has measured a config within 3% of the
best feasible throughput?

The space is the default one (sweeps/rollout_memory.yaml on a2_64g x qwen3_8b: rollout
gpu_memory_utilization 0.30..0.95 x TP {1,2,4,8} x actor param / optimizer offload x ref param
offload = 448 configs). Every method gets the same device-hour budget and runs the recipe's own
config (util 0.6, TP 2, every offload on; docs/ascend.md, Seed recipe) as trial 0.

Cost of a trial, in device-hours (seconds x WORLD devices / 3600):
  0                                   not launched (the planner vetoed it, or a measurement was reused)
  STARTUP_S                           an OOM at vLLM start (start check, KV cache)
  STARTUP_S + step time               an OOM inside the first step (wake-up, log-prob, update)
  STARTUP_S + (k + 1) x step time     pruned after step k (step 1 counts twice: graph capture, warm-up)
  STARTUP_S + (STEPS + 1) x step time completed

Landscapes (the truth, unknown to every method):
  hand-written   four shapes (cliff at the OOM edge, interior peak, TP plateaus, a narrow ridge); a step
                 takes TOKENS_PER_STEP / (tok/s x WORLD). The planner knows nothing of them, so our
                 sweeper runs them unguided (the planner has no opinion, as for a config it cannot model).
  drawn 1, 2      drawn once by benchmarks/draw_landscapes.py (fixed seed; benchmarks/drawn_landscapes.json,
                 committed before any result was seen, never tuned on): start, KV, training and wake-up
                 OOMs from drawn memory sizes, throughput from a drawn KV saturation and util peak
  planner        the planner's own model of a composed recipe, with hidden calibration errors drawn per
                 landscape: every throughput constant x U(0.8, 1.2) and every predicted GiB (all but
                 vLLM's own reservation, util x HBM, which is what it asked for) x one U(0.9, 1.1).
                 Our sweeper sees the packaged (unperturbed) planner: informative but wrong.

Methods:
  verlsweep      our sweeper's defaults: recipe first, then the planner guide's picks (the configs
                 best under draws of the planner's error, study.guide), the boundary sampler
                 (hydra/sweeper/sampler/boundary, verlsweep.proofs: what each OOM/fit proves, told with
                 its phase; bisects the util band; the planner's tok/s ranks the combinations it opens),
                 OOM and planner-infeasible told as constraint violations (_results.tell), the planner's
                 veto and the proof veto (no device time), reuse of measured configs (_reuse), the
                 median pruner (its defaults)
  tpe+guide      the same with multivariate TPE (hydra/sweeper/sampler=tpe, the previous default)
  grid           the recipe, then Hydra's BasicSweeper order (cartesian product, first param outermost)
  random         RandomSampler
  tpe oom=0      Optuna's default TPESampler, an OOM told as throughput 0
  tpe oom=FAIL   the same, an OOM told as FAIL (TPE then ignores it)
  gp             Optuna's GPSampler, an OOM told as a violated constraint (it models constraints itself)
Baselines have no planner, no reuse and no pruner: what a plain Optuna/Hydra sweep does.

    python benchmarks/search_efficiency.py [--seeds 10] [--budget 60] [--workers 2]
        [--top-k 3] [--draws 32] [--methods verlsweep tpe+guide random ...] [--landscapes "TP plateaus" ...]
        [--space throughput] [--long-run [--confirm 2]]

--long-run reads the same race as a question of the long run: does each method's declared best survive
the maximum lengths the long run reaches, at what cost (benchmarks/long_run.py).

--space throughput races the same methods, budget and cost model on the planner landscapes over the
throughput space instead (sweeps/throughput.yaml, chained from each memory landscape's best config;
benchmarks/throughput_landscapes.py). There a config the trial rules refuse costs nothing: our sweeper
tells it as it really does (config_error: a failure toward max_consecutive_failures only where a rule
names a key the sweep does not sweep, verlsweep/study/failures.py), a baseline as it tells an OOM. Two more
columns: refused proposals and sweeps stopped.

Modules: benchmarks/search_landscapes.py (the space and the landscapes), benchmarks/search_methods.py
(the methods and one sweep of each, with the cost model); this one races them and prints the table.

Measured throughput is noise-free (the same for every method). Columns: median and p90 device-hours
to the target over the seeds (a seed that never gets there counts as the budget, shown `>`), and the
share of seeds that get there within the budget, launched trials and launched OOMs per sweep.
"""
from __future__ import annotations

import argparse
import math
import multiprocessing
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import long_run
import search_methods
from search_landscapes import (
    HAND_WRITTEN,
    PLANNER_BASES,
    STEPS,
    WORLD,
    Landscape,
    all_configs,
    hand_written,
    planner_landscape,
    space,
)
from search_methods import GUIDE, METHODS, Run, guide_predictions, run_method

from verlsweep.command.compose import compose_config
from verlsweep.config.study import study_config
from verlsweep.reconcile.budget import quiet_optuna

LONG_RUN = study_config(compose_config([])).long_run

# the race's landscapes, set before its workers fork (a throughput landscape is too big to pickle per job)
_LANDS: dict[str, Landscape] = {}


def _job(args: tuple) -> tuple[str, str, int, Run]:
    import torch

    # GPSampler's torch would start a thread per core in every worker: on a shared machine that
    # multiplies its run time many times over
    torch.set_num_threads(1)
    name, method, seed, budget, top_k, draws = args
    with quiet_optuna():
        return name, method, seed, run_method(method, _LANDS[name], seed, budget, top_k, draws)


def _guide_job(args: tuple) -> tuple[tuple[str, int], list]:
    name, seed, draws = args
    return (name, seed), guide_predictions(_LANDS[name], seed, draws)


def _throughput_job(args: tuple) -> Landscape:
    from throughput_landscapes import throughput_landscape

    return throughput_landscape(*args)


def _p90(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, math.ceil(0.9 * len(xs)) - 1)]


def _arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--budget", type=float, default=60.0, help="device-hours per sweep")
    parser.add_argument("--top-k", type=int, default=GUIDE.top_k, help="study.guide.top_k")
    parser.add_argument("--draws", type=int, default=GUIDE.draws, help="study.guide.draws")
    parser.add_argument("--startup-s", type=float, default=search_methods.STARTUP_S)
    parser.add_argument("--target", type=float, default=search_methods.TARGET,
                        help="done at a measured config this close to the best (0.97: within 3%%)")
    parser.add_argument("--methods", nargs="*", default=list(METHODS))
    parser.add_argument("--landscapes", nargs="*", default=None, help="names (default: all)")
    parser.add_argument("--workers", type=int, default=2)
    # the guide assumes a 20% throughput error (guide.error); a hidden error of another size checks that
    # its wins do not come from knowing the landscapes' error model
    parser.add_argument("--hidden-error", type=float, default=0.2,
                        help="planner landscapes: each throughput constant x U(1-e, 1+e)")
    parser.add_argument("--hidden-memory-error", type=float, default=0.1,
                        help="planner landscapes: predicted GiB x U(1-e, 1+e)")
    parser.add_argument("--long-run", action="store_true",
                        help="whether each method's declared best survives the long run (benchmarks/long_run.py)")
    parser.add_argument("--confirm", type=int, default=LONG_RUN.confirm, help="study.long_run.confirm")
    parser.add_argument("--space", choices=("rollout_memory", "throughput"), default="rollout_memory",
                        help="throughput: the planner landscapes over sweeps/throughput.yaml (chained)")
    return parser.parse_args()


def _race(args: argparse.Namespace) -> tuple[int, list[Landscape], dict[tuple[str, str], list[Run]]]:
    """Every method on every landscape over the seeds (grid once: it has no seed): the number of
    configs, the landscapes and each (landscape, method)'s runs."""
    ctx = multiprocessing.get_context("fork")
    if args.space == "throughput":
        bases = [(n, o, s, args.hidden_error, args.hidden_memory_error) for n, (o, s) in PLANNER_BASES.items()
                 if not args.landscapes or n in args.landscapes]
        with ctx.Pool(args.workers) as pool:
            lands = pool.map(_throughput_job, bases, chunksize=1)
        n_configs = len(lands[0].truth) + len(lands[0].refused) if lands else 0
    else:
        sp = space()
        configs = all_configs(sp)
        n_configs = len(configs)
        lands = [hand_written(n, f, configs) for n, f in HAND_WRITTEN.items()]
        lands += [planner_landscape(n, o, s, sp, configs, args.hidden_error, args.hidden_memory_error)
                  for n, (o, s) in PLANNER_BASES.items()]
        if args.landscapes:
            lands = [land for land in lands if land.name in args.landscapes]
    _LANDS.clear()
    _LANDS.update({land.name: land for land in lands})
    guided = [m for m in args.methods if m in ("verlsweep", "tpe+guide")]
    if len(guided) > 1:       # both guided methods plan the same draws: once per landscape and seed
        with ctx.Pool(args.workers) as pool:
            search_methods.GUIDED.update(pool.map(
                _guide_job, [(land.name, s, args.draws) for land in lands if land.planner is not None
                             for s in range(args.seeds)], chunksize=1))
    jobs = [(land.name, m, s, args.budget, args.top_k, args.draws) for land in lands for m in args.methods
            for s in (range(1) if m == "grid" else range(args.seeds))]
    with ctx.Pool(args.workers) as pool:
        done = pool.map(_job, jobs, chunksize=1)
    runs: dict[tuple[str, str], list[Run]] = {}
    for name, method, _seed, run in done:
        runs.setdefault((name, method), []).append(run)
    return n_configs, lands, runs


def _print_landscape(land: Landscape, runs: dict[tuple[str, str], list[Run]], args: argparse.Namespace
                     ) -> tuple[dict[str, float], dict[str, float]]:
    """One landscape's rows, a method a row; returns each method's median device-hours and mean OOMs."""
    values = list(land.truth.values())
    oom = sum(t.tok_s is None for t in values) / len(values)
    near = sum(t.tok_s is not None and t.tok_s >= search_methods.TARGET * land.best for t in values)
    medians, oom_means = {}, {}
    for i, method in enumerate(args.methods):
        rs = runs[(land.name, method)]
        hours = [r.hours_to_target if r.hours_to_target is not None else args.budget for r in rs]
        reached = sum(r.hours_to_target is not None for r in rs)
        med = statistics.median(hours)
        medians[method] = med
        oom_means[method] = statistics.mean(r.ooms for r in rs)
        missing_med = sum(r.hours_to_target is None for r in rs) * 2 > len(rs)
        missing_p90 = reached < math.ceil(0.9 * len(rs))
        print(f"{(land.name if i == 0 else ''):22.22} {(f'{oom:.0%}' if i == 0 else ''):>4} "
              f"{(str(near) if i == 0 else ''):>4} | {method:13} "
              f"{('>' if missing_med else '') + f'{med:.1f}':>9} "
              f"{('>' if missing_p90 else '') + f'{_p90(hours):.1f}':>8} {reached:>3}/{len(rs):<3} "
              f"{statistics.mean(r.launched for r in rs):8.1f} {statistics.mean(r.ooms for r in rs):5.1f} "
              f"{statistics.mean(r.reused for r in rs):6.1f} "
              f"{statistics.mean(r.vetoed for r in rs):6.1f}"
              + (f" {statistics.mean(r.refused for r in rs):7.1f} {sum(r.stopped for r in rs):>7}"
                 if args.space == "throughput" else ""))
    if land.note:
        print(f"{'':22} {'':>4} {'':>4} | hidden errors: {land.note}")
    return medians, oom_means


def _verdict(land: Landscape, medians: dict[str, float], oom_means: dict[str, float]) -> str | None:
    """verlsweep against the best other method on one landscape, and whether it meets the goal."""
    others = {m: v for m, v in medians.items() if m != "verlsweep"}
    if "verlsweep" not in medians or not others:
        return None
    best_m = min(others, key=others.get)
    ratio = medians["verlsweep"] / others[best_m] if others[best_m] else float("inf")
    fewest = min(v for m, v in oom_means.items() if m != "verlsweep")
    ok = (ratio <= 0.5 and oom_means["verlsweep"] < fewest
          and medians["verlsweep"] <= medians.get("random", float("inf")))
    return (f"  {land.name:22} verlsweep / best other ({best_m}) = {ratio:.2f}; OOMs "
            f"{oom_means['verlsweep']:.1f} vs fewest of the others {fewest:.1f}"
            + (f"; vs random {medians['verlsweep'] / medians['random']:.2f}"
               if "random" in medians and medians["random"] else "")
            + ("  goal met" if ok else "  RESISTS"))


def lost_by_veto(land: Landscape) -> dict[str, object] | None:
    """The planner's veto against the hidden truth of a planner landscape (None: the planner has no
    opinion): configs it vetoes that fit ("lost") and those of them within 3% of the best ("lost
    near-best"), with the error band (vetoed: outside it; verlsweep/plan/predictor/band.py) and without it (every
    config predicted not to fit vetoed, as before the band), and the edge probes the band launches."""
    if land.planner is None or land.guide is None or land.mem_factor is None:
        return None
    from verlsweep.plan.predictor import band, traced_terms

    near = search_methods.TARGET * land.best
    error = band.trainer_error(traced_terms.source(land.guide.inputs[0]))

    def lost(vetoed) -> tuple[int, int, int]:
        out = [t for k, t in land.truth.items() if vetoed(land.planner[k])]
        fit = [t for t in out if t.tok_s is not None]
        return len(out), len(fit), sum(t.tok_s >= near for t in fit)

    edge = [land.truth[k] for k, p in land.planner.items() if p.status == "edge" and k in land.truth]
    return {"memory": land.mem_factor, "band": error, "in_band": land.mem_factor >= 1 - error,
            "with": lost(lambda p: p.vetoed), "without": lost(lambda p: not p.feasible),
            "edge": (len(edge), sum(t.tok_s is not None for t in edge))}


def _print_lost(lands: list[Landscape]) -> None:
    rows = [(land.name, r) for land in lands if (r := lost_by_veto(land)) is not None]
    if not rows:
        return
    print("\nthe planner's veto against the hidden truth (configs of the space; lost: vetoed but fits; near: "
          f"within {(1 - search_methods.TARGET) * 100:g}% of the best; "
          "edge probes: inside the band, launched when proposed):")
    head = (f"{'landscape':22} {'memory':>7} {'band':>6} {'in band':>7} | {'vetoed':>6} {'lost':>5} {'near':>5} | "
            f"{'edge probes':>11} {'fit':>4} | {'no band: vetoed':>15} {'lost':>5} {'near':>5}")
    print(head)
    print("-" * len(head))
    for name, r in rows:
        (v, lost, near), (ev, efit), (v0, lost0, near0) = r["with"], r["edge"], r["without"]
        print(f"{name:22.22} {'x' + format(r['memory'], '.3f'):>7} {'-' + format(r['band'], '.1%'):>6} "
              f"{'yes' if r['in_band'] else 'no':>7} | {v:6d} {lost:5d} {near:5d} | {ev:11d} {efit:4d} | "
              f"{v0:15d} {lost0:5d} {near0:5d}")


def main() -> None:
    args = _arguments()
    search_methods.STARTUP_S = args.startup_s        # read by cost_dh, in the forked workers too
    search_methods.TARGET = args.target              # read by run_method, in the forked workers too
    if args.long_run:                                # the race is to a near-best survivor (long_run.py)
        search_methods.SURVIVES = long_run.survives
    tic = time.perf_counter()
    n_configs, lands, runs = _race(args)

    chained = "throughput space (sweeps/throughput.yaml, chained from the memory best): "
    print(f"{chained if args.space == 'throughput' else ''}"
          f"search space {n_configs} configs; budget {args.budget:g} device-hours per sweep; {args.seeds} seeds; "
          f"target: a measured config within {(1 - args.target) * 100:g}% of the best feasible tok/s; "
          f"start-up {args.startup_s:g} s, "
          f"{STEPS} steps, {WORLD} devices; guide top_k {args.top_k}, draws {args.draws}")
    head = (f"{'landscape':22} {'OOM':>4} {'near':>4} | {'method':13} {'median dh':>9} {'p90 dh':>8} "
            f"{'reached':>7} {'launched':>8} {'OOMs':>5} {'reused':>6} {'vetoed':>6}"
            + (f" {'refused':>7} {'stopped':>7}" if args.space == "throughput" else ""))
    if args.long_run:
        print(f"long run: the declared best at the maximum lengths; verlsweep confirms its best {args.confirm} "
              "(study.long_run.confirm)")
        print("\n".join(long_run.table(lands, runs, args.methods, args.confirm, args.budget, args.target)))
        print(f"\n({time.perf_counter() - tic:.0f} s)")
        return
    print(head)
    print("-" * len(head))
    verdicts = []
    for land in lands:
        verdict = _verdict(land, *_print_landscape(land, runs, args))
        if verdict:
            verdicts.append(verdict)
    if verdicts:
        print("\nmedian device-hours, verlsweep over the best other method, the previous default (tpe+guide) "
              "included (goal: <= 0.5, fewer launched OOMs than any, never worse than random):")
        print("\n".join(verdicts))
    _print_lost(lands)
    print(f"\n({time.perf_counter() - tic:.0f} s)")


if __name__ == "__main__":
    main()
