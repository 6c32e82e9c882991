"""Does calibrating on earlier tasks of one software stack make the next task cheaper?

A sequence of tasks (3 Ascend devices x 2 models x 2 algorithms, in the fixed order below) on one stack
whose hidden truth differs from the planner by a systematic stack error the stack calibration cannot
represent exactly (verlsweep/plan/fit/stack_calibration.py fits runtime_context_gb, fragmentation,
decode_bw_efficiency and train_mfu): device peaks are the planner's x FACTOR + OFFSET_GB + a cubic term in
the peak's share of the device, tokens/s the planner's x a factor that falls with util, plus per-task,
per-config noise (seeded). These numbers were chosen once, before the first run, and not changed after.
A config OOMs where its worst phase's true peak exceeds the device; it fails in the first phase (in the
order a step meets them, verlsweep/plan/predictor/memory.py ORDER) that does, named as the sweep's
classifier names it (verlsweep.common.result.PLAN_CHECK_PHASES).

Each task is searched in two ways, each until a completed trial is within 3% of the task's true best
(a task where no config truly fits: until the search concludes so, every config vetoed or proven to
fail), and a launch costs its devices x (start-up + 10 steps), an OOM the start-up only:

  planner walk  the util x TP x offload grid of `python -m verlsweep.plan` in the planner's order (fits
                first, then by predicted tokens/s; vetoed configs never launched), one after another;
                as the sweep does (study.proofs, verlsweep/study/verl_hooks.py decide), a config that
                an earlier OOM or fit of the task proves to fail (verlsweep.proofs.rules) is skipped
  sweep         as verlsweep's sweeper sweeps it with its defaults (benchmarks/sequence_sweep.py): the
                guide's picks, then the boundary sampler, the planner's veto and the proofs

Cold plans every task with the packaged constants; warm with the calibration on the earlier tasks'
record (each task one study; the record holds every sixth config of a task's grid that fits). A
recorded trial carries what its MLflow run carries: the device peak, tokens/s and verl's allocator peak
(perf/max_memory_allocated_gb, sample kind "memory"): the planner's trainer peak x FACTOR with its own
noise. The stack error's factor applies to every byte the trainer allocates; its offset and cubic term
are the runtime's and the allocator's reserve, which an allocator peak does not see.

Baselines, the mean over 20 random orders: `random (plain)`, a plain Optuna RandomSampler sweep (no
planner veto, no proofs: what benchmarks/search_efficiency.py races), here kinder than Optuna's (no
config drawn twice); `random (verlsweep)`, hydra/sweeper/sampler=random under verlsweep's sweeper: the
guide's picks, then the random order less what the planner (warm) vetoes, with the proofs. The last
blocks check the goals per task: task 2 warm <= 0.5x cold device-hours, warm <= 2 launched trials
from task 3 on, warm never more device-hours than cold.

    python benchmarks/calibrated_sequence.py
"""
from __future__ import annotations

import random
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sequence_sweep import LAUNCHABLE, guide_picks, knobs, predictions, sweep

from verlsweep.command.compose import compose_config
from verlsweep.command.topology import tp_choices
from verlsweep.common.result import PLAN_CHECK_PHASES, TrialResult
from verlsweep.plan import from_cfg, predict
from verlsweep.plan.fit.measured_fit import Sample
from verlsweep.plan.fit.stack_calibration import StackCalibration, calibrate_samples
from verlsweep.plan.predictor import calibration
from verlsweep.plan.predictor.lengths import expected_lengths
from verlsweep.plan.predictor.memory import ORDER, memory_per_phase
from verlsweep.proofs.rules import Observed, decide

TASKS = [("a2_64g", "qwen3_8b", "grpo"), ("a3_64g", "qwen3_8b", "grpo"), ("a2_32g", "qwen3_4b", "grpo"),
         ("a3_64g", "qwen3_4b", "ppo"), ("a2_64g", "qwen3_4b", "ppo"), ("a2_32g", "qwen3_8b", "ppo"),
         ("a3_64g", "qwen3_8b", "ppo"), ("a2_64g", "qwen3_8b", "ppo"), ("a2_32g", "qwen3_4b", "ppo"),
         ("a3_64g", "qwen3_4b", "grpo"), ("a2_64g", "qwen3_4b", "grpo"), ("a2_32g", "qwen3_8b", "grpo")]
