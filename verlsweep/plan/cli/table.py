"""The planner over a grid of rollout memory knobs: gpu_memory_utilization x rollout TP x offload."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from verlsweep.common.names import EDGE_PROBE
from verlsweep.plan.predictor import band
from verlsweep.plan.predictor.calibration import Calibration
from verlsweep.plan.predictor.trial_spec import PlanInputs
from verlsweep.plan.predictor.verdict import Verdict, predict

DEFAULT_UTILS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
OFFLOADS = ((True, True), (True, False), (False, True), (False, False))   # (param, optimizer)
_STATUS_STYLE = {"ok": "green", "tight": "yellow", "edge": "magenta", "infeasible": "red"}
_RANK = {"ok": 0, "tight": 1, "edge": 2, "infeasible": 3}


@dataclass
class Row:
    util: float
    tp: int
    param_offload: bool
    optimizer_offload: bool
    verdict: Verdict
    current: bool


def grid(inp: PlanInputs, cal: Calibration, *, utils: Iterable[float], tps: Iterable[int],
         offloads: Iterable[tuple[bool, bool]] = OFFLOADS) -> list[Row]:
    """One plan per knob combination, best first: fits before tight before edge probes before
    infeasible, then tokens/s."""
    now = (inp.rollout.util, inp.rollout.tp, inp.actor.param_offload, inp.actor.optimizer_offload)
    rows = []
    for util in utils:
        for tp in tps:
            for p_off, o_off in offloads:
                variant = inp.with_knobs(util=util, tp=tp, param_offload=p_off, optimizer_offload=o_off)
                key = (round(util, 4), tp, p_off, o_off)
                rows.append(Row(util, tp, p_off, o_off, predict(variant, cal),
                                key == (round(now[0], 4), *now[1:])))
    rows.sort(key=lambda r: (_RANK[r.verdict.status], -r.verdict.tok_s))
    return rows


def _phase_columns(rows: list[Row]) -> list[str]:
    seen: list[str] = []
    for row in rows:
        for name in row.verdict.phases:
            if name not in seen:
                seen.append(name)
    order = ("rollout", "log_prob", "ref", "values", "critic_update", "actor_update", "vllm_start")
    return [p for p in order if p in seen]


_SHORT = {"rollout": "rollout", "log_prob": "logprob", "ref": "ref", "values": "values",
          "critic_update": "critic", "actor_update": "actor", "vllm_start": "start"}


def render(inp: PlanInputs, rows: list[Row], console: Console | None = None, *, limit: int | None = None,
           rollout_error: float = band.ROLLOUT_ERROR) -> None:
    """The table of `rows`; `rollout_error`: the band of the other modelled terms the rows were planned with
    (the calibration's rollout_band_error; the trainer's is each verdict's own)."""
    console = console or Console()
    hw, m = inp.hardware, inp.model
    console.print(
        f"[bold]{m.name}[/] {inp.algorithm} on [bold]{hw.name}[/] ({hw.world} devices, "
        f"{hw.capacity_gb:.1f} GiB usable each, margin {inp.margin_gb:g} GiB) - batch {inp.train_batch_size} "
        f"x n {inp.rollout.n}, prompt/response {inp.max_prompt_length}/{inp.max_response_length}. "
        "Peaks: GiB per device, every sequence at its max length; tok/s: perf/throughput per device."
    )
    if rows:
        console.print(f"Trainer activations, logits and optimizer step: {rows[0].verdict.trainer}"
                      + (" (from the model code on fake tensors; plan.trainer=analytic for the formula)"
                         if rows[0].verdict.trainer == "traced" else "") + ".")
    phases = _phase_columns(rows)
    table = Table(show_lines=False)
    for col in ("util", "TP", "offload p/o", *(_SHORT[p] for p in phases), "binding", "status", "tok/s"):
        table.add_column(col, justify="right" if col not in ("binding", "status", "offload p/o") else "left",
                         no_wrap=True)
    shown = rows if limit is None else rows[:limit]
    for r in shown:
        v = r.verdict
        style = _STATUS_STYLE[v.status]
        mark = "*" if r.current else ""
        offload = f"{'T' if r.param_offload else 'F'}/{'T' if r.optimizer_offload else 'F'}"
        table.add_row(
            f"{mark}{r.util:.2f}", str(r.tp), offload,
            *[f"{v.phases[p]:.1f}" if p in v.phases else "-" for p in phases],
            v.binding, f"[{style}]{EDGE_PROBE if v.edge_probe else v.status}[/]", f"{v.tok_s:.0f}",
        )
    console.print(table)
    if limit is not None and len(rows) > limit:
        console.print(f"... {len(rows) - limit} more rows (--all shows them)")
    console.print("* the composed config's own knobs. ok: fits with the margin; tight: only without it; "
                  f"{EDGE_PROBE}: does not fit as predicted but does at the favourable end of the planner's "
                  "error band (trainer terms "
                  f"±{rows[0].verdict.trainer_error if rows else 0:.1%}, "
                  f"other modelled terms ±{rollout_error:.1%}): "
                  "launched, named so; infeasible: does not fit even there (preflight skips it when "
                  "plan.enforce). Columns are phases: "
                  "start = vLLM's start check, rollout = generation with the trainer's residency, "
                  "logprob/ref/values = forward passes, actor/critic = updates.")
