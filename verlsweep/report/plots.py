"""The sweep's plots: PNG files (matplotlib, no browser needed) and, where Optuna draws it with plotly,
an interactive HTML fragment for the report.

Optuna's visualization module draws what it has (optimization history with the best-so-far line,
parallel coordinates, parameter importance), on the measured trials only; the plots it has no
function for are drawn here: objective vs gpu_memory_utilization per TP (failures on their own strip),
the proven fit / fail regions per TP and offloads, and measured vs predicted peak HBM (not for
runner=estimate, whose peaks are the prediction).
"""
from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from optuna.trial import TrialState

from verlsweep.common.outcome_colours import OTHER_COLOUR
from verlsweep.common.outcome_colours import OUTCOME_COLOURS as OUTCOME_COLORS
from verlsweep.report.data import ESTIMATE, PREDICTED_PEAK, TP_SUFFIX, UTIL_SUFFIX, Sweep
from verlsweep.report.frontier import combos

log = logging.getLogger(__name__)

PLOTS_DIR = "plots"
@dataclass
class Plot:
    name: str               # file stem
    title: str
    png: Path | None = None
    html: str | None = None  # a plotly div (no script tag for plotly.js itself)
    note: str | None = None  # why it is missing


def _matplotlib() -> Any:
    import matplotlib

    matplotlib.use("Agg")          # files only: never a display
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path, layout: bool = True) -> Path:
    plt = _matplotlib()
    if layout:
        fig.tight_layout()
    fig.savefig(path, dpi=110, bbox_inches="tight")     # legends placed outside the axes stay in
    plt.close(fig)
    return path