# the stack's hidden error: chosen before the first run, never tuned to its results
FACTOR, OFFSET_GB, CUBIC_GB = 1.04, 2.6, 3.0
TOK_FACTOR, TOK_UTIL_SLOPE = 0.82, 0.25
NOISE_PEAK, NOISE_TOK = 0.01, 0.02
UTILS = [round(0.3 + 0.05 * i, 2) for i in range(14)]
OFFLOADS = [(False, False), (False, True), (True, True)]
STARTUP_S, STEPS = 600.0, 10
STACK = {"stack": "benchmark"}
SEEDS = 20                  # random baselines: the mean over this many orders


@dataclass(frozen=True)
class Truth:
    tok_s: float
    peak_gb: float          # the device peak at the mean lengths (what the monitor records)
    phase: str | None       # where it OOMs (verlsweep.common.result.FAILURE_PHASES); None: it fits
    step_s: float

    @property
    def oom(self) -> bool:
        return self.phase is not None


@dataclass
class Outcome:
    launched: float = 0
    ooms: float = 0
    device_hours: float = 0.0
    found: bool = False          # a completed trial within 3% of the best (no fit: the search concluded so)
    misproven: int = 0           # configs a proof skipped that truly fit (0 unless the noise beats a rule)


def truth(inp, cal, rng: random.Random) -> Truth:
    """One config under the hidden truth (the rng's draws in the order the first version drew them)."""
    c = cal.constants
    verdict = predict(inp, cal)
    cap = verdict.capacity_gb

    def true_peak(p: float, noise: float) -> float:
        return (p * FACTOR + OFFSET_GB + CUBIC_GB * (p / cap) ** 3) * (1 + noise)
    mean = max(memory_per_phase(inp, c, lengths=expected_lengths(inp, c)).phases.values())
    noise = rng.gauss(0, NOISE_PEAK)
    failing = [k for k in ORDER if k in verdict.phases and true_peak(verdict.phases[k], noise) > cap]
    tok = verdict.tok_s * TOK_FACTOR * (1 - TOK_UTIL_SLOPE * (inp.rollout.util - 0.5)) * (1 + rng.gauss(0, NOISE_TOK))
    peak = true_peak(mean, rng.gauss(0, NOISE_PEAK))
    return Truth(tok, peak, PLAN_CHECK_PHASES[failing[0]] if failing else None, verdict.step_s / (tok / verdict.tok_s))


def task_grid(task: tuple[str, str, str]) -> list:
    hardware, model, algorithm = task
    cfg = compose_config([f"hardware={hardware}", f"model={model}", f"algorithm={algorithm}"])
    base = replace(from_cfg(cfg), trainer="analytic")
    return [base.with_knobs(util=u, tp=tp, param_offload=p, optimizer_offload=o)
            for u in UTILS for tp in tp_choices(cfg) for p, o in OFFLOADS]


def planner_order(configs: list, cal) -> list[int]:
    """The configs the planner lets launch, fits first, then by predicted tokens/s."""
    verdicts = [predict(inp, cal) for inp in configs]
    return sorted((i for i, v in enumerate(verdicts) if v.status in LAUNCHABLE),
                  key=lambda i: (LAUNCHABLE[verdicts[i].status], -verdicts[i].tok_s))


def cost_dh(t: Truth, world: int) -> float:
    """A launch costs its devices x (start-up + the steps); an OOM the start-up only."""
    return world * (STARTUP_S + (0 if t.oom else STEPS * t.step_s)) / 3600


def target(truths: list[Truth]) -> Callable[[int], bool]:
    """Whether a launched config is within 3% of the best (no config fits: never)."""
    best = max((t.tok_s for t in truths if not t.oom), default=None)
    return lambda i: best is not None and not truths[i].oom and truths[i].tok_s >= 0.97 * best


