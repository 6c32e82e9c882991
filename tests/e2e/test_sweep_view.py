"""The sweep as a person sees it, end to end: `python sweep.py -m ... runner=estimate`, its terminal
output, its MLflow runs in a real `mlflow server` seen through headless Chromium, and its report.html
opened in Chromium. Screenshots land in the test's tmp dir."""
from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
import requests
from mlflow.tracking import MlflowClient

from tests.support.browser import Browser, chromium
from tests.support.trial_helpers import copy_store, new_mark, run_sweep, serve, serve_dashboard, survivors
from verlsweep.tracking import run_columns
from verlsweep.tracking import store as tracking

pytestmark = pytest.mark.slow

N_TRIALS = 8
# a proposal that repeats a measured config is a `reused tNN` run; whether TPE makes one varies
# an edge probe (launched inside the planner's error band, verlsweep.plan.predictor.band) says so after the knobs
CHILD_NAME = re.compile(r"^t\d\d (completed|oom|infeasible|pruned|reused t\d\d) util=\d\.\d\d tp=\d off=[-a-z,]+"
                        r"( edge probe)?$")
needs_chromium = pytest.mark.skipif(chromium() is None, reason="no chromium (.ci/run installs Debian's)")


@pytest.fixture(scope="module")
def estimate_sweep(tmp_path_factory, empty_mlflow_db):
    """One finished estimate sweep of the Quickstart (fewer trials): its dir, store and output."""
    cwd = tmp_path_factory.mktemp("quickstart")
    uri = copy_store(empty_mlflow_db, cwd)
    mark = new_mark()
    proc = run_sweep(cwd, ["hardware=a2_64g", "algorithm=remax", "runner=estimate", f"tracking.uri={uri}",
                           f"paths.output_root={cwd / 'out'}", f"hydra.sweeper.n_trials={N_TRIALS}",
                           "hydra.sweeper.n_jobs=2"], mark, multirun=True, report=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert survivors(mark) == []
    (sweep_dir,) = (cwd / "out" / "sweeps").iterdir()
    return {"cwd": cwd, "uri": uri, "dir": sweep_dir, "out": proc.stdout + proc.stderr}


def test_the_terminal_shows_one_line_per_trial_a_status_line_and_a_summary_within_120_columns(estimate_sweep):
    out = estimate_sweep["out"]
    lines = out.splitlines()
    trial_lines = [ln for ln in lines if re.match(r"^t\d\d  ", ln)]
    assert len(trial_lines) == N_TRIALS, out[-4000:]
    assert all(re.search(r"util=\d\.\d\d tp=\d", ln) for ln in trial_lines)
    assert any(re.match(rf"^\[{N_TRIALS}/{N_TRIALS}\] best objective .* ETA", ln) for ln in lines)
    assert "[I " not in out and "Trial 0 finished" not in out       # Optuna's INFO lines are off
    assert "Launching 2 jobs locally" not in out and "planner:" not in out
    assert not re.search(r"\d\.\d{10,}", out)                        # no 0.9000000000000001
    table = [ln for ln in lines if ln[:1] in "┏┃┡│└"]
    assert table and max(len(ln) for ln in table) <= 120
    assert "report.html" in out and "workflowType=machine_learning" in out


def test_each_child_run_says_its_trial_outcome_and_knobs_and_the_parent_has_the_sweeps_numbers(estimate_sweep):
    client = MlflowClient(estimate_sweep["uri"])
    (exp,) = [e for e in client.search_experiments() if e.name != "Default"]
    assert exp.tags[tracking.EXPERIMENT_KIND_TAG] == "custom_model_development"
    runs = client.search_runs([exp.experiment_id])
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    (parent,) = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(children) == N_TRIALS
    assert all(CHILD_NAME.match(r.info.run_name) for r in children), [r.info.run_name for r in children]
    for r in children:                    # the name's word is the outcome, or `reused` for a reused trial
        said = "reused" if "trial.reused_from" in r.data.tags else r.data.tags["trial.outcome"]
        assert r.info.run_name.split()[1] == said, r.info.run_name
        assert r.info.run_name.endswith("edge probe") == (r.data.tags.get("plan.edge_probe") == "true")
    assert parent.info.run_name == "rollout_memory #1"
    assert parent.data.metrics["trials_done"] == N_TRIALS
    history = client.get_metric_history(parent.info.run_id, "best_objective")
    assert len({m.step for m in history}) >= 2                     # one point per batch
    assert sum(v for k, v in parent.data.metrics.items() if k.startswith("trials_") and k != "trials_done") == N_TRIALS
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"trials.csv", "best.yaml", "best_launch.sh", "report.html", "plots"} <= artifacts
    plots = {a.path for a in client.list_artifacts(parent.info.run_id, "plots")}
    assert {"plots/history.png", "plots/util_by_tp.png", "plots/frontier.png"} <= plots
    assert "plots/memory.png" not in plots            # runner=estimate: measured peak = predicted peak


