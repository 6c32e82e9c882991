"""The report: report.html self-contained with every plot and the launch command; the text status."""
from __future__ import annotations

import re
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.trial import TrialState, create_trial

from verlsweep.common.names import N_TRIALS_ATTR, OBJECTIVES_ATTR, PLACEHOLDER_ATTR, PREDICTED_ATTR
from verlsweep.report import load, write_report
from verlsweep.report.__main__ import main

UTIL = "verl.actor_rollout_ref.rollout.gpu_memory_utilization"
TP = "verl.actor_rollout_ref.rollout.tensor_model_parallel_size"
OFF = "verl.actor_rollout_ref.actor.fsdp_config.param_offload"
DISTS = {UTIL: FloatDistribution(0.3, 0.95, step=0.05), TP: CategoricalDistribution([1, 2, 4]),
         OFF: CategoricalDistribution([True, False])}
# (util, tp, offload, outcome, objective, measured peak)
TRIALS = [(0.6, 2, True, "completed", 390.0, 35.0), (0.9000000000000001, 2, False, "oom", None, None),
          (0.7, 1, True, "completed", 395.0, 36.0), (0.95, 4, True, "infeasible", None, None),
          (0.5, 4, False, "completed", 370.0, 33.0), (0.45, 1, True, "pruned", None, None),
          (0.8, 1, False, "crash", None, None)]


def make_study(storage: str | None, sweep_dir: Path) -> optuna.Study:
    study = optuna.create_study(study_name="report-study", storage=storage, direction="maximize")
    study.set_user_attr(N_TRIALS_ATTR, 10)
    study.set_user_attr(OBJECTIVES_ATTR, ["objective"])
    for n, (util, tp, off, outcome, value, peak) in enumerate(TRIALS):
        attrs = {"outcome": outcome, "peak_memory_gb": peak, "duration_s": 12.5, "job_dir": str(sweep_dir / str(n)),
                 PREDICTED_ATTR: {"plan/trainer_peak_gb": 34.0 + n * 0.5, "plan/tok_s": 380.0 + n}}
        state, values, constraint = TrialState.FAIL, None, 0.0
        if outcome == "completed":
            state, values = TrialState.COMPLETE, [value]
        elif outcome in ("oom", "infeasible"):
            state, values, constraint = TrialState.COMPLETE, [370.0], 1.0
            attrs[PLACEHOLDER_ATTR] = True
        elif outcome == "pruned":
            state = TrialState.PRUNED
        study.add_trial(create_trial(state=state, values=values, params={UTIL: util, TP: tp, OFF: off},
                                     distributions=DISTS, user_attrs=attrs,
                                     system_attrs={"constraints": [constraint]}))
    return study


@pytest.fixture
def sweep_dir(tmp_path: Path) -> Path:
    d = tmp_path / "sweep"
    d.mkdir()
    (d / "best_launch.sh").write_text("#!/usr/bin/env bash\npython -m verl.trainer.main_ppo "
                                      "actor_rollout_ref.rollout.gpu_memory_utilization=0.7\n")
    return d


def test_the_report_is_one_offline_page_with_every_plot_the_best_config_and_its_launch_command(sweep_dir):
    written = write_report(make_study(None, sweep_dir), sweep_dir)
    page = (sweep_dir / "report.html").read_text()
    assert written[0] == sweep_dir / "report.html"
    # offline: nothing is loaded from elsewhere
    assert not re.search(r"<(script|link|img)[^>]+(src|href)=['\"]?(https?:)?//", page)
    images = re.findall(r"<img class='plot' alt='(\w+)' src='data:image/png;base64,([A-Za-z0-9+/=]{200,})'", page)
    assert [name for name, _ in images] == ["history", "util_by_tp", "parallel", "importance", "memory"]
    assert "gpu_memory_utilization=0.7" in page and "Launch command" in page
    assert "trial 2 (util=0.70 tp=1 off=p)" in page          # the best, its knobs at the step's precision
    assert "0.9000000000000001" not in page
    assert page.count("class='plotly-plot'") == 3            # Optuna's interactive plots
    for name in ("history", "util_by_tp", "parallel", "importance", "memory"):
        assert (sweep_dir / "plots" / f"{name}.png").stat().st_size > 1000


def test_the_oom_frontier_per_tp_and_the_planners_predictions_are_in_the_report(sweep_dir):
    sweep = load(make_study(None, sweep_dir))
    assert {f["tp"]: (f["highest_fit"], f["lowest_oom"]) for f in sweep.frontier()} == {
        1: (0.7, None), 2: (0.6, 0.9000000000000001), 4: (0.5, 0.95)}
    write_report(sweep.study, sweep_dir)
    page = (sweep_dir / "report.html").read_text()
    assert "OOM frontier per TP" in page and "<td class=''>0.90</td>" in page
    assert "predicted peak GB" in page and "34.0" in page


def test_status_prints_n_of_total_the_best_so_far_and_the_outcomes(sweep_dir, tmp_path, capsys):
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    make_study(storage, sweep_dir)
    assert main(["--storage", storage, "--study", "report-study", "--status"]) == 0
    out = capsys.readouterr().out
    assert "7 of 10 trials done" in out
    assert "best objective 395 (t02 util=0.70 tp=1 off=p)" in out
    assert "completed 3" in out and "oom 1" in out and "crash 1" in out
    assert not (sweep_dir / "report.html").exists()        # --status writes nothing


def test_a_sweep_dir_is_enough_to_write_the_report(sweep_dir, tmp_path, capsys):
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    make_study(storage, sweep_dir)
    (sweep_dir / "best.yaml").write_text(yaml.safe_dump({"study_name": "report-study", "storage": storage}))
    assert main([str(sweep_dir)]) == 0
    assert (sweep_dir / "report.html").is_file()
    assert "launch the long run: bash" in capsys.readouterr().out


def test_an_unknown_study_names_the_ones_the_storage_has(tmp_path, sweep_dir):
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    make_study(storage, sweep_dir)
    with pytest.raises(SystemExit, match="report-study"):
        main(["--storage", storage, "--study", "nope", "--status"])
