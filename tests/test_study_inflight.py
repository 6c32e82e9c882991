"""verlsweep.study.inflight: which schedule a launcher gets, and the asynchronous loop on a fake launcher
(threads that sleep each trial's duration) with a real in-memory study."""
from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

import optuna
import pytest
from hydra._internal.core_plugins.basic_launcher import BasicLauncher

from hydra_plugins.hydra_joblib_launcher.joblib_launcher import JoblibLauncher
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import LocalLauncher
from hydra_plugins.verlsweep_launcher.slurm_launcher import VerlSweepSlurmLauncher
from verlsweep.common.result import TrialResult
from verlsweep.reconcile import results
from verlsweep.reconcile.budget import remaining
from verlsweep.study import inflight


@pytest.mark.parametrize(("requested", "n_jobs", "launcher", "chosen"), [
    ("auto", 3, JoblibLauncher, "async"), ("auto", 3, LocalLauncher, "async"),
    ("auto", 3, VerlSweepSlurmLauncher, "async"), ("auto", 1, JoblibLauncher, "batch"),
    ("auto", 3, BasicLauncher, "batch"), ("batch", 3, JoblibLauncher, "batch"), ("async", 1, JoblibLauncher, "async")])
def test_auto_is_async_only_with_several_jobs_on_an_out_of_process_launcher(requested, n_jobs, launcher, chosen):
    assert inflight.choose(requested, n_jobs, launcher) == (chosen, [])


def test_async_on_the_in_process_basic_launcher_is_refused_naming_the_key():
    _, (problem,) = inflight.choose("async", 3, BasicLauncher)
    assert problem.key == "hydra.sweeper.schedule" and "hydra/launcher=joblib" in problem.allowed


def test_an_unknown_schedule_is_refused_with_the_allowed_values():
    _, (problem,) = inflight.choose("eager", 3, JoblibLauncher)
    assert problem.key == "hydra.sweeper.schedule" and problem.allowed == "one of auto, async, batch"


class Fake:
    """A launcher whose job sleeps the duration its trial number gives; records start/end times."""

    def __init__(self, seconds: dict[int, float], fail: tuple[int, ...] = ()) -> None:
        self.seconds, self.fail = seconds, fail
        self.spans: dict[int, list[float]] = {}
        self.lock = threading.Lock()

    def run_batch(self, jobs: list[list[str]], idx: int) -> list[Any]:
        (overrides,) = jobs
        number = int(overrides[0])
        with self.lock:
            self.spans[number] = [time.monotonic()]
        time.sleep(self.seconds.get(number, 0.05))
        with self.lock:
            self.spans[number].append(time.monotonic())
        if number in self.fail:
            raise OSError("sbatch: error: submission failed")
        return [TrialResult("completed", objective=float(number))]


def sweep(study: optuna.Study, n_trials: int, told: list, abandoned: list, stop_after: int = 10**6) -> inflight.Sweep:
    def tell(trial: optuna.Trial, ret: Any, result: TrialResult | None) -> results.Told:
        told.append((trial.number, (result or ret).outcome))
        return results.tell(study, trial, None, ["objective"], result=result or ret)

    def count(batch: list) -> bool:
        if len(told) >= stop_after:
            raise KeyboardInterrupt
        return False

    def ask(n: int) -> list[optuna.Trial]:
        return [study.ask({"x": optuna.distributions.FloatDistribution(0, 1)}) for _ in range(n)]

    return inflight.Sweep(left=lambda: remaining(study, n_trials), ask=ask,
                          prepare=lambda trial: (None, [str(trial.number)]), tell=tell, count=count,
                          show=lambda: None, others_running=lambda: False, watch=lambda ts: None,
                          unwatch=lambda ts: None, abandon=abandoned.extend)


def test_a_trial_that_ends_frees_its_slot_for_the_next_while_a_slow_one_runs():
    study = optuna.create_study(direction="maximize", sampler=optuna.samplers.RandomSampler(seed=0))
    fake, told = Fake({0: 1.0}), []
    next_idx = inflight.run(sweep(study, 6, told, []), inflight.InFlight(fake.run_batch, 3), first_job_idx=7)
    assert next_idx == 13 and sorted(n for n, _ in told) == list(range(6))           # each told once
    assert told[-1][0] == 0                                                         # the slow one ended last
    assert all(fake.spans[n][0] < fake.spans[0][1] for n in range(1, 6))            # all ran beside it
    for t, _ in fake.spans.values():
        assert sum(s <= t < e for s, e in fake.spans.values()) <= 3                 # never over n_jobs
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials)