@needs_chromium
def test_the_mlflow_ui_opens_on_the_trials_best_first_with_their_outcome_in_view(estimate_sweep, tmp_path):
    client = MlflowClient(estimate_sweep["uri"])
    (exp,) = [e for e in client.search_experiments() if e.name != "Default"]
    runs = client.search_runs([exp.experiment_id])
    (parent,) = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    children = [r for r in runs if "mlflow.parentRunId" in r.data.tags]
    best = max((r for r in children if "objective" in r.data.metrics), key=lambda r: r.data.metrics["objective"])
    with serve(estimate_sweep["uri"], tmp_path) as url, Browser() as browser:
        browser.open(url + tracking.ui_path(exp.experiment_id))
        # the printed address opens on the trials: every child run listed, no click on a parent's +
        browser.wait_for(" && ".join(f"document.body.innerText.includes({r.info.run_name!r})" for r in children))
        text = browser.text()
        assert "Traces 0" not in text                                  # not the GenAI overview
        assert parent.info.run_name not in text                        # the trials, not the sweep's row
        names = [n for n in (r.info.run_name for r in children) if n in text]
        first = min(names, key=text.index)
        objective = {r.info.run_name: r.data.metrics.get("objective") for r in children}
        assert objective[first] == best.data.metrics["objective"], (first, best.info.run_name)   # best first
        # the outcome column starts within 1000 px of the left edge (MLflow's assistant panel takes the right)
        left = browser.eval("Math.min(...[...document.querySelectorAll('*')].filter(e => e.children.length === 0 "
                            "&& e.textContent.trim() === 'trial.outcome').map(e => e.getBoundingClientRect().left))")
        assert left < 1000, left
        browser.screenshot(tmp_path / "mlflow_runs.png")
    assert (tmp_path / "mlflow_runs.png").stat().st_size > 10_000
    assert "opens on the study's trials" in estimate_sweep["out"]     # and the terminal says what it opens on


def test_the_parent_run_shows_the_best_trials_knobs_objective_and_what_to_run(estimate_sweep):
    client = MlflowClient(estimate_sweep["uri"])
    (exp,) = [e for e in client.search_experiments() if e.name != "Default"]
    runs = client.search_runs([exp.experiment_id])
    (parent,) = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    # the study's best: the highest objective, the earliest trial among equals (as Optuna's best_trial)
    best = max((r for r in runs if "objective" in r.data.metrics),
               key=lambda r: (r.data.metrics["objective"], -int(r.data.tags["trial.number"])))
    tags = parent.data.tags
    assert tags["best.trial"] == best.data.tags["trial.number"]
    assert float(tags["best.objective"]) == best.data.metrics[run_columns.OBJECTIVE_ROUNDED]
    knobs = ("util", "tp", "off")
    assert {k: tags[f"best.{k}"] for k in knobs} == {k: best.data.params[k] for k in knobs}
    assert "best_launch.sh" in tags["mlflow.note.content"] and tags["best.knobs"] in tags["mlflow.note.content"]


# the MLflow UI as a person opens it on a laptop; its assistant panel takes the right ~340 px
WIDTH, KNOB_EDGE = 1400, 1000
HEADERS = ("[...document.querySelectorAll('.ag-header-cell[col-id]')].map(e => [e.getAttribute('col-id'), "
           "Math.round(e.getBoundingClientRect().left)])")
PLOTS = ("[...document.querySelectorAll('.js-plotly-plot')].map(p => [(p.layout.xaxis.title || {}).text, "
         "(p.layout.yaxis.title || {}).text, (p.data || []).flatMap(d => d.x || []).length, "
         "(p.data || []).flatMap(d => [].concat((d.marker || {}).color || []))])")
# the parallel-coordinates chart: an svg whose axes name every knob and the objective
PARALLEL = "[...document.querySelectorAll('svg')].map(s => [...s.querySelectorAll('text')]" \
           ".map(t => t.textContent)).filter(t => t.includes('objective'))"


