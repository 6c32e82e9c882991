"""verlsweep.plan.predictor.calibration: the planner's constants and known points in one YAML; a file that lacks a
constant, names an unknown one or fits a held-out point is refused by name; a refit's file round-trips
(tests/test_plan_points.py checks the packaged points, tests/test_plan_refit.py the refit)."""
from __future__ import annotations

import os
from dataclasses import fields, replace

import pytest
import yaml

from verlsweep.plan.fit import calibration_file
from verlsweep.plan.predictor import calibration
from verlsweep.plan.predictor.calibration import THROUGHPUT_CONSTANTS, Constants, load, parse

RAW = yaml.safe_load(calibration.DEFAULT_PATH.read_text())


def test_the_packaged_file_has_every_constant_with_a_source_and_fit_bounds_inside_them():
    cal = load()
    assert cal.path == calibration.DEFAULT_PATH
    assert set(cal.sources) == {f.name for f in fields(Constants)} and all(cal.sources.values())
    for name, (low, high) in cal.bounds.items():
        assert low <= getattr(cal.constants, name) <= high, name
    assert set(cal.fitted) <= {f.name for f in fields(Constants)}
    assert set(THROUGHPUT_CONSTANTS) <= {f.name for f in fields(Constants)}


def test_a_missing_or_unknown_constant_is_refused_by_name():
    raw = yaml.safe_load(calibration.DEFAULT_PATH.read_text())
    del raw["constants"]["train_mfu"]
    raw["constants"]["warp_factor"] = {"value": 9}
    with pytest.raises(ValueError, match=r"missing constants \['train_mfu'\], unknown constants \['warp_factor'\]"):
        parse(raw)


def test_a_held_out_point_may_not_be_fitted():
    raw = yaml.safe_load(calibration.DEFAULT_PATH.read_text())
    raw["points"] = [{**raw["points"][0], "held_out": True, "fit": ["throughput"]}]
    with pytest.raises(ValueError, match="held_out but name reported numbers under `fit`"):
        parse(raw)


def test_a_point_composes_back_to_its_recipe():
    point = load().points[0]
    assert point.compose_overrides()[:4] == [f"hardware={point.hardware}", f"model={point.model}",
                                             f"algorithm={point.algorithm}", f"data={point.data}"]
    assert load().point(point.id) is point
    with pytest.raises(KeyError):
        load().point("no-such-point")


def test_writing_sets_new_constants_and_extra_points_that_load_reads_back(tmp_path):
    cal = load()
    new = replace(cal.constants, train_mfu=0.123456)
    extra = {**RAW["points"][0], "id": "extra-point"}
    path = calibration_file.write(cal, new, tmp_path / "sub" / "cal.yaml", [extra], note="refit of test")
    again = load(path)
    assert again.constants.train_mfu == pytest.approx(0.123456)
    assert [p.id for p in again.points][-1] == "extra-point" and len(again.points) == len(cal.points) + 1
    assert yaml.safe_load(path.read_text())["refit"] == "refit of test"


def test_writing_keeps_every_comment_and_changes_only_the_values_written(tmp_path):
    cal = load()
    new = replace(cal.constants, train_mfu=0.2345, cpu_adam_params_per_s=1e-5)
    path = calibration_file.write(cal, new, tmp_path / "cal.yaml", note="refit of test")
    before, after = calibration.DEFAULT_PATH.read_text().splitlines(), path.read_text().splitlines()
    assert [line for line in after if "#" in line] == [line for line in before if "#" in line]
    changed = [(old, now) for old, now in zip(before, after) if old != now]
    assert [now.strip() for _, now in changed] == ["value: 0.2345", "value: 1.0e-05"]
    assert after[len(before):] == ["refit: refit of test"]
    assert load(path).constants == new


def test_a_file_the_writer_cannot_edit_is_refused_by_name_and_nothing_is_written(tmp_path):
    flow = tmp_path / "flow.yaml"           # the same calibration in YAML's flow style: no `  <name>:` lines
    flow.write_text(yaml.safe_dump(RAW, default_flow_style=True, width=float("inf")))
    cal = load(flow)
    with pytest.raises(ValueError, match="no constant 'train_mfu'"):
        calibration_file.write(cal, replace(cal.constants, train_mfu=0.3), tmp_path / "out.yaml")
    assert not (tmp_path / "out.yaml").exists()


def test_load_reads_a_changed_file_again(tmp_path):
    path = calibration_file.write(load(), load().constants, tmp_path / "cal.yaml")
    first = load(path)
    raw = yaml.safe_load(path.read_text())
    raw["constants"]["step_overhead_s"]["value"] = first.constants.step_overhead_s + 1
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    os.utime(path, (path.stat().st_atime, path.stat().st_mtime + 5))
    assert load(path).constants.step_overhead_s == pytest.approx(first.constants.step_overhead_s + 1)
