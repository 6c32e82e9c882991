"""Reports on a study after (or while) its sweep runs.

`python -m verlsweep.report --status [--repair] <sweep dir | --storage URL --study NAME>` lists every
disagreement between Optuna, MLflow and the sweep dir (verlsweep.reconcile.check) and, with
--repair, applies the rules a sweep applies on start.

May import: verlsweep.common, verlsweep.tracking, verlsweep.study_link, verlsweep.reconcile.
"""
