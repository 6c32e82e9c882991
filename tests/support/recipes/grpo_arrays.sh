#!/usr/bin/env bash
# GRPO on Qwen3-8B with the overrides grouped in arrays, two training files and the model by its hub id.
# Written for verlsweep's tests in the form of verl's array-style example scripts.
set -xeuo pipefail

export VLLM_ASCEND_ENABLE_NZ=0
export HCCL_BUFFSIZE=512

gsm8k_train=$HOME/data/gsm8k/train.parquet
math_train=$HOME/data/math/train.parquet
train_files="['$gsm8k_train', '$math_train']"
test_files="['$HOME/data/gsm8k/test.parquet']"

ROLLOUT_TP=${ROLLOUT_TP:-4}
UTIL=${UTIL:-0.7}

DATA=(
    algorithm.adv_estimator=grpo
    data.train_files="$train_files"
    data.val_files="$test_files"
    data.train_batch_size=64
    data.max_prompt_length=512
    data.max_response_length=2048
    data.filter_overlong_prompts=True
    data.truncation=error
)
MODEL=(
    actor_rollout_ref.model.path=Qwen/Qwen3-8B
    actor_rollout_ref.model.use_remove_padding=True
    actor_rollout_ref.model.enable_gradient_checkpointing=True
)
ACTOR=(
    actor_rollout_ref.actor.optim.lr=1e-6
    actor_rollout_ref.actor.ppo_mini_batch_size=16
    actor_rollout_ref.actor.use_dynamic_bsz=True
    actor_rollout_ref.actor.ppo_max_token_len_per_gpu=20480
    actor_rollout_ref.actor.use_kl_loss=True
    actor_rollout_ref.actor.kl_loss_coef=0.001
    actor_rollout_ref.actor.fsdp_config.param_offload=False
    actor_rollout_ref.actor.fsdp_config.optimizer_offload=False
)
ROLLOUT=(
    actor_rollout_ref.rollout.name=vllm
    actor_rollout_ref.rollout.n=5
    actor_rollout_ref.rollout.tensor_model_parallel_size=$ROLLOUT_TP
    actor_rollout_ref.rollout.gpu_memory_utilization=$UTIL
    actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True
    actor_rollout_ref.ref.log_prob_use_dynamic_bsz=True
)

python3 -m verl.trainer.main_ppo \
    "${DATA[@]}" \
    "${MODEL[@]}" \
    "${ACTOR[@]}" \
    "${ROLLOUT[@]}" \
    algorithm.use_kl_in_reward=False \
    trainer.critic_warmup=0 \
    trainer.logger='["console","wandb"]' \
    trainer.project_name=verl_grpo_example \
    trainer.experiment_name=qwen3_8b_arrays \
    trainer.n_gpus_per_node=8 \
    trainer.nnodes=1 \
    trainer.save_freq=-1 \
    trainer.test_freq=10 \
    trainer.total_epochs=15 "$@"