def swept(configs: list, truths: list[Truth], predicted: list, world: int) -> Outcome:
    """The task swept as verlsweep's sweeper sweeps it (benchmarks/sequence_sweep.py), with the guide's
    `predicted`."""
    reached = target(truths)

    def run(i: int) -> TrialResult:
        t = truths[i]
        return TrialResult("oom", failure_phase=t.phase) if t.oom else TrialResult("completed", objective=t.tok_s,
                                                                                    steps=STEPS)
    launched, ruled_out = sweep(configs, predicted, run, reached)
    found = any(reached(i) for i in launched) or all(t.oom for t in truths)
    return Outcome(len(launched), sum(truths[i].oom for i in launched),
                   sum(cost_dh(truths[i], world) for i in launched), found,
                   sum(not truths[i].oom for i in ruled_out))


def search(configs: list, truths: list[Truth], order: list[int], world: int, proofs: bool = True) -> Outcome:
    """Launch `order` one after another until a completed trial is within 3% of the best, skipping what
    the finished trials prove to fail (`proofs`). No config fits: until nothing is left to launch."""
    reached = target(truths)
    out, seen = Outcome(), []
    for i in order:
        params = knobs(configs[i])
        if proofs and seen and decide(seen, params).verdict == "fail":
            out.misproven += not truths[i].oom
            continue
        t = truths[i]
        out.launched += 1
        out.device_hours += cost_dh(t, world)
        out.ooms += t.oom
        seen.append(Observed(len(seen), params, "oom" if t.oom else "completed", t.phase))
        if reached(i):
            out.found = True
            return out
    out.found = all(t.oom for t in truths)          # the search concluded that nothing fits
    return out


def random_baseline(configs: list, truths: list[Truth], world: int, predicted: list | None = None) -> Outcome:
    """Mean over SEEDS random orders of the grid. `predicted` (the guide's): under verlsweep's sweeper, the
    guide's picks first, then the random order less what the planner vetoes, the proofs on."""
    allowed = set(range(len(configs))) if predicted is None else {
        i for i, p in enumerate(predicted) if p.status in LAUNCHABLE}
    picks = guide_picks(configs, predicted) if predicted is not None else []
    runs = []
    for seed in range(SEEDS):
        order = list(range(len(configs)))
        random.Random(seed).shuffle(order)
        order = picks + [i for i in order if i in allowed and i not in picks]
        runs.append(search(configs, truths, order, world, proofs=predicted is not None))
    return Outcome(statistics.fmean(r.launched for r in runs), statistics.fmean(r.ooms for r in runs),
                   statistics.fmean(r.device_hours for r in runs), all(r.found for r in runs),
                   sum(r.misproven for r in runs))


def cell(o: Outcome) -> str:
    trials = f"{o.launched:.0f}" if float(o.launched).is_integer() else f"{o.launched:.1f}"
    ooms = f"{o.ooms:.0f}" if float(o.ooms).is_integer() else f"{o.ooms:.1f}"
    return f"{trials:>6s} {ooms:>5s} {o.device_hours:6.1f}"


def summary(got: StackCalibration) -> str:
    if not got.calibrated:
        return got.reason
    words = {"device_memory": "peak", "throughput": "tok/s"}
    held = ", ".join(f"{words[k]} {got.held_out[k]:.1%}{'' if k in got.used else ' (not used)'}"
                     for k in words if k in got.held_out)
    c = got.calibration.constants
    return (f"{got.trials} trials: {held} held out; band: trainer {c.trainer_band_error_analytic:.1%}, "
            f"rollout {c.rollout_band_error:.1%}")


def verdicts(rows: list[tuple[int, Outcome, Outcome]]) -> list[str]:
    """One line per goal: the tasks that meet it and the tasks that resist (rows: task, cold, warm)."""
    def line(goal: str, checked: list[tuple[int, bool]]) -> str:
        met = [n for n, ok in checked if ok]
        resist = [n for n, ok in checked if not ok]
        return (f"{goal}: {'met' if not resist else 'NOT met'} (meet: {', '.join(map(str, met)) or '-'}; "
                f"resist: {', '.join(map(str, resist)) or '-'})")
    return [
        line("task 2 warm device-hours <= 0.5x cold", [(n, w.device_hours <= 0.5 * c.device_hours)
                                                       for n, c, w in rows if n == 2]),
        line("tasks 3+ warm launched trials <= 2", [(n, w.launched <= 2 and w.found) for n, c, w in rows if n >= 3]),
        line("warm never more device-hours than cold", [(n, w.device_hours <= c.device_hours + 1e-9)
                                                       for n, c, w in rows]),
    ]


