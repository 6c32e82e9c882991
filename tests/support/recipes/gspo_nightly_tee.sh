#!/usr/bin/env bash
# GSPO on Qwen3-8B, FSDP2 with sequence parallelism, 8 NPUs: the form of verl's Ascend nightly scripts
# (strict mode, a model id nested in the model path, a per-step token budget computed in bash, a log
# dir made before the launch, an env prefix on the launch, its output piped to tee). Written for
# verlsweep's tests.
set -xeuo pipefail

export HYDRA_FULL_ERROR=1
export HCCL_CONNECT_TIMEOUT=3600
export VLLM_USE_V1=1

MODEL_ID=${MODEL_ID:-Qwen/Qwen3-8B}
MODEL_PATH=${MODEL_PATH:-${HOME}/.cache/models/${MODEL_ID}}
TRAIN_FILE=${TRAIN_FILE:-$HOME/data/gsm8k/train.parquet}
TEST_FILE=${TEST_FILE:-$HOME/data/gsm8k/test.parquet}

LOG_DIR=${LOG_DIR:-$(mktemp -d)}
mkdir -p "$LOG_DIR"

BATCH=${BATCH:-32}
MINI=${MINI:-16}
PROMPT_LEN=${PROMPT_LEN:-2048}
RESPONSE_LEN=${RESPONSE_LEN:-2048}
SP=${SP:-2}
TP=${TP:-2}
MEM=${MEM:-0.7}
STEPS=${STEPS:-15}

seq_len=$((PROMPT_LEN + RESPONSE_LEN))
max_tokens=$((seq_len / SP))

DATA=(
    algorithm.adv_estimator=grpo
    data.train_files="${TRAIN_FILE}"
    data.val_files="${TEST_FILE}"
    data.train_batch_size=${BATCH}
    data.max_prompt_length=${PROMPT_LEN}
    data.max_response_length=${RESPONSE_LEN}
    data.truncation='left'
)
ACTOR=(
    actor_rollout_ref.model.path="${MODEL_PATH}"
    actor_rollout_ref.actor.strategy=fsdp2
    actor_rollout_ref.actor.policy_loss.loss_mode=gspo
    actor_rollout_ref.actor.use_dynamic_bsz=True
    actor_rollout_ref.actor.ppo_mini_batch_size=${MINI}
    actor_rollout_ref.actor.ppo_max_token_len_per_gpu=${max_tokens}
    actor_rollout_ref.actor.ulysses_sequence_parallel_size=${SP}
    actor_rollout_ref.actor.fsdp_config.param_offload=True
    actor_rollout_ref.actor.fsdp_config.optimizer_offload=True
    actor_rollout_ref.ref.strategy=fsdp2
    actor_rollout_ref.ref.log_prob_use_dynamic_bsz=True
    actor_rollout_ref.ref.log_prob_max_token_len_per_gpu=${max_tokens}
    actor_rollout_ref.ref.ulysses_sequence_parallel_size=${SP}
)
ROLLOUT=(
    actor_rollout_ref.rollout.name=vllm
    actor_rollout_ref.rollout.n=4
    actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=True
    actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=${max_tokens}
    actor_rollout_ref.rollout.gpu_memory_utilization=${MEM}
    actor_rollout_ref.rollout.tensor_model_parallel_size=${TP}
    actor_rollout_ref.rollout.max_num_batched_tokens=${seq_len}
    +actor_rollout_ref.rollout.engine_kwargs.vllm.compilation_config.cudagraph_capture_sizes="[4, 8, 16, 32]"
)
TRAINER=(
    trainer.logger='["console"]'
    trainer.project_name=gspo-nightly
    trainer.experiment_name=qwen3-8b-fsdp2
    trainer.device=npu
    trainer.nnodes=1
    trainer.n_gpus_per_node=8
    trainer.val_before_train=False
    trainer.save_freq=-1
    trainer.test_freq=-1
    trainer.total_training_steps=${STEPS}
)

PYTHONUNBUFFERED=1 python3 -m verl.trainer.main_ppo \
    "${DATA[@]}" \
    "${ACTOR[@]}" \
    "${ROLLOUT[@]}" \
    "${TRAINER[@]}" \
    "$@" 2>&1 | tee "$LOG_DIR/train.log"
