"""The least-squares routine both fits use: the measured-points fit (measured_fit.fit: tokens/s and peaks)
and the trace fit (trace_fit.fit_constants: the analytic trainer formula's work against traces).

A residual is log(predicted / measured), so a 10 % miss weighs the same at 60 tok/s and at 600, or at
0.5 GiB and at 50. Only the named constants move, each within its bounds (calibration.yaml `bounds`, else
the caller's default), starting from its current value clipped into them; scipy's trust-region reflective
solver with x_scale="jac" copes with constants of very different sizes (bytes per logit, MFU fractions).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import TypeVar

from verlsweep.plan.predictor.calibration import Constants

S = TypeVar("S")


def solve(start: Constants, names: Sequence[str], samples: Sequence[S], predicted: Callable[[S, Constants], float],
          measured: Callable[[S], float], *, bounds: Mapping[str, tuple[float, float]],
          default_bounds: tuple[float, float]) -> Constants:
    """`start` with the constants `names` set to minimise the squared log(predicted / measured) over `samples`."""
    from scipy.optimize import least_squares

    def build(x: Sequence[float]) -> Constants:
        return replace(start, **{n: float(v) for n, v in zip(names, x)})

    def residuals(x: Sequence[float]) -> list[float]:
        c = build(x)
        return [math.log(max(predicted(s, c), 1e-9) / measured(s)) for s in samples]

    lo = [bounds.get(n, default_bounds)[0] for n in names]
    hi = [bounds.get(n, default_bounds)[1] for n in names]
    x0 = [min(max(getattr(start, n), a), b) for n, a, b in zip(names, lo, hi)]
    return build(least_squares(residuals, x0, bounds=(lo, hi), x_scale="jac").x)
