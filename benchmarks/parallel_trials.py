"""Batch vs asynchronous trials: wall time, slot utilization and device-hours to a near-best config.

The same sweep, run twice: `hydra.sweeper.schedule=batch` (ask n_jobs trials, wait for the slowest)
and `schedule=async` (a trial's end starts the next). Both run the sweeper's own scheduler,
verlsweep.study.inflight.run, with a real Optuna study (multivariate TPE with constant_liar, the
median pruner, OOMs told as constraint violations by verlsweep.reconcile.results.tell); only the
launcher is simulated, on a fake clock: a trial occupies its slot for the time the recipe's cost
model gives (benchmarks/search_methods.py cost_dh):

    OOM at vLLM start      STARTUP_S
    OOM in step 1          STARTUP_S + one step
    pruned after step k    STARTUP_S + (k + 1) steps     (step 1 counts twice: warm-up)
    completed              STARTUP_S + (STEPS + 1) steps

with step times from the hand-written and drawn landscapes of benchmarks/search_landscapes.py (the
rollout_memory space on one node of 8 devices). A slot is one trial's allocation (a Slurm job of
WORLD devices, or a device subset whose trials take the same time). Asking and telling cost no
simulated time. Each step is reported to the study when it ends on the fake clock, and the pruner
decides there from the trials told by then, as a real trial's report and should_prune do at each step
(optuna's PercentilePruner reads the COMPLETE trials; the sweeper tells a trial when its job ends, so
in batches none of the same batch, asynchronously every one that ended before).

Columns: hours of wall time until N trials are told; utilization = slot-seconds busy / slot-seconds
held (slots x wall); slot-hours busy; trials pruned; device-hours held until a config within 3% of the
landscape's best is told (`>`: not within N trials); trials lost (not finished) or started twice over
all runs.

    python benchmarks/parallel_trials.py [--trials 40] [--slots 8] [--seeds 10]

The same sweep on a real Slurm, one job per trial, beside this fake clock for the same landscape, seed,
trials and slots (benchmarks/parallel_trials_slurm.py; skipped where Slurm is not installed):

    python benchmarks/parallel_trials.py --slurm [--trials 16] [--slots 4] [--seeds 1] [--scale 200]
"""
from __future__ import annotations

import argparse
import statistics
import sys
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import optuna
import search_methods
from omegaconf import OmegaConf
from search_landscapes import HAND_WRITTEN, STEPS, WORLD, Landscape, all_configs, hand_written, key, space

from hydra_plugins.verlsweep_sweeper.config import MedianPrunerConfig, TPESamplerConfig
from verlsweep.common.result import TrialResult
from verlsweep.reconcile import results
from verlsweep.reconcile.budget import quiet_optuna, remaining
from verlsweep.study import create, inflight
from verlsweep.study_link import pruner_from_spec

optuna.logging.set_verbosity(optuna.logging.ERROR)
TARGET = 0.97


class SimFlights(inflight.InFlight):
    """InFlight on a fake clock. A launched trial holds its slot through the start-up and then its
    steps, each reported to the study at the moment it ends, where the pruner decides from the trials
    told by then (as the real trial's report and should_prune do, each step); an OOM ends it at start
    or in step 1. batch=True returns trials only once all in flight have ended (Launcher.launch of a
    batch: the sweeper tells none of them before)."""

    def __init__(self, n_jobs: int, land: Landscape, study: optuna.Study, sp: Any, batch: bool) -> None:
        super().__init__(run_batch=lambda jobs, idx: [], n_jobs=n_jobs)
        self.land, self.study, self.sp, self.batch = land, study, sp, batch
        self.now = 0.0
        self.busy = 0.0
        # trial number -> [trial, truth, start time, values reported, time its next event happens]
        self.running: dict[int, list[Any]] = {}
        self.ended: dict[int, tuple[optuna.Trial, TrialResult]] = {}
        self.starts: Counter[int] = Counter()

    def __len__(self) -> int:
        return len(self.running) + len(self.ended)

    @property
    def free(self) -> int:
        return self.n_jobs - len(self)

    def trials(self) -> list[optuna.Trial]:
        return [r[0] for r in self.running.values()] + [t for t, _ in self.ended.values()]

    def start(self, trial: optuna.Trial, overrides: list[str], job_idx: int) -> None:
        truth = self.land.truth[key({k: self.sp.value(k, v) for k, v in trial.params.items()})]
        self.starts[trial.number] += 1
        first = (search_methods.cost_dh(truth, 0) * 3600 / WORLD if truth.tok_s is None
                 else search_methods.STARTUP_S + 2 * truth.step_s)               # step 1 counts twice: warm-up
        self.running[trial.number] = [trial, truth, self.now, [], self.now + first]

    def _step(self, number: int) -> TrialResult | None:
        """The event due now for this trial: its OOM, or the end of its next step; its result once it ends."""
        trial, truth, _, values, _ = entry = self.running[number]
        if truth.tok_s is None:
            return TrialResult("oom", failure_phase=truth.phase or "vllm_start")
        step = len(values) + 1
        values.append(truth.tok_s * (0.5 if step == 1 else 1.0))
        trial.report(values[-1], step)
        if step == STEPS:
            return TrialResult("completed", objective=statistics.mean(values[1:]), steps=step)
        if trial.should_prune():
            return TrialResult("pruned", objective=statistics.mean(values), steps=step)
        entry[4] = self.now + truth.step_s
        return None

    def wait(self, timeout: float | None = None) -> list[tuple[optuna.Trial, Any, TrialResult | None]]:
        while self.running and not (self.ended and not self.batch):
            self.now = min(r[4] for r in self.running.values())
            for number in sorted(n for n, r in self.running.items() if r[4] <= self.now):
                result = self._step(number)
                if result is not None:
                    trial, _, began, _, _ = self.running.pop(number)
                    self.busy += self.now - began
                    self.ended[number] = (trial, result)
        out = [(t, None, r) for t, r in self.ended.values()]
        self.ended.clear()
        return out