def _optuna_plot(sweep: Sweep, out: Path, name: str, title: str, fn: str, **kwargs: Any) -> Plot:
    """One of Optuna's plots on the measured trials: matplotlib PNG + plotly HTML."""
    import optuna.visualization as vis
    import optuna.visualization.matplotlib as vis_mpl

    plot = Plot(name, title)
    study = sweep.measured_study()
    n = len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))
    if n < (2 if fn != "plot_optimization_history" else 1):
        plot.note = f"needs more measured trials (has {n})"
        return plot
    if len(study.directions) > 1:
        kwargs.update(target=lambda t: t.values[0], target_name=sweep.objectives[0])
    elif fn != "plot_param_importances":
        kwargs.setdefault("target_name", sweep.objectives[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")        # Optuna's matplotlib backend is marked experimental
        try:
            ax = getattr(vis_mpl, fn)(study, **kwargs)
            fig = (ax.flat[0] if hasattr(ax, "flat") else ax).figure
            fig.set_size_inches(9, 5)
            plot.png = _save(fig, out / f"{name}.png")
            figure = getattr(vis, fn)(study, **kwargs)
            figure.update_layout(title=title)
            plot.html = figure.to_html(full_html=False, include_plotlyjs=False)
        except Exception as exc:  # noqa: BLE001 - e.g. importance with one distinct value: say so, draw the rest
            plot.note = f"{type(exc).__name__}: {exc}"
    return plot


def history(sweep: Sweep, out: Path) -> Plot:
    return _optuna_plot(sweep, out, "history", "Optimization history (measured trials, best so far)",
                        "plot_optimization_history")


def parallel(sweep: Sweep, out: Path) -> Plot:
    return _optuna_plot(sweep, out, "parallel", "Parallel coordinates (measured trials)", "plot_parallel_coordinate")


def importance(sweep: Sweep, out: Path) -> Plot:
    return _optuna_plot(sweep, out, "importance", "Parameter importance (PED-ANOVA, measured trials)",
                        "plot_param_importances")


def util_by_tp_figure(sweep: Sweep) -> Any:
    """Objective vs gpu_memory_utilization, one column per TP: measured trials on top (the OOM cliff),
    the trials without a measurement (failed, pruned) as marks on a strip below, one row per outcome,
    so no failure is drawn as a fake objective. The legend sits outside the panels. None: no util swept.
    Axes are labelled `tp=<tp> measured` / `tp=<tp> not measured` (what the tests read)."""
    rows = [r for r in sweep.rows if r.param(UTIL_SUFFIX) is not None and r.outcome != "running"]
    if not rows:
        return None
    plt = _matplotlib()
    tps = sorted({r.param(TP_SUFFIX) for r in rows}, key=lambda x: (x is None, x))
    unmeasured = sorted({r.shown_outcome if r.ruled_out_by is None else "ruled out" for r in rows if not r.values})
    fig, axes = plt.subplots(2, len(tps), figsize=(max(3.6 * len(tps), 6.0) + 1.6, 5.2), sharex="col",
                             sharey="row", squeeze=False,
                             gridspec_kw={"height_ratios": [4, max(1, len(unmeasured)) * 0.45 + 0.3]})
    for col, tp in enumerate(tps):
        top, strip = axes[0][col], axes[1][col]
        name = f"tp={tp}" if tp is not None else "tp fixed"
        top.set_label(f"{name} measured")
        strip.set_label(f"{name} not measured")
        sel = [r for r in rows if r.param(TP_SUFFIX) == tp]
        done = [r for r in sel if r.measured]
        if done:
            top.scatter([r.param(UTIL_SUFFIX) for r in done], [r.measured[0] for r in done], label="completed",
                        color=OUTCOME_COLORS["completed"], marker="o", s=36)
        for y, outcome in enumerate(unmeasured):
            hit = [r for r in sel if not r.values
                   and (r.shown_outcome if r.ruled_out_by is None else "ruled out") == outcome]
            if hit:
                strip.scatter([r.param(UTIL_SUFFIX) for r in hit], [y] * len(hit), label=outcome,
                              color=OUTCOME_COLORS.get(outcome, OTHER_COLOUR), marker="x", s=36)
        top.set_title(name)
        top.grid(alpha=0.3)
        strip.set_yticks(range(len(unmeasured)), unmeasured, fontsize=8)
        strip.set_ylim(-0.6, max(len(unmeasured), 1) - 0.4)
        strip.set_xlabel("util")
        strip.grid(alpha=0.3, axis="x")
    axes[0][0].set_ylabel(sweep.objectives[0] + (" (predicted)" if sweep.estimated() else ""))
    handles = {h.get_label(): h for ax in axes.flat for h in ax.collections}
    fig.tight_layout(rect=(0, 0, 1 - 1.4 / fig.get_figwidth(), 1))
    # outside the panels, right of the last column: it never covers a point
    fig.legend(list(handles.values()), list(handles), loc="center left",
               bbox_to_anchor=(1 - 1.35 / fig.get_figwidth(), 0.5), fontsize=8, frameon=False)
    return fig


def _util_plot(name: str, title: str, fig: Any, out: Path, layout: bool = True) -> Plot:
    """A plot over the swept util: its png, or a note when there is no figure (no util swept)."""
    plot = Plot(name, title)
    if fig is None:
        plot.note = "the search space does not vary gpu_memory_utilization"
    else:
        plot.png = _save(fig, out / f"{name}.png", layout=layout)
    return plot


def util_by_tp(sweep: Sweep, out: Path) -> Plot:
    return _util_plot("util_by_tp", f"{sweep.objectives[0]} vs gpu_memory_utilization per TP "
                                    "(failed and pruned trials on the strip below)",
                      util_by_tp_figure(sweep), out, layout=False)


VERDICT_COLORS = {"fit": "#b2f2bb", "fail": "#ffc9c9", "unknown": "#f8f9fa"}


def frontier_figure(sweep: Sweep) -> Any:
    """Per TP/offload combination (rows) and util (columns): what the finished trials prove (green fit,
    red fail, grey unknown; verlsweep.proofs.rules) with each trial on top as a mark of its outcome.
    None: no util swept."""
    items = combos(sweep)
    if not items:
        return None
    plt = _matplotlib()
    grid = items[0].grid
    width = (grid[1] - grid[0]) if len(grid) > 1 else 0.05
    fig, ax = plt.subplots(figsize=(9, 1.2 + 0.42 * len(items)))
    for y, combo in enumerate(items):
        for util, d in zip(grid, combo.verdicts):
            ax.add_patch(plt.Rectangle((util - width / 2, y - 0.4), width, 0.8, color=VERDICT_COLORS[d.verdict],
                                       linewidth=0))
        for r in combo.rows:
            outcome = "ruled out" if r.ruled_out_by is not None else r.outcome
            ax.scatter([r.param(UTIL_SUFFIX)], [y], marker="o" if outcome == "completed" else "x", s=30,
                       color=OUTCOME_COLORS.get(outcome, OTHER_COLOUR), label=outcome, zorder=3)
    ax.set_yticks(range(len(items)), [c.label for c in items], fontsize=8)
    ax.set_ylim(len(items) - 0.4, -0.6)          # the first combination (smallest TP, fewest offloads) on top
    ax.set_xlim(grid[0] - width, grid[-1] + width)
    ax.set_xlabel("util")
    keys = [plt.Rectangle((0, 0), 0, 0, color=color,
                          label=f"proven {verdict}" if verdict != "unknown" else "not proven")
            for verdict, color in VERDICT_COLORS.items()]
    handles = {h.get_label(): h for h in [*ax.collections, *keys]}
    ax.legend(list(handles.values()), list(handles), loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8,
              frameon=False)
    return fig


def frontier(sweep: Sweep, out: Path) -> Plot:
    return _util_plot("frontier", "OOM frontier: proven fit / proven fail per TP and offloads",
                      frontier_figure(sweep), out)


def memory(sweep: Sweep, out: Path) -> Plot:
    """Measured vs predicted peak HBM per trial (GiB per device), with the line where they agree. Trials
    of runner=estimate are left out: their "measured" peak is the prediction itself."""
    plot = Plot("memory", "Measured vs predicted peak HBM per trial (GiB per device)")
    rows = [r for r in sweep.rows if r.peak_gb is not None and r.predicted.get(PREDICTED_PEAK) is not None
            and r.outcome not in ("infeasible", "running") and r.backend != ESTIMATE]
    if not rows:
        plot.note = ("runner=estimate: every peak is the planner's prediction, so measured = predicted"
                     if any(r.backend == ESTIMATE for r in sweep.rows)
                     else "no trial has both a measured peak and the planner's prediction")
        return plot
    plt = _matplotlib()
    fig, ax = plt.subplots(figsize=(6.5, 5))
    xs = [r.predicted[PREDICTED_PEAK] for r in rows]
    ys = [r.peak_gb or 0.0 for r in rows]        # every row has its peak (above)
    for r, x, y in zip(rows, xs, ys):
        ax.scatter([x], [y], color=OUTCOME_COLORS.get(r.outcome, OTHER_COLOUR), s=30)
        ax.annotate(f"t{r.number:02d}", (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    lo, hi = min(xs + ys) * 0.95, max(xs + ys) * 1.05
    ax.plot([lo, hi], [lo, hi], color="#adb5bd", linestyle="--", linewidth=1, label="measured = predicted")
    ax.set_xlabel("predicted peak (plan/trainer_peak_gb)")
    ax.set_ylabel("measured peak (peak_memory_gb)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    plot.png = _save(fig, out / f"{plot.name}.png")
    return plot


def time_split(sweep: Sweep, out: Path) -> Plot:
    """Per trial, measured and predicted step phases (verlsweep.report.time_plot)."""
    from verlsweep.report.time_plot import time_split as draw_split

    return draw_split(sweep, out)


PLOTS: tuple[Callable[[Sweep, Path], Plot], ...] = (history, util_by_tp, frontier, parallel, importance, memory,
                                                    time_split)


def draw(sweep: Sweep, out_dir: Path) -> list[Plot]:
    """Every plot into `out_dir`/plots; a plot that cannot be drawn carries a note instead."""
    out = out_dir / PLOTS_DIR
    out.mkdir(parents=True, exist_ok=True)
    plots = []
    for make in PLOTS:
        try:
            plots.append(make(sweep, out))
        except Exception as exc:  # noqa: BLE001 - one plot's failure must not cost the others or the sweep
            log.warning("plot %s failed: %s", make.__name__, exc)
            plots.append(Plot(make.__name__, make.__name__, note=f"{type(exc).__name__}: {exc}"))
    if any(p.html for p in plots):
        _write_plotlyjs(out)
    for plot in plots:
        if plot.html:
            (out / f"{plot.name}.html").write_text(
                f"<!doctype html><html><head><meta charset='utf-8'><title>{plot.title}</title>"
                f"<script src='{PLOTLY_JS}'></script></head><body>{plot.html}</body></html>")
    return plots


PLOTLY_JS = "plotly.min.js"


def _write_plotlyjs(out: Path) -> None:
    """One copy of plotly.js beside the plots' HTML files, so they open offline."""
    from plotly.offline import get_plotlyjs

    path = out / PLOTLY_JS
    if not path.exists():
        path.write_text(get_plotlyjs())
