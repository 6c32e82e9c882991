"""The report: report.html self-contained with every plot and the launch command; the text status."""
from __future__ import annotations

import html
import re
from pathlib import Path

import optuna
import pytest
import yaml
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.trial import TrialState, create_trial

from verlsweep.common.names import N_TRIALS_ATTR, OBJECTIVES_ATTR, PLACEHOLDER_ATTR, PREDICTED_ATTR
from verlsweep.report import write_report
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
          (0.8, 1, False, "crash", None, None), (0.35, 2, False, "oom", None, None),
          (0.7, 2, False, "completed", 392.0, 35.5), (0.95, 2, False, "infeasible", None, None),
          (0.5, 1, False, "oom", None, None)]
START_OOM = ("ValueError: Free memory on device (40.10/60.96 GiB) on startup is less than desired GPU memory "
             "utilization (0.9, 54.86 GiB). Decrease GPU memory utilization or reduce GPU memory used by "
             "other processes.")
PLANNER_NO = ("rollout: need 68.9 GiB of 60.7 (margin 2.0; headroom -10.2) [trainer residency 12.0, vLLM reservation "
              "54.9] - trainer residency + vLLM's reservation + graph pools exceed HBM when vLLM wakes")
# per trial: the error text, the failure phase and the trial that ruled it out, as the sweeper records them
EXTRA = {1: {"excerpt": START_OOM}, 3: {"excerpt": PLANNER_NO}, 7: {"failure_phase": "kv_cache"},
         9: {"ruled_out_by": 1, "excerpt": "ruled out by trial 1"}, 10: {"failure_phase": "training"}}


def make_study(storage: str | None, sweep_dir: Path) -> optuna.Study:
    study = optuna.create_study(study_name="report-study", storage=storage, direction="maximize")
    study.set_user_attr(N_TRIALS_ATTR, 12)
    study.set_user_attr(OBJECTIVES_ATTR, ["objective"])
    for n, (util, tp, off, outcome, value, peak) in enumerate(TRIALS):
        attrs = {"outcome": outcome, "peak_memory_gb": peak, "duration_s": 12.5, "job_dir": str(sweep_dir / str(n)),
                 PREDICTED_ATTR: {"plan/trainer_peak_gb": 34.0 + n * 0.5, "plan/tok_s": 380.0 + n},
                 "backend": "verl", **EXTRA.get(n, {})}
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
    assert [name for name, _ in images] == ["history", "util_by_tp", "frontier", "parallel", "importance", "memory"]
    assert "gpu_memory_utilization=0.7" in page and "Launch command" in page
    assert "trial 2 (util=0.70 tp=1 off=p)" in page          # the best, its knobs at the step's precision
    assert "0.9000000000000001" not in page
    assert page.count("class='plotly-plot'") == 3            # Optuna's interactive plots
    for name in ("history", "util_by_tp", "frontier", "parallel", "importance", "memory"):
        assert (sweep_dir / "plots" / f"{name}.png").stat().st_size > 1000


def cells(page: str, heading: str) -> list[list[str]]:
    """The rows of the first table after `heading` in report.html, as text."""
    table = page[page.index(heading):].split("<table>", 1)[1].split("</table>", 1)[0]
    return [[html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
            for row in re.findall(r"<tr[^>]*>(.*?)</tr>", table) if "<td" in row]


def test_the_oom_frontier_shows_both_sides_of_the_band_per_tp_and_offloads_with_the_reason_for_each(sweep_dir):
    write_report(make_study(None, sweep_dir), sweep_dir)
    page = (sweep_dir / "report.html").read_text()
    rows = {r[0]: r[1:4] for r in cells(page, "OOM frontier per TP")}
    # the error text says where t01 failed; t07 carries its failure phase; t03 is the planner's verdict
    assert rows["tp=2 off=-"] == ["0.70 (t08: completed)", "0.90 (t01: OOM at vLLM start)",
                                  "0.35 (t07: KV cache too small)"]
    assert rows["tp=4 off=p"] == ["-", "0.95 (t03: infeasible by the planner (rollout: trainer residency + "
                                  "vLLM's reservation + graph pools exceed HBM when vLLM wakes))", "-"]
    assert rows["tp=1 off=-"] == ["-", "0.50 (t10: training OOM)", "-"]
    assert "predicted peak GB" in page and "34.0" in page


def test_the_report_states_the_util_ranges_each_failure_proves_with_the_trial_that_proves_it(sweep_dir):
    write_report(make_study(None, sweep_dir), sweep_dir)
    page = (sweep_dir / "report.html").read_text()
    proven = [" ".join(r) for r in cells(page, "Proven fit / proven fail")]
    assert "tp=2 off=- fails at util <= 0.35: proven by trial 7, KV cache too small" in proven
    assert "tp=2 off=- fits at util 0.70: proven by trial 8, completed" in proven
    assert "tp=2 off=- fails at util >= 0.90: proven by trial 1, OOM at vLLM start" in proven
    # a training OOM does not depend on util: the whole combination fails
    assert "tp=1 off=- fails at every util: proven by trial 10, training OOM" in proven
    assert "frontier" in re.findall(r"<img class='plot' alt='(\w+)'", page)


def test_a_config_a_rule_ruled_out_is_listed_as_ruled_out_by_its_trial(sweep_dir):
    write_report(make_study(None, sweep_dir), sweep_dir)
    page = (sweep_dir / "report.html").read_text()
    trials = {r[0]: r[1] for r in cells(page, "<h2>Trials")}
    assert trials["9"] == "infeasible (ruled out by trial 1)" and trials["1"] == "oom"


def test_status_prints_n_of_total_the_best_so_far_and_the_outcomes(sweep_dir, tmp_path, capsys):
    storage = f"sqlite:///{tmp_path / 'optuna.db'}"
    make_study(storage, sweep_dir)
    assert main(["--storage", storage, "--study", "report-study", "--status"]) == 0
    out = capsys.readouterr().out
    assert "11 of 12 trials done" in out
    assert "best objective 395.0 (t02 util=0.70 tp=1 off=p)" in out
    assert "completed 4" in out and "oom 3" in out and "crash 1" in out
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
