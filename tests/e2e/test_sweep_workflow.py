"""The tuning workflow as a user meets it, through `python sweep.py` and `python -m verlsweep.plan` as
subprocesses: resume means the same search, sweep-level errors are messages, a broken fixed config
stops before the study, group typos get a "did you mean", --help shows our groups, best_launch.sh is
a long run one can start. Sweeps use runner=estimate (seconds per trial, no device or files)."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
import yaml
from mlflow.tracking import MlflowClient

from tests.support.trial_helpers import REPO, copy_store, new_mark, run_sweep, standin_entrypoint, tiny_overrides
from verlsweep import CONF_DIR
from verlsweep.common.labels import figure
from verlsweep.common.names import RESULT_FILE

UTIL = "verl.actor_rollout_ref.rollout.gpu_memory_utilization"
DB = "verlsweep-optuna.db"
PLAN_DATA = REPO / "tests" / "support" / "plan_data"


def estimate_args(tmp: Path, uri: str, *extra: str) -> list[str]:
    return ["hardware=a2_64g", "algorithm=remax", "runner=estimate", f"paths.output_root={tmp / 'out'}",
            f"tracking.uri={uri}", *extra]


def sweep(tmp: Path, args: list[str], **kw) -> subprocess.CompletedProcess:
    return run_sweep(tmp, args, new_mark(), multirun=True, timeout=600, **kw)


def mlflow_runs(uri: str) -> list:
    client = MlflowClient(uri)
    return client.search_runs([e.experiment_id for e in client.search_experiments()])


def sweep_dirs(tmp: Path) -> list[Path]:
    return sorted((tmp / "out" / "sweeps").glob("*")) if (tmp / "out" / "sweeps").exists() else []


def studies(tmp: Path) -> dict[str, optuna.Study]:
    url = f"sqlite:///{tmp / DB}"
    return {s.study_name: optuna.load_study(study_name=s.study_name, storage=url)
            for s in optuna.get_all_study_summaries(url)}


# --- resume means the same search; best_launch.sh -----------------------------------------------------


@pytest.fixture(scope="module")
def resumed(tmp_path_factory, empty_mlflow_db):
    """The Quickstart sweep (2 trials), then the same with another util space, then the Quickstart again."""
    tmp = tmp_path_factory.mktemp("resume")
    uri = copy_store(empty_mlflow_db, tmp)
    plain = estimate_args(tmp, uri, "hydra.sweeper.n_trials=2")
    first = sweep(tmp, plain)
    assert first.returncode == 0, first.stderr[-3000:]
    after_first = {name: dict(s.user_attrs) for name, s in studies(tmp).items()}
    other = sweep(tmp, [*plain, f"{UTIL}=interval(0.4,0.9)"])
    assert other.returncode == 0, other.stderr[-3000:]
    runs_before, dirs_before = len(mlflow_runs(uri)), sweep_dirs(tmp)
    again = sweep(tmp, plain)
    return {"tmp": tmp, "uri": uri, "first": first, "other": other, "again": again,
            "after_first": after_first, "runs_before": runs_before, "dirs_before": dirs_before,
            "first_dir": dirs_before[0]}


@pytest.mark.slow
def test_another_search_space_is_another_study_and_never_rewrites_the_first(resumed):
    found = studies(resumed["tmp"])
    assert len(found) == 2
    (first_name,) = resumed["after_first"]
    assert all(len(s.get_trials()) == 2 for s in found.values())          # the second space ran its own 2
    other = next(s for name, s in found.items() if name != first_name)
    assert "interval(0.4,0.9)" in other.user_attrs["verlsweep.space"]["params"][UTIL]
    assert found[first_name].user_attrs["verlsweep.space"] == resumed["after_first"][first_name]["verlsweep.space"]


@pytest.mark.slow
def test_rerunning_a_complete_study_says_so_and_launches_and_tracks_nothing(resumed):
    again = resumed["again"]
    assert again.returncode == 0, again.stderr[-3000:]
    (name,) = resumed["after_first"]
    assert f"study {name} complete: 2/2 trials, best trial" in again.stdout
    assert "raise hydra.sweeper.n_trials to continue" in again.stdout
    assert f"results: {resumed['first_dir']} (trials.csv, best.yaml" in again.stdout    # the sweep dir
    assert "another search space" not in again.stdout + again.stderr
    assert "Launching" not in again.stdout
    assert len(mlflow_runs(resumed["uri"])) == resumed["runs_before"]     # no parent run, no child
    assert sweep_dirs(resumed["tmp"]) == resumed["dirs_before"]


@pytest.mark.slow
def test_best_launch_is_a_resumable_long_run_that_says_where_its_value_came_from(resumed):
    (name,) = resumed["after_first"]
    best = yaml.safe_load((resumed["first_dir"] / "best.yaml").read_text())
    script = (resumed["first_dir"] / "best_launch.sh").read_text()
    header = "\n".join(line for line in script.splitlines() if line.startswith("#"))
    number = best["trial_number"]
    assert f"trial {number} of study {name}" in header
    assert "predicted, not measured" in header
    assert re.search(r"trial finished \d{4}-\d{2}-\d{2} \d{2}:\d{2}", header)
    assert f"trainer.experiment_name={name}-trial{number}" in script
    assert "trainer.resume_mode=auto" in script and "trainer.resume_mode=disable" not in script
    assert "trainer.total_training_steps=60" in script


# --- errors -------------------------------------------------------------------------------------------

INPUT_ERRORS = {
    "zero_trials": (["hydra.sweeper.n_trials=0"], "hydra.sweeper.n_trials=0: a positive integer"),
    "empty_interval": ([f"{UTIL}=interval(0.9,0.4)"], "low <= high"),
    "misspelt_param_key": (["verl.actor_rollout_ref.rollout.gpu_memory_utilizaton=choice(0.5,0.6)"],
                           f"did you mean {UTIL}"),
    "unknown_choice_option": (["algorithm=choice(remax,grpoo)"], "did you mean grpo?"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(INPUT_ERRORS))
def test_a_bad_sweep_is_a_message_and_exit_2_with_nothing_started(tmp_path, case):
    extra, says = INPUT_ERRORS[case]
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    proc = sweep(tmp_path, estimate_args(tmp_path, uri, *extra))
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert says in proc.stderr
    assert "Traceback" not in proc.stderr and "HYDRA_FULL_ERROR" not in proc.stderr
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / DB).exists()


@pytest.mark.slow
def test_hydra_full_error_adds_the_traceback_and_keeps_the_exit_status(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    proc = sweep(tmp_path, estimate_args(tmp_path, uri, "hydra.sweeper.n_trials=0"), env={"HYDRA_FULL_ERROR": "1"})
    assert proc.returncode == 2, proc.stderr[-3000:]                  # as without the flag
    assert "Traceback" in proc.stderr and "hydra.sweeper.n_trials=0" in proc.stderr


@pytest.mark.slow
def test_a_sweep_stopped_by_consecutive_failures_exits_1_with_the_message_alone(tmp_path, store, tiny_model_dir,
                                                                                 gsm8k_dir):
    # trials that crash when they run (the stand-in's crash mode): an input error every trial shares, such
    # as an objective runner=estimate does not predict, stops the sweep before its study instead (exit 2)
    proc = sweep(tmp_path, [*tiny_overrides(tiny_model_dir, gsm8k_dir, tmp_path / "out", store), standin_entrypoint(),
                            "+env.VERL_STANDIN_MODE=crash", "hydra.sweeper.n_trials=5",
                            "hydra.sweeper.max_consecutive_failures=2"])
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "verlsweep stopped the sweep: 2 consecutive trials failed" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert (sweep_dirs(tmp_path)[0] / "trials.csv").exists()            # what ran is on disk


@pytest.mark.slow
def test_missing_model_and_data_stop_the_sweep_once_listing_every_path(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    empty = tmp_path / "nothing"
    args = ["hardware=a2_64g", "algorithm=remax", f"paths.output_root={tmp_path / 'out'}", f"tracking.uri={uri}"]
    proc = sweep(tmp_path, args, env={"VERLSWEEP_MODEL_ROOT": str(empty), "VERLSWEEP_DATA_ROOT": str(empty)})
    assert proc.returncode == 2, proc.stdout[-2000:] + proc.stderr[-3000:]
    err = proc.stderr
    assert f"not found: model.path={empty}/Qwen3-8B (set VERLSWEEP_MODEL_ROOT or paths.model_root)" in err
    assert f"verl.data.train_files={empty}/gsm8k/train.parquet" in err
    assert f"verl.data.val_files={empty}/gsm8k/test.parquet" in err
    assert "3 problem(s)" in err and "Traceback" not in err
    assert "Launching" not in proc.stdout
    assert not (tmp_path / "mlflow.db").exists() and not (tmp_path / DB).exists()


@pytest.mark.parametrize("arg,says", [("hardware=a2_64G", "did you mean a2_64g?"),
                                      ("model=qwen3-8b", "did you mean qwen3_8b"),
                                      ("algorithm=remax,grpoo", "did you mean grpo?")])
def test_a_misspelt_group_option_gets_a_did_you_mean_beside_the_options(tmp_path, arg, says):
    proc = run_sweep(tmp_path, [arg, "dry_run=true", f"paths.output_root={tmp_path}"], new_mark(), multirun=True,
                     timeout=120)
    assert proc.returncode == 2
    assert says in proc.stderr and "options: " in proc.stderr
    assert "Traceback" not in proc.stderr


def test_hydra_full_error_keeps_the_did_you_mean_and_exit_2_of_a_misspelt_group_option(tmp_path):
    proc = run_sweep(tmp_path, ["model=qwen3-8b", "dry_run=true", f"paths.output_root={tmp_path}"], new_mark(),
                     timeout=120, env=FULL_ERROR)
    assert proc.returncode == 2
    assert "did you mean qwen3_8b" in proc.stderr and "options: " in proc.stderr


# --- runner=estimate, Hydra's basic sweeper, help ---------------------------------------------------


@pytest.mark.slow
def test_the_estimate_runner_measures_the_prediction_itself(tmp_path):
    proc = run_sweep(tmp_path, ["hardware=a2_64g", "algorithm=remax", "runner=estimate", "tracking.enabled=false",
                                f"paths.output_root={tmp_path / 'out'}"], new_mark(), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (plan_file,) = (tmp_path / "out" / "runs").glob("*/plan.json")
    predicted = yaml.safe_load(plan_file.read_text())["tok_s"]
    objective = json.loads((plan_file.parent / RESULT_FILE).read_text())["objective"]
    assert objective == pytest.approx(predicted, rel=1e-5)
    assert f"trial completed, objective {figure(objective)}," in proc.stdout     # as every view shows it
    steps = [yaml.safe_load(line)["data"]["perf/throughput"]
             for line in (plan_file.parent / "metrics.jsonl").read_text().splitlines()]
    assert len(set(steps[1:])) == 1                                      # no noise after the warm-up step


# verl's own recipe scripts export HYDRA_FULL_ERROR=1: a debugging flag must not change what a command does
FULL_ERROR = {"HYDRA_FULL_ERROR": "1"}


@pytest.mark.slow
@pytest.mark.parametrize("env", [{}, FULL_ERROR], ids=["plain", "HYDRA_FULL_ERROR"])
def test_hydras_basic_sweeper_runs_the_cartesian_product_and_dry_runs_show_the_planner(tmp_path, env):
    proc = run_sweep(tmp_path, ["hydra/sweeper=basic", "algorithm=remax,grpo", "model=qwen3_0_6b,qwen3_8b",
                                "dry_run=true", f"paths.output_root={tmp_path}"], new_mark(), multirun=True,
                     timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("# verlsweep dry run") == 4
    verdicts = re.findall(r"^# planner: \(hardware=a2_64g, predicted\) (.*)$", proc.stdout, re.MULTILINE)
    assert len(verdicts) == 4
    ok = [v for v in verdicts if v.startswith("ok:")]
    assert ok and all("GiB to spare" in v and "OOM" not in v for v in ok)


def test_a_dry_run_for_a_node_names_the_machine_each_verdict_is_about_and_this_machines_cpus_never_fail_the_node(
        tmp_path):
    args = ["hardware=a2_64g", "algorithm=remax", "model=qwen3_8b", "dry_run=true", f"paths.output_root={tmp_path}"]
    one_cpu = {"SLURM_CPUS_ON_NODE": "1"}          # this machine may give Ray 1 CPU, whatever its cores
    laptop = run_sweep(tmp_path, args, new_mark(), timeout=120, env=one_cpu)
    assert laptop.returncode == 0, laptop.stderr[-3000:]
    assert re.search(r"^# planner: \(hardware=a2_64g, predicted\) ok: ", laptop.stdout, re.MULTILINE)
    (cpus,) = re.findall(r"^# planner Ray CPUs (.*)$", laptop.stdout, re.MULTILINE)
    assert cpus.startswith("(this machine, ") and "too few here" in cpus and "set hardware.cpus" in cpus
    assert "infeasible" not in cpus
    stated = run_sweep(tmp_path, [*args, "+hardware.cpus=4"], new_mark(), timeout=120, env=one_cpu)
    (cpus,) = re.findall(r"^# planner Ray CPUs (.*)$", stated.stdout, re.MULTILINE)
    assert cpus.startswith("(hardware=a2_64g, as stated): infeasible: ") and "hardware.cpus=4" in cpus


def test_a_search_space_asked_of_hydras_basic_sweeper_is_refused_with_a_message(tmp_path):
    proc = run_sweep(tmp_path, ["hydra/sweeper=basic", "space=smoke", "dry_run=true", f"paths.output_root={tmp_path}"],
                     new_mark(), multirun=True, timeout=120)
    assert proc.returncode == 2
    assert "hydra/sweeper=basic cannot run it: drop space=" in proc.stderr and "Traceback" not in proc.stderr


def test_help_shows_our_groups_and_four_commands(tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "sweep.py"), "--help"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    for group in ("algorithm", "data", "hardware", "model", "runner", "space"):
        assert any(line.split()[:1] == [group] for line in lines), group
    assert not any(line.split()[:1] == ["device"] for line in lines)
    assert sum(1 for line in lines if line.strip().startswith("python sweep.py ")) == 4
    assert any("recipe=path/to/run.sh" in line for line in lines)      # a recipe script of one's own
    plan = subprocess.run([sys.executable, "-m", "verlsweep.plan", "--help"], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert plan.returncode == 0 and "detect" in plan.stdout and "refit" in plan.stdout


@pytest.mark.slow
def test_a_copied_hardware_file_with_the_old_name_is_a_warning(tmp_path):
    (tmp_path / "conf" / "hardware").mkdir(parents=True)
    shutil.copy(CONF_DIR / "hardware" / "a2_64g.yaml", tmp_path / "conf" / "hardware" / "lab_node.yaml")
    proc = run_sweep(tmp_path, ["hardware=lab_node", "dry_run=true", f"paths.output_root={tmp_path}",
                                f"hydra.searchpath=[file://{tmp_path / 'conf'}]"], new_mark(), timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "hardware=lab_node but its file says hardware.name: a2_64g" in proc.stdout + proc.stderr


# --- plan detect from a recorded file ---------------------------------------------------------------


def detect(tmp_path: Path, smi: Path, *extra: str) -> subprocess.CompletedProcess:
    conf = tmp_path / "conf"
    conf.mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-m", "verlsweep.plan", "detect", "--from-npu-smi", str(smi),
                           "--name", "lab_a2", "--conf-dir", str(conf), *extra], cwd=REPO, capture_output=True,
                          text=True, timeout=120)


def test_detect_from_a_recorded_file_needs_the_recorded_nodes_host_memory(tmp_path):
    smi = tmp_path / "npu_smi.txt"
    shutil.copy(PLAN_DATA / "npu_smi_a2_910b3.txt", smi)
    refused = detect(tmp_path, smi)
    assert refused.returncode == 2 and "--host-memory-gb" in refused.stderr and "free -g" in refused.stderr
    assert not (tmp_path / "conf" / "hardware" / "lab_a2.yaml").exists()

    (tmp_path / "free.txt").write_text(
        "               total        used        free      shared  buff/cache   available\n"
        "Mem:            1510          42        1402           1          66        1461\n"
        "Swap:              0           0           0\n")
    proc = detect(tmp_path, smi)
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "conf" / "hardware" / "lab_a2.yaml").read_text()
    assert yaml.safe_load(text)["hardware"]["host_memory_gb"] == 1510
    assert "host_memory_gb: 1510 from recorded `free -g` output free.txt" in text
    assert "measured by npu-smi" in text and "assumed from verlsweep.plan.cli.detect.KNOWN_CHIPS" in text

    given = detect(tmp_path, smi, "--host-memory-gb", "768", "--force")
    assert given.returncode == 0, given.stderr
    assert yaml.safe_load((tmp_path / "conf" / "hardware" / "lab_a2.yaml").read_text())["hardware"][
        "host_memory_gb"] == 768


# --- install ----------------------------------------------------------------------------------------


def test_the_install_guides_cpu_install_takes_torch_from_pytorchs_cpu_index():
    lines = [line.strip() for line in (REPO / "docs" / "install.md").read_text().splitlines()]
    (torch_line,) = [line for line in lines if line.startswith("pip install torch==")]
    assert torch_line.endswith("--index-url https://download.pytorch.org/whl/cpu")


@pytest.mark.slow
def test_building_the_package_gives_no_license_deprecation_warning(tmp_path):
    src = tmp_path / "src"        # a copy: setuptools writes build/ and *.egg-info beside the sources
    shutil.copytree(REPO, src, symlinks=True, ignore=shutil.ignore_patterns(".git", "*.egg-info", "__pycache__",
                                                                           "outputs", "*.db", "mlruns", "venv"))
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w",
                           str(tmp_path / "dist"), str(src)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "project.license" not in proc.stdout + proc.stderr


@pytest.mark.slow
def test_sweep_with_hardware_auto_stops_before_anything_with_that_message(tmp_path):
    proc = subprocess.run([sys.executable, str(REPO / "sweep.py"), "hardware=auto", "dry_run=true"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert "python -m verlsweep.plan detect" in proc.stdout + proc.stderr
