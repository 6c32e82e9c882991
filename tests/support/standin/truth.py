"""The stand-in's hidden truth per software stack and hardware: what a trial "measures" where the planner
is wrong in a way a stack makes it wrong (the runtime holds more memory than the planner's
runtime_context_gb, the allocator fragments more, decode reaches another bandwidth efficiency), the same on
every device of the stack, plus a small per-hardware factor.

The truth is the planner's own model under the stack's true constants (so the stack calibration,
verlsweep/plan/fit/stack_calibration.py, can identify it), times the hardware's factor. A trial whose
true device peak at the longest sequences passes the device's capacity is an OOM.

One truth, two stand-ins:

* tests/support/sweeper_app.py (`+app.truth=true`): the preflight under the sweep's calibration
  (plan.calibration, what the sweep's guide ranked with), then the trial's MLflow run as task.py records
  one: its stack tags, the planner's predictions, the measured tokens/s and device peak (`measure`).
* the verl stand-in (verl_standin.py, knob `truth`: truth_steps.py): each training step's device peak,
  trainer allocator peak and tokens/s at that step's lengths (`peaks_at`), so a config that completes a
  sweep's 5 steps can run out of memory at the maximum lengths of the long run, as this truth decides.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf

from verlsweep.common.result import TrialResult
from verlsweep.common.stack import read_stack, stack_tags

if TYPE_CHECKING:
    from verlsweep.plan import PlanInputs
    from verlsweep.plan.predictor.lengths import Lengths

# a stack as VERLSWEEP_STACK states it
STACK_A = "cann=8.1.RC1,torch=2.5.1,torch_npu=2.5.1,vllm=0.9.1,vllm_ascend=0.9.1,verl=0.5.0"
STACK_B = "cann=8.0.0,torch=2.4.0,torch_npu=2.4.0,vllm=0.8.5,vllm_ascend=0.8.5,verl=0.4.1"


@dataclass(frozen=True)
class StackTruth:
    """The constants a stack really has (the planner's packaged ones differ)."""

    runtime_context_gb: float
    fragmentation: float
    decode_bw_efficiency: float
    train_mfu: float


TRUTHS = {
    # holds 4 GiB more per process than the planner assumes: its best predicted configs run out of HBM
    STACK_A: StackTruth(runtime_context_gb=4.5, fragmentation=1.05, decode_bw_efficiency=0.45, train_mfu=0.2),
    # an older stack that holds less: its trials would pull a calibration the other way
    STACK_B: StackTruth(runtime_context_gb=0.1, fragmentation=1.0, decode_bw_efficiency=0.7, train_mfu=0.3),
}
HARDWARE_FACTOR = {"a2_64g": 1.0, "a3_64g": 1.01}      # peaks: what a stack model leaves per device


def _true_calibration(cal: Any, truth: StackTruth) -> Any:
    return replace(cal, constants=replace(cal.constants, **vars(truth)))


def true_constants(stack: str) -> Any:
    """The planner's constants as `stack` really has them (KeyError: a stack without a truth)."""
    from verlsweep.plan import load_calibration

    return _true_calibration(load_calibration(None), TRUTHS[stack]).constants


@dataclass(frozen=True)
class TruePoint:
    """What a trial of one stack really holds and reaches at one pair of mean lengths."""

    device_peak_gb: float       # the largest device phase, times the hardware's factor
    trainer_peak_gb: float      # torch's allocated peak in the trainer: verl's max_memory_allocated_gb
    tok_s: float                # tokens/s per device
    capacity_gb: float          # what the device holds (torch's "total capacity")

    @property
    def oom(self) -> bool:
        return self.device_peak_gb > self.capacity_gb


def peaks_at(inputs: PlanInputs, stack: str, lengths: Lengths | None = None) -> TruePoint:
    """The truth of `stack` for a trial (the planner's inputs) at `lengths` (None: every sequence at its
    maximum); the hardware is the inputs' profile (HARDWARE_FACTOR, 1.02 for one it does not name)."""
    from verlsweep.plan.predictor.lengths import worst_lengths
    from verlsweep.plan.predictor.memory import memory_per_phase
    from verlsweep.plan.predictor.throughput import step_throughput

    constants = true_constants(stack)
    lengths = lengths or worst_lengths(inputs)
    memory = memory_per_phase(inputs, constants, lengths=lengths)
    factor = HARDWARE_FACTOR.get(inputs.hardware.name, 1.02)
    return TruePoint(device_peak_gb=max(memory.phases.values()) * factor, trainer_peak_gb=memory.trainer_peak_gb,
                     tok_s=step_throughput(inputs, constants, lengths, memory.kv_tokens).tok_s,
                     capacity_gb=inputs.hardware.capacity_gb)


def at_mean_lengths(inputs: PlanInputs, stack: str) -> TruePoint:
    """The truth of `stack` at the mean lengths of its own length model: what a trial measures."""
    from verlsweep.plan.predictor.lengths import expected_lengths

    return peaks_at(inputs, stack, expected_lengths(inputs, true_constants(stack)))


def measure(cfg: DictConfig, stack: str) -> tuple[float, float, bool]:
    """(tokens/s, device peak GiB at the mean lengths, whether it runs out of memory at the maximum
    lengths) under the truth."""
    from verlsweep.plan import from_cfg

    inputs = from_cfg(cfg)
    mean = at_mean_lengths(inputs, stack)
    return mean.tok_s, mean.device_peak_gb, peaks_at(inputs, stack).oom


def trial_inputs(config_yaml: Path) -> PlanInputs:
    """The planner's inputs of a trial from the config Hydra saved into its job dir (.hydra/config.yaml):
    the composed sweep config `measure` reads, as a trial process can read it."""
    from hydra.core.utils import setup_globals

    from verlsweep.command import resolvers
    from verlsweep.plan import from_cfg

    setup_globals()                     # Hydra's ${now:} and the ${verlsweep.*:} the saved config holds
    resolvers.register()                # unresolved, as a job's .hydra/config.yaml does
    return from_cfg(OmegaConf.load(config_yaml))


def run_trial(cfg: DictConfig, knobs: dict[str, Any]) -> TrialResult:
    """One trial of the stand-in: vetoed as task.py's preflight would, else measured and recorded."""
    import time

    from verlsweep.plan import from_cfg, predict_cfg
    from verlsweep.tracking.mlflow_runs import TrialRun
    from verlsweep.tracking.system_metrics import DevicePeak

    planned = predict_cfg(cfg)          # under plan.calibration: the sweep's calibration when it has one
    if not planned.feasible:
        return TrialResult("infeasible", predicted_peak_gb=planned.predicted_peak_gb, excerpt=planned.reason,
                           backend="test", predicted=planned.metrics())
    stack = ",".join(f"{k}={v}" for k, v in read_stack().items())
    tracked = TrialRun.start(cfg, knobs, extra_tags=stack_tags(read_stack()))
    inputs = from_cfg(cfg)
    mean, oom = at_mean_lengths(inputs, stack), peaks_at(inputs, stack).oom
    if oom:
        result = TrialResult("oom", backend="test", excerpt="RuntimeError: NPU out of memory (stand-in truth)",
                             failure_phase="kv_cache", predicted=planned.metrics())
    else:
        for step in range(1, int(cfg.trial.steps) + 1):
            tracked.client.log_metric(tracked.run_id, "perf/throughput", mean.tok_s, step=step)
            # verl's allocator peak per step, what the trainer band calibrates on
            tracked.client.log_metric(tracked.run_id, "actor/perf/max_memory_allocated_gb", mean.trainer_peak_gb,
                                      step=step)
        result = TrialResult("completed", objective=mean.tok_s, steps=int(cfg.trial.steps), backend="test",
                             predicted=planned.metrics())
    peak = None if oom else DevicePeak(mean.device_peak_gb, "0", time.time())
    tracked.finish(result, reason=result.outcome, device_peak=peak)
    return result
