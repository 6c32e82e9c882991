"""What `python sweep.py` prints is the user's to read: counts that stay in place, no line about
nothing, no set-up chatter of MLflow's, and a single run that says where it was tracked."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.trial_helpers import new_mark, run_sweep
from verlsweep.common.result import OUTCOMES

pytestmark = pytest.mark.slow

ESTIMATE = ["hardware=a2_64g", "algorithm=remax", "runner=estimate"]
STORE_SETUP = ("Creating initial MLflow database tables", "Updating database tables", "alembic")
STATUS = re.compile(r"^\[\d+/\d+\] .*? \| (?P<counts>.*?) \| elapsed")


def _fresh_store(where: Path) -> str:
    return f"sqlite:///{where / 'mlflow.db'}"    # no file yet: MLflow creates its tables on first use


@pytest.fixture(scope="module")
def sweep_output(tmp_path_factory) -> str:
    """A seeded estimate sweep whose batches end in completed, pruned and infeasible trials."""
    cwd = tmp_path_factory.mktemp("noise")
    proc = run_sweep(cwd, [*ESTIMATE, f"tracking.uri={_fresh_store(cwd)}", f"paths.output_root={cwd / 'out'}",
                           "hydra.sweeper.n_trials=10", "hydra.sweeper.sampler.seed=0"], new_mark(), multirun=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def test_the_status_line_keeps_its_outcome_counts_in_one_fixed_order(sweep_output):
    orders = [[part.rsplit(" ", 1)[0] for part in m["counts"].split(", ")]
              for m in map(STATUS.match, sweep_output.splitlines()) if m]
    assert len(orders) >= 5, sweep_output[-3000:]
    assert len({name for order in orders for name in order}) >= 2     # something to keep in order
    for order in orders:     # the outcomes' own order, not by count: a count never moves
        assert order == sorted(order, key=OUTCOMES.index), orders


def test_no_reused_line_when_no_proposal_reused_a_measurement(sweep_output):
    if "(reused t" not in sweep_output:      # the summary table marks a reused trial `completed (reused t01)`
        assert "proposal(s) reused" not in sweep_output
    assert "0 proposal(s) reused" not in sweep_output


def test_an_estimate_sweeps_table_and_best_line_say_their_numbers_are_predicted(sweep_output):
    """24.7: runner=estimate measures nothing; its peak column and best line say so."""
    head = next(ln for ln in sweep_output.splitlines() if ln.startswith("┃"))
    assert "pred. GB" in head and "peak GB" not in head, head
    assert re.search(r"best trial \d+: objective=\S+ \(predicted by the planner, runner=estimate\)", sweep_output)


def test_a_fresh_mlflow_store_does_not_announce_creating_its_tables(sweep_output):
    assert "MLflow:" in sweep_output                       # tracked, into a store made by this sweep
    for chatter in STORE_SETUP:
        assert chatter not in sweep_output


def test_a_single_run_names_the_mlflow_experiment_and_tracking_uri_it_used(tmp_path):
    uri = _fresh_store(tmp_path)
    proc = run_sweep(tmp_path, [*ESTIMATE, f"tracking.uri={uri}", f"paths.output_root={tmp_path / 'out'}",
                                "tracking.experiment=noise-check"], new_mark())
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert f"MLflow experiment 'noise-check' at {uri}" in proc.stdout
    for chatter in STORE_SETUP:
        assert chatter not in out
