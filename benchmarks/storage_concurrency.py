"""Which Optuna storage holds up when several processes write one study at once?

The sweeper's study is written by every sweep process (ask/tell, heartbeats) and by every running
trial (one `trial.report` + pruner read per training step), so a sweep with n_jobs trials and a
second sweep process on the same study means many concurrent writers. This script hammers one study
from W worker processes, each doing T trials of: ask (TPE, reads all trials) -> S x (report +
should_prune) -> tell, and prints per backend: errors raised, trials lost or duplicated, and time.

    python benchmarks/storage_concurrency.py [--workers 8 --trials 25 --steps 5] [--cold]
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path

import optuna

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from verlsweep.common import optuna_private

warnings.filterwarnings("ignore")  # heartbeat/experimental warnings of every worker
optuna.logging.set_verbosity(optuna.logging.ERROR)


def make_storage(kind: str, path: Path):
    if kind == "sqlite (optuna default, 5 s lock wait)":
        return f"sqlite:///{path}.db"
    if kind == "sqlite, 60 s lock wait":
        return optuna.storages.RDBStorage(f"sqlite:///{path}.db",
                                          engine_kwargs={"connect_args": {"timeout": 60}})
    if kind == "sqlite, 60 s lock wait + heartbeat":
        return optuna.storages.RDBStorage(f"sqlite:///{path}.db", heartbeat_interval=1, grace_period=10,
                                          engine_kwargs={"connect_args": {"timeout": 60}})
    if kind == "sqlite via verlsweep (study_link.open_storage)":
        from verlsweep.study_link import open_storage

        return open_storage(f"sqlite:///{path}.db", heartbeat_interval=1, grace_period=10)
    if kind == "journal file (symlink lock)":
        return optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(f"{path}.log"))
    if kind == "journal file (open lock)":
        lock = optuna.storages.journal.JournalFileOpenLock(f"{path}.log")
        return optuna.storages.JournalStorage(optuna.storages.journal.JournalFileBackend(f"{path}.log", lock_obj=lock))
    raise ValueError(kind)


KINDS = (
    "sqlite (optuna default, 5 s lock wait)",
    "sqlite, 60 s lock wait",
    "sqlite, 60 s lock wait + heartbeat",
    "sqlite via verlsweep (study_link.open_storage)",
    "journal file (symlink lock)",
    "journal file (open lock)",
)


def worker(kind: str, path: str, n_trials: int, n_steps: int, queue) -> None:
    errors: list[str] = []
    told = 0
    try:
        # every worker creates-or-loads, as every sweep process does: a cold start races on creation
        storage = make_storage(kind, Path(path))
        study = optuna.create_study(study_name="stress", storage=storage, direction="maximize", load_if_exists=True,
                                    sampler=optuna.samplers.TPESampler(n_startup_trials=5),
                                    pruner=optuna.pruners.MedianPruner(n_startup_trials=3))
    except Exception as exc:  # noqa: BLE001 - a storage that cannot start is a row of the table
        queue.put((0, [f"at start: {type(exc).__name__}: {str(exc).splitlines()[0][:110]}"]))
        return
    for _ in range(n_trials):
        try:
            trial = study.ask()
            x = trial.suggest_float("x", 0, 1)
            y = trial.suggest_int("y", 1, 8)
            raw = optuna_private.storage(study)
            hb = getattr(raw, "record_heartbeat", None)
            for step in range(n_steps):
                if hb and optuna_private.heartbeat_enabled(raw):
                    hb(optuna_private.trial_id(trial))
                trial.report(x * y + step, step)
                trial.should_prune()
            trial.set_constraint("memory", 0.0)
            study.tell(trial, x * y)
            told += 1
        except Exception as exc:  # noqa: BLE001 - keep going: we count what breaks
            errors.append(f"{type(exc).__name__}: {str(exc).splitlines()[0][:120]}")
    queue.put((told, errors))


def run(kind: str, workers: int, trials: int, steps: int, cold: bool) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "study"
        if not cold:
            optuna.create_study(study_name="stress", storage=make_storage(kind, path), direction="maximize")
        queue = mp.get_context("spawn").Queue()
        ctx = mp.get_context("spawn")
        procs = [ctx.Process(target=worker, args=(kind, str(path), trials, steps, queue)) for _ in range(workers)]
        tic = time.perf_counter()
        for p in procs:
            p.start()
        results = [queue.get() for _ in procs]
        for p in procs:
            p.join()
        elapsed = time.perf_counter() - tic
        study = optuna.load_study(study_name="stress", storage=make_storage(kind, path))
        all_trials = study.get_trials(deepcopy=False)
        numbers = Counter(t.number for t in all_trials)
        states = Counter(t.state.name for t in all_trials)
        told = sum(r[0] for r in results)
        errors = [e for r in results for e in r[1]]
        return {
            "told": told,
            "expected": workers * trials,
            "stored_complete": states.get("COMPLETE", 0),
            "left_running": states.get("RUNNING", 0),
            "dup_numbers": sum(1 for c in numbers.values() if c > 1),
            "intermediate_ok": sum(len(t.intermediate_values) == steps
                                   for t in all_trials if t.state.name == "COMPLETE"),
            "errors": len(errors),
            "first_error": Counter(errors).most_common(1)[0][0] if errors else "",
            "seconds": elapsed,
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--trials", type=int, default=25)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--kinds", nargs="*", default=list(KINDS))
    parser.add_argument("--cold", action="store_true",
                        help="no storage file before the workers start: all of them create it at once")
    args = parser.parse_args()
    print(f"{args.workers} processes x {args.trials} trials x {args.steps} steps (report + should_prune) on one study"
          f", {'cold start (storage created by the workers)' if args.cold else 'storage created beforehand'}")
    header = (f"{'storage':42} {'told':>9} {'complete':>8} {'running':>7} {'dup#':>4} {'steps ok':>8} "
              f"{'errors':>6} {'s':>6}  first error")
    print(header)
    for kind in args.kinds:
        r = run(kind, args.workers, args.trials, args.steps, args.cold)
        print(f"{kind:42} {r['told']:>4}/{r['expected']:<4} {r['stored_complete']:>8} {r['left_running']:>7} "
              f"{r['dup_numbers']:>4} {r['intermediate_ok']:>8} {r['errors']:>6} {r['seconds']:>6.1f}  "
              f"{r['first_error']}")


if __name__ == "__main__":
    main()
