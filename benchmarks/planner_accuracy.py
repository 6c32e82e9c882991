"""How close is the planner to what was reported, and how fast is it?

For every known point of verlsweep/plan/calibration.yaml (recipes that ran, configurations that fail):
the predicted status and binding constraint against the report, predicted vs reported peak memory
(actor/perf/max_memory_allocated_gb, GiB) and throughput (perf/throughput, tokens/s per device), and
the worst relative error over all reported numbers. Then the time of a full util x TP x offload table
for one hardware x model.

    python benchmarks/planner_accuracy.py [--fit] [--calibration FILE] [--repeats 20]

--fit re-fits the `fit: true` constants to the points first (nothing is written) and shows both.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from verlsweep.command.compose import compose_config  # noqa: E402
from verlsweep.plan import calibration, from_cfg, plan  # noqa: E402
from verlsweep.plan.fit import fit  # noqa: E402
from verlsweep.plan.points import point_inputs, samples  # noqa: E402
from verlsweep.plan.table import DEFAULT_UTILS, grid  # noqa: E402
from verlsweep.command.topology import tp_choices  # noqa: E402


def _err(pred: float, rep: float | None) -> str:
    return f"{pred / rep - 1:+6.1%}" if rep else "      "


def accuracy(cal: calibration.Calibration) -> float:
    print(f"{'point':46s} {'reported':>16s} {'predicted':>22s}   {'peak GiB rep/pred':>19s} {'err':>6s}   "
          f"{'tok/s rep/pred':>16s} {'err':>6s}  used by fit")
    errors: list[float] = []
    mismatches = 0
    for p in cal.points:
        v = plan(point_inputs(p), cal)
        reported = "feasible" if p.feasible else f"fails: {p.binding}"
        predicted = v.status if v.feasible else f"{v.status}: {v.binding}"
        agree = v.feasible == p.feasible and (p.feasible or v.binding == p.binding)
        mismatches += not agree
        peak = f"{p.peak_gb:6.2f} / {v.trainer_peak_gb:6.2f}" if p.peak_gb else f"{'-':>6s} / {v.trainer_peak_gb:6.2f}"
        rng = f" ({p.tok_s_range[0]:g}-{p.tok_s_range[1]:g})" if p.tok_s_range else ""
        tok = f"{p.tok_s:6.1f} / {v.tok_s:6.1f}" if p.tok_s else f"{'-':>6s} / {v.tok_s:6.1f}"
        print(f"{p.id:46s} {reported:>16s} {predicted:>22s}{'' if agree else ' !!'}  {peak:>19s} "
              f"{_err(v.trainer_peak_gb, p.peak_gb)}   {tok:>16s} {_err(v.tok_s, p.tok_s)}  "
              f"{','.join(p.fit) or '-'}{rng}")
        if p.peak_gb:
            errors.append(abs(v.trainer_peak_gb / p.peak_gb - 1))
        if p.tok_s:
            errors.append(abs(v.tok_s / p.tok_s - 1))
    worst = max(errors)
    print(f"\nfeasibility / binding agreement: {len(cal.points) - mismatches}/{len(cal.points)} points; "
          f"worst relative error over the {len(errors)} reported numbers: {worst:.1%}")
    return worst


def speed(cal: calibration.Calibration, repeats: int) -> None:
    t0 = time.perf_counter()
    cfg = compose_config(["hardware=a2_64g", "model=qwen3_8b", "algorithm=remax"])
    compose_s = time.perf_counter() - t0
    inp = from_cfg(cfg)
    tps = tp_choices(cfg)
    grid(inp, cal, utils=DEFAULT_UTILS, tps=tps)            # warm caches (imports, calibration)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        rows = grid(inp, cal, utils=DEFAULT_UTILS, tps=tps)
        times.append(time.perf_counter() - t)
    med = statistics.median(times)
    print(f"\nfull table a2_64g x qwen3_8b x remax: {len(rows)} plans (util {len(DEFAULT_UTILS)} x TP {tps} x "
          f"4 offload) in {med * 1e3:.1f} ms median of {repeats} ({med / len(rows) * 1e6:.0f} us per plan; "
          f"composing the config once: {compose_s * 1e3:.0f} ms)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit", action="store_true", help="re-fit the fitted constants to the points first")
    ap.add_argument("--calibration", type=Path, default=None)
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    cal = calibration.load(args.calibration)
    print(f"calibration: {cal.path}\n")
    if args.fit:
        result = fit(cal, samples(cal))
        for name, (old, new) in result.changed.items():
            print(f"fit: {name} {old:.4g} -> {new:.4g}")
        print(f"fit: worst error on the fitted numbers {result.worst('before'):.1%} -> {result.worst():.1%}\n")
        print("with the packaged constants:")
        accuracy(cal)
        print("\nwith the re-fitted constants:")
        cal = replace(cal, constants=result.constants)
    accuracy(cal)
    speed(cal, args.repeats)


if __name__ == "__main__":
    main()
