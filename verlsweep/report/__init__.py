"""Report (docs/architecture.md, after the stages): what a sweep found, read back from its Optuna study:
report.html (plots, the best config and its launch command, the OOM frontier per TP/offloads with what each
side's trial proves, the planner's predictions next to the measurements) and the text status of a running
study.

    python -m verlsweep.report outputs/sweeps/<date>            # writes <dir>/report.html
    python -m verlsweep.report --storage sqlite:///verlsweep-optuna.db --study NAME --status
    python -m verlsweep.report outputs/sweeps/<date> --status --repair    # check, then reconcile

May import: verlsweep.common and verlsweep.proofs (the rules that say what a finished trial proves about its
neighbours, for the frontier); for --status/--repair (status.py) also verlsweep.tracking, study_link and
reconcile, which say where Optuna, MLflow and the sweep dir disagree and apply the rules a sweep applies on
start, and record (tell a trial, re-run it once, rewrite trials.csv as the sweep does). Never verlsweep.study:
it imports this package to write report.html. The report itself reads what the sweeper stored in the study
(user attrs named in verlsweep.common.names), never the trial process or MLflow.
"""
from __future__ import annotations

from pathlib import Path

import optuna

from verlsweep.report.data import Sweep, load
from verlsweep.report.html import REPORT_HTML, status_text, text_summary, write


def write_report(study: optuna.Study, out_dir: Path, objectives: list[str] | None = None) -> list[Path]:
    """report.html + plots/ of `study` into `out_dir`; the files written."""
    return write(load(study, objectives), out_dir)


__all__ = ["REPORT_HTML", "Sweep", "load", "status_text", "text_summary", "write", "write_report"]
