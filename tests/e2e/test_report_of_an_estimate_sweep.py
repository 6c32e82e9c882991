"""The report of a real estimate sweep (`python sweep.py -m ... runner=estimate`): the OOM frontier, what
its failures prove, the plots and the launch script (the report from a made-up study: tests/test_report.py)."""
from __future__ import annotations

import csv
import re

import optuna
import pytest
import yaml

from tests.support.trial_helpers import new_mark, run_sweep
from tests.test_report import UTIL, cells
from verlsweep.report import load

ESTIMATE_TP = "verl.actor_rollout_ref.rollout.tensor_model_parallel_size"


@pytest.fixture(scope="module")
def estimate_sweep(tmp_path_factory):
    """A finished estimate sweep over util x TP 1/8 (offloads fixed at p,r), every config once (grid);
    plan.enforce=false, so what the planner predicts not to fit ends as `oom` with the error text verl or
    vLLM print (runner=estimate), as on a device. Its sweep dir, study and trials.csv rows."""
    cwd = tmp_path_factory.mktemp("estimate-report")
    proc = run_sweep(cwd, [
        "hardware=a2_64g", "algorithm=remax", "runner=estimate", "tracking.enabled=false", "plan.enforce=false",
        f"paths.output_root={cwd / 'out'}", "hydra/sweeper/sampler=grid", "study.enqueue_recipe=false",
        "hydra.sweeper.n_trials=14", "hydra.sweeper.n_jobs=2", f"{UTIL}=range(0.30,0.90,0.10)",
        f"{ESTIMATE_TP}=choice(1,8)", "verl.actor_rollout_ref.actor.fsdp_config.param_offload=true",
        "verl.actor_rollout_ref.actor.fsdp_config.optimizer_offload=false",
        "verl.actor_rollout_ref.ref.fsdp_config.param_offload=true"], new_mark(), multirun=True, report=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (sweep_dir,) = (cwd / "out" / "sweeps").iterdir()
    best = yaml.safe_load((sweep_dir / "best.yaml").read_text())
    storage = best["storage"] if "://" in best["storage"] else f"sqlite:///{cwd / 'verlsweep-optuna.db'}"
    study = optuna.load_study(study_name=best["study_name"], storage=storage)
    with (sweep_dir / "trials.csv").open() as f:
        rows = list(csv.DictReader(f))
    return {"dir": sweep_dir, "page": (sweep_dir / "report.html").read_text(), "study": study, "rows": rows}


def _util(row: dict) -> float:
    return round(float(row[UTIL]), 2)


def _measured(row: dict) -> bool:
    return row["outcome"] == "completed"        # trials.csv keeps an oom's partial objective too


@pytest.mark.slow
def test_an_estimate_sweeps_frontier_names_both_sides_of_each_tps_band_and_why_each_failed(estimate_sweep):
    frontier = {r[0]: r[1:4] for r in cells(estimate_sweep["page"], "OOM frontier per TP")}
    assert set(frontier) == {"tp=1", "tp=8"}
    for tp, (fit, above, _below) in frontier.items():
        rows = [r for r in estimate_sweep["rows"] if r[ESTIMATE_TP] == tp[3:]]
        top = max((r for r in rows if r["outcome"] == "completed"), key=_util)
        assert fit == f"{_util(top):.1f} (t{int(top['number']):02d}: completed)"      # util step 0.1
        high = min((r for r in rows if r["outcome"] == "oom" and _util(r) > _util(top)), key=_util)
        # the planner's binding constraint above the band: vLLM's share next to the trainer's residency
        assert above == f"{_util(high):.1f} (t{int(high['number']):02d}: OOM when vLLM wakes for a rollout)"
    low = [r for r in estimate_sweep["rows"] if r[ESTIMATE_TP] == "1" and _util(r) == 0.3]
    assert frontier["tp=1"][2] == f"0.3 (t{int(low[0]['number']):02d}: KV cache too small)"  # not an OOM above


@pytest.mark.slow
def test_an_estimate_sweeps_report_says_which_utils_its_failures_prove_to_fail(estimate_sweep):
    proven = [" ".join(r) for r in cells(estimate_sweep["page"], "Proven fit / proven fail")]
    kv = next(r for r in estimate_sweep["rows"] if r[ESTIMATE_TP] == "1" and _util(r) == 0.3)
    assert f"tp=1 fails at util <= 0.3: proven by trial {kv['number']}, KV cache too small" in proven
    wake = next(r for r in estimate_sweep["rows"] if r[ESTIMATE_TP] == "1" and _util(r) == 0.9)
    assert f"tp=1 fails at util >= 0.9: proven by trial {wake['number']}, OOM when vLLM wakes for a rollout" \
        in proven


@pytest.mark.slow
def test_an_estimate_sweeps_report_has_no_measured_vs_predicted_plot_and_calls_its_peak_predicted(estimate_sweep):
    page = estimate_sweep["page"]
    assert "memory" not in re.findall(r"<img class='plot' alt='(\w+)'", page)
    assert "not drawn: runner=estimate" in page
    head = re.findall(r"<th[^>]*>(.*?)</th>", page[page.index("<h2>Trials"):])
    assert "predicted peak GB" in head and "peak GB" not in head


@pytest.mark.slow
def test_an_estimate_sweeps_failed_and_pruned_trials_are_marks_on_a_strip_not_objective_zero(estimate_sweep):
    from verlsweep.report.plots import util_by_tp_figure

    fig = util_by_tp_figure(load(estimate_sweep["study"]))
    axes = {ax.get_label(): ax for ax in fig.axes if ax.get_label()}
    for tp in ("1", "8"):
        rows = [r for r in estimate_sweep["rows"] if r[ESTIMATE_TP] == tp]
        drawn = sorted((round(x, 2), round(y, 3)) for c in axes[f"tp={tp} measured"].collections
                       for x, y in c.get_offsets())
        assert drawn == sorted((_util(r), round(float(r["objective"]), 3)) for r in rows if _measured(r))
        marks = sorted(round(x, 2) for c in axes[f"tp={tp} not measured"].collections for x, _ in c.get_offsets())
        assert marks == sorted(_util(r) for r in rows if not _measured(r)) and marks
    assert any(r["outcome"] == "oom" for r in estimate_sweep["rows"])


@pytest.mark.slow
def test_an_estimate_sweeps_util_plot_legend_covers_no_panel(estimate_sweep):
    from verlsweep.report.plots import util_by_tp_figure

    fig = util_by_tp_figure(load(estimate_sweep["study"]))
    renderer = fig.canvas.get_renderer()
    (legend,) = fig.legends
    box = legend.get_window_extent(renderer)
    assert all(not box.overlaps(ax.get_window_extent(renderer)) for ax in fig.axes)


@pytest.mark.slow
def test_an_estimate_sweeps_launch_script_comes_collapsed_after_the_plots(estimate_sweep):
    page = estimate_sweep["page"]
    last_plot = page.rindex("<img class='plot'")
    details = page.index("<details id='launch-details'>")
    assert last_plot < details < page.index("<pre id='launch'>") < page.index("</details>", details)
    assert "-m verl.trainer.main_ppo" in page[details:]


@pytest.mark.slow
def test_an_estimate_sweeps_predictions_table_has_a_cell_per_header_and_names_the_peak_that_moves(estimate_sweep):
    page = estimate_sweep["page"]
    section = page[page.index("<h2>Planner's predictions"):]
    table = section[:section.index("</table>")]
    head = [re.sub(r"<[^>]+>", "", h) for h in re.findall(r"<th[^>]*>(.*?)</th>", table)]
    rows = cells(page, "<h2>Planner's predictions")
    assert head[:6] == ["#", "outcome", "knobs", "predicted tok/s", "predicted peak GB (phase)",
                        "predicted trainer peak GB"]
    assert rows and all(len(r) == len(head) for r in rows), (head, rows[:3])
    completed = [r for r in rows if r[1] == "completed"]
    assert len({r[5] for r in completed}) == 1              # the trainer peak: the same whatever util
    assert len({r[4] for r in completed}) > 1               # the device peak moves with util and TP
    assert all(re.fullmatch(r"[\d.]+ [a-z_]+", r[4]) for r in completed)       # "38.6 rollout"


@pytest.mark.slow
def test_an_estimate_sweeps_report_shows_where_the_predicted_step_time_goes(estimate_sweep):
    page = estimate_sweep["page"]
    assert "time_split" in re.findall(r"<img class='plot' alt='(\w+)'", page)
    assert "predicted by the planner (runner=estimate measures nothing)" in page
    assert (estimate_sweep["dir"] / "plots" / "time_split.png").is_file()