@pytest.fixture(scope="module")
def both_spaces(estimate_sweep, tmp_path_factory):
    """The Quickstart's store with an estimate sweep of the throughput space added: one store, so one
    `mlflow server` shows both sweeps' experiments."""
    cwd = tmp_path_factory.mktemp("throughput")
    db = cwd / "mlflow.db"
    shutil.copy(estimate_sweep["uri"].removeprefix("sqlite:///"), db)
    mark = new_mark()
    proc = run_sweep(cwd, ["hardware=a2_64g", "algorithm=remax", "runner=estimate", "space=throughput",
                           f"tracking.uri=sqlite:///{db}", f"paths.output_root={cwd / 'out'}",
                           "hydra.sweeper.n_trials=4", "hydra.sweeper.n_jobs=2"], mark, multirun=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert survivors(mark) == []
    return {"uri": f"sqlite:///{db}", "out": proc.stdout + proc.stderr}


@needs_chromium
def test_each_spaces_address_opens_on_its_knobs_beside_the_objective_and_on_its_charts(both_spaces, tmp_path):
    """Done when of the MLflow compare view: at 1400 px, the table's first columns are the outcome, the
    objective and the swept knobs (the default space's all left of 1000 px), and the chart address draws
    objective and predicted peak against the main knob, one point per completed trial in the outcome's
    colour, and the parallel coordinates of the knobs and the objective; without a click."""
    shots = Path(os.environ.get("VERLSWEEP_SCREENSHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    client = MlflowClient(both_spaces["uri"])
    exps = {e.name.split(".")[0]: e for e in client.search_experiments() if e.name != "Default"}
    assert sorted(exps) == ["rollout_memory", "throughput"]
    assert "compareRunsMode=CHART" in both_spaces["out"]                    # the terminal prints the chart address
    with serve(both_spaces["uri"], tmp_path) as url, Browser() as browser:
        browser.viewport(WIDTH, 1000)
        for space, exp in exps.items():
            view = json.loads(exp.tags[tracking.SHARED_VIEW_TAG])
            knobs = [c for c in view["selectedColumns"] if c.startswith("params.")]
            assert knobs == [f"params.`{k}`" for k in (["util", "tp", "off"] if space == "rollout_memory" else
                             ["max_tok", "lp_max_tok", "batched_tokens", "seqs", "eager", "capture", "sp",
                              "free_cache"])]
            trials = client.search_runs([exp.experiment_id], filter_string=tracking.TRIALS_FILTER)
            completed = [r for r in trials if r.data.tags["trial.outcome"] == "completed"]
            assert completed and all(r.data.params.get(k[len("params.`"):-1]) for r in trials for k in knobs)

            browser.open(url + tracking.ui_path(exp.experiment_id))
            browser.wait_for(f"{HEADERS}.some(c => c[0] === {knobs[0]!r})")
            # left to right (the grid draws only the columns in view: the throughput space's last knobs are not)
            shown = sorted((c for c in browser.eval(HEADERS) if c[0].startswith(("tags.", "metrics.", "params."))),
                           key=lambda c: c[1])
            first = ["tags.`trial.outcome`", "metrics.`objective_rounded`", *knobs]
            n = min(len(shown), len(first))
            assert [c for c, _ in shown][:n] == first[:n] and n > 3, shown
            lefts = dict(shown)
            assert lefts[knobs[0]] < KNOB_EDGE, shown
            if space == "rollout_memory":                     # its three knobs all fit left of 1000 px
                assert all(lefts[k] < KNOB_EDGE for k in knobs), shown
            browser.screenshot(shots / f"mlflow_table_{space}.png")

            browser.open(url + tracking.ui_path(exp.experiment_id, "CHART"))
            names = json.dumps([k[len("params.`"):-1] for k in knobs])
            browser.wait_for(f"{PLOTS}.filter(p => p[2] > 0).length >= 2 && "
                             f"{PARALLEL}.some(texts => {names}.every(k => texts.includes(k)))")
            plots = browser.eval(PLOTS)
            main = "util" if space == "rollout_memory" else "max_tok"
            (objective,) = [p for p in plots if p[:2] == [main, "objective"]]
            assert objective[2] == len(completed), plots                 # one point per completed trial
            assert set(objective[3]) == {run_columns.OUTCOME_COLOURS["completed"]}, plots
            (memory,) = [p for p in plots if p[:2] == [main, run_columns.PREDICTED_DEVICE_PEAK]]
            assert memory[2] == sum(run_columns.PREDICTED_DEVICE_PEAK in r.data.metrics for r in trials), plots
            browser.screenshot(shots / f"mlflow_charts_{space}.png")
    print(f"MLflow screenshots: {shots}")
    assert all((shots / f"mlflow_{kind}_{space}.png").stat().st_size > 10_000
               for kind in ("table", "charts") for space in exps)


@needs_chromium
def test_report_html_renders_every_plot_offline_in_a_browser(estimate_sweep, tmp_path):
    report = estimate_sweep["dir"] / "report.html"
    with Browser() as browser:
        browser.open(report.as_uri())
        browser.wait_for("document.readyState === 'complete'")
        sizes = browser.eval("[...document.querySelectorAll('img.plot')]"
                             ".map(i => [i.alt, i.naturalWidth, i.naturalHeight])")
        assert [s[0] for s in sizes] == ["history", "util_by_tp", "frontier", "parallel", "importance", "time_split"]
        assert all(w > 100 and h > 100 for _, w, h in sizes), sizes
        browser.eval("document.querySelectorAll('details').forEach(d => d.open = true)")
        assert browser.wait_for("document.querySelectorAll('.plotly-plot .main-svg').length >= 3")
        assert "-m verl.trainer.main_ppo" in browser.eval("document.getElementById('launch').innerText")
        browser.screenshot(tmp_path / "report.png")
    assert Path(tmp_path / "report.png").stat().st_size > 10_000


def test_optuna_dashboard_serves_the_sweeps_study_from_its_storage_as_it_is(estimate_sweep, tmp_path):
    """README: `optuna-dashboard sqlite:///verlsweep-optuna.db` (the `ui` extra)."""
    pytest.importorskip("optuna_dashboard")
    storage = f"sqlite:///{estimate_sweep['cwd'] / 'verlsweep-optuna.db'}"
    with serve_dashboard(storage, tmp_path) as url:
        (summary,) = requests.get(f"{url}/api/studies", timeout=30).json()["study_summaries"]
        detail = requests.get(f"{url}/api/studies/{summary['study_id']}?after=0", timeout=30)
    assert detail.ok and len(detail.json()["trials"]) == N_TRIALS
    # what the dashboard shows of each trial: a trial that did not fit is marked infeasible by its
    # constraint (the dashboard reads only the list form: verlsweep.reconcile.results.set_violation)
    served = {t["number"]: (t["constraints"], {a["key"]: a["value"] for a in t["user_attrs"]})
              for t in detail.json()["trials"]}
    failed = [n for n, (_, attrs) in served.items() if attrs.get("outcome") in ("oom", "infeasible")]
    assert failed, served
    assert all(served[n][0] and served[n][0][0] > 0 for n in failed), served
    assert all(c == [0.0] for n, (c, a) in served.items() if a.get("outcome") == "completed")


@needs_chromium
def test_optuna_dashboard_in_a_browser_draws_trials_that_did_not_fit_as_infeasible_not_as_results(
        estimate_sweep, tmp_path):
    """24.4: the dashboard's history plot puts a trial whose constraint is violated in its own grey
    "Infeasible Trial of <study>" series and leaves it out of the best-value line, so the placeholder
    value an infeasible trial carries in Optuna is never drawn as a result (optuna-dashboard 0.21's
    history plot: feasible = every constraint <= 0)."""
    pytest.importorskip("optuna_dashboard")
    storage = f"sqlite:///{estimate_sweep['cwd'] / 'verlsweep-optuna.db'}"
    optuna = pytest.importorskip("optuna")
    (study,) = optuna.get_all_study_summaries(storage)
    trials = optuna.load_study(study_name=study.study_name, storage=storage).trials
    did_not_fit = sorted(t.number for t in trials if t.user_attrs.get("outcome") in ("oom", "infeasible"))
    completed = sorted(t.number for t in trials if t.user_attrs.get("outcome") == "completed")
    assert did_not_fit and completed
    with serve_dashboard(storage, tmp_path) as url, Browser() as browser:
        browser.open(f"{url}/dashboard/studies/{study._study_id}")
        # plotly keeps each drawn series on its div: name, mode, x (trial numbers) and y of every series
        series = "[...document.querySelectorAll('.js-plotly-plot')].flatMap(p => (p.data || [])" \
                 ".map(d => [d.name || '', d.mode || '', (d.x || []).map(Number), (d.y || []).map(Number)]))"
        browser.wait_for(f"{series}.some(s => s[0].startsWith('Infeasible Trial of'))")
        drawn = browser.eval(series)
        browser.screenshot(tmp_path / "dashboard_history.png")
    infeasible = [s for s in drawn if s[0] == f"Infeasible Trial of {study.study_name}"]
    # the feasible series is named after the objective ("<objective> of <study>")
    feasible = [s for s in drawn if s[1] == "markers" and s[0].endswith(f" of {study.study_name}")
                and not s[0].startswith(("Infeasible Trial", "Unselected Trial"))]
    best_line = [s for s in drawn if s[0] == f"Best Value of {study.study_name}"]
    assert len(infeasible) == 1 and len(feasible) == 1 and len(best_line) == 1, drawn
    assert sorted(infeasible[0][2]) == did_not_fit, drawn         # x is the trial number
    assert set(completed) <= set(feasible[0][2]) and not set(did_not_fit) & set(feasible[0][2]), drawn
    # the best-value line steps only on completed trials' values (it runs on flat to the last trial)
    values = {t.number: t.value for t in trials}
    assert set(best_line[0][3]) <= {values[n] for n in completed}, drawn
    assert (tmp_path / "dashboard_history.png").stat().st_size > 10_000
