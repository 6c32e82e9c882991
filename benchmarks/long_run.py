"""search_efficiency.py --long-run: does the declared best survive the long run?

Every method runs the race of search_efficiency.py (the same cost model), to a near-best config that
survives: until it measured a config within 3% of the best 5-step throughput among the configs that
survive the long run, or the budget (search_methods.SURVIVES: the same oracle for every method; none of
them knows which configs survive). Its declared best is then its best measured config. A trial measures
5 steps at the lengths the policy writes then; the long run reaches the maximum lengths, where some configs
no longer fit (search_landscapes.survives_long_run, written before any result and never tuned). For
`verlsweep` the confirmation stage follows (verlsweep.study.confirm: the best `k` measured configs each
run study.long_run.confirm_steps steps at the maximum lengths; while none passed, the next best one too;
one a failed confirmation proves to fail there, verlsweep/proofs/rules.py, is settled without a launch),
and its declared best is the best one that passed.

Cost of a confirmation, in device-hours (seconds x WORLD / 3600): STARTUP_S + (confirm_steps + 1) steps at
the maximum lengths (a step there takes LONG_STEP_FACTOR x the 5-step one) when it passes; STARTUP_S + one
such step when it fails (it OOMs in its first step at maximum lengths).

Columns, per landscape and method, over the seeds:
  fails long run   the share of sweeps whose declared best would OOM in the long run (goal for verlsweep: 0)
  near-best surv.  the share whose declared best survives and is within 3% of the best surviving config
  median dh        device-hours until the sweep declared a near-best survivor (sweep + confirmations;
                   a sweep that never declares one counts as the budget, shown `>`)
  confirm share    the confirmations' device-hours over the whole sweep's (goal <= 10%)
In-sample: the landscapes and the long-run rule are the benchmark's own (hand-written, drawn, the planner's
model with hidden errors); nothing here is measured on a device.
"""
from __future__ import annotations

import statistics

import search_methods
from search_landscapes import LONG_STEP_FACTOR, WORLD, Landscape, survives_long_run
from search_methods import Run

from verlsweep.command.compose import compose_config
from verlsweep.config.study import study_config
from verlsweep.proofs.rules import Observed, decide

CONFIRMED = "verlsweep"            # the method that runs the confirmation stage (the sweeper's default)
PLAIN = "verlsweep, no confirm"    # the same runs without it (study.long_run.confirm=0)
CONFIRM_STEPS = study_config(compose_config([])).long_run.confirm_steps
# a config fails at the maximum lengths when what it holds in training does not fit there
FAILS_IN = "training"


def survives(land: Landscape, key: tuple) -> bool:
    return survives_long_run(dict(zip(land.knobs, key)))


def confirm_dh(step_s: float, survives: bool) -> float:
    steps = (CONFIRM_STEPS + 1) if survives else 1
    return (search_methods.STARTUP_S + steps * step_s * LONG_STEP_FACTOR) * WORLD / 3600


def declare(land: Landscape, run: Run, k: int, confirm: bool) -> tuple[tuple | None, float, float]:
    """The declared best's key, the device-hours when it was declared and those the confirmations took."""
    if not run.measured:
        return None, float("inf"), 0.0
    ranked = sorted(run.measured, key=lambda m: -m[1])
    spent = max(m[2] for m in run.measured)
    if not confirm:
        return ranked[0][0], spent, 0.0          # declared when the sweep ends
    cost, examined, passed = 0.0, 0, None
    failed: list[Observed] = []
    for key, _tok_s, _when in ranked:
        if examined >= k and passed is not None:
            break
        examined += 1
        if decide(failed, dict(zip(land.knobs, key))).verdict == "fail":
            continue                              # settled by a failed confirmation's proof: no launch
        ok = survives(land, key)
        cost += confirm_dh(land.truth[key].step_s, ok)
        if not ok:
            failed.append(Observed(len(failed), dict(zip(land.knobs, key)), "oom", FAILS_IN))
        elif passed is None:
            passed = key
    return passed, spent + cost, cost


def table(lands: list[Landscape], runs: dict[tuple[str, str], list[Run]], methods: list[str], k: int,
          budget: float, target: float) -> list[str]:
    lines = [f"{'landscape':22} {'surv.':>5} | {'method':22} {'fails long run':>14} {'near-best surv.':>15} "
             f"{'median dh':>9} {'confirm share':>13}"]
    lines.append("-" * len(lines[0]))
    for land in lands:
        survivors = [t.tok_s for key, t in land.truth.items() if t.tok_s is not None and survives(land, key)]
        best_surviving = max(survivors, default=0.0)
        feasible = sum(1 for t in land.truth.values() if t.tok_s is not None)
        head = f"{land.name:22} {len(survivors) / max(feasible, 1):>5.0%}"
        rows = [(m, m, False) for m in methods if m != CONFIRMED]
        if CONFIRMED in methods:
            rows = [(CONFIRMED, CONFIRMED, True), (PLAIN, CONFIRMED, False), *rows]
        for shown, method, confirm in rows:
            fails, near, hours, shares = 0, 0, [], []
            got = runs.get((land.name, method), [])
            for run in got:
                key, when, cost = declare(land, run, k, confirm)
                ok = key is not None and survives(land, key)
                fails += key is not None and not ok
                good = ok and land.truth[key].tok_s >= target * best_surviving
                near += good
                hours.append(when if good and when <= budget else budget)
                total = max((m[2] for m in run.measured), default=0.0) + cost
                shares.append(cost / total if total else 0.0)
            n = max(len(got), 1)
            median = statistics.median(hours) if hours else budget
            dh = f"{'>' if median >= budget else ''}{median:.1f}"
            share = f"{statistics.mean(shares):.1%}" if confirm else "-"
            lines.append(f"{head if shown == rows[0][0] else '':28} | {shown:22} {fails / n:>14.0%} {near / n:>15.0%} "
                         f"{dh:>9} {share:>13}")
    return lines
