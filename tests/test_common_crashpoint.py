"""verlsweep.common.crashpoint: VERLSWEEP_CRASH_AT=<point>[:<n>] SIGKILLs the process at the n-th time
it reaches that point, and nowhere else (tests/test_reconcile_e2e.py uses it on whole sweeps)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from verlsweep.common.names import CRASH_AT_ENV

SCRIPT = """
from verlsweep.common.crashpoint import reached
for i in range(1, 4):
    reached("trial_ended")
    print("passed", i, flush=True)
"""


def run(env_value: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != CRASH_AT_ENV}
    if env_value is not None:
        env[CRASH_AT_ENV] = env_value
    return subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("value, passed, killed", [
    (None, 3, False),                        # unset: nothing happens
    ("writing_outputs", 3, False),           # another point
    ("trial_ended", 0, True),                # the first time
    ("trial_ended:2", 1, True),              # the second time
])
def test_the_process_is_killed_at_the_named_point_and_time_only(value, passed, killed):
    proc = run(value)
    assert proc.stdout.count("passed") == passed
    assert (proc.returncode == -signal.SIGKILL) is killed
