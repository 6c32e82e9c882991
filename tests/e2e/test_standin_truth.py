"""The verl stand-in under a stack's hidden truth (tests/support/standin/truth_steps.py): the memory and
tokens/s of its steps are truth.py's, from the trial's own composed config, so the number it runs out of
memory on is the truth's peak at the step's lengths (the maximum ones under ignore_eos and a train file
sorted longest prompt first)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from omegaconf import DictConfig, OmegaConf

from tests.support.standin.truth import STACK_A, peaks_at
from tests.support.standin_runs import FAST, clean_env, console_metrics, run_standin, steps_of
from verlsweep.command.compose import build_command, compose_config
from verlsweep.common.stack import STACK_ENV
from verlsweep.plan import from_cfg
from verlsweep.plan.predictor.lengths import Lengths

ROLLOUT = "verl.actor_rollout_ref.rollout"
# the trainer's logits grow with the tokens a device holds (dynamic bsz with room for all of them), and
# vLLM keeps its share through training (free_cache_engine=false): at util 0.4 and TP 1 the truth of
# STACK_A fits a step at half the maximum lengths and not one at them; util 0.3 and TP 2 fits both
SHAPE = ["hardware=a2_64g", "model=qwen3_0_6b", "verl.data.train_batch_size=8",
         "verl.actor_rollout_ref.actor.ppo_mini_batch_size=8", "verl.data.max_prompt_length=512",
         "verl.data.max_response_length=5632", f"{ROLLOUT}.free_cache_engine=false",
         "verl.actor_rollout_ref.actor.ppo_max_token_len_per_gpu=65536"]
WORST = [f"++{ROLLOUT}.ignore_eos=true", "++verl.data.shuffle=false"]
OWN = ("trainer.total_training_steps", "trainer.logger", "trainer.val_before_train")
NOTE = re.compile(r"\[verl-standin\] truth of stack (\S+): step (\d+) at prompt ([\d.]+) / response ([\d.]+) "
                  r"tokens needs ([\d.]+) GiB per device of ([\d.]+)")


def long_prompts_first(data_dir: Path) -> None:
    """A train file whose first batch (8 rows) holds prompts far longer than the file's mean: read in
    order, the first step's prompts reach max_prompt_length."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [{"prompt": [{"role": "user", "content": "w " * (1000 if i < 8 else 10)}]} for i in range(32)]
    data_dir.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), data_dir / "train.parquet")
    pq.write_table(pa.Table.from_pylist(rows[:8]), data_dir / "test.parquet")


def trial(tmp_path: Path, *overrides: str) -> tuple[DictConfig, Path, list[str]]:
    """A trial's composed config, saved where Hydra saves a job's, and the verl argv it launches."""
    long_prompts_first(tmp_path / "data")
    cfg = compose_config([*SHAPE, f"data.dir={tmp_path / 'data'}", *overrides])
    saved = tmp_path / "trial" / ".hydra" / "config.yaml"
    saved.parent.mkdir(parents=True)
    OmegaConf.save(cfg, saved)
    command = build_command(cfg, require_paths=False)
    argv = [a for a in command.argv[command.entrypoint_len:] if not a.lstrip("+").startswith(OWN)]
    return cfg, saved, argv


def run_under_truth(tmp_path: Path, saved: Path, argv: list[str], steps: int, *knobs: str):
    return run_standin(tmp_path, *argv, "+standin.truth=stack", f"+standin.truth_config={saved}", *knobs, *FAST,
                       f"trainer.total_training_steps={steps}", "trainer.logger=[console]",
                       "trainer.val_before_train=false", env=clean_env(**{STACK_ENV: STACK_A}))


def test_the_standin_ooms_on_the_truths_peak_at_the_maximum_lengths(tmp_path: Path) -> None:
    cfg, saved, argv = trial(tmp_path, f"{ROLLOUT}.gpu_memory_utilization=0.4",
                             f"{ROLLOUT}.tensor_model_parallel_size=1", *WORST)
    # seed 2: the first step's prompt noise is upwards, so its mean prompt is capped at max_prompt_length
    res = run_under_truth(tmp_path, saved, argv, 3, "+standin.seed=2")
    assert res.returncode == 1, res.stderr[-3000:]
    assert "torch.OutOfMemoryError: NPU out of memory" in res.stderr and steps_of(res.stdout) == []
    note = NOTE.search(res.stderr)
    assert note, res.stderr[-3000:]
    stack, step, prompt, response, peak, capacity = note.groups()
    assert (stack, step, prompt, response) == (STACK_A, "1", "512.0", "5632.0")
    worst = peaks_at(from_cfg(cfg), STACK_A)          # truth.py at every sequence's maximum length
    assert worst.oom
    assert (peak, capacity) == (f"{worst.device_peak_gb:.3f}", f"{worst.capacity_gb:.3f}")
    assert f"{worst.capacity_gb:.2f} GiB total capacity" in res.stderr       # verl's error names the truth's device


def test_the_standin_logs_the_truths_trainer_peak_and_tokens_per_second_at_each_steps_lengths(
        tmp_path: Path) -> None:
    cfg, saved, argv = trial(tmp_path, f"{ROLLOUT}.gpu_memory_utilization=0.3",
                             f"{ROLLOUT}.tensor_model_parallel_size=2", *WORST)
    res = run_under_truth(tmp_path, saved, argv, 2)
    assert res.returncode == 0, res.stderr[-3000:]
    assert steps_of(res.stdout) == [1, 2]
    inputs = from_cfg(cfg)
    for step in (1, 2):
        logged = console_metrics(res.stdout, step)
        lengths = Lengths(float(logged["prompt_length/mean"]), float(logged["response_length/mean"]))
        truth = peaks_at(inputs, STACK_A, lengths)
        assert not truth.oom
        assert float(logged["actor/perf/max_memory_allocated_gb"]) == pytest.approx(truth.trainer_peak_gb, abs=1e-4)
        assert float(logged["perf/throughput"]) == pytest.approx(truth.tok_s, rel=1e-6)


def test_a_truth_for_a_stack_without_one_is_a_usage_error(tmp_path: Path) -> None:
    res = run_standin(tmp_path, "+standin.truth=stack", env=clean_env(**{STACK_ENV: "cann=1.0,torch=0.1"}))
    assert res.returncode == 2
    assert "standin.truth='stack': no hidden truth for stack 'cann=1.0,torch=0.1'" in res.stderr
    missing = run_standin(tmp_path, "+standin.truth=stack", env=clean_env(**{STACK_ENV: STACK_A}))
    assert missing.returncode == 2 and "standin.truth needs the trial's composed config" in missing.stderr
