"""The report's "where the time goes" plot: per trial, a stacked bar of verl's step phases as measured
(timing_s/*, verlsweep.common.time_split) and, beside it, the planner's predicted split."""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from verlsweep.common.time_split import OTHER, PHASES, from_predicted, measured_split
from verlsweep.report.data import Row, Sweep

if TYPE_CHECKING:     # plots imports this module: the class is imported where it is used
    from verlsweep.report.plots import Plot

# one colour per phase, measured and predicted alike (the predicted bar is hatched)
PHASE_COLORS = dict(zip((*PHASES, OTHER), ("#e8590c", "#1c7ed6", "#9c36b5", "#0ca678", "#f783ac", "#c92a2a",
                                            "#fab005", "#adb5bd")))


def splits(sweep: Sweep) -> list[tuple[Row, dict[str, float], dict[str, float]]]:
    """(row, measured split, predicted split) of every trial with a measured split. Under runner=estimate
    nothing is measured: every trial with the planner's split, the measured one left empty."""
    estimated = sweep.estimated()
    out = []
    for row in sweep.rows:
        measured = {} if estimated else measured_split(row.metrics)
        predicted = from_predicted(row.predicted)
        if measured or (estimated and predicted):
            out.append((row, measured, predicted))
    return out


def time_split(sweep: Sweep, out: Path) -> Plot:
    from verlsweep.report.plots import Plot, _matplotlib, _save

    title = ("Where the step time goes: predicted by the planner (runner=estimate measures nothing), hatched, "
             "per trial" if sweep.estimated() else
             "Where the step time goes: measured (left) and predicted (right, hatched) per trial")
    plot = Plot("time_split", title)
    rows = splits(sweep)
    if not rows:
        plot.note = ("no trial has verl's timing_s/* phases (objective.extra lists them: sweeps/throughput.yaml "
                     "does)")
        return plot
    plt = _matplotlib()
    fig, ax = plt.subplots(figsize=(max(6.5, 0.9 * len(rows) + 2), 4.5))
    labels, seen = [], set()
    for i, (row, measured, predicted) in enumerate(rows):
        for offset, split, hatch in ((-0.2, measured, None), (0.2, predicted, "//")):
            bottom = 0.0
            for phase in (*PHASES, OTHER):
                seconds = split.get(phase, 0.0)
                if seconds <= 0:
                    continue
                ax.bar(i + offset, seconds, width=0.38, bottom=bottom, color=PHASE_COLORS[phase], hatch=hatch,
                       edgecolor="white", label=phase if phase not in seen else None)
                seen.add(phase)
                bottom += seconds
        labels.append(f"t{row.number:02d}")
    ax.set_xticks(range(len(rows)), labels)
    ax.set_ylabel("seconds per step (mean after warm-up)")
    ax.legend(fontsize=8, bbox_to_anchor=(1.01, 1), loc="upper left")
    ax.grid(alpha=0.3, axis="y")
    plot.png = _save(fig, out / f"{plot.name}.png")
    return plot
