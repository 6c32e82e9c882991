"""report.html: one self-contained page (images inline as base64, plotly.js inline: opens offline) and
the same facts as text for the terminal."""
from __future__ import annotations

import base64
import html
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any

from verlsweep.common.files import write_atomic
from verlsweep.common.labels import figure, short
from verlsweep.common.names import FROM_STUDY_ATTR, RECIPE_ATTR
from verlsweep.report.data import PREDICTED_PEAK, PREDICTED_TOK_S, Row, Sweep
from verlsweep.report.frontier import Combo, Side, combos, region_text
from verlsweep.report.plots import Plot, draw

REPORT_HTML = "report.html"
BEST_LAUNCH = "best_launch.sh"      # written by the sweeper beside trials.csv and best.yaml

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#212529}
table{border-collapse:collapse;font-size:13px;margin:.5em 0}
td,th{border:1px solid #dee2e6;padding:2px 8px;text-align:right}
td.l,th.l{text-align:left}tr.best{background:#ebfbee;font-weight:600}
pre{background:#f8f9fa;padding:1em;overflow-x:auto;font-size:12px}
img{max-width:100%;border:1px solid #dee2e6}.note{color:#868e96}
"""


def _num(value: Any, fmt: str | None = None) -> str:
    """A number of the report: as every view shows it (labels.figure), or in `fmt` (a peak's `.1f`)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return "-"
    return figure(value) if fmt is None else format(value, fmt)


def _util(sweep: Sweep, value: Any) -> str:
    return "-" if value is None else sweep.shown(sweep.util_param() or "", value)


def status_text(sweep: Sweep) -> str:
    """`12 of 30 trials; best objective 391.5 (t02 util=0.70 tp=1 off=p); completed 8, oom 3`"""
    done = len(sweep.finished())          # of the n_trials: no confirmation, no stopped trial re-run
    long_run = sum(1 for r in sweep.rows if r.confirms is not None)
    total = f" of {sweep.n_trials}" if sweep.n_trials else ""
    best = sweep.best()
    best_text = (f"best {sweep.objectives[0]} {_num(best.measured[0])} (t{best.number:02d} {best.knobs})"
                 if best else "no measured trial yet")
    running = sum(1 for r in sweep.rows if r.outcome == "running")
    waiting = sum(1 for r in sweep.rows if r.counted and r.outcome == "waiting")
    outcomes = ", ".join(f"{k} {v}" for k, v in sweep.outcomes(sweep.finished()).items())
    # stopped (Ctrl-C, a dead sweep): its re-run counts instead
    rerun = sum(1 for r in sweep.rows if not r.counted and r.confirms is None)
    plural = "" if long_run == 1 else "s"
    return (f"study {sweep.study.study_name}: {done}{total} trials done"
            f"{f' (+{long_run} long-run confirmation{plural})' if long_run else ''}"
            f"{f', {running} running' if running else ''}{f', {waiting} waiting' if waiting else ''}; "
            f"{best_text}; {outcomes or 'no trials'}{f' ({rerun} stopped and re-run)' if rerun else ''}")


def launch_file(sweep: Sweep, sweep_dir: Path | None) -> Path | None:
    """The sweep's best_launch.sh: in the dir given, else in the dir its trials ran in."""
    for folder in (sweep_dir, sweep.sweep_dir()):
        if folder is not None and (folder / BEST_LAUNCH).is_file():
            return folder / BEST_LAUNCH
    return None


def launch_command(sweep: Sweep, sweep_dir: Path | None) -> str | None:
    path = launch_file(sweep, sweep_dir)
    return path.read_text() if path is not None else None


def chained_text(study: Any) -> str | None:
    """`started from study S, trial N (...)` for a study started with study.from_study, else None."""
    link = study.user_attrs.get(FROM_STUDY_ATTR)
    if not isinstance(link, dict):
        return None
    params = dict(link.get("params") or {})
    # each knob by its shortest unique suffix: the actor's and the ref's param_offload apart
    knobs = ", ".join(f"{short(k, list(params))}={v}" for k, v in params.items())
    return (f"started from study {link.get('study_name')}, trial {link.get('trial_number')} "
            f"({link.get('source')}); its knobs fixed unless swept here: {knobs}")


def recipe_text(study: Any) -> str | None:
    """`recipe script P (sha256 H)` for a study of a recipe script (recipe=run.sh), else None."""
    recipe = study.user_attrs.get(RECIPE_ATTR)
    if not isinstance(recipe, dict):
        return None
    return f"recipe script {recipe.get('path')} (sha256 {recipe.get('sha256')}), run as it is with the swept knobs"


def text_summary(sweep: Sweep, sweep_dir: Path | None = None) -> str:
    lines = [status_text(sweep), *([chained] if (chained := chained_text(sweep.study)) else []),
             *([recipe] if (recipe := recipe_text(sweep.study)) else [])]
    best = sweep.best()
    if best is not None:
        lines.append(f"best trial {best.number}: " + ", ".join(
            f"{n}={_num(v)}" for n, v in zip(sweep.objectives, best.measured)))
        lines += [f"  {k}={sweep.shown(k, v)}" for k, v in best.params.items()]
    for c in combos(sweep):
        sides = [(what, side) for what, side in (("completed up to", c.highest_fit),
                                                  ("failed above at", c.failed_above),
                                                  ("failed below at", c.failed_below)) if side is not None]
        if sides:     # a combination with only pruned or crashed trials says nothing about memory
            lines.append(f"{c.label}: " + "; ".join(f"{what} {_side(sweep, side, brief=True)}" for what, side in sides))
    launch = launch_file(sweep, sweep_dir)
    if launch is not None and launch.read_text():
        lines.append(f"launch the long run: bash {launch}")
    return "\n".join(lines)


def _side(sweep: Sweep, side: Side | None, brief: bool = False) -> str:
    """`0.85 (t07: OOM at vLLM start)`; `-` for no such trial."""
    if side is None:
        return "-"
    why = side.brief if brief else side.reason
    return f"{_util(sweep, side.util)} (t{side.trial:02d}{': ' + why if why else ''})"


def _table(head: list[str], rows: list[list[str]], left: set[int], best_rows: AbstractSet[int] = frozenset()) -> str:
    th = "".join(f"<th class='{'l' if i in left else ''}'>{html.escape(h)}</th>" for i, h in enumerate(head))
    body = []
    for n, row in enumerate(rows):
        tds = "".join(f"<td class='{'l' if i in left else ''}'>{html.escape(c)}</td>" for i, c in enumerate(row))
        body.append(f"<tr class='{'best' if n in best_rows else ''}'>{tds}</tr>")
    return f"<table><tr>{th}</tr>{''.join(body)}</table>"


def _trials_table(sweep: Sweep, best: Row | None) -> str:
    # runner=estimate: the peak is the planner's, and the same for every trial of one model
    peak = "predicted peak GB" if sweep.estimated() else "peak GB"
    head = ["#", "outcome", *sweep.objectives, peak, "s", *[sweep.short(p) for p in sweep.param_names]]
    rows, marks = [], set()
    for i, r in enumerate(sweep.rows):
        values = [_num(v) for v in r.values] if r.values else ["-"] * len(sweep.objectives)
        rows.append([str(r.number), r.shown_outcome, *values, _num(r.peak_gb, ".1f"), _num(r.duration_s, ".1f"),
                     *[sweep.shown(p, r.params[p]) if p in r.params else "" for p in sweep.param_names]])
        if best is not None and r.number == best.number:
            marks.add(i)
    return _table(head, rows, {1, *range(len(head) - len(sweep.param_names), len(head))}, marks)


def _device_peak(row: Row) -> str:
    peak = row.predicted_device_peak
    return f"{peak[0]:.1f} {peak[1]}" if peak else "-"


def _predictions_table(sweep: Sweep) -> str:
    # the device peak (its phase named) moves with util, TP and offload; the trainer's allocator peak, what
    # verl logs as perf/max_memory_allocated_gb and the measured "peak GB" is, does not move with util
    head = ["#", "outcome", "knobs", "predicted tok/s", "predicted peak GB (phase)", "predicted trainer peak GB",
            sweep.objectives[0], "peak GB"]
    rows = [[str(r.number), r.shown_outcome, r.knobs, _num(r.predicted.get(PREDICTED_TOK_S)), _device_peak(r),
             _num(r.predicted.get(PREDICTED_PEAK), ".1f"), _num(r.measured[0]) if r.measured else "-",
             _num(r.peak_gb, ".1f")] for r in sweep.rows if r.predicted]
    if not rows:
        return "<p class='note'>no trial carries the planner's prediction</p>"
    if sweep.estimated():
        # runner=estimate measures nothing: its objective and peak are these predictions again
        return ("<p class='note'>runner=estimate: the objective and peak are the planner's prediction</p>"
                + _table(head[:-2], [r[:-2] for r in rows], {1, 2, 4}))
    return _table(head, rows, {1, 2, 4})


def _frontier_tables(sweep: Sweep, items: list[Combo]) -> str:
    if not items:
        return "<p class='note'>the search space does not vary gpu_memory_utilization</p>"
    band = _table(["tp / offloads", "highest util that completed", "lowest util above it that failed (why)",
                   "highest util below the band that failed (why)", "trials"],
                  [[c.label, _side(sweep, c.highest_fit), _side(sweep, c.failed_above), _side(sweep, c.failed_below),
                    str(c.trials)] for c in items], {0, 1, 2, 3})
    shown = lambda u: _util(sweep, u)  # noqa: E731
    proven = [[c.label, region_text(r, c.grid, shown)] for c in items for r in c.regions]
    regions = (_table(["tp / offloads", "what the finished trials prove (verlsweep.proofs.rules)"], proven, {0, 1})
               if proven else "<p class='note'>no finished trial proves anything about its neighbours yet</p>")
    return f"{band}<h3>Proven fit / proven fail</h3>{regions}"


def _plot_section(plot: Plot) -> str:
    parts = [f"<h3>{html.escape(plot.title)}</h3>"]
    if plot.png is not None and plot.png.is_file():
        data = base64.b64encode(plot.png.read_bytes()).decode()
        parts.append(f"<img class='plot' alt='{html.escape(plot.name)}' src='data:image/png;base64,{data}'>")
    if plot.html:
        parts.append(f"<details><summary>interactive</summary><div class='plotly-plot'>{plot.html}</div></details>")
    if plot.note:
        parts.append(f"<p class='note'>not drawn: {html.escape(plot.note)}</p>")
    return "".join(parts)


def render(sweep: Sweep, plots: list[Plot], sweep_dir: Path | None) -> str:
    best = sweep.best()
    launch = launch_command(sweep, sweep_dir)
    best_html = "<p>no measured trial yet</p>"
    if best is not None:
        values = ", ".join(f"{n} = {_num(v)}" for n, v in zip(sweep.objectives, best.measured))
        knobs = "".join(f"{k}={sweep.shown(k, v)}\n" for k, v in best.params.items())
        best_html = (f"<p>trial {best.number} ({html.escape(best.knobs)}): {html.escape(values)}</p>"
                     f"<pre>{html.escape(knobs)}</pre>")
        best_html += f"<p>long run: {html.escape(best.long_run or 'not confirmed at the maximum lengths')}</p>"
        best_html += "".join(f"<p class='note'>trial {r.number}: {html.escape(r.long_run)}</p>" for r in sweep.rows
                             if r.long_run and r.number != best.number)
    # collapsed, after the plots: a ~60-line script must not fill the first screen
    launch_html = (f"<details id='launch-details'><summary>Launch command (best_launch.sh, "
                   f"{len(launch.splitlines())} lines)</summary><pre id='launch'>{html.escape(launch)}</pre></details>"
                   if launch else "<p class='note'>no best_launch.sh yet</p>")
    chained = chained_text(sweep.study)
    chained_html = f"<p id='chained'>{html.escape(chained)}</p>" if chained else ""
    if (recipe := recipe_text(sweep.study)) is not None:
        chained_html += f"<p id='recipe'>{html.escape(recipe)}</p>"
    plotly = ""
    if any(p.html for p in plots):
        from plotly.offline import get_plotlyjs

        plotly = f"<script>{get_plotlyjs()}</script>"
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>verlsweep: {html.escape(sweep.study.study_name)}"
            f"</title><style>{_STYLE}</style>{plotly}</head><body>"
            f"<h1>{html.escape(sweep.study.study_name)}</h1><p>{html.escape(status_text(sweep))}</p>"
            f"{chained_html}"
            f"<h2>Best config</h2>{best_html}"
            f"<h2>Plots</h2>{''.join(_plot_section(p) for p in plots)}"
            f"<h2>Launch the long run</h2>{launch_html}"
            f"<h2>OOM frontier per TP</h2>{_frontier_tables(sweep, combos(sweep))}"
            f"<h2>Planner's predictions and the measurements</h2>{_predictions_table(sweep)}"
            f"<h2>Trials</h2>{_trials_table(sweep, best)}</body></html>")


def write(sweep: Sweep, out_dir: Path) -> list[Path]:
    """report.html and the plots into `out_dir`; returns what was written (the sweep logs it to MLflow)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    plots = draw(sweep, out_dir)
    path = out_dir / REPORT_HTML
    write_atomic(path, render(sweep, plots, out_dir))
    return [path, *(p.png for p in plots if p.png is not None)]
