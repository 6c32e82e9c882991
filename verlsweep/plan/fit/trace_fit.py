"""Re-fit the analytic trainer formula to traces over a grid of shapes (`python -m verlsweep.plan
refit --traces`).

The analytic formula (verlsweep.plan.predictor.trainer_memory: activations and logits of one micro batch) is the
planner's fallback when a trace cannot run (plan.trainer=analytic, no Hugging Face config, a trace past
its time limit). Its constants are fitted here to what the tracer (verlsweep.plan.trace.trainer_trace)
measures for every conf/model group on a grid of passes: the actor update with and without gradient
checkpointing, the old log-prob (forward, entropy) and the ref log-prob (forward, no entropy), each at
a different micro-batch token count. A sample's number is the pass's work (activations + logits +
temporaries, GiB per device); the residual is log(analytic / traced), so each shape weighs the same
whatever its size. Parameters, gradients and Adam's moments are exact arithmetic in both (the state
trace reproduces them byte for byte) and are left out of the fit; the peaks reported add them and
what FSDP gathers, which are the same in both, so a peak's error is smaller than its work's.

Held out: each model group is predicted by constants fitted to the other groups only (leave one group
out), so the per-group error is measured on shapes the fit never saw.
"""
from __future__ import annotations

import json
import statistics
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from verlsweep.common.names import GIB
from verlsweep.plan.fit import calibration_file, least_squares
from verlsweep.plan.predictor import calibration
from verlsweep.plan.predictor.calibration import Calibration, Constants
from verlsweep.plan.predictor.trial_spec import PlanInputs, Role

# the constants of trainer_memory._activations / _logits the traces inform
FITTED = ("activation_factor", "logits_bytes", "forward_logits_bytes")
_BOUNDS = (1e-3, 100.0)      # for a constant calibration.yaml gives no bounds


@dataclass(frozen=True)
class Shape:
    """One traced pass of the grid: which role's pass, tokens per micro batch on a device, checkpointing."""

    phase: str                  # actor_update | log_prob | ref
    tokens: int
    grad_ckpt: bool = False

    @property
    def update(self) -> bool:
        return self.phase == "actor_update"

    @property
    def label(self) -> str:
        ckpt = " ckpt" if self.grad_ckpt else (" no-ckpt" if self.update else "")
        return f"{self.phase}{ckpt} {self.tokens}"


# 4 passes x 8 groups = 32 traces, ~9 min cold on two shared CPU cores (docs/benchmarks.md). Token
# counts are powers of two, so they are points of traced_terms.grid_tokens and the planner's own
# traces of the same shapes hit the cache.
SHAPES = (Shape("actor_update", 4096, grad_ckpt=True), Shape("actor_update", 2048, grad_ckpt=False),
          Shape("log_prob", 16384), Shape("ref", 8192))


@dataclass(frozen=True)
class TraceSample:
    group: str
    shape: Shape
    inputs: PlanInputs
    role: Role
    traced_gb: float            # the traced work of the pass
    fixed_gb: float             # states on the device + gathered units: the same in both models
    seconds: float
    cached: bool


def role_for(inp: PlanInputs, shape: Shape) -> Role:
    """The role whose pass `shape` is: the actor (its update with shape's checkpointing, or its old
    log-prob), or the ref (the actor's shapes, frozen, when the algorithm has none)."""
    if shape.phase == "ref":
        return inp.ref or replace(inp.actor, name="ref", trains=False)
    if shape.update:
        return replace(inp.actor, grad_ckpt=shape.grad_ckpt)
    return inp.actor


def _fixed_gb(inp: PlanInputs, role: Role, c: Constants, *, update: bool) -> float:
    from verlsweep.plan.predictor.trainer_memory import analytic_work, states_on_device

    return (sum(states_on_device(role, update=update).values())
            + analytic_work(inp, role, 0.0, c, update=update)["gathered"])


def group_inputs(groups: Iterable[str] | None = None) -> dict[str, PlanInputs]:
    """The planner's inputs for each conf/model group (a2_64g, remax: the recipe the planner seeds)."""
    from verlsweep import CONF_DIR
    from verlsweep.command.compose import compose_config
    from verlsweep.plan.predictor.inputs import from_cfg

    names = list(groups) if groups else sorted(p.stem for p in (CONF_DIR / "model").glob("*.yaml"))
    return {g: replace(from_cfg(compose_config(["hardware=a2_64g", "algorithm=remax", f"model={g}"])),
                       trainer="analytic") for g in names}


