#!/usr/bin/env python3
"""A verl-faithful stand-in for ``python -m verl.trainer.main_ppo`` (tests only; no GPU/NPU needed).

Run it exactly like verl, from the repository root::

    python tests/standin/verl_standin.py <hydra overrides...> [+standin.KNOB=VALUE ...]
    python -m tests.standin.verl_standin <hydra overrides...> [+standin.KNOB=VALUE ...]

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
  ``ray_kwargs.ray_init.runtime_env.env_vars`` (verl's defaults and any ``+ray_kwargs.ray_init.runtime_env.env_vars.X=``),
  as Ray's actors do, so ``MLFLOW_RUN_ID``/``VERL_FILE_LOGGER_PATH`` may come either way. With ``RAY_ADDRESS`` set
  (an existing cluster, whose raylets start the actors with their own environment) the driver's environment is
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
(tests/standin/ray_placement.py, where its sources are cited); it never exits by itself.

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

This file lives under tests/ only; nothing in the ``verlsweep`` package imports it.
"""

from __future__ import annotations

import ast
import dataclasses
import datetime as _dt
import importlib.util
import logging
import math
import numbers
import os
import pprint
import random
import re
import signal
import socket
import subprocess
import sys
import time
import traceback
import types
from pathlib import Path
from typing import Any, Callable, TextIO

# ---------------------------------------------------------------------------------------------------------------
# Knobs
# ---------------------------------------------------------------------------------------------------------------

def _sibling(name: str) -> Any:
    """A module next to this file, however the stand-in was started (by path or with -m)."""
    spec = importlib.util.spec_from_file_location(f"verl_standin_{name}", Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MODES: tuple[str, ...] = (
    "ok",
    "auto",
    "oom",
    "vllm_cache_oom",
    "vllm_startup_oom",
    "hccl_timeout",
    "hccl_connect_timeout",
    "crash",
    "ray_actor_died",
    "hang",
    "stall",
    "slow_start",
    "no_devices",
    "noisy",
    "oom_linger",
    "unschedulable",
)
# Modes that strike inside fit() at `fail_at_step` (or during worker init when it is 0).
STEP_MODES: frozenset[str] = frozenset({"oom", "hccl_timeout", "ray_actor_died", "crash", "stall", "oom_linger"})
USAGE_EXIT = 2
_KNOB_ARG = re.compile(r"^\+{0,2}standin\.([A-Za-z0-9_]+)=(.*)$", re.S)


@dataclasses.dataclass
class Knobs:
    """Stand-in control knobs (see the module docstring for their meaning)."""

    mode: str = "ok"
    fail_at_step: int = 2
    step_seconds: float = 0.05
    startup_seconds: float = -1.0  # negative: mode default (5 s for slow_start, else 0)
    throughput: float = 1000.0
    peak_memory_gb: float = 24.0
    seed: int = 0
    device_memory_gib: float = 60.96
    model_weights_gib: float = 16.0
    steps_per_epoch: int = 1
    signal: str = "SIGSEGV"
    child_lifetime_s: float = 600.0

    @property
    def startup_delay(self) -> float:
        if self.startup_seconds >= 0:
            return self.startup_seconds
        return 5.0 if self.mode == "slow_start" else 0.0


class KnobError(ValueError):
    """A bad stand-in knob; reported with exit status 2 so it cannot pass for a verl failure."""


def _coerce(name: str, raw: str, kind: Any) -> Any:
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "'\"":
        raw = raw[1:-1]
    try:
        if kind in (int, "int"):
            return int(float(raw)) if raw.lower() not in ("", "none") else 0
        if kind in (float, "float"):
            return float(raw)
    except ValueError as exc:
        raise KnobError(f"standin.{name}={raw!r} is not a {kind}") from exc
    return raw


def parse_standin_args(argv: list[str], environ: dict[str, str] | None = None) -> tuple[Knobs, list[str]]:
    """Split ``standin.*`` knobs from verl's Hydra overrides; env ``VERL_STANDIN_<KNOB>`` fills the gaps."""
    environ = dict(os.environ if environ is None else environ)
    types_ = {f.name: f.type for f in dataclasses.fields(Knobs)}
    values: dict[str, Any] = {}
    for name, kind in types_.items():
        env = environ.get(f"VERL_STANDIN_{name.upper()}")
        if env is not None:
            values[name] = _coerce(name, env, kind)
    rest: list[str] = []
    for arg in argv:
        m = _KNOB_ARG.match(arg)
        if not m:
            if arg.lstrip("+~").startswith("standin.") or arg.lstrip("+~") == "standin":
                raise KnobError(f"malformed stand-in knob {arg!r}; use +standin.KNOB=VALUE")
            rest.append(arg)
            continue
        name, raw = m.group(1), m.group(2)
        if name not in types_:
            raise KnobError(f"unknown knob standin.{name} (known: {', '.join(types_)})")
        values[name] = _coerce(name, raw, types_[name])
    knobs = Knobs(**values)
    if knobs.mode not in MODES:
        raise KnobError(f"unknown standin.mode={knobs.mode!r} (known: {', '.join(MODES)})")
    _signal_number(knobs.signal)
    return knobs, rest


def _signal_number(spec: str) -> int:
    spec = str(spec).strip().upper()
    if spec.isdigit():
        return int(spec)
    name = spec if spec.startswith("SIG") else f"SIG{spec}"
    try:
        return int(getattr(signal, name))
    except AttributeError as exc:
        raise KnobError(f"unknown signal {spec!r} for standin.signal") from exc


# ---------------------------------------------------------------------------------------------------------------
# Installed sources (verl, ray, torch) -- located without importing them
# ---------------------------------------------------------------------------------------------------------------


def _package_dir(name: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def verl_config_dir() -> Path:
    """The installed verl's ``trainer/config`` directory (what verl's own ``@hydra.main`` uses)."""
    root = _package_dir("verl")
    if root is None:
        raise KnobError("verl is not installed in this interpreter; the stand-in needs its config yaml files")
    return root / "trainer" / "config"


def _source_file(package: str, rel: str) -> Path | None:
    root = _package_dir(package)
    if root is None:
        return None
    path = root / rel
    return path if path.is_file() else None


def _locate(package: str, rel: str, func: str, needle: str) -> tuple[str, int, str] | None:
    """(path, lineno, line) of the first line holding ``needle`` whose nearest preceding ``def`` is ``func``."""
    path = _source_file(package, rel)
    if path is None:
        return None
    current = None
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for lineno, line in enumerate(lines, 1):
        stripped = line.lstrip()
        for head in ("def ", "async def "):
            if stripped.startswith(head):
                current = stripped[len(head) :].split("(", 1)[0].strip()
        if needle in line and current == func:
            return str(path), lineno, line
    return None


Frame = tuple[str, str, str, str]  # (package, relative path, function, needle)


def _format_frames(frames: list[Frame]) -> list[str]:
    """Traceback lines for frames located in the installed sources; frames that moved are dropped."""
    out: list[str] = []
    for package, rel, func, needle in frames:
        found = _locate(package, rel, func, needle)
        if found is None:
            continue
        path, lineno, line = found
        out.append(f'  File "{path}", line {lineno}, in {func}')
        out.append(f"    {line.strip()}")
    return out


# ---------------------------------------------------------------------------------------------------------------
# The driver side: synthetic frames with verl's/ray's file names and line numbers
# ---------------------------------------------------------------------------------------------------------------


class _Inert:
    """Stands for any object a replayed source line touches on its non-raising path."""

    def __getattr__(self, name: str) -> "_Inert":
        return self

    def __call__(self, *args: Any, **kwargs: Any) -> "_Inert":
        return self


def _bind_target(statement: ast.stmt, target: str, nxt: Callable[..., Any]) -> Any:
    """Bind ``target`` so the statement's call through it lands in ``nxt`` with no frame in between."""
    for node in ast.walk(statement):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id == target:
                return nxt
            if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == target:
                return types.SimpleNamespace(**{func.attr: nxt})
    raise ValueError(f"{target} is not called in {ast.unparse(statement)}")


def _compile_frame(
    path: str, lineno: int, line: str, func: str, target: str, nxt: Callable[..., Any], params: str = "*args, **kwargs"
) -> Callable[..., Any]:
    """A function named ``func`` whose only statement is the real source ``line`` at ``path:lineno``.

    Tracebacks through it show verl's/ray's own file, line, source text and caret columns, because the
    statement keeps its original text and indentation and its line number is moved to the real one.
    """
    tree = ast.parse(f"def {func}({params}):\n{line}\n")
    fdef = tree.body[0]
    assert isinstance(fdef, ast.FunctionDef)
    stmt = fdef.body[0]
    ast.increment_lineno(stmt, lineno - stmt.lineno)
    names = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)} - {"args", "kwargs"}
    scope: dict[str, Any] = {"__name__": "__main__", "__builtins__": __builtins__}
    for name in names:
        scope[name] = _Inert()
    scope[target] = _bind_target(stmt, target, nxt)
    exec(compile(tree, path, "exec"), scope)  # noqa: S102 - replays a located source line, see docstring
    return scope[func]


