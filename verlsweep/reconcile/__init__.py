"""The study's record, and after a crash Optuna, MLflow and the sweep dir telling the same story.

The record, as the sweep keeps it: how a job's result is told to Optuna (`results`), which trials
count towards n_trials and which are re-run once (`budget`), and trials.csv (`trials_csv`). Both
verlsweep.study (the sweep) and verlsweep.report (`--status --repair` tells a dead sweep's trial and
rewrites trials.csv as the sweep would) use them, so they live here, below both.

A sweep process records itself in its study (`sessions`); the next one on the study finds trials of
sweeps that died (`trials`: their processes stopped, the trial failed `orphaned` or told the outcome
its own files prove, its MLflow run ended) and fixes every run that disagrees with its trial
(`check`, also behind `python -m verlsweep.report --status [--repair]`). Trials of a live sweep
process (its heartbeat fresh, or its pid alive on this host) are never touched.

May import: verlsweep.common, verlsweep.trial (orphans, classify), verlsweep.tracking, verlsweep.study_link.
"""
