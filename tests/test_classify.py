"""The outcome classifier on real error texts (docs/ascend.md, Error signatures; docs/verl.md, Failure modes)."""
from __future__ import annotations

import signal

import pytest

from verlsweep.trial.classify import PATTERNS, LogScanner, classify, strip_prefix

# (expected outcome, a real line as printed by the driver or a Ray actor)
REAL_LINES = [
    ("oom", "RuntimeError: NPU out of memory. Tried to allocate 2.57 GiB (NPU 0; 60.96 GiB total capacity; "
            "57.49 GiB already allocated; 57.49 GiB current active; 1.96 GiB free; 57.62 GiB reserved in total by "
            "PyTorch) If reserved memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation."),
    ("oom", "(WorkerDict pid=4242) torch.OutOfMemoryError: NPU out of memory. Tried to allocate 674.00 MiB"),
    ("oom", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.95 GiB. GPU 0 has a total capacity of "
            "79.11 GiB of which 1.02 GiB is free."),
    ("oom", "RuntimeError: EL0004: [PID: 1234] The memory allocation failed."),
    ("oom", "(vLLMHttpServer pid=77) ValueError: Free memory on device (36.08/60.96 GiB) on startup is less than "
            "desired GPU memory utilization (0.6, 36.58 GiB). Decrease GPU memory utilization or reduce GPU memory "
            "used by other processes."),
    ("oom", "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
            "initializing the engine."),
    # vLLM >= 0.9 when the KV pool cannot hold one max-length request (vllm/v1/core/kv_cache_utils.py)
    ("oom", "(vLLMHttpServer pid=77) ValueError: To serve at least one request with the model's max seq len "
            "(32768), (4.50 GiB KV cache is needed, which is larger than the available KV cache memory (2.10 GiB). "
            "Based on the available memory, the estimated maximum model length is 15296."),
    ("oom", "ray.exceptions.RayTaskError(OutOfMemoryError): ray::TaskRunnerV1.run() (pid=14249, ip=10.0.0.2)"),
    ("hccl_timeout", "[Rank 3] Watchdog caught collective operation timeout: WorkHCCL(SeqNum=196, OpType=ALLREDUCE, "
                     "Timeout(ms)=3600000) ran for 3600185 milliseconds before timing out."),
    ("hccl_timeout", "EI0002: [PID: 99] 2025-01-01-00:00:00 The wait execution of the Notify register times out. "
                     "Reason: The Notify register has not received the Notify record from remote rank [unknown]."),
    ("hccl_timeout", "[W compiler_depend.ts:487] Warning: NPU warning, error code is 507048[Error]:"),
    ("hccl_timeout", "EI0006: [PID: 14862] Getting socket times out. Reason: Remote Rank did not send the data "
                     "in time."),
    ("hccl_timeout", "[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, "
                     "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600013 milliseconds before timing out."),
    ("no_devices", "ValueError: Total available GPUs 0 is less than total desired GPUs 8"),
    ("no_devices", "RuntimeError: torch_npu detected, but NPU device is not available or visible"),
    ("crash", "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task."),
    ("crash", "Fatal Python error: Segmentation fault"),
    ("config_error", "Could not override 'actor_rollout_ref.rollout.gpu_memory_utilisation'."),
    ("config_error", "Key 'gpu_memory_utilisation' is not in struct"),
    ("config_error", "hydra.errors.OverrideParseException: Error parsing override 'a=[1'"),
    # torch's CUDA init on a box without a usable GPU (torch/cuda/__init__.py _lazy_init)
    ("no_devices", "RuntimeError: No CUDA GPUs are available"),
    ("no_devices", "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and "
                   "installed a driver from http://www.nvidia.com/Download/index.aspx"),
    # Ray 2.60's raylet killing workers when the host runs low on memory (its binary's format strings)
    ("oom", "ray.exceptions.OutOfMemoryError: 1 worker(s) were killed due to the node running low on memory. "
            "Memory on the node (IP: 10.0.0.2, ID: 5f1c) was 480.52GB used / 503.48GB limit (0.954403)"),
    ("oom", "(raylet) 2 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to "
            "other reasons at node (ID: 5f1c, IP: 10.0.0.2) over the last time period."),
    # CANN's allocation failure without its error code: decides only for a process that died
    ("oom", "[ERROR] RUNTIME(4242,python):2026-12-03-10:00:00.000.000 Failed to allocate memory."),
    # vLLM before its v1 engine: the KV cache cannot hold one max-length sequence
    ("oom", "ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be "
            "stored in KV cache (21840). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` "
            "when initializing the engine."),
    ("hccl_timeout", "[Rank 3] Work WorkHCCL(SeqNum=12, OpType=ALLREDUCE, Timeout(ms)=1800000) timed out in blocking "
                     "wait (TORCH_HCCL_BLOCKING_WAIT=1)."),
    ("hccl_timeout", "terminate called after throwing an instance of 'c10::DistBackendError' what(): [PG 0 Rank 1] "
                     "HCCL watchdog thread terminated with exception"),
    # ACL graph capture out of streams (vllm-ascend docs/source/faqs.md, graph-mode entry)
    ("crash", "capture_begin:../torch_npu/csrc/core/npu/NPUGraph.cpp:230 NPU function error: "
              "c10_npu::acl::AclmdlRICaptureBegin(capture_stream_, capture_mode), error code is 207008"),
    ("crash", "[Error]: Stream resources are insufficient."),
]