class DriverChain:
    """``run_ppo`` -> ``ray.get`` -> ... -> ``raise value.as_instanceof_cause()`` as real compiled frames."""

    _FRAMES: list[tuple[str, str, str, str, str]] = [
        ("verl", "trainer/main_ppo.py", "run_ppo", "ray.get(runner.run.remote(config))", "ray"),
        ("ray", "_private/auto_init_hook.py", "auto_init_wrapper", "return fn(*args, **kwargs)", "fn"),
        ("ray", "_private/client_mode_hook.py", "wrapper", "return func(*args, **kwargs)", "func"),
        ("ray", "_private/worker.py", "get", "raise value.as_instanceof_cause()", "value"),
    ]

    def __init__(self) -> None:
        self._error: BaseException | None = None
        head: Callable[..., Any] = self._raise_plain
        last = True
        for package, rel, func, needle, target in reversed(self._FRAMES):
            found = _locate(package, rel, func, needle)
            if found is None:
                continue
            path, lineno, line = found
            if last:
                getter = types.SimpleNamespace(as_instanceof_cause=lambda: self._error)
                head = _compile_frame(path, lineno, line, func, target, getter.as_instanceof_cause)
                last = False
            else:
                head = _compile_frame(path, lineno, line, func, target, head)
        self.head = head

    def _raise_plain(self, *args: Any, **kwargs: Any) -> None:
        assert self._error is not None
        raise self._error

    def arm(self, error: BaseException) -> Callable[..., Any]:
        """Return the ``run_ppo`` replacement that raises ``error`` from ``ray.get``'s frame."""
        self._error = error
        return self.head


def _noop(*args: Any, **kwargs: Any) -> None:
    return None


def build_task_function(body: Callable[[Any], None], state: dict[str, Any]) -> Callable[[Any], None]:
    """The Hydra task function, compiled as verl's ``main_ppo.main`` (file, line numbers and source text).

    ``body(config)`` runs the whole simulation; on failure it stores ``state["run_ppo"]`` so that the
    following replayed line ``run_ppo(config, task_runner_class=TaskRunnerV1)`` raises through
    :class:`DriverChain`, exactly where verl's driver raises. Hydra names the job after this file ("main_ppo").
    """
    v1 = _locate("verl", "trainer/main_ppo.py", "main", "run_ppo(config, task_runner_class=TaskRunnerV1)")
    v0 = _locate("verl", "trainer/main_ppo.py", "main", "run_ppo(config, task_runner_class=TaskRunner)")
    if v1 is not None and v0 is not None:
        path = v1[0]
        src = (
            "def main(config):\n"
            "    _standin_body(config)\n"
            "    if _standin_use_v1(config):\n"
            f"{v1[2]}\n"
            "    else:\n"
            f"{v0[2]}\n"
        )
        try:
            tree = ast.parse(src)
            fdef = tree.body[0]
            assert isinstance(fdef, ast.FunctionDef)
            branch = fdef.body[1]
            assert isinstance(branch, ast.If)
            ast.increment_lineno(branch.body[0], v1[1] - branch.body[0].lineno)
            ast.increment_lineno(branch.orelse[0], v0[1] - branch.orelse[0].lineno)
            scope: dict[str, Any] = {
                "__name__": "__main__",
                "__builtins__": __builtins__,
                "_standin_body": body,
                "_standin_use_v1": lambda cfg: bool(cfg.trainer.use_v1),
                "TaskRunnerV1": _Inert(),
                "TaskRunner": _Inert(),
                "run_ppo": _noop,
            }
            exec(compile(tree, path, "exec"), scope)  # noqa: S102 - see docstring
            state["scope"] = scope
            return scope["main"]
        except (SyntaxError, AssertionError, IndexError):
            pass

    def main(config: Any) -> None:  # fallback when verl's main_ppo.py moved its lines
        body(config)
        state.get("run_ppo", _noop)(config)

    state["scope"] = None
    return main


# ---------------------------------------------------------------------------------------------------------------
# Ray-shaped exceptions (class names as ray.exceptions.RayTaskError.as_instanceof_cause builds them)
# ---------------------------------------------------------------------------------------------------------------


def _exception_class(module: str, qualname: str) -> type[Exception]:
    cls = type(qualname, (Exception,), {"__module__": module, "__qualname__": qualname, "__str__": _text_str})
    return cls


def _text_str(self: BaseException) -> str:
    return str(self.args[0]) if self.args else ""


def ray_task_error(cause: str, text: str) -> Exception:
    """``ray.exceptions.RayTaskError(<cause>)`` whose ``str`` is Ray's formatted nested traceback ``text``."""
    return _exception_class("ray.exceptions", f"RayTaskError({cause})")(text)


def _hex_id(rng: random.Random, nbytes: int = 12, suffix: str = "01000000") -> str:
    return "".join(f"{rng.randrange(256):02x}" for _ in range(nbytes)) + suffix


def _address(rng: random.Random) -> str:
    return f"0x7f{rng.randrange(16**10):010x}"


@dataclasses.dataclass
class RayActor:
    """One Ray actor as it appears in log prefixes and RayTaskError headers."""

    cls: str
    pid: int
    repr_module: str
    actor_id: str
    address: str

    @property
    def prefix(self) -> str:
        return f"({self.cls} pid={self.pid})"

    def header(self, method: str, ip: str) -> str:
        # RayTaskError.__str__ colours the proctitle whatever RAY_COLOR_PREFIX says
        return (
            f"{CYAN}ray::{self.cls}.{method}(){FORE_RESET} (pid={self.pid}, ip={ip}, actor_id={self.actor_id}, "
            f"repr=<{self.repr_module}.{self.cls} object at {self.address}>)"
        )


# ---------------------------------------------------------------------------------------------------------------
# Output: Ray's per-line log prefixes, verl's logging format
# ---------------------------------------------------------------------------------------------------------------


# colorama's codes as Ray uses them (ray/_private/worker.py print_worker_logs, ray/exceptions.py)
CYAN, YELLOW, FORE_RESET, RESET_ALL = "\x1b[36m", "\x1b[33m", "\x1b[39m", "\x1b[0m"
_PID_COLOURS = ("\x1b[35m", "\x1b[36m", "\x1b[32m", "\x1b[90m", "\x1b[94m", "\x1b[95m")


def ray_prefix(prefix: str) -> str:
    """A log prefix as Ray's driver prints it: no colour with RAY_COLOR_PREFIX=0, one colour per pid with
    RAY_COLOR_PREFIX=1, else cyan (yellow for the raylet). Only Ray's own ``(name pid=N)`` is coloured;
    a prefix the process printed itself (vLLM's ``(EngineCore_DP0 pid=M)``) stays plain."""
    setting = os.environ.get("RAY_COLOR_PREFIX")
    if setting == "0":
        return prefix
    own, sep, rest = prefix.partition(") ")
    own += ")" if sep else ""
    if own == "(raylet)":
        colour = YELLOW
    elif setting == "1":
        pid = re.search(r"pid=(\d+)", own)
        colour = _PID_COLOURS[int(pid.group(1)) % len(_PID_COLOURS)] if pid else _PID_COLOURS[0]
    else:
        colour = CYAN
    return f"{colour}{own}{RESET_ALL}" + (f" {rest}" if sep else "")


