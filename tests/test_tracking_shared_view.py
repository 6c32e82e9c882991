"""The runs table and chart view a sweep's address opens on: verlsweep.tracking.shared_view (the view
kept in the experiment) and verlsweep.tracking.run_columns (what each trial run carries for it).
tests/e2e/test_sweep_view.py looks at both in Chromium against a real `mlflow server`."""
from __future__ import annotations

import json

import pytest
from mlflow.tracking import MlflowClient
from optuna.distributions import CategoricalDistribution, FloatDistribution

from verlsweep.command.compose import compose_config
from verlsweep.common.result import OUTCOMES, TrialResult
from verlsweep.study.space import numeric
from verlsweep.tracking import run_columns as rc
from verlsweep.tracking import shared_view as sv
from verlsweep.tracking import store as st
from verlsweep.tracking import study_runs, sweep_run
from verlsweep.tracking.mlflow_runs import TrialRun

ROLLOUT = "verl.actor_rollout_ref.rollout"
MEMORY_SPACE = [f"{ROLLOUT}.gpu_memory_utilization", f"{ROLLOUT}.tensor_model_parallel_size",
                "verl.actor_rollout_ref.actor.fsdp_config.param_offload",
                "verl.actor_rollout_ref.actor.fsdp_config.optimizer_offload",
                "verl.actor_rollout_ref.ref.fsdp_config.param_offload"]
THROUGHPUT_SPACE = ["verl.actor_rollout_ref.actor.ppo_max_token_len_per_gpu",
                    f"{ROLLOUT}.log_prob_max_token_len_per_gpu", f"{ROLLOUT}.max_num_batched_tokens",
                    f"{ROLLOUT}.max_num_seqs", f"{ROLLOUT}.enforce_eager", "throughput.max_capture_size",
                    "verl.actor_rollout_ref.actor.ulysses_sequence_parallel_size", f"{ROLLOUT}.free_cache_engine"]


def test_knobs_go_by_the_names_their_labels_use_offload_flags_as_one():
    assert rc.knob_names(MEMORY_SPACE) == ["util", "tp", "off"]
    assert rc.knob_names(THROUGHPUT_SPACE) == ["max_tok", "lp_max_tok", "batched_tokens", "seqs", "eager",
                                               "capture", "sp", "free_cache"]
    assert [rc.knob_name(k, MEMORY_SPACE) for k in MEMORY_SPACE] == ["util", "tp", "off", "off", "off"]
    # a user's own space: a knob without a short name keeps its shortest unambiguous suffix
    assert rc.knob_names(["verl.a.b.lr", "verl.c.lr", "algorithm"]) == ["b.lr", "c.lr", "algorithm"]


def test_two_knobs_that_end_alike_are_told_apart_not_merged_under_one_abbreviation():
    keys = [f"{ROLLOUT}.log_prob_max_token_len_per_gpu", "verl.actor_rollout_ref.ref.log_prob_max_token_len_per_gpu"]
    names = rc.knob_names(keys)
    assert len(set(names)) == 2 and names[0].startswith("rollout."), names


def test_a_label_gives_one_param_per_knob_at_the_labels_precision():
    assert rc.label_params("util=0.90 tp=2 off=p,o") == {"util": "0.90", "tp": "2", "off": "p,o"}
    assert rc.label_params(None) == {} and rc.label_params("") == {}
    assert rc.label_params("name=a b tp=2") == {"name": "a b", "tp": "2"}      # a value with a space


def test_the_objective_is_rounded_and_the_predicted_device_peak_names_its_phase():
    metrics, tags = rc.derived({"objective": 398.4964713292099, "plan/peak_gb/rollout": 59.36545,
                                "plan/peak_gb/actor_update": 37.0, "plan/trainer_peak_gb": 33.7})
    assert metrics == {rc.OBJECTIVE_ROUNDED: 398.5, rc.PREDICTED_DEVICE_PEAK: 59.37}
    assert tags == {rc.PEAK_PHASE_TAG: "rollout"}
    assert rc.derived({"objective": None, "objective.x": True}) == ({}, {})


def test_every_outcome_has_a_colour_and_what_never_launched_has_its_own():
    colours = {o: rc.colour(o)[rc.COLOUR_TAG] for o in OUTCOMES}
    assert all(c.startswith("#") and len(c) == 7 for c in colours.values())
    assert len({colours["completed"], colours["pruned"], colours["oom"], colours["infeasible"]}) == 4
    reused, ruled_out = rc.colour("completed", reused=True), rc.colour("infeasible", ruled_out=True)
    assert len({colours["completed"], colours["infeasible"], reused[rc.COLOUR_TAG], ruled_out[rc.COLOUR_TAG]}) == 4


