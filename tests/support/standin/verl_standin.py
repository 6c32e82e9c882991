#!/usr/bin/env python3
"""A verl-faithful stand-in for ``python -m verl.trainer.main_ppo`` (tests only; no GPU/NPU needed).

Run it exactly like verl, from the repository root::

    python tests/support/standin/verl_standin.py <hydra overrides...> [+standin.KNOB=VALUE ...]
    python -m tests.support.standin.verl_standin <hydra overrides...> [+standin.KNOB=VALUE ...]

What is real and what is simulated
----------------------------------
* **Config**: the installed verl's own ``verl/trainer/config/ppo_trainer.yaml`` is composed by the real
  ``@hydra.main`` (absolute ``config_path`` found with ``importlib.util.find_spec('verl')``, so neither verl,
  torch nor ray is imported). Unknown keys, ``+``/``++`` semantics, ``--cfg job``, ``--help``, the
  ``outputs/<date>/<time>/.hydra`` run dir, "Error executing job with overrides: [...]" and the exit code 1 of
  ``hydra._internal.utils.run_and_report`` are therefore Hydra's, byte for byte. Only Hydra's struct checks run;
  verl's ``validate_config`` / dataclass checks (``verl/utils/config.py``) are *not* reproduced.
* **Tracking**: ``mlflow`` and ``file`` backends run verl's *own* ``Tracking`` class: the installed
  ``verl/utils/tracking.py`` is loaded from its file (it imports only stdlib, orjson and packaging at module level),
  so ``MLFLOW_TRACKING_URI`` (default ``sqlite:////tmp/mlruns.db``), ``MLFLOW_RUN_ID`` -> ``mlflow.start_run(run_id=)``
  else ``set_experiment(project_name)`` + ``start_run(run_name=experiment_name)``, the 3x5 s retry loop,
  ``log_params(_compute_mlflow_params_from_objects(config))`` (whole resolved config flattened with ``/``), metric-key
  sanitising (``@`` -> ``_at_`` ...) and ``FileLogger`` (``$VERL_FILE_LOGGER_PATH`` or
  ``$VERL_FILE_LOGGER_ROOT/<project>/<experiment>.jsonl``, ``{"step": N, "data": {...}}`` per line) are verl's code.
  The ``console`` backend is reproduced here (``concat_dict_to_str`` imports torch). Other valid backends
  (wandb, tensorboard, ...) are skipped with a note on stderr; an invalid one fails like verl
  (``AssertionError: X is not supported`` inside the TaskRunner).
* **MLflow run status** (verl 0.9.1, checked in the installed source): ``TaskRunnerV1.run`` has
  ``finally: tracking.finish(exit_code=...)`` and ``_MlflowLoggingAdapter.finish`` calls ``mlflow.end_run()``,
  i.e. status FINISHED *even when training failed* (``exit_code`` is ignored for mlflow). The legacy trainer never
  calls ``finish`` but ``Tracking.__del__`` does the same when ``fit``'s frame is released. The stand-in calls
  ``finish()`` at the same points. A run is left RUNNING when the process dies without reaching it (``crash``,
  ``hang``/``stall`` killed from outside: the real run lives in the TaskRunner actor, which Ray SIGKILLs, so neither
  ``finally`` nor mlflow's ``atexit`` end it) and is never touched when the failure happens before ``fit()``
  (``no_devices``, ``vllm_*``, ``hccl_connect_timeout``, ``fail_at_step=0``): no MLflow join and no JSONL file.
* **Environment**: the "actor" part runs with the driver's environment plus the composed
  ``ray_kwargs.ray_init.runtime_env.env_vars`` (verl's defaults and any
  ``+ray_kwargs.ray_init.runtime_env.env_vars.X=``), as Ray's actors do, so
  ``MLFLOW_RUN_ID``/``VERL_FILE_LOGGER_PATH`` may come either way. With ``RAY_ADDRESS`` set (an existing
  cluster, whose raylets start the actors with their own environment) the driver's environment is
  dropped first, but for ``CLUSTER_ENV``; only the runtime_env reaches the actor. Like verl, Hydra writes its
  run dir (``outputs/<date>/<time>/.hydra``, ``main_ppo.log``) under the cwd unless ``hydra.run.dir=`` is given.
* **Console**: driver lines go to the process stdout/stderr unprefixed; "actor" lines carry Ray's log prefix
  ``(TaskRunnerV1 pid=N) `` (``(TaskRunner pid=N)`` when ``trainer.use_v1=False``), ``(WorkerDict pid=N)``,
  ``(vLLMHttpServer pid=N)`` or ``(raylet)``; actor stdout -> stdout, actor stderr -> stderr, as Ray's log monitor
  does. Colours as Ray 2.60 prints them by default: the prefix in ANSI cyan (the raylet's in yellow, one colour
  per pid with ``RAY_COLOR_PREFIX=1``, none with ``RAY_COLOR_PREFIX=0``; ray/_private/worker.py
  ``print_worker_logs``), and ``ray::Cls.method()`` in a RayTaskError's header always in cyan
  (ray/exceptions.py ``RayTaskError.__str__``). Per step:
  ``(TaskRunnerV1 pid=N) step:3 - actor/pg_loss:... - perf/throughput:...`` with verl's
  ``concat_dict_to_str`` rules (numbers only, ``pprint.pformat`` values, so numpy scalars print as
  ``np.float64(...)``/``np.int64(...)``).
* **Failures** raise the error the Ray driver would re-raise (``ray.exceptions.RayTaskError(<Cause>)`` with the
  nested TaskRunner/worker traceback text and verl/torch/ray source lines read from the installed files) from
  synthetic frames compiled with the real file names and line numbers of ``main_ppo.main`` -> ``run_ppo`` ->
  ``ray.get`` (so Hydra prints the traceback verl's driver prints). Numbers, pids, actor ids and timestamps are
  made up; the error *texts* are verbatim from the sources cited below.
* **Processes**: at "ray.init" the stand-in starts one child (the "raylet") which forks a grandchild (the
  "TaskRunner worker" whose pid is used in the log prefix), all in the caller's process group. On a normal exit they
  are killed (as ``ray.shutdown`` does). Otherwise they follow the parent's death within ~0.2 s (Ray's fate
  sharing) -- except in ``hang``/``stall``, where they deliberately outlive a killed leader (for at most
  ``child_lifetime_s``) so a test can prove the *whole process group* was killed. SIGTERM to the leader (after
  "ray.init") exits with status 15 like Ray's driver handler ``sys.exit(signum)``, after killing the children.
* **Metrics**: verl 0.9 names; values come from a deterministic model (seed, step and the config's
  ``rollout.gpu_memory_utilization``, ``rollout.tensor_model_parallel_size``, ``actor.fsdp_config.param_offload`` /
  ``optimizer_offload``, batch and lengths). Timings (``timing_s/*``, ``perf/time_per_step``) are *simulated*
  seconds consistent with ``perf/throughput = perf/total_num_tokens / (perf/time_per_step * n_gpus)``; the real
  pace is ``step_seconds``. ``trainer.val_before_train`` (default True) logs validation metrics at step 0, as verl
  does, so an ok run writes ``total_training_steps + 1`` JSONL/console records by default.

Knobs (never part of verl's config; stripped from argv before Hydra sees it)
---------------------------------------------------------------------------
Give as ``+standin.KNOB=VALUE`` (``standin.``/``++standin.`` also accepted) or env ``VERL_STANDIN_<KNOB>``
(upper case); the override wins. An unknown knob or mode exits 2.

=====================  ==========  ==================================================================
knob                   default     meaning
=====================  ==========  ==================================================================
mode                   ok          ok | auto | oom | vllm_cache_oom | vllm_startup_oom | hccl_timeout |
                                   hccl_connect_timeout | crash | ray_actor_died | hang | stall |
                                   slow_start | no_devices | noisy | oom_linger | unschedulable
fail_at_step           2           step at which oom/hccl_timeout/ray_actor_died/crash/stall/oom_linger strike
                                   (steps before it are logged); 0 = during worker init (before fit)
step_seconds           0.05        real seconds slept per training step
startup_seconds        0 (5 for    real seconds slept while "loading models" (before fit, before MLflow)
                       slow_start)
throughput             1000        base tokens/s/device of the throughput model
peak_memory_gb         24          actor peak memory before offload factors
length_gib             0           what a batch at maximum lengths adds to the trainer peak; ``auto`` OOMs
                                   at the first step that no longer fits (lengths.py: responses grow with
                                   the step, ``ignore_eos`` and ``data.shuffle=False`` honoured)
truth                  (off)       ``stack`` (the stack ``VERLSWEEP_STACK`` states) or a stack as it states one:
                                   memory and tokens/s from that stack's hidden truth (truth.py) at each step's
                                   lengths; ``ok``/``auto`` then OOM at the first step whose true device peak
                                   passes the truth's device capacity (truth_steps.py); a stack without a truth
                                   exits 2
truth_config           (trial's)   the trial's composed config the truth plans from (default
                                   ``$VERLSWEEP_TRIAL_DIR/.hydra/config.yaml``, what Hydra saved for the job)
seed                   0           seed of the deterministic per-step noise
device_memory_gib      60.96       device capacity (torch_npu's "total capacity" of a 64 GB Ascend 910B)
model_weights_gib      16          rollout weights (split by TP) for ``auto``'s KV-cache check
steps_per_epoch        1           used when trainer.total_training_steps is null
                                   (steps = trainer.total_epochs * steps_per_epoch)
signal                 SIGSEGV     signal for ``crash`` (name or number)
child_lifetime_s       600         upper bound on the life of hang/stall children left behind
=====================  ==========  ==================================================================

``noisy`` prints lines healthy runs print too while "loading models" (an allocator retry warning
``WARNING: Failed to allocate pinned buffer, retrying``; an HCCL environment warning in torch's c10d wording,
``Environment variable HCCL_BLOCKING_WAIT is deprecated; use TORCH_HCCL_BLOCKING_WAIT instead`` from libtorch's
``Environment variable `` / `` is deprecated; use `` strings; Ray 2.60's per-node worker-failure summary counting
``0 Workers (tasks / actors) killed due to memory pressure (OOM)``) and then trains like ``ok``. ``oom_linger``
logs ``fail_at_step - 1`` steps, then a worker's NPU OOM that nobody ``ray.get``s -- Ray's driver logs it as
``Unhandled error (suppress with 'RAY_IGNORE_UNHANDLED_ERRORS=1'): <RayTaskError text>``
(ray/_private/worker.py ``_unhandled_error_handler``) -- and keeps polling like ``stall`` without exiting.

``auto`` derives the outcome from the config with a simple Ascend memory model: vLLM startup needs
``util*capacity`` free next to the resident FSDP state (else ``vllm_startup_oom``), the KV cache needs
``util*capacity - weights/TP - 2 GiB > 0`` (else ``vllm_cache_oom``), training needs its peak plus ~3.3 GiB
(plus the KV cache when ``rollout.free_cache_engine=False``) (else ``oom`` at step 1).

Exit status: 0 ok/slow_start/auto-ok; 1 every raised failure (Hydra's ``run_and_report``); ``-signal`` for crash
(default -11); hang/stall never exit (SIGTERM -> 15, SIGKILL -> -9); 2 stand-in usage errors. ``hang`` prints the
startup lines, joins MLflow and creates the JSONL file, then logs verl's replay-buffer poll line
(``INFO:<time>:pending: 0, running: N, finished: 0, failure: 0``) every ``$VERL_REPLAY_BUFFER_DEBUG_INTERVAL_SECONDS``
(default 60, as verl) without any ``step:`` line; ``stall`` does the same after logging the steps before
``fail_at_step``. ``unschedulable`` starts a *real* local Ray and waits forever on TransferQueue's storage
placement group of ``transfer_queue.backend.SimpleStorage.num_data_storage_units`` one-CPU bundles
(ray_placement.py next to this file, where its sources are cited); it never exits by itself.

Sources whose behaviour or text is reproduced (installed verl 0.9.1 wheel, ray 2.60.0, hydra-core 1.3.8)
-----------------------------------------------------------------------------------------------------
* verl/trainer/main_ppo.py: ``main`` (hydra.main on config/ppo_trainer, ``auto_set_device``, legacy-trainer warning
  text), ``run_ppo`` (``print(f"ray init kwargs: {...}")``, ``ray.get(runner.run.remote(config))``),
  ``TaskRunnerV1.run`` (``config.transfer_queue.enable = True``, ``pprint`` of the resolved config,
  ``finally: tracking.finish(exit_code=...)``).
* verl/trainer/main_ppo_v0.py: ``TaskRunner.run`` (``TaskRunner hostname: ..., PID: ...`` line, pprint).
* verl/trainer/constants_ppo.py: ``PPO_RAY_RUNTIME_ENV`` / ``get_ppo_ray_runtime_env`` (env var names only).
* verl/trainer/ppo/v1/trainer_base.py: ``fit`` (Tracking built at fit start, "Initial validation metrics" pprint,
  step-0 validation log, ``test_freq``, "Final validation metrics"), ``_compute_metrics`` (metric names,
  numpy-typed ``training/num_turns/*`` and ``training/off_policy/*``), ``_update_actor`` (``actor/`` rename,
  ``perf/mfu/actor``), ``_val_metrics_update`` (``val-core``/``val-aux`` names); verl/trainer/ppo/ray_trainer.py
  (legacy fit; ``reduce_metrics`` makes ``actor/*`` numpy scalars).
* verl/trainer/ppo/metric_utils.py: ``compute_data_metrics``, ``compute_timing_metrics``,
  ``compute_throughout_metrics`` (``perf/throughput = total_num_tokens / (time * n_gpus)``).
* verl/workers/engine_workers.py ``_postprocess_output`` (``perf/max_memory_*_gb``, ``perf/cpu_memory_used_gb``).
* verl/utils/logger/aggregate_logger.py: ``concat_dict_to_str`` / ``LocalLogger.log`` (console line format).
* verl/utils/tracking.py: ``Tracking``, ``FileLogger``, ``_MlflowLoggingAdapter``,
  ``_compute_mlflow_params_from_objects`` (executed, not copied).
* verl/utils/logging_utils.py: ``configure_verl_logging`` (``%(levelname)s:%(asctime)s:%(message)s`` on stderr).
* verl/trainer/ppo/v1/replay_buffer.py: ``_wait_for_next_poll`` (poll line and
  ``VERL_REPLAY_BUFFER_DEBUG_INTERVAL_SECONDS``).
* verl/single_controller/ray/base.py: ``ResourcePoolManager._check_resource_available``
  (``Total available GPUs 0 is less than total desired GPUs N``), ``func_generator`` (``output = ray.get(output)``),
  ``create_colocated_worker_cls`` (``WorkerDict``).
* ray 2.60.0: ray/exceptions.py ``RayTaskError.__str__`` / ``as_instanceof_cause`` (``RayTaskError(<Cause>)`` class
  name, ``ray::Cls.method() (pid=, ip=, actor_id=, repr=)`` header), ``ActorDiedError`` (BASE_ERROR_MSG and context
  lines); ray/_private/worker.py (``Started a local Ray instance.`` log line, driver ``sigterm_handler``
  ``sys.exit(signum)``, ``get`` -> ``raise value.as_instanceof_cause()``); raylet binary strings
  ("The actor is dead because its worker process has died.", "A worker died or was killed while executing a task
  by an unexpected system error. ...", "Worker unexpectedly exits with a connection error code ...");
  ray/_private/services.py / utils.py ``set_kill_on_parent_death_linux`` (fate sharing).
* hydra 1.3.8: hydra/_internal/utils.py ``run_and_report``; hydra/core/utils.py ``JobReturn.return_value``.
* torch_npu (Ascend/pytorch NPUCachingAllocator; vllm-ascend#6611, #1127, vllm-omni#1199; docs/ascend.md):
  ``NPU out of memory. Tried to allocate X (NPU d; T total capacity; A already allocated;
  A current active; F free; R reserved in total by PyTorch) If reserved memory is >> allocated memory try setting
  max_split_size_mb to avoid fragmentation.`` raised as ``torch.OutOfMemoryError``.
* CANN/HCCL (vllm-ascend#1443, #3413, #486, #382; docs/ascend.md): ``EI0002`` notify-wait timeout block after
  ``NPU function error: AclrtSynchronizeDeviceWithTimeout, error code is 507048``; ProcessGroupHCCL watchdog lines;
  ``EI0006`` "Getting socket times out" after ``OPS function error: HcclAllreduce, error code is 6``.
* vLLM (vllm/v1/core/kv_cache_utils.py ``_check_enough_kv_cache_memory``: "No available memory for the cache
  blocks. ..."; vllm/v1/engine/utils.py ``wait_for_engine_startup``: "Engine core initialization failed. See root
  cause above. Failed core proc(s): {}"; v1 core.py "EngineCore failed to start.") and vllm-ascend
  (vllm_ascend/worker/worker.py ``NPUWorker._init_device``: "Free memory on device (F/T GiB) on startup is less than
  desired GPU memory utilization (u, R GiB). Decrease GPU memory utilization or reduce GPU memory used by other
  processes.").

Where each part lives (this directory)
--------------------------------------
* verl_standin.py (this file): the entry point; ``main`` hands the argv to verl's ``@hydra.main``.
* knobs.py: the knobs and modes, split from verl's overrides.
* sources.py: verl/ray/torch source lines located without importing them; verl's ``tracking.py`` loaded from its file.
* driver.py: the driver's synthetic frames (``main_ppo.main`` -> ``run_ppo`` -> ``ray.get``).
* console.py: Ray's log prefixes and colours, verl's console line.
* ray_actors.py: Ray-shaped exceptions, actors, the raylet/worker child processes.
* metrics.py: the run's shape and the deterministic metrics / memory model.
* lengths.py: how long a step's sequences are (their growth) and what they add to the trainer's peak.
* truth.py, truth_steps.py: a stack's hidden truth (shared with tests/support/sweeper_app.py) and the
  stand-in's steps under it (knob ``truth``).
* failure_texts.py: the failure texts and the frames each failure surfaces through.
* run.py, run_failures.py, tracking.py: the simulation (``StandinRun``), its failures and hangs, its tracking.
* ray_placement.py: the real Ray of ``unschedulable``.

This directory lives under tests/ only; nothing in the ``verlsweep`` package imports it.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

if not __package__:
    # Run by path, as verl is: the modules beside this file are imported as tests.support.standin.*, from the
    # repository root in place of this directory (whose module names must not shadow any installed ones).
    _here, _root = Path(__file__).resolve().parent, str(Path(__file__).resolve().parents[3])
    if sys.path and Path(sys.path[0] or ".").resolve() == _here:
        sys.path[0] = _root
    else:
        sys.path.insert(0, _root)

from tests.support.standin.driver import DriverChain, build_task_function
from tests.support.standin.knobs import USAGE_EXIT, KnobError, parse_standin_args
from tests.support.standin.run import StandinRun
from tests.support.standin.sources import verl_config_dir


def main(argv: list[str] | None = None) -> None:
    """Parse knobs, then hand the remaining argv to the real ``@hydra.main`` on verl's ``ppo_trainer``."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        knobs, rest = parse_standin_args(args)
        truth = None
        if knobs.truth:        # the planner is imported only for a run under a hidden truth
            from tests.support.standin.truth_steps import TruthSteps

            truth = TruthSteps.load(knobs)
        config_dir = verl_config_dir()
    except KnobError as exc:
        print(f"verl_standin: {exc}", file=sys.stderr)
        sys.exit(USAGE_EXIT)
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(line_buffering=True)
    import hydra

    state: dict[str, Any] = {}
    run = StandinRun(knobs, DriverChain(), state, truth)
    task = build_task_function(run, state)
    sys.argv = [sys.argv[0], *rest]
    hydra.main(config_path=str(config_dir), config_name="ppo_trainer", version_base=None)(task)()


if __name__ == "__main__":
    main()
