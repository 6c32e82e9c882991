"""`--status`: what Optuna, MLflow and the sweep dir say about a study, where they disagree, and
(`--repair`) the fixes a sweep applies when it starts (verlsweep.reconcile)."""
from __future__ import annotations

import logging
import sys
import warnings
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from verlsweep.common import optuna_private
from verlsweep.common.names import OBJECTIVES_ATTR, TRACKING_ATTR
from verlsweep.reconcile import budget, check, confirmations, results, sessions, trials_csv
from verlsweep.study_link import absolute_storage_url, open_storage
from verlsweep.tracking import store, study_runs

DEFAULT_GRACE_S = 90.0          # the sweeper's default: 3 x hydra.sweeper.heartbeat_interval (30 s)
DEFAULT_STOP_GRACE_S = 30.0     # runner.grace_period's default


class TargetError(ValueError):
    pass


@dataclass
class Target:
    storage: str
    study: str
    sweep_dir: Path | None = None
    tracking_uri: str | None = None


def resolve(sweep_dir: str | None, storage: str | None, study: str | None, tracking_uri: str | None) -> Target:
    """The study named by a sweep dir (best.yaml, else multirun.yaml) or by --storage/--study."""
    if storage or study:
        if not (storage and study):
            raise TargetError("--storage and --study go together")
        return Target(absolute_storage_url(storage, Path.cwd()), study,
                      Path(sweep_dir) if sweep_dir else None, tracking_uri)
    if not sweep_dir:
        raise TargetError("give a sweep dir, or --storage URL --study NAME")
    root = Path(sweep_dir)
    if not root.exists():
        raise TargetError(f"{root} does not exist: give the sweep dir a sweep printed (`results: <dir>`), "
                          "or --storage URL --study NAME")
    best = root / "best.yaml"
    if best.is_file():
        doc = yaml.safe_load(best.read_text()) or {}
        if doc.get("storage") and doc.get("study_name"):
            return Target(str(doc["storage"]), str(doc["study_name"]), root, tracking_uri)
    raise TargetError(f"{root} is not a sweep dir with a stored study (no best.yaml naming study_name and storage); "
                      "use --storage URL --study NAME")


def _sweeper_helpers(study: Any) -> tuple[Any, Any, Any]:
    """tell (as the sweep tells a result), the re-run-once callback and the trials.csv writer: the sweep's
    own (verlsweep.reconcile), so a repair leaves the study as a restarted sweep would."""
    import optuna

    objectives = list(study.user_attrs.get(OBJECTIVES_ATTR) or ["objective"])

    def tell(frozen: Any, result: Any) -> Any:
        return results.tell(study, optuna_private.trial_of(study, frozen), None, objectives, result=result).state

    with budget.quiet_optuna():
        retry = optuna.storages.RetryHeartbeatStaleTrialCallback(max_retry=budget.STALE_RETRIES)
    return tell, retry, lambda sweep_dir: trials_csv.write_trials(sweep_dir, study, objectives)


def _tracking(study: Any, target: Target) -> check.Tracking | None:
    recorded = study.user_attrs.get(TRACKING_ATTR) or {}
    uri = target.tracking_uri or recorded.get("uri")
    if not uri:
        return None
    client = store.client_for(uri)
    exp = study_runs.experiment_id(client, recorded.get("experiment") or study.study_name)
    found = study_runs.parents(client, exp, study.study_name) if exp else []
    return check.Tracking(client, exp, found[0].info.run_id if found else None)


def findings(study: Any, target: Target, tracking: check.Tracking | None, grace_s: float, stop_grace_s: float,
             helpers: tuple) -> list[check.Finding]:
    tell, retry, rewrite = helpers
    out = check.stale_findings(study, grace_s, stop_grace_s, tell, retry)
    if tracking is not None:
        out += check.parent_findings(study, tracking, grace_s, "python -m verlsweep.report --repair")
        live = {s.id for s in sessions.live(optuna_private.storage(study), optuna_private.study_id(study), grace_s)}
        out += check.run_findings(study, tracking, skip_sessions=live)
    if target.sweep_dir is not None:
        out += check.csv_findings(study, target.sweep_dir,
                                  (lambda: rewrite(target.sweep_dir)) if rewrite else None)
    return out


def run(target: Target, *, repair: bool, grace_s: float, stop_grace_s: float, out: Any = None) -> int:
    import optuna

    out = out or sys.stdout
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    storage = open_storage(target.storage, heartbeat_interval=max(1, int(grace_s // 3)), grace_period=int(grace_s))
    study = optuna.load_study(study_name=target.study, storage=storage)
    helpers = _sweeper_helpers(study)
    tracking = _tracking(study, target)
    trials = study.get_trials(deepcopy=False)
    states = ", ".join(f"{n} {s}" for s, n in sorted(Counter(t.state.name for t in trials).items()))
    out.write(f"study {study.study_name} ({target.storage}): {len(trials)} trial(s): {states or 'none'}\n")
    for number, found_ in sorted(confirmations.of_study(trials).items()):
        out.write(f"long run: trial {number} {found_.sentence()}\n")
    if tracking is None:
        out.write("MLflow: not tracked (no tracking URI recorded with the study; --tracking-uri)\n")
    found = findings(study, target, tracking, grace_s, stop_grace_s, helpers)
    if repair:
        # in order: settling stale trials finishes them, which decides what their runs must say
        for _ in range(3):
            fixable = [(f, f.fix) for f in found if f.fix is not None]
            if not fixable:
                break
            for finding, fix in fixable:
                out.write(f"repair: {finding.what}\n")
                try:
                    fix()
                except Exception as exc:  # noqa: BLE001 - reported, and the check below still fails
                    out.write(f"  failed: {type(exc).__name__}: {exc}\n")
            found = findings(study, target, tracking, grace_s, stop_grace_s, helpers)
    for finding in found:
        out.write(f"DISAGREES: {finding.what}{'' if finding.fix else ' (needs a person)'}\n")
    if not found:
        out.write("Optuna, MLflow and the sweep dir agree.\n")
    return 1 if found else 0

