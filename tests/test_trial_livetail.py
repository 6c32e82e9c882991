"""verlsweep.trial.livetail: off a terminal (CI, a redirected stderr) only the lines that matter reach
it, with Ray's prefix stripped, so a long sweep's log stays readable; lines=0 shows nothing."""
from __future__ import annotations

from verlsweep.trial.livetail import LiveTail


def test_off_a_terminal_only_important_lines_are_written_with_rays_prefix_stripped(capsys):
    with LiveTail("t03 util=0.90", lines=10) as tail:
        tail.line("(TaskRunnerV1 pid=7, ip=10.0.0.2) loading weights\n")
        tail.line("(TaskRunnerV1 pid=7, ip=10.0.0.2) step:1 - perf/throughput:480\n", important=True)
    assert capsys.readouterr().err == "[t03 util=0.90] step:1 - perf/throughput:480\n"


def test_a_long_line_is_cut(capsys):
    LiveTail("t", lines=5).line("x" * 1000, important=True)
    assert capsys.readouterr().err == f"[t] {'x' * 300}\n"


def test_zero_lines_shows_nothing(capsys):
    with LiveTail("t", lines=0) as tail:
        tail.line("ValueError: boom", important=True)
    assert capsys.readouterr().err == ""
