"""The analytic trainer formula re-fitted to traces (verlsweep/plan/fit/trace_fit.py), without tracing:
the fit routine on synthetic traces, and the packaged constants against a committed slice of the real
grid (`python -m verlsweep.plan refit --traces`, docs/benchmarks.md#planner-accuracy)."""
from __future__ import annotations

from dataclasses import replace

import pytest

from verlsweep.plan.fit import trace_fit
from verlsweep.plan.predictor import calibration

CAL = calibration.load()

# Traced work (activations + logits + temporaries, GiB per device) of the grid's passes for two groups,
# copied from `python -m verlsweep.plan refit --traces` (torch 2.13, transformers 5): a dense and a
# mixture-of-experts model.
SLICE = {
    "qwen3_0_6b": {"actor_update ckpt 4096": 2.06, "actor_update no-ckpt 2048": 5.19,
                   "log_prob 16384": 13.91, "ref 8192": 2.39},
    "qwen3_30b_a3b": {"actor_update ckpt 4096": 3.43, "actor_update no-ckpt 2048": 20.80,
                      "log_prob 16384": 13.91, "ref 8192": 2.39},
}
# analytic / traced - 1 of each pass with the fitted constants, as the fit printed them; the slice's
# rounding to 0.01 GiB moves them by up to 0.5 %
FIT_ERROR = {
    "qwen3_0_6b": {"actor_update ckpt 4096": 0.107, "actor_update no-ckpt 2048": -0.191,
                   "log_prob 16384": 0.009, "ref 8192": -0.005},
    "qwen3_30b_a3b": {"actor_update ckpt 4096": -0.110, "actor_update no-ckpt 2048": -0.414,
                      "log_prob 16384": 0.009, "ref 8192": -0.005},
}


@pytest.fixture(scope="module")
def inputs():
    return trace_fit.group_inputs(sorted(SLICE))


def _samples(inputs, traced) -> list[trace_fit.TraceSample]:
    out = []
    for group, inp in inputs.items():
        for shape in trace_fit.SHAPES:
            sample = trace_fit.TraceSample(group, shape, inp, trace_fit.role_for(inp, shape), 1.0, 0.0, 0.0, True)
            out.append(replace(sample, traced_gb=traced(sample)))
    return out


def test_the_fit_recovers_the_constants_synthetic_traces_were_made_with(inputs):
    truth = replace(CAL.constants, activation_factor=1.4, logits_bytes=3.0, forward_logits_bytes=2.5)
    samples = _samples(inputs, lambda s: trace_fit.analytic_gb(s, truth))
    got = trace_fit.fit_constants(CAL, samples)
    for name in trace_fit.FITTED:
        assert getattr(got, name) == pytest.approx(getattr(truth, name), rel=1e-3), name


def test_the_packaged_constants_reproduce_the_committed_slice_of_the_fit(inputs):
    samples = _samples(inputs, lambda s: SLICE[s.group][s.shape.label])
    for s in samples:
        error = trace_fit.analytic_gb(s, CAL.constants) / s.traced_gb - 1
        assert error == pytest.approx(FIT_ERROR[s.group][s.shape.label], abs=0.006), (s.group, s.shape.label)


def test_writing_the_fit_sets_the_values_and_keeps_the_file_s_comments(tmp_path):
    path = tmp_path / "cal.yaml"
    path.write_text(calibration.DEFAULT_PATH.read_text())
    fitted = replace(CAL.constants, activation_factor=1.25, logits_bytes=3.5, forward_logits_bytes=2.25)
    trace_fit.write_constants(path, fitted, "a test fit")
    trace_fit.write_constants(path, fitted, "a second fit")          # replaces the first note
    text = path.read_text()
    assert text.count("# fitted to traces: a second fit") == 3 and "a test fit" not in text
    assert text.startswith("# The planner's constants")
    got = calibration.load(path).constants
    assert (got.activation_factor, got.logits_bytes, got.forward_logits_bytes) == (1.25, 3.5, 2.25)
    assert replace(got, activation_factor=1.0, logits_bytes=4.0, forward_logits_bytes=4.0) == \
        replace(CAL.constants, activation_factor=1.0, logits_bytes=4.0, forward_logits_bytes=4.0)
