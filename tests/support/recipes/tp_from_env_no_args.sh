#!/usr/bin/env bash
# GRPO on Qwen3-8B whose only knob from the environment is the rollout's TP; it does not pass "$@" on.
# Written for verlsweep's tests (a script that cannot take every swept knob).
set -x
export HYDRA_FULL_ERROR=1
TP=${TP:-2}
python3 -m verl.trainer.main_ppo \
    algorithm.adv_estimator=grpo \
    data.train_files=$HOME/data/gsm8k/train.parquet \
    data.val_files=$HOME/data/gsm8k/test.parquet \
    data.train_batch_size=64 \
    actor_rollout_ref.actor.ppo_mini_batch_size=16 \
    actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2 \
    actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=4 \
    actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=4 \
    actor_rollout_ref.model.path=Qwen/Qwen3-8B \
    actor_rollout_ref.rollout.name=vllm \
    actor_rollout_ref.rollout.n=4 \
    actor_rollout_ref.rollout.tensor_model_parallel_size=$TP \
    trainer.n_gpus_per_node=8 \
    trainer.nnodes=1
