"""verlsweep.common.distributions: the one place the values of a discrete Optuna distribution are
computed (the boundary sampler, the report's frontier grid and benchmarks enumerate with it)."""
from __future__ import annotations

import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from verlsweep.common.distributions import decimals_of, discrete_values


def test_a_float_step_range_has_every_value_written_as_the_user_would_without_drift():
    values = discrete_values(FloatDistribution(0.30, 0.95, step=0.05))
    assert values == [0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95]
    # exactly the floats of the literals: unrounded, 0.3 + 6 * 0.05 is 0.6000000000000001
    assert [repr(v) for v in values] == [repr(v) for v in (0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75,
                                                            0.8, 0.85, 0.9, 0.95)]
    assert 0.3 + 6 * 0.05 != 0.6


def test_a_float_range_with_a_step_of_a_tenth_reaches_its_high_end():
    assert discrete_values(FloatDistribution(0.1, 0.7, step=0.1)) == [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7]


def test_given_decimals_round_coarser_than_the_step():
    assert discrete_values(FloatDistribution(0.25, 0.75, step=0.25), decimals=1) == [0.2, 0.5, 0.8]


def test_an_int_range_steps_from_low_to_high_inclusive():
    assert discrete_values(IntDistribution(1, 8)) == [1, 2, 3, 4, 5, 6, 7, 8]
    assert discrete_values(IntDistribution(2, 10, step=4)) == [2, 6, 10]


def test_a_categorical_keeps_its_choices_and_their_order():
    assert discrete_values(CategoricalDistribution([8, 1, 4])) == [8, 1, 4]
    assert discrete_values(CategoricalDistribution([True, False])) == [True, False]


@pytest.mark.parametrize("dist", [FloatDistribution(0.3, 0.9), FloatDistribution(1e-5, 1e-1, log=True),
                                  IntDistribution(1, 1024, log=True)])
def test_a_continuous_distribution_has_no_list_of_values(dist):
    assert discrete_values(dist) is None


@pytest.mark.parametrize("numbers, digits", [((0.3,), 1), ((0.3, 0.05), 2), ((1e-05,), 5), ((2,), 0),
                                             ((0.125, 1), 3)])
def test_decimals_of_counts_the_digits_a_number_is_written_with(numbers, digits):
    assert decimals_of(*numbers) == digits
