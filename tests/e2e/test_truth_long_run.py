"""One hidden truth decides both what a sweep's trials measure and which config survives the long run.

A stand-in sweep (the verl stand-in as runner=verl launches it) whose trials follow the truth of one
stack (tests/support/standin/truth.py, through the stand-in's knob `truth`: truth_steps.py): the trials'
tokens/s and trainer peaks are the truth's at each step's lengths. The fastest config completes its 5
steps, whose responses are about half of max_response_length (lengths.py), and runs out of memory at
the maximum lengths of its confirmation (ignore_eos, the train file sorted longest prompt first) under
the same truth; the next one survives them and is declared the best.
"""
from __future__ import annotations

import csv
import re

import pytest

from tests.support.standin.truth import STACK_A, TruePoint, peaks_at
from tests.support.trial_helpers import NO_CONFIRM, copy_store, new_mark, run_sweep, standin_entrypoint, tiny_overrides
from verlsweep.command.compose import compose_config
from verlsweep.common.stack import STACK_ENV
from verlsweep.plan import from_cfg
from verlsweep.plan.predictor.lengths import Lengths

pytestmark = pytest.mark.slow

ROLLOUT = "verl.actor_rollout_ref.rollout"
UTIL, TP = f"{ROLLOUT}.gpu_memory_utilization", f"{ROLLOUT}.tensor_model_parallel_size"
OFFLOADS = ("verl.actor_rollout_ref.actor.fsdp_config.param_offload",
            "verl.actor_rollout_ref.actor.fsdp_config.optimizer_offload",
            "verl.actor_rollout_ref.ref.fsdp_config.param_offload")
LENGTHS = {"verl.data.max_prompt_length": 512, "verl.data.max_response_length": 5632}
# the trainer's logits grow with the tokens a device holds (dynamic bsz with room for all of them) and
# vLLM keeps its share through training (free_cache_engine=false), so util and the lengths add up
SHAPE = [*(f"{k}={v}" for k, v in LENGTHS.items()), f"{ROLLOUT}.free_cache_engine=false",
         "verl.actor_rollout_ref.actor.ppo_max_token_len_per_gpu=65536"]
FAST, SAFE = {UTIL: 0.4, TP: 1}, {UTIL: 0.3, TP: 2}      # TP 1 decodes faster; util 0.3 leaves room
NOTE = re.compile(r"truth of stack (?P<stack>\S+): step (?P<step>\d+) at prompt (?P<prompt>[\d.]+) / "
                  r"response (?P<response>[\d.]+) tokens needs (?P<peak>[\d.]+) GiB")


def _entry(knobs: dict[str, float]) -> str:
    values = {**knobs, **dict.fromkeys(OFFLOADS, "false")}
    return "{" + ",".join(f"{k}:{v}" for k, v in values.items()) + "}"


def _truth(knobs: dict[str, float], prompt: float, response: float) -> TruePoint:
    cfg = compose_config(["hardware=a2_64g", "model=qwen3_0_6b", "verl.data.train_batch_size=8",
                          "verl.actor_rollout_ref.actor.ppo_mini_batch_size=8", *SHAPE,
                          *(f"{k}={v}" for k, v in knobs.items()), *(f"{k}=false" for k in OFFLOADS)])
    return peaks_at(from_cfg(cfg), STACK_A, Lengths(prompt, response))


def test_the_fastest_config_under_a_stacks_truth_fails_at_max_lengths_and_one_that_survives_is_declared(
        tiny_model_dir, gsm8k_dir, empty_mlflow_db, tmp_path):
    uri = copy_store(empty_mlflow_db, tmp_path)
    base = [a for a in tiny_overrides(tiny_model_dir, gsm8k_dir, tmp_path / "out", uri)
            if a != NO_CONFIRM and a.split("=", 1)[0] not in LENGTHS]
    proc = run_sweep(tmp_path, [
        *base, *SHAPE, standin_entrypoint(), "validate.verl=false", "trial.steps=5",
        "study.long_run.confirm=1", "study.long_run.confirm_steps=2",
        "+env.VERL_STANDIN_TRUTH=stack", "+env.VERL_STANDIN_STEP_SECONDS=0.01", "hydra/sweeper/pruner=none",
        "study.enqueue_recipe=false", "study.guide.top_k=0", "study.proofs=false", "hydra.sweeper.n_trials=2",
        f"hydra.sweeper.enqueue=[{_entry(FAST)},{_entry(SAFE)}]", f"hydra.sweep.dir={tmp_path / 'sweep'}",
    ], new_mark(), multirun=True, env={STACK_ENV: STACK_A})
    assert proc.returncode == 0, proc.stderr[-3000:]
    sweep = tmp_path / "sweep"
    rows = {int(r["number"]): r for r in csv.DictReader((sweep / "trials.csv").open())}
    # both ordinary trials complete their 5 steps under the truth, the fast one faster
    assert [rows[n]["outcome"] for n in (0, 1)] == ["completed"] * 2, proc.stdout[-3000:]
    assert float(rows[0]["objective"]) > float(rows[1]["objective"])
    # the truth's own numbers: tokens/s at a 5-step trial's lengths, the fast config's device peak fits
    # there and passes the device at the maximum lengths; the safe one fits at them
    max_p, max_r = LENGTHS.values()
    assert float(rows[0]["objective"]) == pytest.approx(_truth(FAST, 0.45 * max_p, 0.48 * max_r).tok_s,
                                                        rel=0.06)
    assert not _truth(FAST, 0.45 * max_p, 0.52 * max_r).oom
    assert _truth(FAST, 0.45 * max_p, max_r).oom and not _truth(SAFE, max_p, max_r).oom
    # the fastest is confirmed first (study.long_run.confirm=1) and fails; the next is confirmed, passes
    assert [(rows[n]["confirms"], rows[n]["outcome"]) for n in (2, 3)] == [("0", "oom"), ("1", "completed")]
    assert rows[0]["long_run"].startswith(f"fails at max lengths at prompt {max_p} / response {max_r}: trial 2 "
                                          "ended oom"), rows[0]["long_run"]
    assert rows[1]["long_run"].startswith(f"confirmed at prompt {max_p} / response {max_r} by trial 3"), rows[1]
    assert "trial_number: 1\n" in (sweep / "best.yaml").read_text()
    # the confirmation's OOM is the truth's: its stand-in says which stack, at which lengths, what it needed
    log = next(sweep.glob("2*/trial.log")).read_text()
    note = NOTE.search(log)
    assert note and "torch.OutOfMemoryError: NPU out of memory" in log, log[-3000:]
    assert note["stack"] == STACK_A and note["step"] == "1" and float(note["response"]) == max_r
    truth = _truth(FAST, float(note["prompt"]), max_r)
    assert note["peak"] == f"{truth.device_peak_gb:.3f}" and truth.oom
