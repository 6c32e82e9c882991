"""A new user's second walk, through the commands they type: what used to trip them, now a clear path."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.trial_helpers import REPO, new_mark, run_sweep

PLAN_DATA = REPO / "tests" / "support" / "plan_data"


@pytest.mark.slow
def test_a_profile_detected_from_a_recorded_npu_smi_leaves_the_cpus_to_its_node_and_its_estimate_runs(tmp_path):
    """`plan detect --from-npu-smi FILE` used to write this machine's CPU count (2 here) into a profile for
    another node: every trial on it was then refused for Ray CPUs. Unstated, the node counts its own."""
    site = tmp_path / "site"
    detect = subprocess.run(
        [sys.executable, "-m", "verlsweep.plan", "detect", "--from-npu-smi", str(PLAN_DATA / "npu_smi_a2_910b3.txt"),
         "--host-memory-gb", "1024", "--name", "lab_a2", "--conf-dir", str(site)],
        cwd=REPO, capture_output=True, text=True, timeout=120)
    assert detect.returncode == 0, detect.stderr[-3000:]
    written = (site / "hardware" / "lab_a2.yaml").read_text()
    assert "cpus" not in yaml.safe_load(written)["hardware"]
    assert "# cpus: not stated (recorded on another node)" in written and "--cpus N" in written

    proc = run_sweep(tmp_path, ["hardware=lab_a2", "algorithm=remax", "runner=estimate", "tracking.enabled=false",
                                f"paths.output_root={tmp_path / 'out'}"], new_mark(), timeout=300,
                     env={"VERLSWEEP_CONFIG_PATH": str(site)})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "trial completed, objective" in proc.stdout

    stated = subprocess.run(
        [sys.executable, "-m", "verlsweep.plan", "detect", "--from-npu-smi", str(PLAN_DATA / "npu_smi_a2_910b3.txt"),
         "--host-memory-gb", "1024", "--cpus", "192", "--name", "lab_a2_cpus", "--conf-dir", str(site)],
        cwd=REPO, capture_output=True, text=True, timeout=120)
    assert stated.returncode == 0, stated.stderr[-3000:]
    assert yaml.safe_load((site / "hardware" / "lab_a2_cpus.yaml").read_text())["hardware"]["cpus"] == 192
