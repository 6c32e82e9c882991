"""verlsweep.plan.cli.table: the planner over a grid of util x TP x offloads, best first, the composed
config's own knobs marked (what `python -m verlsweep.plan table` prints; tests/test_plan_cli.py runs it)."""
from __future__ import annotations

import io

import pytest
from rich.console import Console

from verlsweep.command.compose import compose_config
from verlsweep.plan import from_cfg
from verlsweep.plan.cli.table import _RANK, grid, render
from verlsweep.plan.predictor import calibration

CAL = calibration.load()


@pytest.fixture(scope="module")
def inp():
    return from_cfg(compose_config(["hardware=a2_64g", "model=qwen3_8b", "algorithm=grpo"]))


@pytest.fixture(scope="module")
def rows(inp):
    return grid(inp, CAL, utils=(0.4, 0.6, 0.95), tps=(1, 2, 8))


def test_one_row_per_combination_fits_first_then_by_throughput(rows):
    assert len(rows) == 3 * 3 * 4
    keys = [(_RANK[r.verdict.status], -r.verdict.tok_s) for r in rows]
    assert keys == sorted(keys)
    assert rows[0].verdict.status == "ok" and rows[-1].verdict.status == "infeasible"


def test_exactly_the_composed_knobs_are_marked_current(inp, rows):
    (current,) = [r for r in rows if r.current]
    assert (current.util, current.tp, current.param_offload, current.optimizer_offload) == \
        (inp.rollout.util, inp.rollout.tp, inp.actor.param_offload, inp.actor.optimizer_offload)


def test_render_prints_a_row_per_combination_up_to_the_limit(inp, rows):
    out = io.StringIO()
    render(inp, rows, Console(file=out, width=200), limit=5)
    text = out.getvalue()
    assert "qwen3_8b grpo on a2_64g (8 devices" in text
    assert f"... {len(rows) - 5} more rows (--all shows them)" in text
    everything = io.StringIO()
    render(inp, rows, Console(file=everything, width=200))
    assert "*0.60" in everything.getvalue() and "more rows" not in everything.getvalue()
