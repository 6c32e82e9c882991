"""verl's per-step metrics: file-logger JSONL (primary) and console lines (fallback)."""
from __future__ import annotations

import json
import math

import pytest

from verlsweep.trial.metrics import (
    JsonlTail,
    StepLog,
    aggregate,
    objective,
    parse_console_line,
    parse_jsonl_record,
    strip_ansi,
)


def test_console_line_behind_a_ray_actor_prefix_with_numpy_reprs_is_parsed():
    line = ("(TaskRunnerV1 pid=1234) step:12 - actor/pg_loss:np.float64(-0.0125) - training/num_turns/mean:np.int64(3)"
            " - perf/throughput:1234.5 - response_length/mean:200.0\n")
    step, data = parse_console_line(line)
    assert step == 12
    assert data == {"actor/pg_loss": -0.0125, "training/num_turns/mean": 3.0, "perf/throughput": 1234.5,
                    "response_length/mean": 200.0}


def test_console_line_nan_and_scientific_values_are_numbers():
    _, data = parse_console_line("step:3 - critic/vf_explained_var:nan - actor/lr:1e-06")
    assert math.isnan(data["critic/vf_explained_var"]) and data["actor/lr"] == 1e-6


@pytest.mark.parametrize("line", [
    "Training Progress:  40%|####      | 2/5 [00:03<00:04]",
    "INFO:2026-01-01 00:00:00,000:pending: 0, running: 8, finished: 0, failure: 0",
    "'total_training_steps': 5, 'global_step:': 3",
])
def test_lines_that_are_not_step_lines_are_ignored(line):
    assert parse_console_line(line) is None


def test_file_logger_record_keeps_numbers_and_drops_nulls_and_strings():
    rec = json.dumps({"step": 2, "data": {"perf/throughput": 812.5, "critic/vf_explained_var": None,
                                          "training/epoch": 0, "note": "x", "flag": True}})
    assert parse_jsonl_record(rec) == (2, {"perf/throughput": 812.5, "training/epoch": 0.0})


def test_jsonl_tail_returns_only_complete_new_lines(tmp_path):
    path = tmp_path / "m.jsonl"
    tail = JsonlTail(path)
    assert tail.read() == []                      # not created yet
    with path.open("wb") as fh:
        fh.write(b'{"step": 1, "data": {"a": 1}}\n{"step": 2, "da')
    assert tail.read() == [(1, {"a": 1.0})]
    with path.open("ab") as fh:
        fh.write(b'ta": {"a": 2}}\n')
    assert tail.read() == [(2, {"a": 2.0})]
    assert tail.read() == []


def test_file_record_replaces_the_console_record_of_the_same_step_and_counts_once():
    log = StepLog()
    assert log.add(1, {"perf/throughput": 100.0}, "console") is True
    assert log.add(1, {"perf/throughput": 100.0, "actor/perf/max_memory_reserved_gb": 30.0}, "file") is False
    assert log.add(1, {"perf/throughput": 1.0}, "console") is False
    assert log.steps[1]["actor/perf/max_memory_reserved_gb"] == 30.0
    assert len(log) == 1


def test_objective_skips_warmup_steps_and_validation_step_zero():
    log = StepLog()
    log.add(0, {"val-core/openai/gsm8k/acc/mean@1": 0.1}, "file")
    for step, value in [(1, 10.0), (2, 100.0), (3, 200.0), (4, 600.0)]:
        log.add(step, {"perf/throughput": value}, "file")
    assert log.training_steps() == 4
    assert objective(log, "perf/throughput", "mean", 1) == 300.0
    assert objective(log, "perf/throughput", "median", 1) == 200.0
    assert objective(log, "perf/throughput", "last", 1) == 600.0
    assert objective(log, "perf/throughput", "mean", 0) == 227.5


def test_objective_of_a_trial_shorter_than_its_warmup_uses_the_warmup_steps():
    log = StepLog()
    log.add(1, {"perf/throughput": 42.0}, "file")
    assert objective(log, "perf/throughput", "mean", 1) == 42.0


def test_objective_without_the_metric_is_none():
    assert objective(StepLog(), "perf/throughput", "mean", 1) is None


def test_peak_memory_is_the_actors_allocated_peak_over_the_steps_never_reserved_or_another_role():
    log = StepLog()
    log.add(1, {"actor/perf/max_memory_allocated_gb": 20.0, "actor/perf/max_memory_reserved_gb": 24.5}, "file")
    log.add(2, {"actor/perf/max_memory_allocated_gb": 22.0, "critic/perf/max_memory_reserved_gb": 31.0,
                "actor/perf/cpu_memory_used_gb": 500.0}, "file")
    assert log.peak_memory_gb() == 22.0


def test_the_same_peak_memory_metric_in_every_runner_and_in_plan_refit():
    from verlsweep.common.names import PEAK_MEMORY_METRIC
    from verlsweep.plan.fit import refit
    from verlsweep.trial.runners import estimate

    assert refit.PEAK == PEAK_MEMORY_METRIC and PEAK_MEMORY_METRIC in estimate.STEP_METRICS


@pytest.mark.parametrize("line,clean", [
    ("\x1b[36m(TaskRunnerV1 pid=7)\x1b[0m step:1 - perf/throughput:1.0",
     "(TaskRunnerV1 pid=7) step:1 - perf/throughput:1.0"),
    ("ray.exceptions.RayTaskError(X): \x1b[36mray::TaskRunnerV1.run()\x1b[39m (pid=7)",
     "ray.exceptions.RayTaskError(X): ray::TaskRunnerV1.run() (pid=7)"),
    ("plain line", "plain line"),
])
def test_console_lines_are_read_without_rays_colour_codes(line, clean):
    assert strip_ansi(line) == clean
    assert parse_console_line(strip_ansi(line)) == parse_console_line(clean)


def test_unknown_aggregate_is_rejected_with_the_allowed_values():
    with pytest.raises(ValueError, match="mean, median, last"):
        aggregate([1.0], "p99")
