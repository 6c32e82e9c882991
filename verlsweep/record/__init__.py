"""The study's record of its trials, as the sweep keeps it: how a job's result is told to Optuna
(`results`), which trials count towards n_trials and which are re-run once (`budget`), and trials.csv
(`trials_csv`).

Below both verlsweep.study (the sweep) and verlsweep.report (`--status --repair` tells a dead sweep's
trial and rewrites trials.csv as the sweep would): study imports report (report.html), so what both
need lives here, and imports go one way: study -> report -> record -> reconcile.

May import: verlsweep.common, verlsweep.reconcile (a trial's outcome as trials.csv shows it).
"""