def test_the_sweeps_view_opens_on_outcome_objective_and_every_knob_then_the_memory_figures():
    view = sv.for_sweep(["util", "tp", "off"], ["util", "tp"], measured=True)
    assert view["selectedColumns"] == [
        "tags.`trial.outcome`", "metrics.`objective_rounded`", "params.`util`", "params.`tp`", "params.`off`",
        "metrics.`peak_device_hbm_gb`", "metrics.`predicted_device_peak_gb`", "tags.`plan.peak_phase`",
        "metrics.`peak_memory_gb`", "attributes.`Duration`"]
    assert view["columnOrder"][2:] == view["selectedColumns"]
    assert (view["searchFilter"], view["orderByKey"], view["orderByAsc"]) == (
        sv.TRIALS_FILTER, "metrics.`objective`", False)
    assert view["runsHiddenMode"] == "SHOW_ALL"          # every trial in the charts, not MLflow's first 10
    # runner=estimate: no device measured, and the duration is the estimate's own milliseconds
    estimate = sv.for_sweep(["util"], ["util"], measured=False)["selectedColumns"]
    assert "metrics.`peak_device_hbm_gb`" not in estimate and "attributes.`Duration`" not in estimate
    # monitor.enabled=false: trials run, no device read
    unmonitored = sv.for_sweep(["util"], ["util"], measured=True, device_peak=False)
    assert "metrics.`peak_device_hbm_gb`" not in unmonitored["selectedColumns"]
    assert "attributes.`Duration`" in unmonitored["selectedColumns"]
    assert sv.DEVICE_PEAK not in [c["yaxis"]["key"] for c in unmonitored["compareRunCharts"] if "yaxis" in c]


def test_the_chart_view_holds_objective_and_memory_by_the_main_knob_and_a_parallel_chart():
    charts = sv.for_sweep(["util", "tp", "off"], ["util", "tp"], measured=False)["compareRunCharts"]
    scatters = [(c["xaxis"], c["yaxis"]) for c in charts if c["type"] == "SCATTER"]
    assert scatters == [({"key": "util", "type": "PARAM"}, {"key": "objective", "type": "METRIC"}),
                        ({"key": "util", "type": "PARAM"}, {"key": rc.PREDICTED_DEVICE_PEAK, "type": "METRIC"})]
    (parallel,) = [c for c in charts if c["type"] == "PARALLEL"]
    assert parallel["selectedParams"] == ["util", "tp", "off"] and parallel["selectedMetrics"] == ["objective"]
    assert {c["metricSectionId"] for c in charts} == {sv.SECTION_UUID}
    measured = sv.for_sweep(["util"], ["util"], measured=True)["compareRunCharts"]
    assert sv.DEVICE_PEAK in [c["yaxis"]["key"] for c in measured if c["type"] == "SCATTER"]


@pytest.mark.parametrize(("knobs", "numeric_knobs", "main"), [
    (["tp", "util", "off"], ["tp", "util"], "util"),                  # util when swept
    (["max_tok", "eager"], ["max_tok"], "max_tok"),                   # else the first numeric one
    (["eager", "algorithm", "seqs"], ["seqs"], "seqs"),
    (["algorithm"], [], "algorithm"),                                 # else the first
])
def test_the_charts_x_axis_is_util_else_the_first_numeric_knob(knobs, numeric_knobs, main):
    assert sv.main_knob(knobs, numeric_knobs) == main


def test_numeric_knobs_are_ranges_and_choices_of_numbers_not_of_flags():
    assert numeric(FloatDistribution(0.3, 0.9, step=0.05)) and numeric(CategoricalDistribution([1, 2, 4]))
    assert not numeric(CategoricalDistribution([True, False])) and not numeric(CategoricalDistribution(["a", 1]))


def test_the_chart_address_is_the_same_view_in_chart_mode():
    assert st.ui_path("3", "CHART") == (
        "/#/experiments/3/runs?workflowType=machine_learning&compareRunsMode=CHART&viewStateShareKey=verlsweep")


def cfg_for(uri, *overrides):
    return compose_config(["hardware=a2_64g", "algorithm=remax", "model=qwen3_8b", f"tracking.uri={uri}", *overrides])


