"""The sweep's plots: PNG files (matplotlib, no browser needed) and, where Optuna draws it with plotly,
an interactive HTML fragment for the report.

Optuna's visualization module draws what it has (optimization history with the best-so-far line,
parallel coordinates, parameter importance), on the measured trials only; the two plots it has no
function for are drawn here: objective vs gpu_memory_utilization by outcome per TP, and measured vs
predicted peak HBM.
"""
from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from optuna.trial import TrialState

from verlsweep.report.data import PREDICTED_PEAK, TP_SUFFIX, UTIL_SUFFIX, Sweep

log = logging.getLogger(__name__)

PLOTS_DIR = "plots"
OUTCOME_COLORS = {
    "completed": "#2b8a3e", "pruned": "#868e96", "oom": "#e03131", "infeasible": "#f08c00",
    "hccl_timeout": "#7048e8", "hang": "#1971c2", "timeout": "#1098ad", "crash": "#000000",
    "config_error": "#c2255c", "no_devices": "#5c940d",
}


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


def _save(fig: Any, path: Path) -> Path:
    plt = _matplotlib()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
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
    return _optuna_plot(sweep, out, "importance", "Parameter importance (fANOVA, measured trials)",
                        "plot_param_importances")


def util_by_tp(sweep: Sweep, out: Path) -> Plot:
    """Objective vs gpu_memory_utilization, one panel per TP, coloured by outcome: the OOM cliff.
    Trials without a measurement sit on the zero line in their outcome's colour."""
    plot = Plot("util_by_tp", f"{sweep.objectives[0]} vs gpu_memory_utilization by outcome, per TP")
    rows = [r for r in sweep.rows if r.param(UTIL_SUFFIX) is not None and r.outcome != "running"]
    if not rows:
        plot.note = "the search space does not vary gpu_memory_utilization"
        return plot
    plt = _matplotlib()
    tps = sorted({r.param(TP_SUFFIX) for r in rows}, key=lambda x: (x is None, x))
    fig, axes = plt.subplots(1, len(tps), figsize=(max(4.0 * len(tps), 6.0), 4.2), sharey=True, squeeze=False)
    for ax, tp in zip(axes[0], tps):
        for outcome in sorted({r.outcome for r in rows}):
            sel = [r for r in rows if r.param(TP_SUFFIX) == tp and r.outcome == outcome]
            if sel:
                ax.scatter([r.param(UTIL_SUFFIX) for r in sel], [r.values[0] if r.values else 0.0 for r in sel],
                           label=outcome, color=OUTCOME_COLORS.get(outcome, "#495057"),
                           marker="o" if outcome == "completed" else "x", s=36)
        ax.set_title(f"tp={tp}" if tp is not None else "tp fixed")
        ax.set_xlabel("util")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(sweep.objectives[0])
    handles = {h.get_label(): h for ax in axes[0] for h in ax.collections}
    fig.legend(list(handles.values()), list(handles), loc="upper right", fontsize=8)
    plot.png = _save(fig, out / f"{plot.name}.png")
    return plot


def memory(sweep: Sweep, out: Path) -> Plot:
    """Measured vs predicted peak HBM per trial (GiB per device), with the line where they agree."""
    plot = Plot("memory", "Measured vs predicted peak HBM per trial (GiB per device)")
    rows = [r for r in sweep.rows if r.peak_gb is not None and r.predicted.get(PREDICTED_PEAK) is not None
            and r.outcome not in ("infeasible", "running")]
    if not rows:
        plot.note = "no trial has both a measured peak and the planner's prediction"
        return plot
    plt = _matplotlib()
    fig, ax = plt.subplots(figsize=(6.5, 5))
    xs = [r.predicted[PREDICTED_PEAK] for r in rows]
    ys = [r.peak_gb for r in rows]
    for r, x, y in zip(rows, xs, ys):
        ax.scatter([x], [y], color=OUTCOME_COLORS.get(r.outcome, "#495057"), s=30)
        ax.annotate(f"t{r.number:02d}", (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    lo, hi = min(xs + ys) * 0.95, max(xs + ys) * 1.05
    ax.plot([lo, hi], [lo, hi], color="#adb5bd", linestyle="--", linewidth=1, label="measured = predicted")
    ax.set_xlabel("predicted peak (plan/trainer_peak_gb)")
    ax.set_ylabel("measured peak (peak_memory_gb)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    plot.png = _save(fig, out / f"{plot.name}.png")
    return plot


PLOTS: tuple[Callable[[Sweep, Path], Plot], ...] = (history, util_by_tp, parallel, importance, memory)


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
