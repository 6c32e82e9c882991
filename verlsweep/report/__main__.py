"""python -m verlsweep.report <sweep dir> | --storage URL --study NAME [--status] [--out DIR]"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import optuna
import yaml

from verlsweep.report.data import load
from verlsweep.report.html import REPORT_HTML, status_text, text_summary, write

BEST_YAML = "best.yaml"    # the sweeper's: names the study and its storage


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m verlsweep.report",
                                description="Report on a sweep: report.html and a text summary, or --status.")
    p.add_argument("target", nargs="?", help="a sweep dir (holds best.yaml), or nothing with --storage/--study")
    p.add_argument("--storage", help="the study's Optuna storage URL (hydra.sweeper.storage)")
    p.add_argument("--study", help="the study's name (printed at the start of the sweep, in best.yaml)")
    p.add_argument("--status", action="store_true", help="print n of N, best so far and the outcomes; write nothing")
    p.add_argument("--out", type=Path, help="where report.html goes (default: the sweep dir)")
    return p


def _open(args: argparse.Namespace) -> tuple[optuna.Study, Path | None]:
    sweep_dir = Path(args.target) if args.target else None
    storage, name = args.storage, args.study
    if sweep_dir is not None:
        best = sweep_dir / BEST_YAML
        if not best.is_file():
            raise SystemExit(f"verlsweep.report: {sweep_dir} has no {BEST_YAML}: give a sweep dir, "
                             "or --storage URL --study NAME")
        doc = yaml.safe_load(best.read_text()) or {}
        storage, name = storage or doc.get("storage"), name or doc.get("study_name")
    if not storage or not name:
        raise SystemExit("verlsweep.report: give a sweep dir, or both --storage URL and --study NAME")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        study = optuna.load_study(study_name=name, storage=storage)
    except KeyError as exc:
        names = [s.study_name for s in optuna.get_all_study_summaries(storage)]
        raise SystemExit(f"verlsweep.report: no study {name!r} in {storage}; it has: {', '.join(names) or 'none'}") from exc
    return study, sweep_dir


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    study, sweep_dir = _open(args)
    sweep = load(study)
    if args.status:
        print(status_text(sweep))
        return 0
    out = args.out or sweep_dir or sweep.sweep_dir() or Path(".")
    write(sweep, out)
    print(text_summary(sweep, sweep_dir or out))
    print(f"report: {out / REPORT_HTML}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