def test_a_sweep_writes_its_view_into_its_experiment_after_the_base_one(store):
    view = sv.for_sweep(["util", "tp"], ["util", "tp"])
    tracking = sweep_run.open_sweep_run(cfg_for(store, "tracking.enabled=true"), "view-study", {}, sampler="tpe",
                                        sweep_name=None, session="s1", others_alive=False, view=view)
    assert tracking is not None
    exp = MlflowClient(store).get_experiment(tracking.experiment_id)
    assert json.loads(exp.tags[st.SHARED_VIEW_TAG]) == view


def test_a_trial_run_carries_its_knobs_by_name_a_readable_objective_its_predicted_peak_and_colour(store):
    parent = sweep_run.start_sweep_run(cfg_for(store), "cols-study", {})
    cfg = cfg_for(store, f"tracking.parent_run_id={parent}", "trial.number=3", "trial.label='util=0.90 tp=2 off=p,o'")
    knobs = {"actor_rollout_ref.rollout.gpu_memory_utilization": 0.9}
    run = TrialRun.start(cfg, knobs)
    client = MlflowClient(store)
    assert client.get_run(run.run_id).data.tags[rc.COLOUR_TAG] == rc.OUTCOME_COLOURS["running"]
    run.finish(TrialResult("completed", objective=398.4964, predicted={"plan/peak_gb/rollout": 59.366,
                                                                      "plan/peak_gb/ref": 21.8}), reason="ok")
    done = client.get_run(run.run_id).data
    assert done.params == {"util": "0.90", "tp": "2", "off": "p,o",
                           "actor_rollout_ref.rollout.gpu_memory_utilization": "0.9"}
    assert done.metrics[rc.OBJECTIVE_ROUNDED] == 398.5 and done.metrics[rc.PREDICTED_DEVICE_PEAK] == 59.37
    assert done.tags[rc.PEAK_PHASE_TAG] == "rollout"
    assert done.tags[rc.COLOUR_TAG] == rc.OUTCOME_COLOURS["completed"]


def test_a_pruned_trial_has_no_rounded_objective_the_table_would_sort_among_completed_ones(store):
    run = TrialRun.start(cfg_for(store), {})
    run.finish(TrialResult("pruned", objective=300.0), reason="pruned")
    done = MlflowClient(store).get_run(run.run_id).data
    assert rc.OBJECTIVE_ROUNDED not in done.metrics and done.tags[rc.COLOUR_TAG] == rc.OUTCOME_COLOURS["pruned"]


def test_a_recorded_reused_trial_has_its_knob_params_colour_and_rounded_objective(store):
    client = MlflowClient(store)
    exp = client.create_experiment("recorded")
    run_id = study_runs.record_trial(client, exp, "s", 4, None, "completed", "reused", params={"verl.util": 0.9},
                                     tags={study_runs.REUSED_FROM_TAG: "1"}, label="util=0.90 tp=2")
    study_runs.log_measurements(client, run_id, {"objective": 398.4964}, "completed")
    run = client.get_run(run_id).data
    assert run.params == {"util": "0.90", "tp": "2", "verl.util": "0.9"}
    assert run.tags[rc.COLOUR_TAG] == rc.OUTCOME_COLOURS["reused"] and run.metrics[rc.OBJECTIVE_ROUNDED] == 398.5
    study_runs.end_run(client, run_id, "KILLED", {study_runs.OUTCOME_TAG: "orphaned"})   # an outcome told later
    assert client.get_run(run_id).data.tags[rc.COLOUR_TAG] == rc.OTHER_COLOUR


def test_the_parent_run_shows_the_best_trials_knobs_objective_and_what_to_run(store):
    cfg = cfg_for(store)
    parent = sweep_run.start_sweep_run(cfg, "best-study", {})
    sweep_run.update_sweep_run(cfg, parent, 3, {"best_objective": 398.4964},
                               tags=sweep_run.best_tags(1, "util=0.65 tp=1 off=r", 398.4964, "objective"))
    tags = MlflowClient(store).get_run(parent).data.tags
    assert {k: tags[k] for k in ("best.trial", "best.objective", "best.knobs", "best.util", "best.tp", "best.off")} == {
        "best.trial": "1", "best.objective": "398.5", "best.knobs": "util=0.65 tp=1 off=r", "best.util": "0.65",
        "best.tp": "1", "best.off": "r"}
    note = tags["mlflow.note.content"]
    assert "t01 util=0.65 tp=1 off=r" in note and "best_launch.sh" in note and "report.html" in note
