"""The stand-in's process tree: hang/stall leave "Ray" children in the process group, SIGTERM exits 15, and
the children follow a crashed leader (tests/support/standin/ray_actors.py)."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from tests.support.standin_runs import FAST, Background, clean_env, group_members, steps_of, wait_for
from verlsweep.trial.metrics import strip_ansi


def test_hang_leaves_children_in_its_process_group(tmp_path: Path) -> None:
    run = Background(tmp_path, "+standin.mode=hang", "trainer.logger=[console]",
                     env=clean_env(VERL_REPLAY_BUFFER_DEBUG_INTERVAL_SECONDS="1"))
    try:
        err = wait_for(run.err, "pending: 0, running: ")
        assert "INFO:" in err and "(TaskRunnerV1 pid=" in err
        members = group_members(run.proc.pid)
        assert run.proc.pid in members and len(members) >= 3, members  # driver + "raylet" + "worker"
        # Killing only the leader orphans the Ray stand-ins: a product must kill the whole group.
        os.kill(run.proc.pid, signal.SIGKILL)
        assert run.proc.wait(timeout=10) == -signal.SIGKILL
        time.sleep(0.5)
        assert len(group_members(run.proc.pid)) >= 2
        assert steps_of(strip_ansi(run.out.read_text())) == []
    finally:
        run.kill_group()
    assert group_members(run.proc.pid) == []


def test_stall_logs_steps_then_blocks_and_sigterm_exits_15(tmp_path: Path) -> None:
    run = Background(tmp_path, "+standin.mode=stall", "+standin.fail_at_step=3", "trainer.total_training_steps=5",
                     "trainer.logger=[console]", *FAST)
    try:
        wait_for(run.out, ") step:2 - ")
        time.sleep(0.5)
        assert steps_of(strip_ansi(run.out.read_text())) == [0, 1, 2]
        assert run.proc.poll() is None
        os.killpg(run.proc.pid, signal.SIGTERM)
        assert run.proc.wait(timeout=10) == 15  # Ray's driver SIGTERM handler: sys.exit(signum)
    finally:
        run.kill_group()
    assert group_members(run.proc.pid) == []


def test_children_follow_a_crashed_leader(tmp_path: Path) -> None:
    run = Background(tmp_path, "+standin.mode=crash", "+standin.fail_at_step=1", "trainer.logger=[console]", *FAST)
    assert run.proc.wait(timeout=30) == -signal.SIGSEGV
    deadline = time.monotonic() + 5
    while group_members(run.proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert group_members(run.proc.pid) == []  # Ray's fate sharing, except in hang/stall
