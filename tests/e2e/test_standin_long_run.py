"""The stand-in's growth model (tests/support/standin/lengths.py): responses grow with the step and the
trainer peak with the lengths, so a config passes 5 steps and OOMs later; ignore_eos runs every response to
max_response_length and data.shuffle=false reads the train file in order."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.standin_runs import FAST, console_metrics, run_standin, steps_of
from verlsweep.study.confirm import longest_first

# 30 GiB of trainer peak plus what the driver keeps leaves 27.7 GiB of a 60.96 GiB device for the
# lengths' growth: 44 GiB x (prompt + response) / (max prompt + max response) fits at step 5 (about 0.48
# of the maxima) but not once the responses pass about 0.81 of max_response_length
KNOBS = ["+standin.mode=auto", "+standin.peak_memory_gb=30", "+standin.length_gib=44",
         "trainer.val_before_train=false", "trainer.logger=[console]", *FAST]


def test_a_config_passes_five_steps_and_ooms_once_its_responses_have_grown(tmp_path: Path) -> None:
    five = run_standin(tmp_path, *KNOBS, "trainer.total_training_steps=5")
    assert five.returncode == 0, five.stderr[-2000:]
    assert steps_of(five.stdout)[-1] == 5
    forty = run_standin(tmp_path, *KNOBS, "trainer.total_training_steps=40")
    assert forty.returncode == 1
    assert "OutOfMemoryError" in forty.stderr
    last = steps_of(forty.stdout)[-1]
    assert 5 < last < 40, last


def test_ignore_eos_runs_every_response_to_max_length_and_ooms_in_the_first_step(tmp_path: Path) -> None:
    ok = run_standin(tmp_path, "trainer.val_before_train=false", "trainer.logger=[console]", *FAST,
                     "trainer.total_training_steps=1", "actor_rollout_ref.rollout.ignore_eos=true",
                     "data.max_response_length=256")
    step = console_metrics(ok.stdout, 1)
    assert float(step["response_length/mean"]) == 256.0 and float(step["response_length/clip_ratio"]) == 1.0
    oom = run_standin(tmp_path, *KNOBS, "trainer.total_training_steps=5", "actor_rollout_ref.rollout.ignore_eos=true")
    assert oom.returncode == 1 and "OutOfMemoryError" in oom.stderr
    assert steps_of(oom.stdout) == []


@pytest.mark.parametrize("shuffle", [True, False])
def test_an_unshuffled_sorted_train_file_puts_its_longest_prompts_in_the_first_step(
        tmp_path: Path, shuffle: bool) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    # prompts of 20..160 characters in a shuffled order, as a GSM8K-style chat column
    rows = [{"prompt": [{"role": "user", "content": "w " * (10 * n)}]} for n in (3, 8, 1, 6, 2, 7, 4, 5)]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "train.parquet")
    ordered = tmp_path / "sorted.parquet"
    longest_first(tmp_path / "train.parquet", ordered, "prompt")
    args = ["trainer.val_before_train=false", "trainer.logger=[console]", *FAST, "trainer.total_training_steps=2",
            f"data.train_files={ordered}", "data.train_batch_size=4", f"data.shuffle={str(shuffle).lower()}"]
    res = run_standin(tmp_path, *args)
    first, second = (float(console_metrics(res.stdout, s)["prompt_length/mean"]) for s in (1, 2))
    if shuffle:        # a shuffled sampler: the file's mean every step (the noise aside)
        assert abs(first - second) / first < 0.05
    else:
        assert first > second * 1.3
