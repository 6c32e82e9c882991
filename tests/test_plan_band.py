"""The veto knows its error: a config that fits only at the favourable end of the planner's error band
(verlsweep/plan/predictor/band.py) is launched as an edge probe; one that does not fit even there is vetoed."""
from __future__ import annotations

import pytest
from rich.console import Console

from verlsweep.command.compose import compose_config
from verlsweep.common.names import EDGE_PROBE, EDGE_PROBE_METRIC
from verlsweep.plan import blocks_launch, from_cfg, predict_cfg
from verlsweep.plan.cli.table import grid, render
from verlsweep.plan.predictor import band
from verlsweep.plan.predictor.memory import Check
from verlsweep.plan.predictor.verdict import load_calibration

ACTOR = "verl.actor_rollout_ref.actor"
ROLLOUT = "verl.actor_rollout_ref.rollout"
NO_OFFLOAD = [f"{ACTOR}.fsdp_config.param_offload=false", f"{ACTOR}.fsdp_config.optimizer_offload=false"]


def rollout_check(residency: float) -> Check:
    """vLLM's 48 GiB reservation (counted: no band) + the trainer's residency (traced band) on 60 GiB."""
    parts = {"vLLM reservation": 48.0, "trainer residency": residency, "comm buffers": 1.0}
    check = Check("rollout", sum(parts.values()), 60.0, 2.0, parts)
    check.low = band.favourable(parts, band.trainer_error("traced"))
    return check


def test_only_the_modelled_parts_of_a_need_have_a_band_each_its_own_measured_error():
    parts = {"vLLM reservation": 40.0, "trainer": 10.0, "graph pools": 1.0}
    assert band.favourable(parts, 0.068) == pytest.approx(40.0 + 10.0 * (1 - 0.068) + 1.0 * (1 - band.ROLLOUT_ERROR))
    assert band.trainer_error("traced") == 0.068
    assert band.trainer_error("analytic (the trace failed: too slow)") == band.TRAINER_ERROR["analytic"] == 0.2


def test_a_need_over_the_limit_is_an_edge_probe_inside_the_band_and_a_failure_beyond_it():
    inside = rollout_check(11.5)             # 60.5 GiB predicted; 11.5 x 0.932 + 49 = 59.7 at the favourable end
    assert inside.need > inside.limit and inside.status == "edge"
    assert "edge probe" in inside.message() and "59.7" in inside.message()
    beyond = rollout_check(12.5)             # 12.5 x 0.932 + 49 = 60.65: does not fit even there
    assert beyond.status == "fail" and "even at the favourable end" in beyond.message()
    assert rollout_check(8.0).status == "ok" and rollout_check(10.5).status == "tight"   # the margin as before


def test_the_planner_launches_an_edge_probe_names_it_in_its_table_and_vetoes_what_is_beyond_the_band():
    def at(util: float):
        return compose_config(["hardware=a2_64g", "algorithm=remax", "plan.trainer=analytic", *NO_OFFLOAD,
                               f"{ROLLOUT}.gpu_memory_utilization={util}"])

    edge = predict_cfg(at(0.8))                 # needs 62.8 GiB of 60.7, 60.1 at the favourable end
    assert edge.status == "edge" and edge.edge_probe and edge.feasible and not edge.fits
    assert not blocks_launch(at(0.8), edge) and EDGE_PROBE in edge.summary()
    assert edge.phases_low["rollout"] < edge.capacity_gb < edge.phases["rollout"]
    assert edge.metrics()[EDGE_PROBE_METRIC] == 1.0
    low, high = edge.trainer_peak_band_gb
    assert low == pytest.approx(edge.trainer_peak_gb * 0.8) and high == pytest.approx(edge.trainer_peak_gb * 1.2)
    vetoed = predict_cfg(at(0.85))
    assert vetoed.status == "infeasible" and blocks_launch(at(0.85), vetoed)

    inp = from_cfg(at(0.8))
    rows = grid(inp, load_calibration(None), utils=(0.7, 0.8, 0.85), tps=(2,), offloads=((False, False),))
    assert [r.verdict.status for r in rows] == ["ok", "edge", "infeasible"]
    console = Console(record=True, width=200)
    render(inp, rows, console)
    row = next(line for line in console.export_text().splitlines() if "0.80" in line)
    assert EDGE_PROBE in row and "rollout" in row          # its row, not only the legend, names it


def test_an_edge_probes_terminal_lines_say_so(capsys, tmp_path):
    from verlsweep.common.result import TrialResult
    from verlsweep.study.progress import Progress
    from verlsweep.task import _report

    progress = Progress(10, {}, "perf/throughput")
    progress.console = Console(record=True, width=120)
    progress.trial(4, "completed", [400.0], {"util": 0.8}, 12.0, None, edge_probe=True)
    progress.trial(5, "completed", [390.0], {"util": 0.7}, 12.0, None)
    probe, plain = progress.console.export_text().splitlines()
    assert EDGE_PROBE in probe and EDGE_PROBE not in plain
    _report(TrialResult("completed", objective=400.0, predicted={EDGE_PROBE_METRIC: 1.0}), tmp_path, multirun=False)
    assert f"verlsweep: trial completed ({EDGE_PROBE})" in capsys.readouterr().out
