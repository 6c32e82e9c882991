"""How a sweep ends before its n_trials: its failures rule stopped it (the sweeper exits 1), or Ctrl-C
interrupted it (exit 130). Either way the loop has written its outputs first."""
from __future__ import annotations


class SweepStopped(RuntimeError):
    """max_consecutive_failures (or max_failure_rate) reached; the outputs so far are written."""


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C: the trials it stopped in flight (failed, and re-run once when the same command runs again)."""

    def __init__(self, abandoned: list[int]) -> None:
        super().__init__(abandoned)
        self.abandoned = abandoned
