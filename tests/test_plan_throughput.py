"""verlsweep.plan.predictor.throughput: the roofline of one colocated verl step in verl's perf/throughput unit
(tokens / (step time x devices)). Pinned here: the unit, which knobs move which component, and the
TP / util ordering the model gives and why."""
from __future__ import annotations

import pytest

from verlsweep.command.compose import compose_config
from verlsweep.plan import from_cfg, predict
from verlsweep.plan.predictor import calibration
from verlsweep.plan.predictor.lengths import expected_lengths
from verlsweep.plan.predictor.memory import memory_per_phase
from verlsweep.plan.predictor.throughput import Throughput, step_throughput

CAL = calibration.load()
C = CAL.constants
ROLLOUT = "verl.actor_rollout_ref.rollout"
TRAINING = ("old_log_prob", "update_actor", "ref")


def inputs(*overrides: str, algorithm: str = "grpo"):
    return from_cfg(compose_config(["hardware=a2_64g", "model=qwen3_8b", f"algorithm={algorithm}", *overrides]))


@pytest.fixture(scope="module")
def base():
    return inputs()


def throughput(inp) -> Throughput:
    lengths = expected_lengths(inp, C)
    return step_throughput(inp, C, lengths, memory_per_phase(inp, C).kv_tokens)


def test_tok_s_is_verls_unit_every_trained_token_per_second_per_device(base):
    t = throughput(base)
    lengths = expected_lengths(base, C)
    assert t.tokens_per_step == pytest.approx(base.train_batch_size * base.rollout.n * lengths.seq)
    assert t.step_s == pytest.approx(sum(t.parts.values()))
    assert t.tok_s == pytest.approx(t.tokens_per_step / (t.step_s * 8))
    assert t.world == 8


def test_the_step_has_one_part_per_component_and_grpo_has_a_ref_but_no_critic(base):
    parts = throughput(base).parts
    assert set(parts) == {"gen", *TRAINING, "offload", "host_adam", "update_weights", "other"}
    assert parts["other"] == C.step_overhead_s
    assert all(v >= 0 for v in parts.values())


def test_ppo_adds_the_critics_values_and_update_and_remax_a_greedy_generation():
    ppo = throughput(inputs(algorithm="ppo")).parts
    assert {"values", "update_critic"} <= set(ppo)
    remax = throughput(inputs(algorithm="remax")).parts
    assert remax["gen_baseline"] > 0
    assert "gen_baseline" not in throughput(inputs()).parts


@pytest.mark.parametrize("tp, util", [(1, 0.4), (4, 0.8), (8, 0.6)])
def test_rollout_knobs_leave_the_training_passes_alone(base, tp, util):
    here, there = throughput(base).parts, throughput(base.with_knobs(tp=tp, util=util)).parts
    assert {k: here[k] for k in TRAINING} == pytest.approx({k: there[k] for k in TRAINING})


def test_offloading_the_actor_costs_host_link_time_and_nothing_on_the_device(base):
    on = throughput(base.with_knobs(param_offload=True, optimizer_offload=True)).parts
    off = throughput(base.with_knobs(param_offload=False, optimizer_offload=False)).parts
    assert on["offload"] > off["offload"]
    assert {k: on[k] for k in TRAINING} == pytest.approx({k: off[k] for k in TRAINING})


def test_more_tp_means_less_of_the_vllm_weights_to_sync_and_copy_per_device(base):
    sync = [throughput(base.with_knobs(tp=tp)).parts["update_weights"] for tp in (1, 2, 4, 8)]
    assert sync == sorted(sync, reverse=True) and sync[0] > sync[-1]


def test_eager_mode_pays_the_per_step_launch_overhead_graphs_avoid():
    """The recipe captures graphs up to 32 sequences: a batch of at most 16 decodes in them."""
    small = f"{ROLLOUT}.max_num_seqs=16"
    graphs = throughput(inputs(small)).parts["gen"]
    eager = throughput(inputs(small, f"{ROLLOUT}.enforce_eager=true")).parts["gen"]
    assert C.eager_step_overhead_ms > C.graph_step_overhead_ms
    assert eager > graphs


def test_a_batch_beyond_the_largest_captured_size_runs_eager_and_only_the_tail_replays_graphs(base):
    """The bulk of a call runs the whole concurrent batch, above the largest capture size: eager. Only the
    tail, the longest sequences finishing alone, fits a graph."""
    assert predict(base, CAL).concurrency > max(base.rollout.capture_sizes)
    eager = throughput(inputs(f"{ROLLOUT}.enforce_eager=true")).parts["gen"]
    sizes = "[" + ",".join(str(s) for s in range(8, 513, 8)) + "]"
    every_step_captured = throughput(inputs(
        f"{ROLLOUT}.engine_kwargs.vllm.compilation_config.cudagraph_capture_sizes={sizes}")).parts["gen"]
    assert every_step_captured < throughput(base).parts["gen"] < eager


@pytest.mark.parametrize("algorithm", ["grpo", "remax"])
@pytest.mark.parametrize("hardware", ["a2_64g", "a3_64g"])
@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_more_util_never_slows_generation(hardware, tp, algorithm):
    """A higher util holds more sequences at once (more KV cache), so a call takes fewer decode steps; at
    TP 1 on a3_64g the planner once predicted the opposite, where a mean batch crossed the capture size."""
    inp = inputs(f"hardware={hardware}", algorithm=algorithm)
    gens = [throughput(inp.with_knobs(tp=tp, util=u)).parts["gen"] for u in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)]
    assert all(a >= b - 1e-9 for a, b in zip(gens, gens[1:]))


def test_where_the_kv_cache_caps_the_batch_more_tp_frees_it_and_generation_speeds_up(base):
    """TP 1 at util 0.4: the weights leave little KV cache, so a replica decodes fewer sequences at once
    than max_num_seqs; TP 2 halves the weights per device and lifts that cap."""
    one, two = (predict(base.with_knobs(tp=tp, util=0.4), CAL) for tp in (1, 2))
    assert one.concurrency < base.rollout.max_num_seqs           # the precondition: KV-bound at TP 1
    assert one.kv_tokens < two.kv_tokens
    assert two.time_s["gen"] < one.time_s["gen"] and two.tok_s > one.tok_s


def test_where_max_num_seqs_caps_the_batch_more_tp_only_means_fewer_replicas_and_slower_generation():
    """With the batch capped by max_num_seqs, not the KV cache, TP x 2 halves the replicas: each decodes
    twice the sequences in twice the steps, and a step reads the weights / TP plus the KV of the same
    batch, with the TP all-reduce on top, so generation slows and tok/s falls as TP grows."""
    inp = inputs(f"{ROLLOUT}.max_num_seqs=32", f"{ROLLOUT}.gpu_memory_utilization=0.9")
    verdicts = {tp: predict(inp.with_knobs(tp=tp), CAL) for tp in (2, 4, 8)}
    assert all(v.concurrency == 32 for v in verdicts.values())   # the precondition: max_num_seqs-bound
    gens = [verdicts[tp].time_s["gen"] for tp in (2, 4, 8)]
    toks = [verdicts[tp].tok_s for tp in (2, 4, 8)]
    assert gens == sorted(gens) and gens[0] < gens[-1]
    assert toks == sorted(toks, reverse=True) and toks[0] > toks[-1]