def scan(*lines: str) -> LogScanner:
    scanner = LogScanner()
    for line in lines:
        scanner.feed(line + "\n")
    return scanner


@pytest.mark.parametrize("expected,line", REAL_LINES, ids=[f"{o}-{i}" for i, (o, _) in enumerate(REAL_LINES)])
def test_real_error_line_classifies_to_its_outcome_and_is_kept_as_excerpt(expected, line):
    diagnosis = classify(1, scan("INFO: starting", line, "Set the environment variable HYDRA_FULL_ERROR=1"), steps=0)
    assert diagnosis.outcome == expected
    assert strip_prefix(line) in diagnosis.excerpt


def test_every_row_of_the_classifier_is_the_one_that_decides_some_real_line():
    """A row shadowed by an earlier, broader row (or written for a text no tool prints) never decides anything."""
    deciding = {classify(1, scan(line), steps=0).reason for _, line in REAL_LINES}
    never = [f"{p.outcome}: {p.label}" for p in PATTERNS if p.label not in deciding]
    assert not never, "rows that decide none of REAL_LINES:\n" + "\n".join(never)


def test_the_first_failure_text_in_time_wins_an_oom_before_the_timeouts_and_dead_actors_it_causes():
    diagnosis = classify(1, scan(
        "torch.OutOfMemoryError: NPU out of memory. Tried to allocate 674.00 MiB",
        "[Rank 1] Watchdog caught collective operation timeout: WorkHCCL(SeqNum=1, OpType=ALLREDUCE)",
        "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
    ), steps=1)
    assert (diagnosis.outcome, diagnosis.reason) == ("oom", "npu out of memory")


def test_in_one_traceback_the_innermost_exception_is_the_cause_not_the_ray_wrapper_before_it():
    diagnosis = classify(1, scan(
        "Traceback (most recent call last):",
        '  File "main_ppo.py", line 1, in main',
        "ray.exceptions.RayTaskError(OutOfMemoryError): ray::TaskRunnerV1.run() (pid=7, ip=10.0.0.2)",
        '  File "engine_workers.py", line 2, in update_actor',
        "torch.OutOfMemoryError: NPU out of memory. Tried to allocate 674.00 MiB",
    ), steps=1)
    assert (diagnosis.outcome, diagnosis.reason) == ("oom", "npu out of memory")
    assert diagnosis.excerpt.startswith("torch.OutOfMemoryError: NPU out of memory")


def _oom_in(method: str) -> list[str]:
    """A worker OOM as Ray relays it from verl 0.9.1's engine worker: prefixed frames, the method innermost."""
    return ["(TaskRunnerV1 pid=7) Traceback (most recent call last):",
            '(TaskRunnerV1 pid=7)   File "verl/trainer/ppo/v1/trainer_base.py", line 900, in fit',
            "(TaskRunnerV1 pid=7) ray.exceptions.RayTaskError(OutOfMemoryError): ray::WorkerDict.actor_rollout_"
            f"{method}() (pid=8, ip=10.0.0.2)",
            '(TaskRunnerV1 pid=7)   File "verl/single_controller/ray/base.py", line 80, in func',
            f'(TaskRunnerV1 pid=7)   File "verl/workers/engine_workers.py", line 713, in {method}',
            "(TaskRunnerV1 pid=7) torch.OutOfMemoryError: NPU out of memory. Tried to allocate 674.00 MiB"]


