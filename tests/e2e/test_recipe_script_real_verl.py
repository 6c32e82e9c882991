"""A recipe script in the ReMax recipe's form, run by `python sweep.py recipe=<script>` with the REAL installed
verl on a CPU-only box: the script's own `python3` (this interpreter, first on PATH) launches verl with the
argv recorded in command.json, and verl gets through its config, Ray, tokenizer and data to its device check
(tests/support/fixtures/REAL_VERL_NOTES.md). Its knobs reach it the script's way: the batch through the
variables it reads, the device through "$@"."""
from __future__ import annotations

import json
import os
import sys

import pytest

from tests.support.recipes import RECIPES
from tests.support.trial_helpers import new_mark, run_sweep, survivors

pytestmark = pytest.mark.slow

DEVICE_CHECK = "Total available GPUs 0 is less than total desired GPUs 8"


def test_real_verl_launched_by_a_recipe_script_reaches_its_device_check(tiny_model_dir, gsm8k_dir, store, tmp_path):
    node_bin = tmp_path / "bin"               # `python3` in the script: this test's interpreter (verl installed)
    node_bin.mkdir()
    (node_bin / "python3").write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    (node_bin / "python3").chmod(0o755)
    env = {"HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "PATH": f"{node_bin}{os.pathsep}{os.environ['PATH']}", "MODEL_PATH": str(tiny_model_dir),
           "TRAIN_FILE": str(gsm8k_dir / "train.parquet"), "TEST_FILE": str(gsm8k_dir / "test.parquet"),
           # the fixture's 16 rows and short prompts, set the way a user sets them: the script's variables
           "TRAIN_BATCH_SIZE": "8", "PPO_MINI_BATCH_SIZE": "8", "MAX_PROMPT_LENGTH": "256"}
    mark = new_mark()
    proc = run_sweep(tmp_path, [f"recipe={RECIPES / 'remax_ascend.sh'}", "hardware=h100_80g",
                                "verl.trainer.device=cuda", f"paths.output_root={tmp_path / 'out'}",
                                f"tracking.uri={store}", "plan.enforce=false", "runner.startup_timeout=300"],
                     mark, env=env, timeout=400, verl_check=True)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]      # a single run that failed
    assert "trial no_devices" in proc.stdout
    (log,) = (tmp_path / "out").rglob("trial.log")
    text = log.read_text()
    assert DEVICE_CHECK in text and "ray::TaskRunner.run()" in text
    (command,) = (tmp_path / "out").rglob("command.json")
    recorded = json.loads(command.read_text())
    assert recorded["script"]["args"][0] == "trainer.device=cuda"               # through "$@"
    verl = dict(a.split("=", 1) for a in recorded["argv"][3:])
    assert verl["data.train_batch_size"] == "8" and verl["trainer.device"] == "cuda"
    assert survivors(mark) == []
