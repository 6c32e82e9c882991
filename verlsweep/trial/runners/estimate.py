"""runner=estimate: the trial's measurement is the planner's prediction, with optional seeded noise.

Nothing is launched and no model or data file is read, so a whole sweep runs in seconds on a machine
without accelerators. The trial otherwise looks like a real one: verl-style per-step metrics (written
to $VERL_FILE_LOGGER_PATH in verl's file-logger format and reported to the sweeper step by step), the
objective aggregated the same way (verlsweep.trial.metrics), and the outcome a real run would end in:
`completed`, `oom` when the planner predicts a constraint does not fit (with the error text that
constraint produces in verl/vLLM), `infeasible` when plan.enforce would have stopped it before launch,
`pruned` when the sweeper says so. The prediction is the prepared trial's (RunSpec.clearance): the planner
ran once, before launch (verlsweep.prepare), and is not asked again here.
"""
from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Mapping
from pathlib import Path

from verlsweep.common.errors import ConfigError, Problem
from verlsweep.common.names import FILE_LOGGER_ENV, METRICS_FILE, MLFLOW_RUN_ID_ENV, PEAK_MEMORY_METRIC, TRIAL_DIR_ENV
from verlsweep.common.result import PLAN_CHECK_PHASES, StepReporter, TrialResult
from verlsweep.common.time_split import PHASES, predicted_split
from verlsweep.config import EstimateRunnerConfig, Hardware, Objective
from verlsweep.plan import Verdict
from verlsweep.trial import metrics
from verlsweep.trial.runners.base import RunDetails, RunOutput, RunSpec

PLAN_FILE = "plan.json"

# The metrics each estimated step carries (verl's names, verl/trainer/ppo/metric_utils.py and
# engine_workers.py); the objective must be one of them.
STEP_METRICS = (
    "perf/throughput", "perf/time_per_step", "perf/total_num_tokens", "timing_s/step",
    *(f"timing_s/{phase}" for phase in PHASES), PEAK_MEMORY_METRIC,
    "prompt_length/mean", "response_length/mean",
)


class EstimateRunner:
    name = "estimate"
    uses_devices = False         # nothing runs on a device, so no device monitor
    needs_files = False          # model/data paths need not exist (build_command require_paths), and no
                                 # Ray starts here, so this machine's CPUs are not checked

    def problems(self, spec: RunSpec) -> list[Problem]:
        """An objective it does not predict, a config the planner cannot model: every such trial would
        end config_error, so prepare() refuses it before the study (or the single run's MLflow run)."""
        objective = spec.objective
        found = []
        unknown = [m for m in (objective.metric, *objective.extra) if m not in STEP_METRICS]
        if unknown:
            found.append(Problem("objective.metric" if objective.metric in unknown else "objective.extra",
                                 unknown, f"metrics runner=estimate predicts: {', '.join(STEP_METRICS)}"))
        if spec.clearance.memory is None:
            found.append(Problem("runner.name", "estimate",
                                 f"a config the planner models ({spec.clearance.unplannable})"))
        return found

    def run(self, spec: RunSpec, reporter: StepReporter, env: Mapping[str, str]) -> RunOutput:
        started = time.monotonic()
        if found := self.problems(spec):
            raise ConfigError(found)
        objective, verdict = spec.objective, spec.clearance.memory
        assert verdict is not None

        trial_dir = Path(env.get(TRIAL_DIR_ENV) or ".")
        artifacts = [self._write_plan(trial_dir, verdict)]
        step_log = metrics.StepLog()

        if spec.clearance.enforce and not verdict.feasible:
            # never ran: nothing measured; the prediction is kept apart from measurements
            return self._done(TrialResult("infeasible", excerpt=verdict.reason, backend=self.name,
                                          predicted_peak_gb=verdict.predicted_peak_gb), started,
                              f"predicted infeasible ({verdict.binding})", step_log, artifacts, env)

        options = spec.options
        assert isinstance(options, EstimateRunnerConfig)
        rng = random.Random(options.seed * 1_000_003 + int(spec.trial_number or 0))
        steps = spec.steps
        # a real run stops at the binding constraint: before step 1, or when vLLM wakes for step 2
        # (an edge probe too: the estimate is the planner's own prediction, not the favourable end of its band)
        completes = steps if verdict.fits else (1 if verdict.binding == "rollout" else 0)
        logger = Path(env[FILE_LOGGER_ENV]) if env.get(FILE_LOGGER_ENV) else trial_dir / METRICS_FILE
        logger.parent.mkdir(parents=True, exist_ok=True)
        outcome, reason = "completed", f"estimated {steps} step(s)"
        noise, slowdown, step_seconds = options.noise, options.first_step_slowdown, options.step_seconds
        with logger.open("a") as out:
            for step in range(1, completes + 1):
                data = step_metrics(verdict, step, rng, noise, slowdown)
                out.write(json.dumps({"step": step, "data": data}) + "\n")
                out.flush()
                step_log.add(step, data, "file")
                if step_seconds > 0:
                    time.sleep(step_seconds)
                if reporter.report(step, data[objective.metric]):
                    outcome, reason = "pruned", f"pruned by the sweeper after step {step}"
                    break
        artifacts.append(logger)

        excerpt, phase = None, None
        if not verdict.fits and outcome != "pruned":
            outcome, reason = "oom", f"predicted {verdict.binding} does not fit"
            phase = PLAN_CHECK_PHASES.get(verdict.binding)
            excerpt = f"{verdict.reason}\n(predicted) {failure_text(verdict, spec)}"
        result = TrialResult(
            outcome=outcome,
            objective=_aggregate(step_log, objective, objective.metric),
            peak_memory_gb=step_log.peak_memory_gb(),     # None when no step ran, as in a real run
            metrics={m: v for m in objective.extra if (v := _aggregate(step_log, objective, m)) is not None},
            steps=len(step_log), excerpt=excerpt, backend=self.name, failure_phase=phase,
        )
        return self._done(result, started, reason, step_log, artifacts, env)

    @staticmethod
    def _done(result: TrialResult, started: float, reason: str, step_log: metrics.StepLog,
              artifacts: list[Path], env: Mapping[str, str]) -> RunOutput:
        result.run_id = env.get(MLFLOW_RUN_ID_ENV)
        result.duration_s = time.monotonic() - started
        return RunOutput(result, RunDetails(reason=reason, step_log=step_log, artifacts=artifacts))

    @staticmethod
    def _write_plan(trial_dir: Path, verdict: Verdict) -> Path:
        trial_dir.mkdir(parents=True, exist_ok=True)
        path = trial_dir / PLAN_FILE
        path.write_text(json.dumps(verdict.to_dict(), indent=2, default=float) + "\n")
        return path


