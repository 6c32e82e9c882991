"""verlsweep.study.failures: one stop rule for batched and asynchronous trials."""
from __future__ import annotations

from pathlib import Path

from optuna.trial import TrialState

from verlsweep.reconcile.results import NO_RESULT, Told
from verlsweep.study.failures import FailureWatch


def ok(n: int) -> Told:
    return Told(n, "completed", TrialState.COMPLETE, [1.0])


def bad(n: int) -> Told:
    return Told(n, "crash", TrialState.FAIL, None, excerpt="Traceback\nRuntimeError: boom")


def test_consecutive_failures_stop_the_sweep_and_a_result_resets_the_count_but_no_result_does_not():
    watch = FailureWatch(max_consecutive=3, max_rate=None, window=2)
    assert not watch.told([bad(0), bad(1)])
    assert not watch.told([ok(2)])                                         # reset
    assert not watch.told([bad(3), Told(4, NO_RESULT, TrialState.FAIL, None), bad(5)])
    assert watch.told([bad(6)])
    assert [t.number for t in watch.stopped_by] == [3, 5, 6]
    text = watch.message(Path("/s/trials.csv"), resumable=True)
    assert "3 consecutive trials failed (3:crash, 5:crash, 6:crash)" in text
    assert "max_consecutive_failures=3" in text and "RuntimeError: boom" in text and "resumes" in text


def test_a_failure_rate_is_judged_per_batch_and_per_run_of_n_jobs_asynchronous_trials():
    batched = FailureWatch(max_consecutive=5, max_rate=0.5, window=4)
    assert not batched.told([ok(0), bad(1)], batch=True)                   # 1 of 2: not above 0.5
    assert batched.told([bad(2), bad(3), ok(4)], batch=True)               # 2 of 3
    assert "2 trials failed (2:crash, 3:crash); hydra.sweeper.max_failure_rate=0.5" in batched.message(
        Path("t.csv"), resumable=False)
    one_by_one = FailureWatch(max_consecutive=5, max_rate=0.5, window=3)
    assert not one_by_one.told([bad(0)]) and not one_by_one.told([bad(1)])   # not judged before 3 told
    assert one_by_one.told([ok(2)])                                        # 2 of 3 failed
    lenient = FailureWatch(max_consecutive=1, max_rate=1.0, window=2)      # the rate replaces our count
    assert not any(lenient.told([bad(n)]) for n in range(6))


def refused(n: int, *keys: str) -> Told:
    return Told(n, "config_error", TrialState.FAIL, None, excerpt="invalid trial config", refused_keys=keys)


def test_a_refusal_of_the_trials_own_params_is_a_finding_and_one_of_a_fixed_key_a_failure():
    tp = "verl.actor_rollout_ref.rollout.tensor_model_parallel_size"
    watch = FailureWatch(max_consecutive=3, max_rate=None, window=1, swept=[tp, "+trial.max_token_len_factor"])
    # the throughput race's five refusals in a row (a TP the heads do not divide, a budget too small)
    assert not any(watch.told([refused(n, tp, "trial.max_token_len_factor")]) for n in range(5))
    fixed = [refused(n, "objective.metric") for n in (5, 6, 7)]             # every trial refused alike
    assert not watch.told(fixed[:2]) and watch.told(fixed[2:])
    mixed = FailureWatch(max_consecutive=2, max_rate=None, window=1, swept=[tp])
    assert mixed.told([refused(0, tp, "objective.metric"), refused(1, tp, "objective.metric")])
    no_keys = FailureWatch(max_consecutive=2, max_rate=None, window=1, swept=[tp])   # a compose error
    assert no_keys.told([refused(0), refused(1)])
    rate = FailureWatch(max_consecutive=5, max_rate=0.5, window=2, swept=[tp])
    assert not rate.told([refused(0, tp), refused(1, tp)], batch=True)