def test_a_launcher_failure_is_that_trials_crash_and_the_others_go_on():
    study = optuna.create_study(direction="maximize")
    told: list = []
    inflight.run(sweep(study, 3, told, []), inflight.InFlight(Fake({}, fail=(1,)).run_batch, 2), 0)
    assert sorted(told) == [(0, "completed"), (1, "crash"), (2, "completed")]


def test_an_interrupted_sweep_abandons_exactly_the_trials_still_in_flight():
    study = optuna.create_study(direction="maximize")
    told, abandoned = [], []
    with pytest.raises(KeyboardInterrupt):
        inflight.run(sweep(study, 6, told, abandoned, stop_after=1),
                     inflight.InFlight(Fake({1: 0.5, 2: 0.5}).run_batch, 3), 0)
    assert [n for n, _ in told] == [0] and sorted(t.number for t in abandoned) == [1, 2]


def test_a_stop_asks_no_more_trials_but_tells_the_ones_in_flight():
    study = optuna.create_study(direction="maximize")
    told: list = []
    hooks = sweep(study, 10, told, [])
    hooks.count = lambda batch: any(t.outcome == "crash" for t in batch)     # max_consecutive_failures reached
    inflight.run(hooks, inflight.InFlight(Fake({1: 0.3}, fail=(0,)).run_batch, 2), 0)
    assert sorted(told) == [(0, "crash"), (1, "completed")] and len(study.trials) == 2


def test_each_trial_in_flight_holds_a_slot_of_its_own_and_frees_it_when_it_ends():
    study = optuna.create_study(direction="maximize")
    seen: dict[int, list[str]] = {}
    fake = Fake({0: 0.4})

    def run_batch(jobs: list[list[str]], idx: int) -> list[Any]:
        seen[int(jobs[0][0])] = jobs[0][1:]
        return fake.run_batch([jobs[0][:1]], idx)

    inflight.run(sweep(study, 4, [], []), inflight.InFlight(run_batch, 2, [["dev=0,1"], ["dev=2,3"]]), 0)
    assert seen[0] == ["dev=0,1"] and {n: seen[n] for n in (1, 2, 3)} == {n: ["dev=2,3"] for n in (1, 2, 3)}


def test_an_interrupt_while_preparing_abandons_the_asked_trials_not_yet_started_too():
    study = optuna.create_study(direction="maximize")
    abandoned: list = []
    hooks = sweep(study, 6, [], abandoned)

    def prepare(trial: optuna.Trial) -> tuple:
        if trial.number == 1:
            raise KeyboardInterrupt
        return None, [str(trial.number)]

    hooks.prepare = prepare
    with pytest.raises(KeyboardInterrupt):
        inflight.run(hooks, inflight.InFlight(Fake({0: 0.5}).run_batch, 3), 0)
    assert sorted(t.number for t in abandoned) == [0, 1, 2]


def test_a_trial_that_ended_while_the_slot_was_refilled_is_told_before_the_outputs_are_written():
    """The outputs take seconds (trials.csv, best_launch.sh, the report): a trial already ended is told first."""
    study = optuna.create_study(direction="maximize")
    fake, told, told_at, shows = Fake({0: 0.05, 1: 0.15, 2: 2.0, 3: 2.0}), [], {}, []
    base = sweep(study, 4, told, [])
    tell = base.tell

    def timed_tell(trial: optuna.Trial, ret: Any, result: TrialResult | None) -> results.Told:
        told_at[trial.number] = time.monotonic()
        return tell(trial, ret, result)

    def slow_prepare(trial: optuna.Trial) -> tuple[None, list[str]]:
        time.sleep(0.3)                 # asking and composing the refill takes a moment
        return None, [str(trial.number)]

    def show() -> None:
        shows.append(time.monotonic())
        time.sleep(1.0)

    inflight.run(dataclasses.replace(base, tell=timed_tell, prepare=slow_prepare, show=show),
                 inflight.InFlight(fake.run_batch, 2), 0)
    assert told_at[1] - fake.spans[1][1] < 0.5, (told_at[1] - fake.spans[1][1])
    assert all(s > told_at[1] for s in shows[:1])          # no write came between trial 1's end and its tell


def test_parallel_jobs_on_the_basic_launcher_get_one_line_naming_the_launcher_to_use():
    from verlsweep.study.inflight import one_at_a_time

    note = one_at_a_time(3, BasicLauncher)
    assert note is not None and "one trial at a time" in note and "hydra/launcher=joblib" in note
    assert one_at_a_time(1, BasicLauncher) is None and one_at_a_time(3, JoblibLauncher) is None
