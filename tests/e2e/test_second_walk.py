"""A new user's second walk, through the commands they type: what used to trip them, now a clear path."""
from __future__ import annotations

import csv
import re
import subprocess
import sys

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


def _readme_command(needle: str) -> str:
    from tests.test_docs_commands import collect

    (command,) = [c for c in collect(REPO / "README.md") if needle in c.text and c.skip_reason is None]
    return command.text


@pytest.mark.slow
def test_the_readme_tour_after_the_quickstart_runs_its_own_study(tmp_path):
    """The tour's sweep composes the quickstart's study (same space, hardware, algorithm): it used to resume
    that finished study, print `complete: 30/4 trials` and write nothing where the tour looks next."""
    from tests.test_docs_commands import command_env, workdir_for

    work = workdir_for(tmp_path)
    env = command_env(tmp_path, work)
    quickstart = subprocess.run(      # ./quickstart's own sweep, with the tour's budget of 4 trials
        [sys.executable, "sweep.py", "-m", "hardware=a2_64g", "algorithm=remax", "runner=estimate",
         "hydra.sweeper.n_trials=4"], cwd=work, env=env, capture_output=True, text=True, timeout=600)
    assert quickstart.returncode == 0, quickstart.stderr[-3000:]
    tour = subprocess.run(["bash", "-c", _readme_command("hydra.sweep.dir=outputs/sweeps/tour")], cwd=work, env=env,
                          capture_output=True, text=True, timeout=600)
    assert tour.returncode == 0, tour.stderr[-3000:]
    with (work / "outputs" / "sweeps" / "tour" / "trials.csv").open() as f:
        rows = [r for r in csv.DictReader(f) if not r["confirms"]]     # the long-run confirmations aside
    assert len(rows) == 4, rows
    report = subprocess.run([sys.executable, "-m", "verlsweep.report", "outputs/sweeps/tour"], cwd=work, env=env,
                            capture_output=True, text=True, timeout=300)
    assert report.returncode == 0 and "4 of 4 trials" in report.stdout, report.stderr[-3000:]


def test_a_report_on_a_dir_that_does_not_exist_says_so_and_exits_2(tmp_path):
    missing = tmp_path / "outputs" / "sweeps" / "tuor"
    done = subprocess.run([sys.executable, "-m", "verlsweep.report", str(missing)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert f"{missing} does not exist" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_a_throughput_sweeps_terminal_says_the_best_once_in_one_number_format_and_cuts_labels_at_a_word(tmp_path):
    proc = run_sweep(tmp_path, ["hardware=a2_64g", "algorithm=grpo", "model=qwen3_8b", "space=throughput",
                                "runner=estimate", "hydra.sweeper.n_trials=2", "tracking.enabled=false",
                                f"hydra.sweep.dir={tmp_path / 'sweep'}"], new_mark(), multirun=True,
                     env={"COLUMNS": "120"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = proc.stdout + proc.stderr
    assert "Best parameters" not in out and "Best value" not in out       # the summary says the best, once
    assert len(re.findall(r"^best trial \d+: ", proc.stdout, re.MULTILINE)) == 1
    lines = re.findall(r"^t\d\d  completed .*$", proc.stdout, re.MULTILINE)
    assert len(lines) == 2
    for line in lines:
        assert re.search(r"\d s$", line), line                 # the label gave way, the trial's time stays
        assert not re.search(r"\S…", line), line              # cut after a whole knob, never inside one
    shown = re.findall(r"^t\d\d  completed +(\S+)", proc.stdout, re.MULTILINE)
    shown += re.findall(r"best objective (\S+) \(t", proc.stdout)
    assert shown and all(len(re.sub(r"\D", "", s).lstrip("0")) == 4 for s in shown), shown


@pytest.mark.slow
def test_a_laptop_dry_run_says_its_ray_cpus_in_one_short_line(tmp_path):
    proc = run_sweep(tmp_path, ["hardware=a2_64g", "algorithm=remax", "model=qwen3_8b", "dry_run=true",
                                f"paths.output_root={tmp_path}"], new_mark(), env={"SLURM_CPUS_ON_NODE": "2"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    (line,) = re.findall(r"^# planner Ray CPUs .*$", proc.stdout, re.MULTILINE)
    assert len(line) < 250 and "set hardware.cpus" in line, line
