"""The best config survives the long run: a stand-in sweep whose fastest 5-step configs OOM at the
maximum lengths (tests/support/standin/lengths.py: responses grow with the step, the trainer peak with
the lengths; with ignore_eos and the train file sorted longest prompt first they OOM in step 1) declares
one that survives them, and the confirmations show in the terminal, trials.csv, MLflow, `--status`, the
report and best_launch.sh."""
from __future__ import annotations

import csv
import re
import subprocess
import sys

import pytest
from mlflow.tracking import MlflowClient

from tests.support.trial_helpers import NO_CONFIRM, copy_store, new_mark, run_sweep, standin_entrypoint, tiny_overrides
from verlsweep.proofs.rules import OFFLOADS, TP, UTIL

pytestmark = pytest.mark.slow

P_OFF, O_OFF, R_OFF = OFFLOADS


def _entry(util: float, offload: bool) -> str:
    values = {UTIL: util, TP: 2, P_OFF: offload, O_OFF: offload, R_OFF: False}
    return "{" + ",".join(f"{k}:{str(v).lower() if isinstance(v, bool) else v}" for k, v in values.items()) + "}"


def test_the_fastest_configs_fail_at_max_lengths_and_the_declared_best_survives_them(
        tiny_model_dir, gsm8k_dir, empty_mlflow_db, tmp_path):
    uri = copy_store(empty_mlflow_db, tmp_path)
    order = [_entry(0.6, False), _entry(0.5, True)]
    proc = run_sweep(tmp_path, [
        *[a for a in tiny_overrides(tiny_model_dir, gsm8k_dir, tmp_path / "out", uri) if a != NO_CONFIRM],
        "study.long_run.confirm=1", standin_entrypoint(), "validate.verl=false",
        "trial.steps=5", "+env.VERL_STANDIN_MODE=auto", "+env.VERL_STANDIN_PEAK_MEMORY_GB=30",
        "+env.VERL_STANDIN_LENGTH_GIB=44", "+env.VERL_STANDIN_STEP_SECONDS=0.01", "hydra/sweeper/pruner=none",
        "study.enqueue_recipe=false", "study.guide.top_k=0", "study.proofs=false", "hydra.sweeper.n_trials=2",
        f"hydra.sweeper.enqueue=[{','.join(order)}]", f"hydra.sweep.dir={tmp_path / 'sweep'}",
    ], new_mark(), multirun=True, report=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    sweep = tmp_path / "sweep"
    rows = {int(r["number"]): r for r in csv.DictReader((sweep / "trials.csv").open())}
    # both ordinary trials completed their 5 steps, the faster one first; it fails at max lengths (the
    # top 1 confirmed: study.long_run.confirm=1), so the next best is confirmed too, and passes
    assert [rows[n]["outcome"] for n in (0, 1)] == ["completed"] * 2
    assert float(rows[0]["objective"]) > float(rows[1]["objective"])
    assert [(rows[n]["confirms"], rows[n]["outcome"]) for n in (2, 3)] == [("0", "oom"), ("1", "completed")]
    assert rows[0]["long_run"].startswith("fails at max lengths at prompt 64 / response 64: trial 2 ended oom")
    assert rows[1]["long_run"].startswith("confirmed at prompt 64 / response 64 by trial 3: peak ")
    # the declared best survives, and best_launch.sh is written from it and says so
    best = (sweep / "best.yaml").read_text()
    assert "trial_number: 1\n" in best, best
    launch = (sweep / "best_launch.sh").read_text()
    assert "knobs of trial 1 " in launch and "# long run: confirmed at prompt 64 / response 64 by trial 3" in launch
    # the confirmation's own trial ran verl's worst case: ignore_eos, in order, the sorted copy
    command = next(sweep.glob("3*/command.json")).read_text()
    assert "ignore_eos=True" in command and "data.shuffle=False" in command and "train_longest_first" in command
    # the terminal
    assert re.search(r"^t02 .*oom.* confirms t00 at max lengths", proc.stdout, re.MULTILINE), proc.stdout
    assert re.search(r"^t03 .*completed.* confirms t01 at max lengths", proc.stdout, re.MULTILINE), proc.stdout
    assert "[2/2 +2 long-run (1 failed)]" in proc.stdout
    # MLflow: the confirmation names the trial it confirms; the confirmed trial says how it went
    client = MlflowClient(uri)
    runs = {int(r.data.tags["trial.number"]): r for r in client.search_runs(
        [e.experiment_id for e in client.search_experiments()]) if "trial.number" in r.data.tags}
    assert runs[3].data.tags["trial.confirms"] == "1"
    assert runs[1].data.tags["trial.confirmation"].startswith("confirmed at prompt 64 / response 64 by trial 3")
    assert runs[0].data.tags["trial.confirmation"].startswith("fails at max lengths")
    # the report and --status
    assert "confirmed at prompt 64 / response 64 by trial 3: peak" in (sweep / "report.html").read_text()
    status = subprocess.run([sys.executable, "-m", "verlsweep.report", str(sweep), "--status"],
                            capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert "trial 1 confirmed at prompt 64 / response 64 by trial 3" in status.stdout, status.stdout + status.stderr
    assert "trial 0 fails at max lengths" in status.stdout


def test_what_a_failed_confirmation_proves_settles_the_next_config_without_a_launch(
        tiny_model_dir, gsm8k_dir, empty_mlflow_db, tmp_path):
    uri = copy_store(empty_mlflow_db, tmp_path)
    # t00 and t01 hold everything on the device at the same TP: when t00 OOMs in training at max lengths,
    # t01 (a lower util, the same offloads) is proven to fail there too; t02 (offloads on) is launched
    order = [_entry(0.6, False), _entry(0.55, False), _entry(0.5, True)]
    proc = run_sweep(tmp_path, [
        *[a for a in tiny_overrides(tiny_model_dir, gsm8k_dir, tmp_path / "out", uri) if a != NO_CONFIRM],
        "study.long_run.confirm=1", standin_entrypoint(), "validate.verl=false",
        "trial.steps=5", "+env.VERL_STANDIN_MODE=auto", "+env.VERL_STANDIN_PEAK_MEMORY_GB=30",
        "+env.VERL_STANDIN_LENGTH_GIB=44", "+env.VERL_STANDIN_STEP_SECONDS=0.01", "hydra/sweeper/pruner=none",
        "study.enqueue_recipe=false", "study.guide.top_k=0", "hydra.sweeper.n_trials=3",
        f"hydra.sweeper.enqueue=[{','.join(order)}]", f"hydra.sweep.dir={tmp_path / 'sweep'}",
    ], new_mark(), multirun=True, report=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    sweep = tmp_path / "sweep"
    rows = {int(r["number"]): r for r in csv.DictReader((sweep / "trials.csv").open())}
    assert [rows[n]["outcome"] for n in (0, 1, 2)] == ["completed"] * 3
    assert float(rows[0]["objective"]) > float(rows[1]["objective"]) > float(rows[2]["objective"])
    assert rows[3]["confirms"] == "0" and rows[3]["outcome"] == "oom"
    assert rows[1]["long_run"].startswith("fails at max lengths at prompt 64 / response 64: proven by trial 3 "
                                          "(oom in training), not launched"), rows[1]
    assert (rows[5]["confirms"], rows[5]["outcome"]) == ("2", "completed")
    assert not list(sweep.glob("4*/command.json"))             # the settled one never launched
    assert "trial_number: 2\n" in (sweep / "best.yaml").read_text()
    assert "trial 1 fails at the maximum lengths without a launch: proven fail by trial 3" in proc.stdout + proc.stderr


def test_a_resumed_finished_study_confirms_what_it_has_not_and_estimate_models_the_worst_case(
        empty_mlflow_db, tmp_path):
    import optuna

    uri = copy_store(empty_mlflow_db, tmp_path)
    args = ["hardware=a2_64g", "algorithm=remax", "runner=estimate", "hydra.sweeper.n_trials=2",
            "study.guide.top_k=0", f"tracking.uri={uri}", f"hydra.sweep.dir={tmp_path / 'sweep'}",
            "hydra.sweeper.study_name=resume-confirm"]
    first = run_sweep(tmp_path, [*args, "study.long_run.confirm=0"], new_mark(), multirun=True)
    assert first.returncode == 0, first.stderr[-3000:]
    assert "confirms" not in first.stdout
    launch = (tmp_path / "sweep" / "best_launch.sh").read_text()
    assert "# long run: not confirmed at the maximum lengths" in launch
    client = MlflowClient(uri)
    tags = [r.data.tags.get("trial.confirmation") for r in client.search_runs(
        [e.experiment_id for e in client.search_experiments()]) if "trial.number" in r.data.tags]
    assert tags.count("not confirmed") == 1
    # the study is complete (2 of 2): a re-run with confirmations on runs them, and no ordinary trial
    again = run_sweep(tmp_path, [*args, "study.long_run.confirm=1"], new_mark(), multirun=True)
    assert again.returncode == 0, again.stderr[-3000:]
    assert re.search(r"^t02 .*completed.* confirms t0[01] at max lengths", again.stdout, re.MULTILINE), again.stdout
    assert "[2/2 +1 long-run]" in again.stdout
    study = optuna.load_study(study_name="resume-confirm", storage=f"sqlite:///{tmp_path / 'verlsweep-optuna.db'}")
    trials = study.get_trials()
    assert len(trials) == 3
    confirmation = trials[2]
    confirmed = trials[confirmation.user_attrs["verlsweep.confirms"]]
    # runner=estimate: the confirmation's lengths are the planner's worst case, and the best is confirmed
    assert confirmation.user_attrs["predicted"]["plan/trainer_peak_gb"] == pytest.approx(
        confirmed.user_attrs["predicted"]["plan/worst_trainer_peak_gb"])
    assert "# long run: confirmed at prompt 1024 / response 2048 by trial 2" in (
        tmp_path / "sweep" / "best_launch.sh").read_text()
