"""Asynchronous trials: up to n_jobs in flight, the next one asked the moment any one ends.

Hydra's `Launcher.launch` returns when the last job of its batch ends, so a batch of trials whose
durations differ tenfold (an OOM at vLLM start, a pruned trial, a completed one) leaves most slots
idle (Hydra issues #3091, #2435). Here each trial's job is handed alone to the configured launcher
(`launch([overrides], initial_job_idx)`) from its own thread; the sweep thread waits for the first of
them to end (`concurrent.futures.wait(..., FIRST_COMPLETED)`), tells its result, and asks and starts
the next. Every Optuna call (ask, tell, storage) stays on the sweep thread.

That is safe only for launchers whose `launch` hands the job to another process and waits: joblib's
loky workers, submitit's local processes and Slurm jobs (their job handles are futures). Hydra's
BasicLauncher runs the job in the sweep process itself (it changes the working dir and sets the
global HydraConfig), so it keeps batches.

What the sampler sees of the trials in flight: they are RUNNING in the study. Optuna 5's TPE with
`constant_liar=True` (our default, config.py) counts each as a trial with the worst value, so it does
not propose the same region again (optuna/samplers/_tpe/sampler.py, _split_trials); the boundary
sampler never proposes a config that a RUNNING trial holds (verlsweep.proofs.sampler: `tried`); GP
conditions on running trials too, the grid skips their points; random and QMC ignore them.
"""
from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import optuna

from verlsweep.common.errors import Problem
from verlsweep.common.result import TrialResult
from verlsweep.reconcile.results import Told

log = logging.getLogger(__name__)

KEY = "hydra.sweeper.schedule"
SCHEDULES = ("auto", "async", "batch")
# launchers whose launch() waits on jobs that run in other processes (matched on the class and its bases)
OUT_OF_PROCESS = ("hydra_plugins.hydra_joblib_launcher.joblib_launcher.JoblibLauncher",
                  "hydra_plugins.hydra_submitit_launcher.submitit_launcher.BaseSubmititLauncher")
IN_PROCESS = ("hydra._internal.core_plugins.basic_launcher.BasicLauncher",)


def _names(launcher: type) -> set[str]:
    return {f"{c.__module__}.{c.__qualname__}" for c in launcher.__mro__}


def choose(requested: str, n_jobs: int, launcher: type) -> tuple[str, list[Problem]]:
    """The schedule the sweep uses and the problems with the request. `auto`: async when more than
    one trial may run and the launcher runs jobs out of process, else batch; `async` on a launcher
    not known to be out of process is the user's call, except on the in-process BasicLauncher."""
    if requested not in SCHEDULES:
        return "batch", [Problem(KEY, requested, "one of " + ", ".join(SCHEDULES))]
    names = _names(launcher)
    if requested == "async" and names & set(IN_PROCESS):
        return "batch", [Problem(KEY, requested, "batch (or auto) with hydra/launcher=basic, which runs each job "
                                 "inside the sweep process; async needs a launcher that runs jobs in their own "
                                 "processes: hydra/launcher=joblib, submitit_local, submitit_slurm or slurm")]
    if requested == "auto":
        requested = "async" if n_jobs > 1 and names & set(OUT_OF_PROCESS) else "batch"
    return requested, []


def one_at_a_time(n_jobs: int, launcher: type) -> str | None:
    """A note when n_jobs > 1 asks for parallel trials of a launcher that runs one job at a time."""
    if n_jobs <= 1 or not _names(launcher) & set(IN_PROCESS):
        return None
    return (f"hydra.sweeper.n_jobs={n_jobs} with hydra/launcher=basic runs one trial at a time (each job runs "
            f"in the sweep's own process); for {n_jobs} at once add hydra/launcher=joblib")


@dataclass
class Flight:
    trial: optuna.Trial
    job_idx: int
    future: concurrent.futures.Future
    slot: int