class RayLogStream:
    """File-like stream that prefixes each complete line like Ray's log monitor does for actor output."""

    def __init__(self, target: TextIO, prefix: str) -> None:
        self._target = target
        self._prefix = prefix
        self._pending = ""

    def write(self, text: str) -> int:
        self._pending += text
        *lines, self._pending = self._pending.split("\n")
        for line in lines:
            self._target.write(f"{ray_prefix(self._prefix)} {line}\n")
        self._target.flush()
        return len(text)

    def flush(self) -> None:
        self._target.flush()

    def close_line(self) -> None:
        if self._pending:
            self.write("\n")

    def isatty(self) -> bool:
        return False

    @property
    def encoding(self) -> str:
        return getattr(self._target, "encoding", "utf-8")


def _emit(stream: TextIO, text: str) -> None:
    stream.write(text if text.endswith("\n") else text + "\n")
    stream.flush()


def _now_ms() -> str:
    return _dt.datetime.now().strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]


def _cann_time(precise: bool = False) -> str:
    now = _dt.datetime.now()
    base = now.strftime("%Y-%m-%d-%H:%M:%S")
    return f"{base}.{now.microsecond // 1000:03d}.{now.microsecond % 1000:03d}" if precise else base


# ---------------------------------------------------------------------------------------------------------------
# Child processes standing in for Ray's raylet and the TaskRunner worker
# ---------------------------------------------------------------------------------------------------------------

_CHILD_CODE = r"""
import os, sys, time
lifetime = float(sys.argv[1]); follow_parent = sys.argv[2] == "1"

def linger():
    parent = os.getppid()
    deadline = time.monotonic() + lifetime
    while time.monotonic() < deadline:
        if follow_parent and os.getppid() != parent:
            return
        time.sleep(0.2)

worker = os.fork()
if worker == 0:
    linger()
    os._exit(0)
sys.stdout.write(f"{worker}\n")
sys.stdout.flush()
linger()
if follow_parent:
    try:
        os.kill(worker, 9)
    except OSError:
        pass
os._exit(0)
"""


