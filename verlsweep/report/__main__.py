"""python -m verlsweep.report --status [--repair] <sweep dir | --storage URL --study NAME>"""
from __future__ import annotations

import argparse
import sys

from verlsweep.report import status


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m verlsweep.report", description=__doc__)
    p.add_argument("target", nargs="?", help="a sweep dir (its best.yaml names the study and storage)")
    p.add_argument("--storage", help="Optuna storage URL of the study (instead of a sweep dir)")
    p.add_argument("--study", help="study name (with --storage)")
    p.add_argument("--tracking-uri", help="MLflow tracking URI (default: the one the sweep recorded in the study)")
    p.add_argument("--status", action="store_true",
                   help="list disagreements between Optuna, MLflow and the sweep dir; exit 1 while one remains")
    p.add_argument("--repair", action="store_true", help="with --status: apply the reconciliation rules first")
    p.add_argument("--grace-period", type=float, default=status.DEFAULT_GRACE_S,
                   help="seconds without a heartbeat after which a sweep on another host counts as dead")
    p.add_argument("--stop-grace", type=float, default=status.DEFAULT_STOP_GRACE_S,
                   help="seconds an orphaned process gets between SIGTERM and SIGKILL")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if not args.status:
        parser().error("say what to report: --status")
    try:
        target = status.resolve(args.target, args.storage, args.study, args.tracking_uri)
    except status.TargetError as exc:
        parser().error(str(exc))
    return status.run(target, repair=args.repair, grace_s=args.grace_period, stop_grace_s=args.stop_grace)


if __name__ == "__main__":
    sys.exit(main())
