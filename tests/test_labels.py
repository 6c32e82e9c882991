"""Knob labels: trial names, terminal lines and report columns say the same short thing."""
from __future__ import annotations

from verlsweep.common.labels import clip, decimals_of, figure, knob_tokens, path_safe, show, trial_label

P = "verl.actor_rollout_ref"


def test_floats_are_shown_at_their_steps_precision():
    assert decimals_of(0.05) == 2
    assert show(0.9000000000000001, 0.05) == "0.90"
    assert show(0.30000000000000004, 0.1) == "0.3"
    assert show(0.123456789) == "0.1235"


def test_a_label_names_the_varying_knobs_short_with_the_offload_flags_collapsed():
    params = {f"{P}.rollout.gpu_memory_utilization": 0.9000000000000001,
              f"{P}.rollout.tensor_model_parallel_size": 2,
              f"{P}.actor.fsdp_config.param_offload": True,
              f"{P}.actor.fsdp_config.optimizer_offload": True,
              f"{P}.ref.fsdp_config.param_offload": False}
    knobs = " ".join(knob_tokens(params, {f"{P}.rollout.gpu_memory_utilization": 0.05}))
    assert knobs == "util=0.90 tp=2 off=p,o"
    assert trial_label(7, "oom", knobs) == "t07 oom util=0.90 tp=2 off=p,o"
    assert trial_label(7, None, knobs) == "t07 util=0.90 tp=2 off=p,o"
    assert path_safe(trial_label(7, None, knobs)) == "t07_util-0.90_tp-2_off-p+o"


def test_no_offload_flag_on_reads_as_a_dash_and_other_knobs_keep_a_short_suffix():
    params = {f"{P}.actor.fsdp_config.param_offload": False, f"{P}.rollout.max_num_seqs": 64,
              "verl.actor_rollout_ref.actor.optim.lr": 1e-6}
    assert knob_tokens(params) == ["off=-", "seqs=64", "lr=1e-06"]


def test_figures_side_by_side_keep_four_significant_digits_and_their_trailing_zeros():
    assert [figure(v) for v in (343.0, 340.66, 1012.53, 0.54, 410.1137)] == ["343.0", "340.7", "1013", "0.5400",
                                                                             "410.1"]


def test_a_clipped_label_ends_after_a_whole_word():
    label = "max_tok=16384 log_prob_max_token_len_per_gpu=16384 batched_tokens=8192 enforce_eager=False"
    assert clip(label, 60) == "max_tok=16384 log_prob_max_token_len_per_gpu=16384 …"
    assert clip(label, len(label)) == label
    assert len(clip(label, 40)) <= 40 and clip("x" * 50, 10) == "x" * 9 + "…"
