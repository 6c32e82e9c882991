"""Named points where a test may kill the process, to prove a crash there loses nothing.

`VERLSWEEP_CRASH_AT=<point>[:<n>]` in the environment makes the n-th `reached(<point>)` of the process
(default the first) SIGKILL it: no `finally`, no atexit, exactly what the OOM killer or `kill -9`
leave behind. Unset (always, outside tests), `reached` is one dict lookup. The points:

    trial_running    the runner saw the trial's first training step (the trial process lives on)
    trial_ended      the trial's process ended and result.json is written; nothing is told yet
    writing_outputs  the sweep is between writing trials.csv and best.yaml (1st: at its start,
                     then after each batch)
"""
from __future__ import annotations

import os
import signal
from collections import Counter

from verlsweep.common.names import CRASH_AT_ENV

POINTS = ("trial_running", "trial_ended", "writing_outputs")
_seen: Counter[str] = Counter()


def reached(point: str) -> None:
    wanted = os.environ.get(CRASH_AT_ENV)
    if not wanted:
        return
    name, _, nth = wanted.partition(":")
    if name != point:
        return
    _seen[point] += 1
    if _seen[point] == int(nth or 1):
        os.kill(os.getpid(), signal.SIGKILL)