def one_sweep(land: Landscape, seed: int, n_trials: int, slots: int, batch: bool) -> dict[str, float]:
    sp = space()
    with quiet_optuna():
        sampler = create.build_sampler(OmegaConf.structured(TPESamplerConfig(seed=seed)), sp)
        pruner = pruner_from_spec(OmegaConf.to_container(OmegaConf.structured(MedianPrunerConfig)))
        study = optuna.create_study(direction="maximize", sampler=sampler, pruner=pruner)
    flights = SimFlights(slots, land, study, sp, batch)
    reached: list[float] = []

    def tell(trial: optuna.Trial, ret: Any, result: TrialResult | None) -> results.Told:
        assert result is not None
        with quiet_optuna():
            told = results.tell(study, trial, None, ["objective"], result=result)
        if result.outcome == "completed" and result.objective >= TARGET * land.best and not reached:
            reached.append(flights.now)
        return told

    def ask(count: int) -> list[optuna.Trial]:
        with quiet_optuna():
            return [study.ask(fixed_distributions=sp.distributions) for _ in range(count)]

    sweep = inflight.Sweep(left=lambda: remaining(study, n_trials), ask=ask, prepare=lambda trial: (None, []),
                           tell=tell, count=lambda told: False, show=lambda: None, others_running=lambda: False,
                           watch=lambda ts: None, unwatch=lambda ts: None, abandon=lambda ts: None)
    inflight.run(sweep, flights, 0)
    trials = study.get_trials(deepcopy=False)
    return {"wall_h": flights.now / 3600, "util": flights.busy / (slots * flights.now),
            "busy_h": flights.busy / 3600, "pruned": sum(t.state == optuna.trial.TrialState.PRUNED for t in trials),
            "dh_target": (reached[0] if reached else flights.now) * slots * WORLD / 3600,
            "missed": 0 if reached else 1,
            "lost": sum(not t.state.is_finished() for t in trials) + (n_trials - len(trials)),
            "twice": sum(c > 1 for c in flights.starts.values())}


def main() -> None:
    if "--slurm" in sys.argv[1:]:
        import parallel_trials_slurm

        argv = [a for a in sys.argv[1:] if a != "--slurm"]
        parallel_trials_slurm.main(parallel_trials_slurm.parser().parse_args(argv))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--slots", type=int, default=8)
    parser.add_argument("--seeds", type=int, default=10)
    args = parser.parse_args()
    configs = all_configs(space())
    lands = [hand_written(name, f, configs) for name, f in HAND_WRITTEN.items()]
    print(f"{args.trials} trials, {args.slots} slots of {WORLD} devices, start-up {search_methods.STARTUP_S:.0f} s, "
          f"{len(lands)} landscapes x {args.seeds} seeds (medians)")
    print(f"{'landscape':<22} {'schedule':<8} {'wall h':>7} {'util':>6} {'busy h':>7} {'pruned':>6} "
          f"{'dev-h to 3%':>12}  {'lost':>5} {'twice':>6}")
    ratios, packed = [], []
    for land in lands:
        walls, busy = {}, {}
        for mode in ("batch", "async"):
            runs = [one_sweep(land, seed, args.trials, args.slots, mode == "batch") for seed in range(args.seeds)]
            med = {k: statistics.median(r[k] for r in runs)
                   for k in ("wall_h", "util", "busy_h", "pruned", "dh_target")}
            missed = f" ({sum(r['missed'] for r in runs)}>)" if any(r["missed"] for r in runs) else ""
            walls[mode], busy[mode] = med["wall_h"], med["busy_h"]
            print(f"{land.name[:22]:<22} {mode:<8} {med['wall_h']:>7.2f} {med['util']:>6.0%} "
                  f"{med['busy_h']:>7.2f} {med['pruned']:>6.1f} "
                  f"{med['dh_target']:>8.1f}{missed:<6}{sum(r['lost'] for r in runs):>5} "
                  f"{sum(r['twice'] for r in runs):>6}")
        ratios.append(walls["async"] / walls["batch"])
        packed.append(busy["async"] / args.slots / walls["batch"])
    print(f"async wall / batch wall: median {statistics.median(ratios):.2f}, worst {max(ratios):.2f}")
    # what no scheduler can beat with these trials: the asynchronous ones packed with no slot ever idle
    print(f"the async trials with every slot busy all the time / batch wall: median {statistics.median(packed):.2f}, "
          f"worst {max(packed):.2f}")


if __name__ == "__main__":
    main()
