"""How close is the planner to what was reported, and how fast is it?

For the known points of verlsweep/plan/calibration.yaml:
* every number the fit uses (perf/throughput in tokens/s per device, actor/perf/max_memory_allocated_gb
  in GiB): its in-sample error, its leave-one-out error (the fitted constants re-fitted without that
  point, then the point predicted), its error calibrated on the other points (the stack calibration,
  verlsweep/plan/fit/stack_calibration.py, given the other points as its trials) and the constants it fits;
* held-out points (`held_out: true`): published numbers no fit uses, each with its source;
* predicted status and binding constraint against the report for every point; points derived from
  the planner's own rules (`derived: true`) are shown but not counted.
* peak memory side by side for every point that reports one: published, analytic (the packaged
  constants, in-sample) and traced (plan.trainer=traced: the trainer's activations, logits and optimizer
  step from the model code, verlsweep.plan.trace.trainer_trace), with the time the traces took (cold) or
  "cache" when the disk cache had them. The published number is actor/perf/max_memory_allocated_gb:
  torch's allocated bytes, which is what both predictions are (no caching-allocator overhead).
Then the time of a full util x TP x offload table for one hardware x model.
The fit and the first three tables plan with the analytic formula, whose constants the fit sets; its
memory constants are fitted to traces instead (`python -m verlsweep.plan refit --traces`,
verlsweep/plan/fit/trace_fit.py), so no published peak is in their fit.

    python benchmarks/planner_accuracy.py [--fit] [--calibration FILE] [--repeats 20] [--groups]

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

from verlsweep.command.compose import compose_config
from verlsweep.command.topology import tp_choices
from verlsweep.plan import from_cfg, predict
from verlsweep.plan.cli.table import DEFAULT_UTILS, grid
from verlsweep.plan.fit.measured_fit import fit, informed
from verlsweep.plan.fit.points import point_inputs, samples
from verlsweep.plan.fit.stack_calibration import calibrate_samples
from verlsweep.plan.predictor import band, calibration


def _err(pred: float, rep: float | None) -> str:
    return f"{pred / rep - 1:+6.1%}" if rep else "      "


def _reported(p: calibration.Point) -> list[tuple[str, float]]:
    out = []
    if p.tok_s:
        out.append(("throughput", float(p.tok_s)))
    if p.peak_gb:
        out.append(("memory", float(p.peak_gb)))
    return out


def _inputs(p: calibration.Point, trainer: str = "analytic"):
    return replace(point_inputs(p), trainer=trainer)


def _predicted(v, kind: str) -> float:
    return v.tok_s if kind == "throughput" else v.trainer_peak_gb


def fitted_numbers(cal: calibration.Calibration) -> list[float]:
    """In-sample and leave-one-out error of every number the fit uses: the constants re-fitted
    without that point's numbers, then the point predicted."""
    all_samples = samples(cal)
    print(f"{'fitted point':34s} {'number':10s} {'reported':>9s} {'in-sample':>18s} {'leave-one-out':>18s}  "
          f"{'calibrated on the other points':>30s}  constants it fits")
    loo_errors, in_errors, cal_errors = [], [], []
    for p in cal.points:
        if not p.fit:
            continue
        rest = [smp for smp in all_samples if not smp.label.startswith(f"{p.id} ")]
        refit = fit(cal, rest)
        v_in, v_out = predict(_inputs(p), cal), predict(_inputs(p), replace(cal, constants=refit.constants))
        # from the leave-one-out constants: the packaged ones were fitted to this point too
        v_cal = predict(_inputs(p), stack_calibrated(replace(cal, constants=refit.constants), rest))
        for kind, rep in _reported(p):
            if kind not in p.fit:
                continue
            a, b, c = _predicted(v_in, kind), _predicted(v_out, kind), _predicted(v_cal, kind)
            in_errors.append(abs(a / rep - 1))
            loo_errors.append(abs(b / rep - 1))
            cal_errors.append(abs(c / rep - 1))
            print(f"{p.id:34.34s} {kind:10s} {rep:9.2f} {a:9.2f} {_err(a, rep)}  {b:9.2f} {_err(b, rep)}  "
                  f"{c:21.2f} {_err(c, rep)}  "
                  f"{', '.join(informed(cal, (kind,))) or 'none (fitted to traces: plan refit --traces)'}")
    print(f"worst error over the {len(in_errors)} fitted numbers: in-sample {max(in_errors):.1%}, "
          f"leave-one-out {max(loo_errors):.1%}, calibrated on the other points {max(cal_errors):.1%}")
    return loo_errors