@pytest.mark.parametrize("lines,phase", [
    (_oom_in("update_actor"), "training"),
    (_oom_in("compute_ref_log_prob"), "training"),
    (_oom_in("update_weights"), "rollout_wake"),
    (_oom_in("init_model"), None),               # model load: no rule reads it
    (["(vLLMHttpServer pid=77) ValueError: Free memory on device (36.08/60.96 GiB) on startup is less than desired "
      "GPU memory utilization (0.6, 36.58 GiB)."], "vllm_start"),
    (["ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`."], "kv_cache"),
    (["torch.OutOfMemoryError: NPU out of memory. Tried to allocate 674.00 MiB"], None),   # no traceback: unknown
], ids=["update_actor", "ref_log_prob", "update_weights", "init_model", "vllm_start", "kv_cache", "bare"])
def test_an_oom_names_its_phase_from_vllms_check_or_the_verl_worker_method_it_struck_in(lines, phase):
    diagnosis = classify(1, scan(*lines), steps=1)
    assert (diagnosis.outcome, diagnosis.phase) == ("oom", phase)


def test_a_failure_that_is_not_an_oom_has_no_phase():
    lines = [line.replace("RayTaskError(OutOfMemoryError)", "RayTaskError(RuntimeError)") for line in _oom_in(
        "update_actor")[:-1]]
    diagnosis = classify(1, scan(*lines, "RuntimeError: EI0002: The wait execution of the Notify register times out."),
                       steps=1)
    assert (diagnosis.outcome, diagnosis.phase) == ("hccl_timeout", None)


def test_an_hccl_timeout_after_an_allocation_warning_is_an_hccl_timeout():
    diagnosis = classify(1, scan(
        "(WorkerDict pid=7) WARNING: Failed to allocate pinned buffer, retrying",
        "(WorkerDict pid=8) [Rank 1] Watchdog caught collective operation timeout: WorkHCCL(SeqNum=1)",
    ), steps=1)
    assert diagnosis.outcome == "hccl_timeout"


def test_an_ambiguous_text_colours_a_process_that_died_but_never_a_limit_stop():
    warning = "(WorkerDict pid=7) WARNING: Failed to allocate pinned buffer, retrying"
    assert classify(1, scan(warning), steps=0).outcome == "oom"
    assert classify(-15, scan(warning), steps=0, stopped="hang", detail="runner.startup_timeout=3s").outcome == "hang"


def test_ray_260_host_memory_kill_is_oom_and_its_zero_kill_summary_is_not():
    oom = ("ray.exceptions.OutOfMemoryError: 1 worker(s) were killed due to the node running low on memory. "
           "Memory on the node (IP: 10.0.0.2, ID: 4f2a) was 1961.55GB used / 2015.12GB limit (0.973)")
    assert classify(1, scan(oom), steps=0).outcome == "oom"
    fine = ("(raylet) 0 Workers (tasks / actors) killed due to memory pressure (OOM), 1 Workers crashed due to "
            "other reasons at node (ID: 4f2a, IP: 10.0.0.2) over the last time period.")
    assert scan(fine).hits == {}
    assert classify(1, scan(fine.replace("(raylet) 0 ", "(raylet) 3 ")), steps=0).outcome == "oom"


@pytest.mark.parametrize("lines,fatal", [
    (["Traceback (most recent call last):", '  File "x.py", line 1, in <module>', "KeyError: 'reward_model'"], True),
    # Ray's unhandled-error log: a RayTaskError's frames and exception without a Traceback header
    (["2026-12-03 10:00:00,000\tERROR worker.py:440 -- Unhandled error (suppress with "
      "'RAY_IGNORE_UNHANDLED_ERRORS=1'): ray::WorkerDict.update() (pid=9, ip=10.0.0.2)",
      '  File "/x/verl/workers/engine_workers.py", line 3, in update',
      "torch.OutOfMemoryError: NPU out of memory. Tried to allocate 674.00 MiB"], True),
    (["ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task."], True),
    # every worker error reaches verl's driver log this way: Ray's prefix before each line, frames indented
    (["(TaskRunner pid=123) Traceback (most recent call last):",
      '(TaskRunner pid=123)   File "/x/verl/workers/engine_workers.py", line 812, in update_actor',
      "(TaskRunner pid=123)     output = self.engine.train_batch(data)",
      "(TaskRunner pid=123) RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB"], True),
    (["(WorkerDict pid=7) WARNING: Failed to allocate pinned buffer, retrying",
      "RuntimeError: mentioned in a log line, not raised", "ERROR [core.py:1] ValueError: logged"], False),
])
def test_fatal_texts_are_a_tracebacks_exception_line_or_rays_actor_died_notice(lines, fatal):
    scanner = LogScanner()
    assert any([scanner.feed(line) for line in lines]) == fatal