COLUMNS = ("planner walk, cold", "planner walk, warm", "sweep, cold", "sweep, warm", "random (plain)",
           "random (verlsweep)")


def main() -> None:
    packaged = calibration.load()
    samples: list[Sample] = []
    runs: list[str] = []
    studies: dict[str, str] = {}
    walks: list[tuple[int, Outcome, Outcome]] = []
    sweeps: list[tuple[int, Outcome, Outcome]] = []
    misproven = 0
    print(f"{'':31s}| " + " | ".join(f"{c:19s}" for c in COLUMNS) + " |")
    print(f"{'#':>2} {'task':21s} {'fit':>7s}| " + " | ".join(f"{'trials':>6s} {'OOMs':>5s} {'dev-h':>6s}"
                                                              for _ in COLUMNS) + " | calibration")
    for n, task in enumerate(TASKS, 1):
        rng = random.Random(n)
        configs = task_grid(task)
        truths = [truth(inp, packaged, rng) for inp in configs]
        world = configs[0].hardware.world
        got = calibrate_samples(packaged, samples, runs, studies, STACK) if samples else StackCalibration(
            packaged, "benchmark", reason="no earlier task")
        warm_predicted = predictions(configs, got.calibration)
        cells = {COLUMNS[0]: search(configs, truths, planner_order(configs, packaged), world),
                 COLUMNS[1]: search(configs, truths, planner_order(configs, got.calibration), world),
                 COLUMNS[2]: swept(configs, truths, predictions(configs, packaged), world),
                 COLUMNS[3]: swept(configs, truths, warm_predicted, world),
                 COLUMNS[4]: random_baseline(configs, truths, world),
                 COLUMNS[5]: random_baseline(configs, truths, world, warm_predicted)}
        misproven += sum(o.misproven for o in cells.values())
        walks.append((n, cells[COLUMNS[0]], cells[COLUMNS[1]]))
        sweeps.append((n, cells[COLUMNS[2]], cells[COLUMNS[3]]))
        fits = f"{sum(not t.oom for t in truths)}/{len(truths)}"       # configs that truly fit
        missed = [c for c, o in cells.items() if not o.found]
        print(f"{n:2d} {' '.join(task):21s} {fits:>7s}| " + " | ".join(cell(o) for o in cells.values())
              + f" | {summary(got)}" + (f"  (target missed: {', '.join(missed)})" if missed else ""))
        # what this task measured joins the record: the trials the warm search completed
        record_rng = random.Random(1000 + n)     # its own draws: the truths above stay what they were
        for i, inp in enumerate(configs):
            if truths[i].oom or i % 6:          # the record holds some of the completed configs, not the whole grid
                continue
            rid = f"t{n}-{i}"
            allocated = memory_per_phase(inp, packaged.constants,
                                         lengths=expected_lengths(inp, packaged.constants)).trainer_peak_gb
            samples += [Sample(rid, inp, "device_memory", truths[i].peak_gb),
                        Sample(rid, inp, "throughput", truths[i].tok_s),
                        Sample(rid, inp, "memory", allocated * FACTOR * (1 + record_rng.gauss(0, NOISE_PEAK)))]
            runs += [rid, rid, rid]
            studies[rid] = f"task{n}"
    print("\ntrials: launched (random: the mean over 20 orders); a task where no config fits (fit 0/...) ends when "
          "the search concludes so:\nevery config vetoed or proven to fail (plain random: the grid exhausted)")
    print(f"proofs that skipped a config which truly fits (per-config noise against a rule): {misproven}")
    for name, rows in (("planner walk", walks), ("sweep", sweeps)):
        print(f"goals, {name}:")
        for text in verdicts(rows):
            print(f"  {text}")

if __name__ == "__main__":
    main()
