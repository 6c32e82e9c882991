"""How many tokens a step's sequences hold: the expected lengths the throughput and memory models use
(responses drawn from a Gamma distribution, clipped at max_response_length as verl's rollout stops
there) and the worst case the feasibility checks use."""
from __future__ import annotations

import math
from dataclasses import dataclass

from verlsweep.plan.predictor.calibration import Constants
from verlsweep.plan.predictor.trial_spec import PlanInputs


@dataclass(frozen=True)
class Lengths:
    prompt: float
    response: float

    @property
    def seq(self) -> float:
        return self.prompt + self.response


def gamma_p(a: float, x: float) -> float:
    """Regularized lower incomplete gamma P(a, x): the series below a + 1, Lentz's continued fraction
    for the upper tail above it (the textbook split; pure Python keeps the planner import-light)."""
    if x <= 0:
        return 0.0
    log_front = a * math.log(x) - x - math.lgamma(a)
    if x < a + 1:
        term = total = 1.0 / a
        n = a
        while abs(term) > abs(total) * 1e-14:
            n += 1
            term *= x / n
            total += term
        return total * math.exp(log_front)
    tiny = 1e-300
    b = x + 1 - a
    c, d = 1 / tiny, 1 / b
    h = d
    for i in range(1, 500):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        step = d * c
        h *= step
        if abs(step - 1) < 1e-14:
            break
    return 1.0 - math.exp(log_front) * h


def clipped_gamma_mean(mean: float, shape: float, clip: float) -> float:
    """E[min(X, clip)] for X ~ Gamma(shape, mean/shape): responses stop at max_response_length."""
    x = clip * shape / mean
    return mean * gamma_p(shape + 1, x) + clip * (1.0 - gamma_p(shape, x))


def expected_lengths(inp: PlanInputs, c: Constants) -> Lengths:
    prompt = min(inp.prompt_tokens or c.prompt_tokens, inp.max_prompt_length)
    if inp.response_tokens:
        response = min(inp.response_tokens, inp.max_response_length)
    else:
        response = clipped_gamma_mean(c.response_mean_tokens, c.response_shape, inp.max_response_length)
    return Lengths(prompt, response)


def worst_lengths(inp: PlanInputs) -> Lengths:
    return Lengths(float(inp.max_prompt_length), float(inp.max_response_length))