def test_excerpt_keeps_the_matched_line_and_two_following_lines_without_ray_prefix():
    diagnosis = classify(1, scan("(TaskRunnerV1 pid=12, ip=10.0.0.2) ValueError: Total available GPUs 0 is less than "
                               "total desired GPUs 8", "(TaskRunnerV1 pid=12) line two", "line three", "line four"),
                       steps=0)
    assert diagnosis.excerpt.splitlines() == [
        "ValueError: Total available GPUs 0 is less than total desired GPUs 8", "line two", "line three"]


def test_a_cause_printed_long_before_the_end_is_not_lost_to_the_tail_window():
    scanner = LogScanner(tail_lines=5)
    scanner.feed("RuntimeError: NPU out of memory. Tried to allocate 1.00 GiB")
    for i in range(100):
        scanner.feed(f"noise {i}")
    assert classify(1, scanner, steps=0).outcome == "oom"


def test_exit_zero_with_steps_is_completed_even_if_an_error_text_was_printed():
    assert classify(0, scan("WARNING: Failed to allocate pinned buffer, retrying"), steps=5).outcome == "completed"


def test_exit_zero_without_any_training_step_is_a_crash_not_a_silent_success():
    diagnosis = classify(0, scan("hello"), steps=0)
    assert diagnosis.outcome == "crash"
    assert "no training step" in diagnosis.reason


def test_unexplained_nonzero_exit_is_a_crash_with_the_last_exception_line():
    diagnosis = classify(1, scan("Traceback (most recent call last):", '  File "x.py", line 1',
                               "KeyError: 'reward_model'", "Set the environment variable HYDRA_FULL_ERROR=1"),
                       steps=0)
    assert (diagnosis.outcome, diagnosis.excerpt) == ("crash", "KeyError: 'reward_model'")


def test_death_by_signal_names_the_signal():
    diagnosis = classify(-signal.SIGKILL, scan("step:1 - a:1"), steps=1)
    assert diagnosis.outcome == "crash"
    assert "SIGKILL" in diagnosis.reason


def test_prune_wins_over_everything_in_the_log():
    diagnosis = classify(-15, scan("NPU out of memory. Tried to allocate 1 GiB"), steps=2, stopped="pruned")
    assert diagnosis.outcome == "pruned"


@pytest.mark.parametrize("stopped", ["hang", "timeout"])
def test_a_kill_for_a_limit_is_that_limit_unless_the_log_explains_it(stopped):
    plain = classify(-15, scan("INFO: pending: 0, running: 8, finished: 0, failure: 0"), steps=0,
                     stopped=stopped, detail="runner.startup_timeout=3s")
    assert plain.outcome == stopped
    assert "runner.startup_timeout=3s" in plain.excerpt and "pending: 0" in plain.excerpt
    explained = classify(-15, scan("EI0002: The wait execution of the Notify register times out."), steps=0,
                         stopped=stopped)
    assert explained.outcome == "hccl_timeout"


def test_a_hang_excerpt_names_the_phase_the_trial_was_stopped_in():
    def stopped_after(*lines: str, steps: int = 0) -> str:
        return classify(-15, scan(*lines), steps=steps, stopped="hang", detail="no step").excerpt

    assert "phase: starting verl" in stopped_after("Error executing nothing yet")
    assert "phase: TaskRunner" in stopped_after("ray init kwargs: {}",
                                                "INFO worker.py:2029 -- Started a local Ray instance.")
    # the furthest marker wins: vLLM servers keep printing after initialisation
    vllm_late = stopped_after("ray init kwargs: {}", "INFO:x:all initialize finished, ready to fit",
                              "(vLLMHttpServer pid=12) INFO: engine step")
    assert "phase: first rollout and training step" in vllm_late
    assert "phase: training, after step 3" in stopped_after("step:3 - x:1", steps=3)