def trace_grid(cal: Calibration, groups: Iterable[str] | None = None, shapes: Iterable[Shape] = SHAPES, *,
               limit_s: float = 300.0, log=print) -> list[TraceSample]:
    """Trace every shape for every group (from the disk cache when traced before)."""
    from verlsweep.plan.predictor.traced_terms import pass_spec
    from verlsweep.plan.trace import trainer_trace

    out = []
    for group, inp in group_inputs(groups).items():
        if inp.model.hf_config is None:
            log(f"{group}: no Hugging Face config, skipped")
            continue
        config = json.loads(inp.model.hf_config)
        for shape in shapes:
            role = role_for(inp, shape)
            start = time.perf_counter()
            traced = trainer_trace.trace_pass(config, pass_spec(role, shape.tokens, update=shape.update),
                                              limit_s=limit_s)
            took = time.perf_counter() - start
            out.append(TraceSample(group, shape, inp, role, traced.work_bytes / GIB,
                                   _fixed_gb(inp, role, cal.constants, update=shape.update), took, traced.cached))
            log(f"  traced {group:22s} {shape.label:26s} {traced.work_bytes / GIB:7.2f} GiB  "
                f"{'cache' if traced.cached else f'{took:.0f} s'}")
    return out


def analytic_gb(sample: TraceSample, c: Constants) -> float:
    """The analytic formula's work for the sample's pass: activations + logits."""
    from verlsweep.plan.predictor.trainer_memory import analytic_work

    terms = analytic_work(sample.inputs, sample.role, sample.shape.tokens, c, update=sample.shape.update)
    return sum(v for k, v in terms.items() if k != "gathered")


def fit_constants(cal: Calibration, samples: list[TraceSample], names: tuple[str, ...] = FITTED,
                  start: Constants | None = None) -> Constants:
    """Least squares of log(analytic / traced) work over the samples, within calibration.yaml's bounds."""
    return least_squares.solve(start or cal.constants, names, samples, analytic_gb, lambda s: s.traced_gb,
                               bounds=cal.bounds, default_bounds=_BOUNDS)


@dataclass(frozen=True)
class GroupError:
    group: str
    work: list[float]           # analytic / traced - 1, per shape
    peak: list[float]

    @staticmethod
    def of(group: str, samples: list[TraceSample], c: Constants) -> GroupError:
        work = [analytic_gb(s, c) / s.traced_gb - 1 for s in samples]
        peak = [(s.fixed_gb + analytic_gb(s, c)) / (s.fixed_gb + s.traced_gb) - 1 for s in samples]
        return GroupError(group, work, peak)


def _worst(xs: list[float]) -> float:
    return max(xs, key=abs)


def by_group(samples: list[TraceSample]) -> dict[str, list[TraceSample]]:
    out: dict[str, list[TraceSample]] = {}
    for s in samples:
        out.setdefault(s.group, []).append(s)
    return out


def held_out(cal: Calibration, samples: list[TraceSample]) -> dict[str, GroupError]:
    """Each group's error with constants fitted to the other groups only."""
    groups = by_group(samples)
    return {g: GroupError.of(g, mine, fit_constants(cal, [s for s in samples if s.group != g])
                             if len(groups) > 1 else cal.constants)
            for g, mine in groups.items()}


def report(cal: Calibration, samples: list[TraceSample], fitted: Constants,
           log=print) -> dict[str, dict[str, GroupError]]:
    """Per group: the packaged constants, the fit (in-sample) and leave-one-group-out (held out)."""
    groups = by_group(samples)
    tables = {"packaged": {g: GroupError.of(g, s, cal.constants) for g, s in groups.items()},
              "fitted": {g: GroupError.of(g, s, fitted) for g, s in groups.items()},
              "held out": held_out(cal, samples)}
    log(f"\nanalytic vs traced, per model group ({len(samples) // max(1, len(groups))} passes each): "
        "worst / median of analytic / traced - 1")
    log(f"{'model group':22s} " + " ".join(f"{name + ' work':>22s} {name + ' peak':>22s}" for name in tables))
    for g in groups:
        cells = []
        for t in tables.values():
            e = t[g]
            cells.append(f"{_worst(e.work):+10.1%} {statistics.median(e.work):+10.1%} "
                         f"{_worst(e.peak):+10.1%} {statistics.median(e.peak):+10.1%}")
        log(f"{g:22s} " + " ".join(cells))
    for name, t in tables.items():
        work = [x for e in t.values() for x in e.work]
        peak = [x for e in t.values() for x in e.peak]
        log(f"{name:9s}: worst work {_worst(work):+.1%} (median |.| {statistics.median(map(abs, work)):.1%}), "
            f"worst peak {_worst(peak):+.1%} (median |.| {statistics.median(map(abs, peak)):.1%})")
    log("\nper shape, fitted constants (analytic / traced - 1 of the work):")
    for s in samples:
        log(f"  {s.group:22s} {s.shape.label:26s} traced {s.traced_gb:7.2f}  analytic "
            f"{analytic_gb(s, fitted):7.2f}  {analytic_gb(s, fitted) / s.traced_gb - 1:+6.1%}")
    return tables


def write_constants(path: Path, fitted: Constants, note: str, names: tuple[str, ...] = FITTED) -> None:
    """Set the fitted values in a calibration YAML in place, keeping its comments, with a comment
    under each value that cites the fit."""
    calibration_file.write(calibration.load(path), fitted, path, names=names, comment=f"fitted to traces: {note}",
                           digits=4)
