"""python -m verlsweep.report <sweep dir> | --storage URL --study NAME [--status [--repair]] [--out DIR]"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import optuna

from verlsweep.report import status
from verlsweep.report.data import load
from verlsweep.report.html import REPORT_HTML, status_text, text_summary, write


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m verlsweep.report",
                                description="Report on a sweep: report.html and a text summary, or --status.")
    p.add_argument("target", nargs="?", help="a sweep dir (holds best.yaml), or nothing with --storage/--study")
    p.add_argument("--storage", help="the study's Optuna storage URL (hydra.sweeper.storage)")
    p.add_argument("--study", help="the study's name (printed at the start of the sweep, in best.yaml)")
    p.add_argument("--status", action="store_true",
                   help="print n of N, best so far and the outcomes, then every disagreement between Optuna, "
                        "MLflow and the sweep dir; exit 1 while one remains; write no report")
    p.add_argument("--repair", action="store_true",
                   help="with --status: first apply the rules a sweep applies on start (stop orphans, end stale runs)")
    p.add_argument("--tracking-uri", help="MLflow tracking URI (default: the one the sweep recorded in the study)")
    p.add_argument("--grace-period", type=float, default=status.DEFAULT_GRACE_S,
                   help="seconds without a heartbeat after which a sweep on another host counts as dead")
    p.add_argument("--stop-grace", type=float, default=status.DEFAULT_STOP_GRACE_S,
                   help="seconds an orphaned process gets between SIGTERM and SIGKILL")
    p.add_argument("--out", type=Path, help="where report.html goes (default: the sweep dir)")
    return p


def _open(target: status.Target) -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        return optuna.load_study(study_name=target.study, storage=target.storage)
    except KeyError as exc:
        names = [s.study_name for s in optuna.get_all_study_summaries(target.storage)]
        raise SystemExit(f"verlsweep.report: no study {target.study!r} in {target.storage}; "
                         f"it has: {', '.join(names) or 'none'}") from exc


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.repair and not args.status:
        parser.error("--repair goes with --status")
    try:
        target = status.resolve(args.target, args.storage, args.study, args.tracking_uri)
    except status.TargetError as exc:     # what the user typed: exit 2, as every input error
        print(f"verlsweep.report: {exc}", file=sys.stderr)
        raise SystemExit(2) from exc
    study = _open(target)
    sweep = load(study)
    if args.status:
        print(status_text(sweep), flush=True)
        return status.run(target, repair=args.repair, grace_s=args.grace_period, stop_grace_s=args.stop_grace)
    out = args.out or target.sweep_dir or sweep.sweep_dir() or Path(".")
    write(sweep, out)
    print(text_summary(sweep, target.sweep_dir or out))
    print(f"report: {out / REPORT_HTML}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