def stack_calibrated(cal: calibration.Calibration, points: list) -> calibration.Calibration:
    """What the planner plans with after the stack calibration (verlsweep/plan/fit/stack_calibration.py)
    takes these points' numbers as its measured trials, each point its own study: its decision included
    (the packaged constants where the refit does not beat them held out)."""
    runs = [smp.label.split(" ", 1)[0] for smp in points]
    return calibrate_samples(cal, points, runs, {}, {"points": "calibration.yaml"}).calibration


def held_out(cal: calibration.Calibration) -> list[float]:
    """Published numbers no fit uses."""
    print(f"\n{'held-out point':34s} {'number':10s} {'reported':>9s} {'predicted':>18s} "
          f"{'calibrated on the other points':>30s}  source")
    errors, cal_errors = [], []
    calibrated = stack_calibrated(cal, samples(cal))
    for p in cal.points:
        if not p.held_out:
            continue
        v, v_cal = predict(_inputs(p), cal), predict(_inputs(p), calibrated)
        for kind, rep in _reported(p):
            pred, c = _predicted(v, kind), _predicted(v_cal, kind)
            errors.append(abs(pred / rep - 1))
            cal_errors.append(abs(c / rep - 1))
            rng = (f" (reported {p.tok_s_range[0]:g}-{p.tok_s_range[1]:g})"
                   if kind == "throughput" and p.tok_s_range else "")
            print(f"{p.id:34.34s} {kind:10s} {rep:9.2f} {pred:9.2f} {_err(pred, rep)} {c:22.2f} {_err(c, rep)}  "
                  f"{' '.join(p.source.split())[:110]}{rng}")
    if errors:
        print(f"worst held-out error over {len(errors)} numbers: {max(errors):.1%}; calibrated on the other "
              f"points {max(cal_errors):.1%}")
    return errors


def feasibility(cal: calibration.Calibration) -> int:
    """Predicted status and binding constraint against the report, for every point."""
    print(f"\n{'point':46s} {'reported':>22s} {'predicted':>22s}  counted")
    counted, agree_n = 0, 0
    for p in cal.points:
        v = predict(_inputs(p), cal)
        reported = "feasible" if p.feasible else f"fails: {p.binding}"
        predicted = v.status if v.fits else f"{v.status}: {v.binding}"
        # the prediction itself (an edge probe is predicted not to fit), and a reported failure must
        # also be vetoed: outside the error band (verlsweep.plan.predictor.band)
        agree = v.fits == p.feasible and (p.feasible or (v.binding == p.binding and not v.feasible))
        if not p.derived:
            counted += 1
            agree_n += agree
        note = "no: derived from the planner's rules" if p.derived else "yes"
        print(f"{p.id:46.46s} {reported:>22s} {predicted:>22s}{'' if agree else ' !!'}  {note}")
    print(f"feasibility / binding agreement: {agree_n}/{counted} reported points "
          f"({sum(p.derived for p in cal.points)} derived points shown, not counted)")
    return counted - agree_n


