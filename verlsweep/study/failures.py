"""When failures stop a sweep: one rule for batched and asynchronous trials.

Ours: `max_consecutive_failures` failed trials in a row (a trial with a result resets the count; one
with no result, our task's dry run, neither counts nor resets; another app's task that returns None
fails, as with hydra-optuna-sweeper). A config_error whose refused keys are all swept params is the trial
rules' finding about those values (a TP the heads do not divide, a token budget below the longest
sequence), as an OOM is: it does not count; one naming a fixed key (objective.metric=perf/nope, a
missing path) is the sweep's own config, failing every trial alike, and does. hydra-optuna-sweeper's,
when `max_failure_rate` is set, replaces it: each batch of `n_jobs` trials told is judged on its share
of failures (its _impl.py checks every batch). Asynchronous trials have no batches, so each run of
`n_jobs` trials told in turn is one.
"""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from verlsweep.reconcile import results
from verlsweep.study import peer_compat
from verlsweep.study.space import config_key


class FailureWatch:
    def __init__(self, max_consecutive: int, max_rate: float | None, window: int,
                 swept: Iterable[str] = ()) -> None:
        self.swept = {config_key(name) for name in swept}     # the keys the space's params set
        self.max_consecutive = max_consecutive
        self.max_rate = max_rate
        self.window = max(1, window)
        self._in_a_row: list[results.Told] = []
        self._pending: list[results.Told] = []
        self.stopped_by: list[results.Told] = []      # the failures that stopped the sweep, once it must stop

    def told(self, told: list[results.Told], batch: bool = False) -> bool:
        """Count trials as they are told; True once the sweep must start no more trials. `batch`: these
        are one whole batch (the rate is judged on them, not on a window)."""
        for t in told:
            if self.failed(t):
                self._in_a_row.append(t)
            elif t.outcome != results.NO_RESULT:
                self._in_a_row.clear()
        if self.max_rate is None:
            if len(self._in_a_row) >= self.max_consecutive:
                self.stopped_by = list(self._in_a_row)
            return bool(self.stopped_by)
        self._pending.extend(told)
        if not batch and len(self._pending) < self.window:
            return bool(self.stopped_by)
        judged, self._pending = self._pending, []
        if peer_compat.failure_rate_exceeded(judged, self.max_rate, self.failed):
            self.stopped_by = [t for t in judged if self.failed(t)]
        return bool(self.stopped_by)

    def failed(self, t: results.Told) -> bool:
        """A failure as this rule counts one: Told.failed, but a refusal of the trial's own params."""
        refused_params = t.outcome == "config_error" and bool(t.refused_keys) and set(t.refused_keys) <= self.swept
        return t.failed and not refused_params

    def message(self, trials_csv: Path, resumable: bool) -> str:
        failures = self.stopped_by
        last = failures[-1]
        outcomes = ", ".join(f"{t.number}:{t.outcome}" for t in failures)
        excerpt = (last.excerpt or "").strip().splitlines()
        rate = self.max_rate is not None
        why = (f"hydra.sweeper.max_failure_rate={self.max_rate}" if rate else
               f"hydra.sweeper.max_consecutive_failures={self.max_consecutive}")
        return (f"verlsweep stopped the sweep: {len(failures)} {'' if rate else 'consecutive '}trials failed "
                f"({outcomes}); {why}.\n"
                "A run of failures like this usually means a broken environment (devices, drivers, paths, "
                "a missing package), not a bad config.\n"
                f"Last failure, trial {last.number} ({last.outcome}): "
                f"{excerpt[-1][:500] if excerpt else 'no excerpt'}\n"
                f"Results so far: {trials_csv}."
                + (" Re-running the same command resumes the study." if resumable else ""))