class InFlight:
    """Trials whose jobs run now, each waited on by its own daemon thread (a sweep interrupted with
    jobs in flight exits without waiting for them: its trials are abandoned and re-run, as in batches)."""

    def __init__(self, run_batch: Callable[[list[list[str]], int], Sequence[Any]], n_jobs: int,
                 slot_overrides: Sequence[list[str]] = ()) -> None:
        self.run_batch = run_batch
        self.n_jobs = n_jobs
        # per slot (0 .. n_jobs-1), what the trial holding it gets: a device group (verlsweep.study.subsets)
        self.slot_overrides = slot_overrides
        self.flights: list[Flight] = []

    def __len__(self) -> int:
        return len(self.flights)

    @property
    def free(self) -> int:
        return self.n_jobs - len(self.flights)

    def trials(self) -> list[optuna.Trial]:
        return [f.trial for f in self.flights]

    def start(self, trial: optuna.Trial, overrides: list[str], job_idx: int) -> None:
        future: concurrent.futures.Future = concurrent.futures.Future()
        slot = min(set(range(self.n_jobs)) - {f.slot for f in self.flights})
        if self.slot_overrides:
            overrides = overrides + self.slot_overrides[slot]

        def work() -> None:
            try:
                returns = list(self.run_batch([overrides], job_idx))
            except BaseException as exc:  # noqa: BLE001 - the launcher's failure is this trial's outcome
                future.set_exception(exc)
            else:
                future.set_result(returns[0] if returns else None)

        threading.Thread(target=work, name=f"verlsweep-trial-{trial.number}", daemon=True).start()
        self.flights.append(Flight(trial, job_idx, future, slot))

    def ready(self) -> bool:
        """A trial in flight has ended and waits to be told."""
        return any(f.future.done() for f in self.flights)

    def wait(self, timeout: float | None = None) -> list[tuple[optuna.Trial, Any, TrialResult | None]]:
        """The trials that ended (at least one unless `timeout`), in the order they were started: each
        with its JobReturn, or with a crash result when the launcher raised."""
        concurrent.futures.wait([f.future for f in self.flights], timeout=timeout,
                                return_when=concurrent.futures.FIRST_COMPLETED)
        ended = [f for f in self.flights if f.future.done()]
        self.flights = [f for f in self.flights if not f.future.done()]
        out: list[tuple[optuna.Trial, Any, TrialResult | None]] = []
        for f in ended:
            exc = f.future.exception()
            if exc is None:
                out.append((f.trial, f.future.result(), None))
            else:
                log.error("verlsweep: the launcher failed on trial %d: %s", f.trial.number, exc)
                out.append((f.trial, None, TrialResult("crash", excerpt=f"launcher: {type(exc).__name__}: {exc}")))
        return out


@dataclass
class Sweep:
    """What the asynchronous loop asks of the sweep (verlsweep.study.loop.Loop gives it)."""
    left: Callable[[], int | None]      # trials that may still be asked (None: no new ones ever, e.g. timeout)
    ask: Callable[[int], list[optuna.Trial]]
    # a trial's job overrides, or its result when nothing is launched (reused, ruled out, config_error)
    prepare: Callable[[optuna.Trial], tuple[Told | None, list[str] | None]]
    tell: Callable[[optuna.Trial, Any, TrialResult | None], Told]
    count: Callable[[list[Told]], bool]    # trials told: True when the sweep must ask no more (failures)
    show: Callable[[], None]               # outputs, progress line, parent run (seconds: after the refill)
    # waits a moment and says whether another sweep process still runs trials of the study
    others_running: Callable[[], bool]
    watch: Callable[[Iterable[optuna.Trial]], None]      # heartbeats start
    unwatch: Callable[[Iterable[optuna.Trial]], None]
    abandon: Callable[[list[optuna.Trial]], None]        # interrupted: FAIL and re-run once


def run(sweep: Sweep, flights: InFlight, first_job_idx: int) -> int:
    """Until no slot is left and nothing runs; returns the next job index. A trial's end is told,
    the freed slot refilled, and only then the outputs written (the report takes seconds)."""
    job_idx = first_job_idx
    stop = unshown = False
    unstarted: list[optuna.Trial] = []
    try:
        while True:
            left = None if stop else sweep.left()
            stop = stop or left is None
            if left and flights.free:
                asked = sweep.ask(min(flights.free, left))
                unstarted = list(asked)
                for trial in asked:
                    done, overrides = sweep.prepare(trial)
                    unstarted.remove(trial)
                    if done is not None:
                        stop = sweep.count([done]) or stop
                        unshown = True
                        continue
                    sweep.watch([trial])
                    flights.start(trial, overrides or [], job_idx)
                    job_idx += 1
                if asked and flights.free and not stop:
                    continue            # proposals told without a launch left slots free: ask again
            # the outputs take seconds: a trial that has ended meanwhile is told (and its slot refilled) first
            if unshown and not flights.ready():
                sweep.show()
                unshown = False
            if not flights:
                if left == 0 and not stop and sweep.others_running():
                    continue            # others_running waited a moment; left() settles a dead sweep's trials
                return job_idx
            ended = flights.wait()
            sweep.unwatch(t for t, _, _ in ended)
            stop = sweep.count([sweep.tell(trial, ret, result) for trial, ret, result in ended]) or stop
            unshown = True
    except BaseException:
        sweep.abandon(flights.trials() + unstarted)
        raise
