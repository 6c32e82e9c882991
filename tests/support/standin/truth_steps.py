"""The verl stand-in under a stack's hidden truth (knob ``truth``; the truth itself: truth.py).

With ``+standin.truth=stack`` (the stack VERLSWEEP_STACK states, as a trial process reads its own) or
``+standin.truth=<a stack as VERLSWEEP_STACK states it>``, each training step's memory and tokens/s are
the truth's at that step's mean lengths (lengths.py's growth: the step's ``prompt_length/mean`` and
``response_length/mean``): ``actor/perf/max_memory_allocated_gb`` is the truth's trainer allocator peak,
``perf/throughput`` its tokens/s per device, and the first step whose device peak (the largest phase
times the hardware's factor) passes the device's capacity ends in verl's NPU out-of-memory error. One
truth then decides both what a sweep's trials measure (tests/support/sweeper_app.py) and whether a
config survives the maximum lengths of the long run.

The planner's inputs are the trial's own: the composed sweep config Hydra saved into the trial's job dir
(``$VERLSWEEP_TRIAL_DIR/.hydra/config.yaml``, the verl runner's working dir; the knob ``truth_config``
names another file), the config whose ``verl`` node became this process's argv.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tests.support.standin.knobs import KnobError, Knobs
from tests.support.standin.truth import TRUTHS, TruePoint, peaks_at, trial_inputs
from verlsweep.common.names import TRIAL_DIR_ENV
from verlsweep.common.stack import STACK_ENV, read_stack

if TYPE_CHECKING:
    from verlsweep.plan import PlanInputs

OWN_STACK = "stack"                             # the knob's value for "the stack this process runs on"
SAVED_CONFIG = Path(".hydra") / "config.yaml"   # where Hydra saves a job's composed config


def truth_stack(spec: str, environ: Mapping[str, str]) -> str:
    """The stack a `truth` knob names; KnobError for one without a truth."""
    stack = ",".join(f"{k}={v}" for k, v in read_stack(dict(environ)).items()) if spec == OWN_STACK else spec
    if stack not in TRUTHS:
        known = " | ".join([OWN_STACK, *TRUTHS])
        raise KnobError(f"standin.truth={spec!r}: no hidden truth for stack {stack!r} (set {STACK_ENV} to one "
                        f"of truth.py's stacks; known: {known})")
    return stack


def saved_config(knobs: Knobs, environ: Mapping[str, str]) -> Path:
    """The trial's composed config: `truth_config`, else its job dir's .hydra/config.yaml."""
    if knobs.truth_config:
        return Path(knobs.truth_config).expanduser()
    return Path(environ.get(TRIAL_DIR_ENV) or os.getcwd()) / SAVED_CONFIG


@dataclass(frozen=True)
class TruthSteps:
    """One trial under its stack's truth: what it holds and reaches at any step's mean lengths."""

    stack: str
    inputs: PlanInputs

    @classmethod
    def load(cls, knobs: Knobs, environ: Mapping[str, str] | None = None) -> TruthSteps | None:
        """None when the `truth` knob is off; KnobError when its stack or the trial's config is wrong."""
        if not knobs.truth:
            return None
        environ = os.environ if environ is None else environ
        stack = truth_stack(knobs.truth, environ)
        path = saved_config(knobs, environ)
        if not path.is_file():
            raise KnobError(f"standin.truth needs the trial's composed config: no {path} (standin.truth_config "
                            f"names it, else ${TRIAL_DIR_ENV}/{SAVED_CONFIG})")
        try:
            inputs = trial_inputs(path)
        except Exception as exc:       # any reason the planner cannot read it is a usage error here
            raise KnobError(f"standin.truth: the planner cannot read {path}: {exc}") from exc
        return cls(stack, inputs)

    @property
    def capacity_gb(self) -> float:
        return self.inputs.hardware.capacity_gb

    def at(self, prompt: float, response: float) -> TruePoint:
        """The truth at a step whose mean prompt and response hold these many tokens."""
        from verlsweep.plan.predictor.lengths import Lengths

        return peaks_at(self.inputs, self.stack, Lengths(prompt, response))
