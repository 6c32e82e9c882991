"""verlsweep.plan.predictor.lengths: the sequence lengths the planner assumes. Memory checks take every sequence at
its max length; throughput takes the expected mean, responses drawn from a gamma clipped at
max_response_length (unless plan.prompt_tokens / plan.response_tokens say otherwise)."""
from __future__ import annotations

import math
from dataclasses import replace

import pytest

from verlsweep.command.compose import compose_config
from verlsweep.plan import from_cfg
from verlsweep.plan.predictor import calibration
from verlsweep.plan.predictor.lengths import Lengths, clipped_gamma_mean, expected_lengths, gamma_p, worst_lengths

C = calibration.load().constants


@pytest.mark.parametrize("a, x, p", [
    (1.0, 1.0, 1 - math.exp(-1)),                        # exponential: 1 - e^-x
    (1.0, 5.0, 1 - math.exp(-5)),                        # the continued-fraction side (x > a + 1)
    (2.0, 3.0, 1 - math.exp(-3) * (1 + 3)),              # Erlang 2: 1 - e^-x (1 + x)
    (3.0, 0.5, 1 - math.exp(-0.5) * (1 + 0.5 + 0.125)),  # Erlang 3, the series side
    (0.5, 2.0, math.erf(math.sqrt(2.0))),                # chi-square-like: P(1/2, x) = erf(sqrt(x))
])
def test_gamma_p_matches_closed_forms_on_both_sides_of_its_split(a, x, p):
    assert gamma_p(a, x) == pytest.approx(p, rel=1e-12)


def test_gamma_p_is_zero_at_zero_and_tends_to_one():
    assert gamma_p(2.0, 0.0) == 0.0 and gamma_p(2.0, -1.0) == 0.0
    assert gamma_p(2.0, 200.0) == pytest.approx(1.0)


def test_clipping_at_a_limit_far_above_the_mean_keeps_the_mean_and_near_it_lowers_it():
    assert clipped_gamma_mean(500.0, 2.0, 1e6) == pytest.approx(500.0, rel=1e-9)
    assert clipped_gamma_mean(500.0, 2.0, 500.0) < 500.0
    assert clipped_gamma_mean(500.0, 2.0, 100.0) < 100.0


@pytest.fixture(scope="module")
def inp():
    return from_cfg(compose_config(["hardware=a2_64g", "model=qwen3_8b", "algorithm=grpo"]))


def test_worst_lengths_are_the_configured_maxima(inp):
    assert worst_lengths(inp) == Lengths(inp.max_prompt_length, inp.max_response_length)
    assert worst_lengths(inp).seq == inp.max_prompt_length + inp.max_response_length


def test_expected_lengths_come_from_the_calibration_clipped_at_the_maxima(inp):
    got = expected_lengths(inp, C)
    assert got.prompt == min(C.prompt_tokens, inp.max_prompt_length)
    assert got.response == pytest.approx(clipped_gamma_mean(C.response_mean_tokens, C.response_shape,
                                                            inp.max_response_length))
    assert got.response <= inp.max_response_length


def test_plan_lengths_override_the_model_but_not_the_maxima(inp):
    given = replace(inp, prompt_tokens=100.0, response_tokens=10 * inp.max_response_length)
    assert expected_lengths(given, C) == Lengths(100.0, float(inp.max_response_length))
