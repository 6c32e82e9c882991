"""The values a discrete Optuna distribution allows, computed one way for every stage: the sweeper's
search space, the boundary sampler (verlsweep.proofs.sampler) and the report's frontier grid."""
from __future__ import annotations

from decimal import Decimal
from typing import Any

from optuna.distributions import BaseDistribution, CategoricalDistribution, FloatDistribution, IntDistribution

# digits kept when a float's own repr has more (e.g. a low of 1/3): enough to drop the drift of
# low + i * step, few enough never to change a value the user wrote
MAX_DECIMALS = 12


def decimals_of(*numbers: float) -> int:
    """The decimal digits the numbers are written with: 0.3 -> 1, 0.05 -> 2, 1e-05 -> 5, 2 -> 0."""
    return max(max(0, -_exponent(float(x))) for x in numbers)


def _exponent(x: float) -> int:
    exponent = Decimal(repr(x)).normalize().as_tuple().exponent
    return exponent if isinstance(exponent, int) else 0    # 'n'/'N'/'F': nan and inf have no digits


def discrete_values(dist: BaseDistribution, decimals: int | None = None) -> list[Any] | None:
    """Every value `dist` allows, in its order: a categorical's choices; an int range's ints; a float
    range with a step from low to high inclusive, each value rounded to `decimals` (default: the digits
    low and step are written with) so 0.3 + 13 x 0.05 is 0.95, not 0.9500000000000001. None for a
    continuous distribution (no step, or a log-scaled int)."""
    if isinstance(dist, CategoricalDistribution):
        return list(dist.choices)
    if isinstance(dist, IntDistribution) and not dist.log:
        return list(range(dist.low, dist.high + 1, dist.step))
    if isinstance(dist, FloatDistribution) and dist.step is not None:
        if decimals is None:
            decimals = min(decimals_of(dist.low, dist.step), MAX_DECIMALS)
        n = int(round((dist.high - dist.low) / dist.step))
        return [round(dist.low + i * dist.step, decimals) for i in range(n + 1)]
    return None