def traced_peaks(cal: calibration.Calibration) -> None:
    """Published, analytic and traced trainer peaks for every point that reports one."""
    print(f"\n{'point with a published peak':34s} {'use':8s} {'published':>9s} {'analytic':>17s} "
          f"{'traced':>17s}  trace")
    errors: dict[str, list[float]] = {"analytic": [], "traced": []}
    for p in cal.points:
        if not p.peak_gb:
            continue
        analytic = predict(_inputs(p), cal).trainer_peak_gb
        start = time.perf_counter()
        verdict = predict(_inputs(p, "traced"), cal)
        took = time.perf_counter() - start
        traced, rep = verdict.trainer_peak_gb, float(p.peak_gb)
        errors["analytic"].append(abs(analytic / rep - 1))
        errors["traced"].append(abs(traced / rep - 1))
        # a memory number no constant is fitted to (they are fitted to traces) measures the formula out of sample
        use = ("held out" if p.held_out else "fitted" if "memory" in p.fit and informed(cal, ("memory",))
               else "unfitted")
        how = verdict.trainer if verdict.trainer != "traced" else ("cache" if took < 0.5 else f"{took:.0f} s")
        print(f"{p.id:34.34s} {use:8s} {rep:9.2f} {analytic:9.2f} {_err(analytic, rep)}  {traced:9.2f} "
              f"{_err(traced, rep)}  {how}")
    if errors["traced"]:
        print(f"worst peak error over {len(errors['traced'])} published peaks: analytic "
              f"{max(errors['analytic']):.1%}, traced {max(errors['traced']):.1%}")
        print(f"the veto's band (verlsweep/plan/predictor/band.py): trainer terms traced "
              f"±{band.TRAINER_ERROR['traced']:.1%}, "
              f"analytic ±{band.TRAINER_ERROR['analytic']:.1%} "
              "(no tighter than its error above or against traces); other "
              f"modelled terms ±{band.ROLLOUT_ERROR:.1%}; counted bytes exact"
              + ("" if max(errors["traced"]) <= band.TRAINER_ERROR["traced"] + 5e-4
                 else "  !! the traced error measured here exceeds its band"))


def by_group(cal: calibration.Calibration) -> None:
    """The analytic formula against the trace for every model group, on one recipe per group
    (a2_64g, remax, the group's own rollout knobs): the trainer peak and the actor update's terms."""
    from verlsweep import CONF_DIR

    print(f"\n{'model group (a2_64g, remax)':30s} {'traced GiB':>10s} {'analytic GiB':>12s} {'error':>7s}  trace")
    for path in sorted((CONF_DIR / "model").glob("*.yaml")):
        inp = from_cfg(compose_config(["hardware=a2_64g", "algorithm=remax", f"model={path.stem}"]))
        start = time.perf_counter()
        traced = predict(replace(inp, trainer="traced"), cal)
        took = time.perf_counter() - start
        analytic = predict(replace(inp, trainer="analytic"), cal).trainer_peak_gb
        how = traced.trainer if traced.trainer != "traced" else ("cache" if took < 0.5 else f"{took:.0f} s")
        print(f"{path.stem:30s} {traced.trainer_peak_gb:10.2f} {analytic:12.2f} "
              f"{_err(analytic, traced.trainer_peak_gb)}  {how}")


def accuracy(cal: calibration.Calibration) -> None:
    fitted_numbers(cal)
    held_out(cal)
    feasibility(cal)
    traced_peaks(cal)


def speed(cal: calibration.Calibration, repeats: int) -> None:
    t0 = time.perf_counter()
    cfg = compose_config(["hardware=a2_64g", "model=qwen3_8b", "algorithm=remax"])
    compose_s = time.perf_counter() - t0
    inp = replace(from_cfg(cfg), trainer="analytic")
    tps = tp_choices(cfg)
    grid(inp, cal, utils=DEFAULT_UTILS, tps=tps)            # warm caches (imports, calibration)
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        rows = grid(inp, cal, utils=DEFAULT_UTILS, tps=tps)
        times.append(time.perf_counter() - t)
    med = statistics.median(times)
    print(f"\nfull table a2_64g x qwen3_8b x remax (analytic trainer): {len(rows)} plans "
          f"(util {len(DEFAULT_UTILS)} x TP {tps} x "
          f"4 offload) in {med * 1e3:.1f} ms median of {repeats} ({med / len(rows) * 1e6:.0f} us per plan; "
          f"composing the config once: {compose_s * 1e3:.0f} ms)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit", action="store_true", help="re-fit the fitted constants to the points first")
    ap.add_argument("--calibration", type=Path, default=None)
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--groups", action="store_true",
                    help="also the analytic formula against the trace for every conf/model group (minutes, once)")
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
    if args.groups:
        by_group(cal)
    speed(cal, args.repeats)


if __name__ == "__main__":
    main()
