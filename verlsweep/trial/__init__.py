"""Run (docs/architecture.md, stage 7), the trial process: launch one trial, supervise it, read its steps,
decide its outcome.

`runners/` launch (verl, a recipe script, or the planner's estimate); `supervise` owns the process
session, its private Ray and stopping the whole tree; `orphans` stops what a dead sweep's trial left
running; `ray_watch` (+ its `ray_probe` process) reads that Ray's pending demand; `metrics` reads verl's
file logger and console steps; `classify` turns exit status + log into an outcome by the failure
texts of verlsweep.common.patterns; `livetail` shows the log in the terminal.

May import: verlsweep.common, verlsweep.config (the typed RunSpec), verlsweep.command (the Command),
verlsweep.plan (runner=estimate).
Never tracking, the sweeper or task.py.
"""