def _aggregate(step_log: metrics.StepLog, objective: Objective, metric: str) -> float | None:
    return metrics.objective(step_log, metric, objective.aggregate, objective.warmup_steps)


def step_metrics(verdict: Verdict, step: int, rng: random.Random, noise: float,
                 first_step_slowdown: float) -> dict[str, float]:
    """One step's verl-style metrics from the prediction. Step 1 is slower (graph capture, compile,
    first weight sync), which is why objectives skip warm-up steps; noise is a seeded log-normal factor
    on the step time."""
    factor = math.exp(rng.gauss(0.0, noise)) if noise > 0 else 1.0
    if step == 1:
        factor *= first_step_slowdown
    step_s = verdict.step_s * factor
    tokens = verdict.tok_s * verdict.step_s * verdict.world
    split = predicted_split(verdict.time_s)
    return {
        "perf/throughput": tokens / (step_s * verdict.world),
        "perf/time_per_step": step_s,
        "perf/total_num_tokens": tokens,
        "timing_s/step": step_s,
        # verl logs a phase only when the step has it (no ref without KL, no values without a critic)
        **{f"timing_s/{phase}": split[phase] * factor for phase in PHASES if phase in split},
        PEAK_MEMORY_METRIC: verdict.predicted_peak_gb,
        "prompt_length/mean": verdict.prompt_tokens,
        "response_length/mean": verdict.response_tokens,
    }


def failure_text(verdict: Verdict, spec: RunSpec) -> str:
    """The error a real run would print at the binding constraint (docs/ascend.md, Error signatures;
    the texts and their sources are the rows of verlsweep.common.patterns)."""
    check = verdict.checks[verdict.binding]
    hardware: Hardware = spec.hardware
    # the planner has read hbm_usable_gb to predict at all; its capacity is the fallback
    total = hardware.hbm_usable_gb if hardware.hbm_usable_gb is not None else verdict.capacity_gb
    if verdict.binding == "vllm_start":
        util = float(spec.verl["actor_rollout_ref.rollout.gpu_memory_utilization"])
        free = check.limit - (check.need - util * total)
        return (f"ValueError: Free memory on device ({free:.2f}/{total:.2f} GiB) on startup is less than desired "
                f"GPU memory utilization ({util}, {util * total:.2f} GiB). Decrease GPU memory utilization or "
                "reduce GPU memory used by other processes.")
    if verdict.binding == "kv_cache":
        return ("ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` "
                "when initializing the engine.")
    if verdict.binding == "host_memory":
        used, limit = check.need, check.limit
        return (f"ray.exceptions.OutOfMemoryError: 1 worker(s) were killed due to the node running low on memory. "
                f"Memory on the node (IP: 127.0.0.1, ID: 0) was {used:.2f}GB used / {limit:.2f}GB limit "
                f"({used / max(limit, 1e-9):.3f})")
    device = "NPU" if hardware.device == "npu" else "CUDA"
    short = check.need - check.limit
    return (f"torch.OutOfMemoryError: {device} out of memory. Tried to allocate {max(short, 0.01):.2f} GiB "
            f"({device} 0; {total:.2f} GiB total capacity; {max(check.limit - 1.0, 0):.2f} GiB already allocated)")
