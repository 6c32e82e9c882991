"""tests/conftest.py's xdist groups reach pytest-xdist: the Ray/Slurm tests really run one at a time."""
import subprocess
import sys
from pathlib import Path

GROUPED = r'''
import os, time, pytest

@pytest.mark.xdist_group("one")
@pytest.mark.parametrize("i", range(4))
def test_grouped(i):
    time.sleep(0.2)
    with open(os.path.join(os.path.dirname(__file__), "workers.txt"), "a") as f:
        f.write(os.environ["PYTEST_XDIST_WORKER"] + "\n")
'''


def test_an_xdist_group_runs_on_one_worker(tmp_path: Path):
    (tmp_path / "test_grouped.py").write_text(GROUPED)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup",
                           "-p", "no:cacheprovider", "-o", "addopts=", str(tmp_path / "test_grouped.py")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:]
    workers = set((tmp_path / "workers.txt").read_text().split())
    assert len(workers) == 1, f"a group split over workers {workers}: pytest and pytest-xdist disagree on nodeids"
