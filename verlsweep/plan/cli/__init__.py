"""`python -m verlsweep.plan` (main): the plan table over util x TP x offload (table), a hardware profile
for this node (detect) and the refits (verlsweep.plan.fit).

May import: verlsweep.common, verlsweep.command, and every other part of verlsweep.plan (trace,
predictor, fit).
"""
from verlsweep.plan.cli.main import main
from verlsweep.plan.cli.table import DEFAULT_UTILS, Row, grid, render

__all__ = ["DEFAULT_UTILS", "Row", "grid", "render", "main"]