class RayProcesses:
    """A "raylet" child and its "worker" grandchild, in the caller's process group."""

    def __init__(self, lifetime_s: float, follow_parent: bool) -> None:
        self.raylet = subprocess.Popen(
            [sys.executable, "-S", "-c", _CHILD_CODE, str(lifetime_s), "1" if follow_parent else "0"],
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        assert self.raylet.stdout is not None
        line = self.raylet.stdout.readline().strip()
        self.raylet.stdout.close()
        self.worker_pid = int(line) if line.isdigit() else self.raylet.pid
        self._alive = True

    def shutdown(self) -> None:
        """What ``ray.shutdown()`` at driver exit amounts to: the Ray processes go away."""
        if not self._alive:
            return
        self._alive = False
        for pid in (self.worker_pid, self.raylet.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            self.raylet.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


# ---------------------------------------------------------------------------------------------------------------
# The run's shape and the deterministic performance / memory model
# ---------------------------------------------------------------------------------------------------------------


def _sel(cfg: Any, key: str, default: Any) -> Any:
    from omegaconf import OmegaConf

    value = OmegaConf.select(cfg, key, default=default, throw_on_missing=False)
    return default if value is None else value


@dataclasses.dataclass(frozen=True)
class RunShape:
    """The config facts the stand-in's models read."""

    project: str
    experiment: str
    loggers: tuple[str, ...]
    use_v1: bool
    n_gpus: int
    total_steps: int
    steps_per_epoch: int
    batch: int
    n: int
    max_prompt: int
    max_response: int
    util: float
    tp: int
    param_offload: bool
    optimizer_offload: bool
    use_kl_loss: bool
    use_ref: bool
    use_critic: bool
    free_cache_engine: bool
    val_before_train: bool
    test_freq: int

    @classmethod
    def from_config(cls, cfg: Any, knobs: Knobs) -> "RunShape":
        loggers = _sel(cfg, "trainer.logger", ["console"])
        if isinstance(loggers, str):
            loggers = [loggers]
        steps_per_epoch = max(1, int(knobs.steps_per_epoch))
        total = _sel(cfg, "trainer.total_training_steps", None)
        if total is None:
            total = int(_sel(cfg, "trainer.total_epochs", 1)) * steps_per_epoch
        use_kl_loss = bool(_sel(cfg, "actor_rollout_ref.actor.use_kl_loss", False))
        use_kl_in_reward = bool(_sel(cfg, "algorithm.use_kl_in_reward", False))
        return cls(
            project=str(_sel(cfg, "trainer.project_name", "verl_examples")),
            experiment=str(_sel(cfg, "trainer.experiment_name", "gsm8k")),
            loggers=tuple(str(x) for x in loggers),
            use_v1=bool(_sel(cfg, "trainer.use_v1", True)),
            n_gpus=max(0, int(_sel(cfg, "trainer.n_gpus_per_node", 8)) * int(_sel(cfg, "trainer.nnodes", 1))),
            total_steps=int(total),
            steps_per_epoch=steps_per_epoch,
            batch=max(1, int(_sel(cfg, "data.train_batch_size", 1024))),
            n=max(1, int(_sel(cfg, "actor_rollout_ref.rollout.n", 1))),
            max_prompt=max(1, int(_sel(cfg, "data.max_prompt_length", 512))),
            max_response=max(1, int(_sel(cfg, "data.max_response_length", 512))),
            util=float(_sel(cfg, "actor_rollout_ref.rollout.gpu_memory_utilization", 0.5)),
            tp=max(1, int(_sel(cfg, "actor_rollout_ref.rollout.tensor_model_parallel_size", 1))),
            param_offload=bool(_sel(cfg, "actor_rollout_ref.actor.fsdp_config.param_offload", False)),
            optimizer_offload=bool(_sel(cfg, "actor_rollout_ref.actor.fsdp_config.optimizer_offload", False)),
            use_kl_loss=use_kl_loss,
            use_ref=use_kl_loss or use_kl_in_reward,
            use_critic=str(_sel(cfg, "algorithm.adv_estimator", "gae")) == "gae",
            free_cache_engine=bool(_sel(cfg, "actor_rollout_ref.rollout.free_cache_engine", True)),
            val_before_train=bool(_sel(cfg, "trainer.val_before_train", True)),
            test_freq=int(_sel(cfg, "trainer.test_freq", -1)),
        )


@dataclasses.dataclass(frozen=True)
class MemoryModel:
    """Coarse colocated FSDP + vLLM(-Ascend) memory budget of one device, in GiB."""

    capacity: float
    train_peak: float
    resident_at_rollout_start: float
    free_at_rollout_start: float
    rollout_request: float
    kv_cache: float
    train_need: float

    @classmethod
    def build(cls, shape: RunShape, knobs: Knobs) -> "MemoryModel":
        capacity = knobs.device_memory_gib
        peak = knobs.peak_memory_gb * (0.6 if shape.param_offload else 1.0) * (0.65 if shape.optimizer_offload else 1.0)
        resident = peak * 0.5 * (0.25 if shape.param_offload else 1.0) * (0.5 if shape.optimizer_offload else 1.0)
        driver_reserved = 3.3  # idle HBM the Ascend driver keeps (npu-smi in vllm-ascend#1903)
        free = capacity - driver_reserved - resident
        request = shape.util * capacity
        kv = request - knobs.model_weights_gib / shape.tp - 2.0
        need = peak + driver_reserved + (0.0 if shape.free_cache_engine else request)
        return cls(capacity, peak, resident, free, request, kv, need)

    def verdict(self) -> str:
        if self.rollout_request > self.free_at_rollout_start:
            return "vllm_startup_oom"
        if self.kv_cache <= 0:
            return "vllm_cache_oom"
        if self.train_need > self.capacity:
            return "oom"
        return "ok"


def _noise(seed: int, step: int, salt: str) -> float:
    """Deterministic value in [-1, 1] (string seeds hash with SHA-512, independent of PYTHONHASHSEED)."""
    return random.Random(f"{seed}:{step}:{salt}").uniform(-1.0, 1.0)


def throughput_per_device(shape: RunShape, knobs: Knobs, step: int) -> float:
    """tokens/s/device: more KV cache helps with diminishing returns, TP=2 is the sweet spot, offload costs."""
    util = min(max(shape.util, 0.05), 0.99)
    f_util = 1.0 - 0.55 * math.exp(-(util - 0.05) / 0.22)
    f_tp = 1.0 / (1.0 + 0.15 * (math.log2(shape.tp) - 1.0) ** 2)
    f_off = (0.82 if shape.param_offload else 1.0) * (0.9 if shape.optimizer_offload else 1.0)
    warmup = 0.85 if step == 1 else 1.0
    return knobs.throughput * f_util * f_tp * f_off * warmup * (1.0 + 0.03 * _noise(knobs.seed, step, "tput"))


def step_metrics(shape: RunShape, knobs: Knobs, step: int, np: Any) -> dict[str, Any]:
    """One step's metrics with verl 0.9's names, insertion order and scalar types."""
    legacy = not shape.use_v1
    rnd = lambda salt: _noise(knobs.seed, step, salt)  # noqa: E731 - local shorthand
    actor_num = (lambda v: np.float64(v)) if legacy else float  # legacy reduce_metrics -> numpy scalars
    epoch = (step - 1) // shape.steps_per_epoch
    n_seq = shape.batch * shape.n
    prompt_mean = 0.45 * shape.max_prompt * (1.0 + 0.02 * rnd("plen"))
    resp_mean = shape.max_response * min(0.95, 0.45 + 0.01 * step) * (1.0 + 0.04 * rnd("rlen"))
    total_tokens = int(n_seq * (prompt_mean + resp_mean))
    tput = throughput_per_device(shape, knobs, step)
    t_step = total_tokens / (tput * max(1, shape.n_gpus))
    mem = MemoryModel.build(shape, knobs)
    alloc = mem.train_peak * (1.0 + 0.01 * rnd("mem"))
    score = 0.2 + 0.5 * (1.0 - math.exp(-step / 15.0)) + 0.02 * rnd("score")

    timing: dict[str, float] = {"gen": 0.55 * t_step, "old_log_prob": 0.07 * t_step}
    if shape.use_ref:
        timing["ref"] = 0.06 * t_step
    if shape.use_critic:
        timing["values"] = 0.05 * t_step
    timing["adv"] = 0.004 * t_step
    if shape.use_critic:
        timing["update_critic"] = 0.1 * t_step
    timing["update_actor"] = 0.22 * t_step
    timing["update_weights"] = 0.03 * t_step
    timing["step"] = t_step

    m: dict[str, Any] = {}
    m["actor/pg_loss"] = actor_num(-0.01 + 0.02 * rnd("pg"))
    m["actor/pg_clipfrac"] = actor_num(0.002 + 0.001 * rnd("clip"))
    m["actor/ppo_kl"] = actor_num(0.0005 * (1.0 + rnd("kl")))
    m["actor/pg_clipfrac_lower"] = actor_num(0.0)
    if shape.use_kl_loss:
        m["actor/kl_loss"] = actor_num(0.001 * step * (1.0 + 0.1 * rnd("kll")))
        m["actor/kl_coef"] = actor_num(0.001)
    m["actor/grad_norm"] = actor_num(0.3 + 0.05 * rnd("gn"))
    m["actor/lr"] = actor_num(1e-6)
    m["actor/perf/max_memory_allocated_gb"] = actor_num(round(alloc, 4))
    m["actor/perf/max_memory_reserved_gb"] = actor_num(round(alloc * 1.06 + 0.4, 4))
    m["actor/perf/cpu_memory_used_gb"] = actor_num(
        round(120.0 + (30.0 if shape.param_offload else 0.0) + (40.0 if shape.optimizer_offload else 0.0), 3)
    )
    m["perf/mfu/actor"] = actor_num(0.28 * tput / max(knobs.throughput, 1e-9))
    m["actor/entropy"] = 0.55 - 0.004 * step + 0.01 * rnd("ent")
    if shape.use_critic:
        m["critic/vf_loss"] = 0.05 + 0.01 * rnd("vf")
        m["critic/vf_clipfrac"] = 0.01 + 0.005 * rnd("vfc")
        m["critic/grad_norm"] = 0.6 + 0.1 * rnd("cgn")
    m["training/global_step"] = step
    m["training/epoch"] = epoch
    m["critic/score/mean"] = score
    m["critic/score/max"] = 1.0
    m["critic/score/min"] = 0.0
    m["critic/rewards/mean"] = score
    m["critic/rewards/max"] = 1.0
    m["critic/rewards/min"] = 0.0
    m["critic/advantages/mean"] = 0.001 * rnd("adv")
    m["critic/advantages/max"] = 2.5
    m["critic/advantages/min"] = -2.5
    m["critic/returns/mean"] = score * 0.9
    m["critic/returns/max"] = 1.0
    m["critic/returns/min"] = 0.0
    m["response_length/mean"] = resp_mean
    m["response_length/max"] = float(shape.max_response)
    m["response_length/min"] = float(max(1, int(resp_mean * 0.1)))
    m["response_length/clip_ratio"] = max(0.0, 0.02 + 0.01 * rnd("clipr"))
    m["response_length_non_aborted/mean"] = resp_mean
    m["response/aborted_ratio"] = 0.0
    m["prompt_length/mean"] = prompt_mean
    m["prompt_length/max"] = float(shape.max_prompt)
    m["prompt_length/min"] = float(max(1, int(prompt_mean * 0.3)))
    m["prompt_length/clip_ratio"] = 0.0
    n_resp_tokens = n_seq * resp_mean
    for name, seconds in timing.items():
        m[f"timing_s/{name}"] = seconds
    for name in ("gen", "ref", "values", "adv", "update_critic", "update_actor"):
        if name in timing:
            tokens = n_resp_tokens if name == "gen" else total_tokens
            m[f"timing_per_token_ms/{name}"] = timing[name] * 1000 / tokens
    m["perf/total_num_tokens"] = total_tokens
    m["perf/time_per_step"] = t_step
    m["perf/throughput"] = total_tokens / (t_step * max(1, shape.n_gpus))
    turns = np.ones(8, dtype=np.int64)
    m["training/num_turns/mean"] = turns.mean()
    m["training/num_turns/max"] = turns.max()
    m["training/num_turns/min"] = turns.min()
    spans = np.ones(8, dtype=int)
    stale = np.zeros(8, dtype=int)
    off_policy = (("trajectory_spans", spans), ("trajectory_staleness", stale), ("trajectory_staleness_worst", stale))
    for key, arr in off_policy:
        m[f"training/off_policy/{key}/mean"] = arr.mean()
        m[f"training/off_policy/{key}/max"] = arr.max()
        m[f"training/off_policy/{key}/min"] = arr.min()
    return m


def val_metrics(knobs: Knobs, step: int, np: Any) -> dict[str, Any]:
    """Validation metrics as ``_val_metrics_update`` names them (gsm8k data source, one sample)."""
    acc = np.float64(round(0.2 + 0.5 * (1.0 - math.exp(-step / 15.0)) + 0.01 * _noise(knobs.seed, step, "val"), 6))
    turns = np.ones(16, dtype=np.int64)
    return {
        "val-core/openai/gsm8k/acc/mean@1": acc,
        "val-aux/openai/gsm8k/reward/mean@1": acc,
        "val-aux/openai/gsm8k/score/mean@1": acc,
        "val-aux/num_turns/min": turns.min(),
        "val-aux/num_turns/max": turns.max(),
        "val-aux/num_turns/mean": turns.mean(),
    }


def concat_dict_to_str(data: dict[str, Any], step: int) -> str:
    """verl's console line: ``step:N - k:v - ...`` over numeric values, each ``pprint.pformat``-ed."""
    parts = [f"step:{step}"]
    parts += [f"{k}:{pprint.pformat(v)}" for k, v in data.items() if isinstance(v, numbers.Number)]
    return " - ".join(parts)


# ---------------------------------------------------------------------------------------------------------------
# Error texts
# ---------------------------------------------------------------------------------------------------------------


def _size(gib: float) -> str:
    return f"{gib * 1024:.2f} MiB" if gib < 1 else f"{gib:.2f} GiB"


def npu_oom_message(capacity: float, request_gib: float, device: int = 0) -> str:
    reserved = max(0.5, capacity - 3.34)
    allocated = max(0.1, reserved - 0.13)
    free = max(0.01, capacity - reserved - 3.0)
    return (
        f"NPU out of memory. Tried to allocate {_size(request_gib)} (NPU {device}; {capacity:.2f} GiB total capacity; "
        f"{allocated:.2f} GiB already allocated; {allocated:.2f} GiB current active; {_size(free)} free; "
        f"{reserved:.2f} GiB reserved in total by PyTorch) If reserved memory is >> allocated memory try setting "
        "max_split_size_mb to avoid fragmentation."
    )


def ei0002_message(pid: int, rank_size: int) -> str:
    return (
        "npuSynchronizeDevice:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:479 NPU function error: "
        "AclrtSynchronizeDeviceWithTimeout, error code is 507048\n"
        f"[ERROR] {_cann_time()} (PID:{pid}, Device:0, RankID:0) ERR00100 PTA call acl api failed\n"
        "[Error]: The execution of the internal task times out. \n"
        "        Rectify the fault based on the error information in the ascend log.\n"
        f"EI0002: [PID: {pid}] {_cann_time(True)} The wait execution of the Notify register times out. "
        "Reason: The Notify register has not received the Notify record from remote rank: [unknown]. "
        "base information: [streamID:[1], taskID[8318285], taskType[Notify Wait], tag[AllReduce_group_name_710], "
        "AlgType(level 0-1-2):[fullmesh-ring-NHR].]. task information: [notify id:[0x0000000000000213], stage:[0], "
        f"remote rank:[unknown]]. group information: [group:[group_name_710], user define information[Unspecified], "
        f"rankSize[{rank_size}], rankId[0]]\n"
        "        Possible Cause: 1. An exception occurs during the execution on some NPUs in the cluster. As a result, "
        "collective communication operation failed.2. The execution speed on some NPU in the cluster is too slow to "
        "complete a communication operation within the timeout interval. (default 1800s, You can set the interval by "
        "using HCCL_EXEC_TIMEOUT.)3. The number of training samples of each NPU is inconsistent.4. Packet loss or "
        "other connectivity problems occur on the communication link.\n"
        "        Solution: 1. If this error is reported on part of these ranks, check other ranks to see whether other "
        "errors have been reported earlier.\n"
        "        TraceBack (most recent call last):"
    )


def ei0006_message(pid: int) -> str:
    return (
        "InnerRunOpApi:torch_npu/csrc/framework/OpParamMaker.cpp:281 OPS function error: HcclAllreduce, "
        "error code is 6\n"
        f"[ERROR] {_cann_time()} (PID:{pid}, Device:1, RankID:1) ERR01100 OPS call acl api failed.\n"
        f"EI0006: [PID: {pid}] {_cann_time(True)} Getting socket times out. Reason: Remote Rank did not send the "
        "data in time. Please check the reason for the rank being stuck\n"
        "        Solution: 1. Check the rank service processes with other errors or no errors in the cluster.\n"
        "        TraceBack (most recent call last):"
    )


def _hccl_exec_timeout_ms() -> int:
    try:
        return int(os.environ.get("HCCL_EXEC_TIMEOUT", "1800")) * 1000
    except ValueError:
        return 1_800_000


KV_CACHE_MESSAGE = (
    "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when initializing the "
    "engine. See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ for more details."
)
ENGINE_FAILED_MESSAGE = "Engine core initialization failed. See root cause above. Failed core proc(s): {}"
WORKER_DEATH_DETAIL = (
    "Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2. "
    "End of file. Some common causes include: (1) the process was killed by the OOM killer due to high memory "
    "usage, (2) ray stop --force was called, or (3) the worker crashed unexpectedly due to SIGSEGV or another "
    "unexpected error. If the process was killed by the kernel OOM killer (verifiable by checking for OOM in dmesg "
    "of the OOMing node), consider enabling resource isolation via --enable-resource-isolation to prevent node "
    "deaths by resource contention and significant loss of progress by uninformed kernel OOM killing."
)


def vllm_startup_message(capacity: float, util: float, free: float) -> str:
    request = capacity * util
    return (
        f"Free memory on device ({round(free, 2)}/{round(capacity, 2)} GiB) on startup is less than desired GPU "
        f"memory utilization ({util}, {round(request, 2)} GiB). Decrease GPU memory utilization or reduce GPU memory "
        "used by other processes."
    )


# Where each failure surfaces inside the TaskRunner (frames located in the installed verl; missing ones dropped).
V1 = "trainer/ppo/v1/trainer_base.py"
_RUN_FIT_V1: list[Frame] = [("verl", "trainer/main_ppo.py", "run", "self.trainer.fit(self.agent_loop_manager)")]
_RUN_INIT_V1: list[Frame] = [
    ("verl", "trainer/main_ppo.py", "run", "self.trainer.init()"),
    ("verl", V1, "init", "self._setup()"),
]
_RUN_FIT_V0: list[Frame] = [
    ("verl", "trainer/main_ppo_v0.py", "run", "trainer.fit()"),
]
_RUN_INIT_V0: list[Frame] = [("verl", "trainer/main_ppo_v0.py", "run", "trainer.init_workers()")]
_WG_CALL: list[Frame] = [("verl", "single_controller/ray/base.py", "__call__", "output = ray.get(output)")]
SITES: dict[tuple[str, bool], list[Frame]] = {
    ("update_actor", True): _RUN_FIT_V1
    + [
        ("verl", V1, "fit", "batch = self.step(metrics, self.timing_raw)"),
        ("verl", V1, "step", "batch = self._step_once(iter_metrics, timing_raw, sample_batch_size)"),
        ("verl", V1, "_step_once", "batch = self._update_actor(batch, metrics=metrics)"),
        ("verl", V1, "_update_actor", "output: TensorDict = self.actor_rollout_wg.update_actor(batch)"),
    ]
    + _WG_CALL,
    ("update_actor", False): _RUN_FIT_V0
    + [
        ("verl", "trainer/ppo/ray_trainer.py", "fit", "actor_output = self._update_actor(batch)"),
        ("verl", "trainer/ppo/ray_trainer.py", "_update_actor", "actor_output = self.actor_rollout_wg.update_actor("),
    ]
    + _WG_CALL,
    ("resource_pool", True): _RUN_INIT_V1
    + [
        ("verl", V1, "_setup", "self.resource_pool_manager.create_resource_pool()"),
        ("verl", "single_controller/ray/base.py", "create_resource_pool", "self._check_resource_available()"),
        ("verl", "single_controller/ray/base.py", "_check_resource_available", "raise ValueError("),
    ],
    ("resource_pool", False): _RUN_INIT_V0
    + [
        ("verl", "trainer/ppo/ray_trainer.py", "init_workers", "self.resource_pool_manager.create_resource_pool()"),
        ("verl", "single_controller/ray/base.py", "create_resource_pool", "self._check_resource_available()"),
        ("verl", "single_controller/ray/base.py", "_check_resource_available", "raise ValueError("),
    ],
    ("init_model", True): _RUN_INIT_V1 + [("verl", V1, "_setup", "self.actor_rollout_wg.init_model()")] + _WG_CALL,
    ("init_model", False): _RUN_INIT_V0
    + [("verl", "trainer/ppo/ray_trainer.py", "init_workers", "self.actor_rollout_wg.init_model()")]
    + _WG_CALL,
    ("tracking", True): _RUN_FIT_V1
    + [
        ("verl", V1, "fit", "self.logger = Tracking("),
        ("verl", "utils/tracking.py", "__init__", "assert backend in self.supported_backend"),
    ],
    ("tracking", False): _RUN_FIT_V0
    + [
        ("verl", "trainer/ppo/ray_trainer.py", "fit", "logger = Tracking("),
        ("verl", "utils/tracking.py", "__init__", "assert backend in self.supported_backend"),
    ],
    ("rollout", True): _RUN_INIT_V1
    + [
        ("verl", V1, "_setup", "LLMServerManager.create("),
        ("verl", "workers/rollout/llm_server.py", "create", "await instance._initialize_llm_servers()"),
    ],
    ("rollout", False): _RUN_INIT_V0
    + [
        ("verl", "trainer/ppo/ray_trainer.py", "init_workers", "LLMServerManager.create("),
        ("verl", "workers/rollout/llm_server.py", "create", "await instance._initialize_llm_servers()"),
    ],
}
_WORKER_ENTRY: list[Frame] = [
    ("verl", "single_controller/ray/base.py", "func", "return getattr(self.worker_dict[key], name)(*args, **kwargs)"),
    ("verl", "single_controller/base/decorator.py", "inner", "return func(*args, **kwargs)"),
]
_WORKER_TRAIN: list[Frame] = _WORKER_ENTRY + [
    ("verl", "workers/engine_workers.py", "update_actor", "output = self.actor.train_mini_batch(data=data)"),
    ("verl", "workers/engine_workers.py", "train_mini_batch", "actor_output = self.train_batch(mini_batch_td)"),
    ("verl", "workers/engine_workers.py", "train_batch", "output = self.engine.train_batch(data, loss_function="),
]
WORKER_OOM_TRAIN: list[Frame] = _WORKER_TRAIN + [
    ("verl", "workers/engine/base.py", "train_batch", "outputs = self.forward_backward_batch(data, loss_function"),
    ("verl", "workers/engine/fsdp/transformer_impl.py", "forward_backward_batch", "loss.backward()"),
    ("torch", "_tensor.py", "backward", "torch.autograd.backward("),
    ("torch", "autograd/__init__.py", "backward", "_engine_run_backward("),
    ("torch", "autograd/graph.py", "_engine_run_backward", "return Variable._execution_engine.run_backward("),
]
WORKER_HCCL_TRAIN: list[Frame] = _WORKER_TRAIN + [
    ("verl", "workers/engine/base.py", "train_batch", "grad_norm = self.optimizer_step()"),
    ("verl", "workers/engine/fsdp/transformer_impl.py", "optimizer_step", "grad_norm = fsdp2_clip_grad_norm_("),
]
WORKER_INIT: list[Frame] = _WORKER_ENTRY + [
    ("verl", "workers/engine_workers.py", "init_model", "self.actor.reset()"),
    ("verl", "workers/engine_workers.py", "reset", "self.engine.initialize()"),
    ("verl", "workers/engine/fsdp/transformer_impl.py", "initialize", "self._build_model_optimizer()"),
]
WORKER_ROLLOUT: list[Frame] = [
    (
        "verl",
        "workers/rollout/vllm_rollout/vllm_async_server.py",
        "launch_server",
        "await self.run_server(server_args)",
    ),
]


# ---------------------------------------------------------------------------------------------------------------
# The simulation
# ---------------------------------------------------------------------------------------------------------------


# What an existing cluster's actors see of the driver's environment: nothing (its raylet's own basics).
CLUSTER_ENV = frozenset({"PATH", "HOME", "LANG", "LC_ALL", "USER", "TMPDIR", "PYTHONPATH"})


class StandinRun:
    """Everything between Hydra handing over the config and ``run_ppo`` returning or raising."""

    def __init__(self, knobs: Knobs, chain: DriverChain, state: dict[str, Any]) -> None:
        self.knobs = knobs
        self.chain = chain
        self.state = state
        self.rng = random.Random()
        self.ip = "10.0.0.2"
        self.ray: RayProcesses | None = None
        self.tracking: Any = None
        self.console = False
        self.actor_env: dict[str, str] = {}

    # -- entry point -------------------------------------------------------------------------------------------
    def __call__(self, config: Any) -> None:
        from omegaconf import OmegaConf

        # Hydra multirun calls the task once per job: nothing may carry over from the previous one.
        self.tracking = None
        self.console = False
        self._arm(None)
        knobs = self.knobs
        config.trainer.device = "npu"  # auto_set_device on an Ascend host
        shape = RunShape.from_config(config, knobs)
        self.shape = shape
        mode = knobs.mode
        if mode == "auto":
            mode = MemoryModel.build(shape, knobs).verdict()
            if mode == "oom":
                knobs = dataclasses.replace(knobs, fail_at_step=1)
        self.mode = mode
        self.k = knobs
        if not shape.use_v1:
            logging.getLogger("__main__").warning(
                "Legacy trainer `main_ppo_v0.py` is deprecated, and wil be removed in v0.9.0."
                "Please set `trainer.use_v1=True` in config to use V1 trainer."
            )
        self._ray_init(config)
        runner_cls = "TaskRunnerV1" if shape.use_v1 else "TaskRunner"
        runner_mod = "main_ppo" if shape.use_v1 else "verl.trainer.main_ppo_v0"
        assert self.ray is not None
        self.runner = RayActor(runner_cls, self.ray.worker_pid, runner_mod, _hex_id(self.rng), _address(self.rng))
        self.out = RayLogStream(sys.__stdout__ or sys.stdout, self.runner.prefix)
        self.err = RayLogStream(sys.__stderr__ or sys.stderr, self.runner.prefix)
        saved_env = dict(os.environ)
        if os.environ.get("RAY_ADDRESS"):
            # an existing cluster: its raylet starts the actors with its own environment, not the driver's
            for key in [k for k in os.environ if k not in CLUSTER_ENV]:
                del os.environ[key]
        os.environ.update(self.actor_env)
        try:
            error = self._task_runner(config, OmegaConf)
        except Exception as exc:  # whatever else the actor raises reaches the driver as RayTaskError(<type>)
            self.finish(exit_code=1)
            error = self._actor_exception(exc)
        finally:
            os.environ.clear()
            os.environ.update(saved_env)
        self._arm(error)
        if self.ray is not None:
            self.ray.shutdown()

    def _arm(self, error: BaseException | None) -> None:
        """Make the replayed ``run_ppo(...)`` line in ``main`` return (no error) or raise ``error``."""
        run_ppo = _noop if error is None else self.chain.arm(error)
        scope = self.state.get("scope")
        if scope is not None:
            scope["run_ppo"] = run_ppo
        else:
            self.state["run_ppo"] = run_ppo

    def _actor_exception(self, exc: BaseException) -> Exception:
        """Ray's rendering of an exception raised inside the TaskRunner actor, frames and all."""
        lines = "".join(traceback.format_exception(exc)).rstrip("\n").split("\n")
        if lines and lines[0].startswith("Traceback (most recent call last):"):
            lines = lines[1:]
        return ray_task_error(type(exc).__name__, "\n".join([self.runner.header("run", self.ip), *lines]))

    # -- driver-side startup -----------------------------------------------------------------------------------
    def _ray_init(self, config: Any) -> None:
        from omegaconf import OmegaConf

        env_vars = {
            "TOKENIZERS_PARALLELISM": "true",
            "NCCL_DEBUG": "WARN",
            "VLLM_LOGGING_LEVEL": "WARN",
            "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "true",
            "VLLM_DISABLE_COMPILE_CACHE": "1",
            "HCCL_HOST_SOCKET_PORT_RANGE": "auto",
            "HCCL_NPU_SOCKET_PORT_RANGE": "auto",
            "HSA_NO_SCRATCH_RECLAIM": "1",
        }
        env_vars = {k: v for k, v in env_vars.items() if os.environ.get(k) is None}
        for key in ("VERL_FULL_DETERMINISM", "VLLM_BATCH_INVARIANT", "VERL_RL_INSIGHT_ENABLE"):
            env_vars[key] = os.environ.get(key, "0")
        forwarded = ("PYTHONHASHSEED", "CUBLAS_WORKSPACE_CONFIG", "FLASH_ATTENTION_DETERMINISTIC", "NCCL_DETERMINISTIC")
        for key in (*forwarded, "NCCL_ALGO"):
            if os.environ.get(key) is not None:
                env_vars[key] = os.environ[key]
        ray_init = config.ray_kwargs.get("ray_init", {})
        runtime_env = OmegaConf.merge({"env_vars": env_vars, "working_dir": None}, ray_init.get("runtime_env", {}))
        kwargs = OmegaConf.create({**ray_init, "runtime_env": runtime_env})
        print(f"ray init kwargs: {kwargs}", flush=True)
        # Ray starts the actors with the driver's environment plus runtime_env.env_vars (how a caller may pass
        # MLFLOW_RUN_ID via +ray_kwargs.ray_init.runtime_env.env_vars.MLFLOW_RUN_ID=...).
        actor_env = OmegaConf.to_container(runtime_env, resolve=True).get("env_vars") or {}
        self.actor_env = {str(k): str(v) for k, v in actor_env.items() if v is not None}
        follow = self.mode not in ("hang", "stall")
        self.ray = RayProcesses(self.k.child_lifetime_s, follow_parent=follow)
        signal.signal(signal.SIGTERM, self._on_sigterm)
        _emit(sys.stderr, f"{_now_ms()}\tINFO worker.py:2038 -- Started a local Ray instance.")

    def _on_sigterm(self, signum: int, frame: Any) -> None:
        # Ray's driver handler is sys.exit(signum); its atexit ray.shutdown() then reaps the Ray processes.
        # os._exit keeps mlflow's atexit from ending a run that, in verl, lives in the (SIGKILLed) actor.
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        if self.ray is not None:
            self.ray.shutdown()
        os._exit(signum)

    # -- the TaskRunner actor ----------------------------------------------------------------------------------
    def _task_runner(self, config: Any, OmegaConf: Any) -> BaseException | None:
        shape, k, mode = self.shape, self.k, self.mode
        if shape.use_v1:
            config.transfer_queue.enable = True
        else:
            self.say(f"TaskRunner hostname: {socket.gethostname()}, PID: {self.runner.pid}")
        self.pprint(OmegaConf.to_container(config, resolve=True))
        OmegaConf.resolve(config)
        self._setup_verl_logging()

        if mode == "no_devices":
            return self.fail_no_devices()
        if mode == "noisy":
            self.print_harmless()
        if mode == "unschedulable":          # a real Ray that waits forever (tests/standin/ray_placement.py)
            wait_for_storage = _sibling("ray_placement").wait_for_storage
            ray_init = OmegaConf.to_container(config.ray_kwargs.get("ray_init", {}), resolve=True)
            wait_for_storage(int(config.transfer_queue.backend.SimpleStorage.num_data_storage_units), ray_init)
        if k.startup_delay > 0:
            time.sleep(k.startup_delay)
        if mode == "hccl_connect_timeout":
            return self.fail_hccl_connect()
        if mode in STEP_MODES and k.fail_at_step <= 0:
            early = self.fail_in_step(mode, at_init=True)
            if early is not None:
                return early
        if mode in ("vllm_startup_oom", "vllm_cache_oom"):
            return self.fail_rollout_start(mode)

        # fit(): Tracking first, as verl's trainer does.
        error = self._start_tracking(config, OmegaConf)
        if error is not None:
            return error
        if mode == "hang":
            self.hang(running=shape.batch * shape.n)
        np = _numpy()
        step = 0
        if shape.val_before_train:
            val = val_metrics(k, 0, np)
            self.pprint(f"Initial validation metrics: {val}")
            self.log(val, 0)
        last_val: dict[str, Any] | None = None
        for step in range(1, shape.total_steps + 1):
            time.sleep(max(0.0, k.step_seconds))
            if mode in STEP_MODES and step == k.fail_at_step:
                error = self.fail_in_step(mode, at_init=False)
                if error is not None:
                    self.finish(exit_code=1)
                    return error
            metrics: dict[str, Any] = {}
            is_last = step >= shape.total_steps
            if shape.test_freq > 0 and (is_last or step % shape.test_freq == 0):
                val = val_metrics(k, step, np)
                metrics.update(val)
                if is_last:
                    last_val = val
            self.log({**step_metrics(shape, k, step, np), **metrics}, step)
        self.pprint(f"Final validation metrics: {last_val}")
        self.finish(exit_code=0)
        return None

    # -- output helpers ----------------------------------------------------------------------------------------
    def say(self, text: str) -> None:
        self.out.write(text + "\n")

    def say_err(self, text: str) -> None:
        self.err.write(text + "\n")

    def pprint(self, obj: Any) -> None:
        pprint.pprint(obj, stream=self.out)  # type: ignore[arg-type]

    def _setup_verl_logging(self) -> None:
        handler = logging.StreamHandler(stream=self.err)  # type: ignore[arg-type]
        level = os.getenv("VERL_LOGGING_LEVEL", "INFO")
        handler.setLevel(level)
        handler.setFormatter(logging.Formatter("%(levelname)s:%(asctime)s:%(message)s"))
        verl_logger = logging.getLogger("verl")
        verl_logger.handlers = [handler]
        verl_logger.setLevel(level)
        verl_logger.propagate = False
        self.verl_log = logging.getLogger("verl.trainer.ppo.v1.replay_buffer")

    def _with_actor_streams(self, fn: Callable[[], Any]) -> Any:
        saved = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = self.out, self.err  # type: ignore[assignment]
        try:
            return fn()
        finally:
            sys.stdout, sys.stderr = saved

    # -- tracking ----------------------------------------------------------------------------------------------
    def _start_tracking(self, config: Any, OmegaConf: Any) -> BaseException | None:
        shape = self.shape
        module = _load_verl_tracking()
        supported = list(module.Tracking.supported_backend)
        bad = [b for b in shape.loggers if b != "tracking" and b not in supported]
        if bad:
            text = self._runner_text("tracking", f"AssertionError: {bad[0]} is not supported")
            return ray_task_error("AssertionError", text)
        simulated = [b for b in shape.loggers if b in ("mlflow", "file")]
        for other in shape.loggers:
            if other not in ("mlflow", "file", "console"):
                _emit(sys.stderr, f"[verl-standin] logger backend {other!r} is not simulated; skipped")
        self.console = "console" in shape.loggers
        container = OmegaConf.to_container(config, resolve=True)
        self.tracking = self._with_actor_streams(
            lambda: module.Tracking(
                project_name=shape.project,
                experiment_name=shape.experiment,
                default_backend=simulated,
                config=container,
            )
        )
        return None

    def log(self, data: dict[str, Any], step: int) -> None:
        if self.console:
            self.say(concat_dict_to_str(data, step))
        if self.tracking is not None:
            self._with_actor_streams(lambda: self.tracking.log(data=data, step=step))

    def finish(self, exit_code: int) -> None:
        if self.tracking is not None:
            self._with_actor_streams(lambda: self.tracking.finish(exit_code=exit_code))

    # -- hangs -------------------------------------------------------------------------------------------------
    def hang(self, running: int) -> None:
        """Block forever like the replay buffer polling a rollout that never finishes."""
        try:
            interval = int(os.getenv("VERL_REPLAY_BUFFER_DEBUG_INTERVAL_SECONDS", "60"))
        except ValueError:
            interval = 60
        last = time.time()
        while True:
            time.sleep(0.1 if interval <= 1 else 1.0)
            now = time.time()
            if now - last > interval:
                self.verl_log.info(f"pending: 0, running: {running}, finished: 0, failure: 0")
                last = now

    # -- failures ----------------------------------------------------------------------------------------------
    def _worker(self, cls: str, offset: int, module: str) -> RayActor:
        return RayActor(cls, self.runner.pid + offset, module, _hex_id(self.rng), _address(self.rng))

    def _runner_text(self, site_key: str, tail: str) -> str:
        """Ray's text for a TaskRunner-level failure: header, frames of the failing call site, then ``tail``."""
        lines = [self.runner.header("run", self.ip)]
        lines += _format_frames(SITES.get((site_key, self.shape.use_v1), []))
        lines.append(tail)
        return "\n".join(lines)

    def _nested(
        self, site_key: str, worker: RayActor, method: str, worker_frames: list[Frame], cause: str, message: str
    ) -> Exception:
        """A worker-side ``cause`` seen through ``ray.get`` in the TaskRunner, then through the driver's ``ray.get``."""
        short = cause.rsplit(".", 1)[-1]
        worker_text = "\n".join(
            [f"ray.exceptions.RayTaskError({short}): {worker.header(method, self.ip)}"]
            + _format_frames(worker_frames)
            + [f"{cause}: {message}"]
        )
        return ray_task_error(short, self._runner_text(site_key, worker_text))

    def _role_prefix(self) -> str:
        return "actor_rollout_ref" if self.shape.use_ref else "actor_rollout"

    def fail_no_devices(self) -> BaseException:
        tail = f"ValueError: Total available GPUs 0 is less than total desired GPUs {self.shape.n_gpus}"
        text = self._runner_text("resource_pool", tail)
        return ray_task_error("ValueError", text)

    def fail_hccl_connect(self) -> BaseException:
        worker = self._worker("WorkerDict", 1, "verl.single_controller.ray.base")
        return self._nested(
            "init_model",
            worker,
            f"{self._role_prefix()}_init_model",
            WORKER_INIT,
            "RuntimeError",
            ei0006_message(worker.pid),
        )

    def fail_rollout_start(self, mode: str) -> BaseException:
        mem = MemoryModel.build(self.shape, self.k)
        server = self._worker("vLLMHttpServer", 9, "verl.workers.rollout.vllm_rollout.vllm_async_server")
        engine_pid = self.runner.pid + 10
        if mode == "vllm_startup_oom":
            free = min(mem.free_at_rollout_start, mem.rollout_request - 0.5)
            cause = vllm_startup_message(mem.capacity, self.shape.util, max(0.01, free))
        else:
            cause = KV_CACHE_MESSAGE
        stamp = _dt.datetime.now().strftime("%m-%d %H:%M:%S")
        log = RayLogStream(sys.__stderr__ or sys.stderr, f"{server.prefix} (EngineCore_DP0 pid={engine_pid})")
        log.write(f"ERROR {stamp} [core.py:1006] EngineCore failed to start.\n")
        log.write(f"ERROR {stamp} [core.py:1006] ValueError: {cause}\n")
        return self._nested("rollout", server, "launch_server", WORKER_ROLLOUT, "RuntimeError", ENGINE_FAILED_MESSAGE)

    def fail_in_step(self, mode: str, at_init: bool) -> BaseException | None:
        shape, k = self.shape, self.k
        worker = self._worker("WorkerDict", 1, "verl.single_controller.ray.base")
        site = "init_model" if at_init else "update_actor"
        method = f"{self._role_prefix()}_{'init_model' if at_init else 'update_actor'}"
        if mode == "stall":
            self.hang(running=shape.batch * shape.n)
        if mode == "oom_linger":
            self.print_unhandled_oom(worker, method, at_init)
            self.hang(running=shape.batch * shape.n)
        if mode == "crash":
            self._crash(_signal_number(k.signal))
        if mode == "oom":
            mem = MemoryModel.build(shape, k)
            request = max(0.3, round(mem.train_peak * 0.107, 2))
            frames = WORKER_INIT if at_init else WORKER_OOM_TRAIN
            message = npu_oom_message(k.device_memory_gib, request)
            return self._nested(site, worker, method, frames, "torch.OutOfMemoryError", message)
        if mode == "hccl_timeout":
            peer = self._worker("WorkerDict", 2, "verl.single_controller.ray.base")
            timeout = _hccl_exec_timeout_ms()
            peer_log = RayLogStream(sys.__stderr__ or sys.stderr, peer.prefix)
            peer_log.write("[W compiler_depend.ts:487] Warning: NPU warning, error code is 507048[Error]: \n")
            peer_log.write(
                f"[Rank 1] Watchdog caught collective operation timeout: WorkHCCL(SeqNum=196, OpType=ALLREDUCE, "
                f"Timeout(ms)={timeout}) ran for {timeout + 185} milliseconds before timing out.\n"
            )
            peer_log.write(
                "Some HCCL operations have failed or timed out. Due to the asynchronous nature of ASCEND kernels, "
                "subsequent NPU operations might run on corrupted/incomplete data.\n"
            )
            peer_log.write("To avoid data inconsistency, we are taking the entire process down.\n")
            peer_log.write("HCCL watchdog thread terminated with exception\n")
            frames = WORKER_INIT if at_init else WORKER_HCCL_TRAIN
            message = ei0002_message(worker.pid, max(1, shape.n_gpus))
            return self._nested(site, worker, method, frames, "RuntimeError", message)
        if mode == "ray_actor_died":
            node_id = "".join(f"{self.rng.randrange(256):02x}" for _ in range(28))
            _emit(
                sys.stderr,
                ray_prefix("(raylet)") + " A worker died or was killed while executing a task by an unexpected "
                "system error. To troubleshoot the problem, check the logs for the dead worker. "
                f"Lease ID: {_hex_id(self.rng, 24, '')} Worker ID: {_hex_id(self.rng, 28, '')} Node ID: {node_id} "
                f"Worker IP address: {self.ip} Worker port: {40000 + self.rng.randrange(20000)} "
                f"Worker PID: {worker.pid} {WORKER_DEATH_DETAIL}",
            )
            died = "\n".join(
                [
                    "The actor died unexpectedly before finishing this task.",
                    "\tclass_name: create_colocated_worker_cls.<locals>.WorkerDict",
                    f"\tactor_id: {worker.actor_id}",
                    f"\tpid: {worker.pid}",
                    f"\tnamespace: {_hex_id(self.rng, 16, '')}",
                    f"\tip: {self.ip}",
                    f"The actor is dead because its worker process has died. {WORKER_DEATH_DETAIL}",
                ]
            )
            text = self._runner_text(site, f"ray.exceptions.ActorDiedError: {died}")
            return ray_task_error("ActorDiedError", text)
        return None

    def print_harmless(self) -> None:
        """Lines healthy runs print too, then training goes on: an allocator's retry warning, an HCCL
        environment warning and Ray's per-node worker-failure summary counting no OOM kill (the raylet's
        ``%d Workers (tasks / actors) killed due to memory pressure (OOM), %d Workers crashed due to other
        reasons at node (ID: %s, IP: %s) over the last time period.``, ray 2.60.0 raylet binary)."""
        worker = RayLogStream(sys.__stderr__ or sys.stderr, self._worker("WorkerDict", 1, "").prefix)
        worker.write("WARNING: Failed to allocate pinned buffer, retrying\n")
        worker.write("[W compiler_depend.ts:107] Warning: Environment variable HCCL_BLOCKING_WAIT is deprecated; "
                     "use TORCH_HCCL_BLOCKING_WAIT instead\n")
        node_id = "".join(f"{self.rng.randrange(256):02x}" for _ in range(28))
        _emit(sys.stderr, ray_prefix("(raylet)") + " 0 Workers (tasks / actors) killed due to memory pressure (OOM), "
              f"1 Workers crashed due to other reasons at node (ID: {node_id}, IP: {self.ip}) over the last time "
              f"period. To see more information about the Workers killed on this node, use "
              f"`ray logs raylet.out -ip {self.ip}`")

    def print_unhandled_oom(self, worker: RayActor, method: str, at_init: bool) -> None:
        """A worker's OOM that nobody ``ray.get``s: Ray's driver logs it (ray/_private/worker.py
        ``_unhandled_error_handler``) as the RayTaskError's text, and the trainer keeps waiting."""
        frames = WORKER_INIT if at_init else WORKER_OOM_TRAIN
        request = max(0.3, round(MemoryModel.build(self.shape, self.k).train_peak * 0.107, 2))
        text = "\n".join([worker.header(method, self.ip)] + _format_frames(frames)
                         + [f"torch.OutOfMemoryError: {npu_oom_message(self.k.device_memory_gib, request)}"])
        _emit(sys.stderr, f"{_now_ms()}\tERROR worker.py:440 -- Unhandled error (suppress with "
              f"'RAY_IGNORE_UNHANDLED_ERRORS=1'): {text}")

    def _crash(self, signum: int) -> None:
        """Die by a signal with no Python cleanup, like a native crash (the mlflow run stays RUNNING)."""
        names = {signal.SIGSEGV: "Segmentation fault", signal.SIGABRT: "Aborted", signal.SIGBUS: "Bus error"}
        if signum in names:
            name = signal.Signals(signum).name
            _emit(sys.stderr, f"*** {name} received at time={int(time.time())} on cpu {os.getpid() % 16} ***")
            _emit(sys.stderr, f"Fatal Python error: {names[signum]}")
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        time.sleep(5)
        os._exit(128 + signum)


def _numpy() -> Any:
    import numpy

    return numpy


_TRACKING_MODULE: Any = None


def _load_verl_tracking() -> Any:
    """Execute the installed ``verl/utils/tracking.py`` without importing the ``verl`` package (and torch)."""
    global _TRACKING_MODULE
    if _TRACKING_MODULE is None:
        path = _source_file("verl", "utils/tracking.py")
        if path is None:
            raise KnobError("verl/utils/tracking.py not found in the installed verl")
        spec = importlib.util.spec_from_file_location("verl.utils.tracking", path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _TRACKING_MODULE = module
    return _TRACKING_MODULE


# ---------------------------------------------------------------------------------------------------------------
# Entry point
# ---------------------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> None:
    """Parse knobs, then hand the remaining argv to the real ``@hydra.main`` on verl's ``ppo_trainer``."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        knobs, rest = parse_standin_args(args)
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
    run = StandinRun(knobs, DriverChain(), state)
    task = build_task_function(run, state)
    sys.argv = [sys.argv[0], *rest]
    hydra.main(config_path=str(config_dir), config_name="ppo_trainer", version_base=None)(task)()


if __name__ == "__main__":
    main()
