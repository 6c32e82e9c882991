"""The simulation: everything between Hydra handing over the config and ``run_ppo`` returning or raising
(Ray start, the TaskRunner actor's environment and streams, the training loop). Failures and hangs are in
run_failures.py, tracking in tracking.py."""
from __future__ import annotations

import dataclasses
import logging
import os
import pprint
import random
import signal
import socket
import sys
import time
import traceback
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tests.support.standin.console import RayLogStream, _emit, _now_ms
from tests.support.standin.driver import DriverChain, _noop
from tests.support.standin.knobs import STEP_MODES, Knobs
from tests.support.standin.metrics import MemoryModel, RunShape, _numpy, step_lengths, step_metrics, val_metrics
from tests.support.standin.ray_actors import RayActor, RayProcesses, _address, _hex_id, ray_task_error
from tests.support.standin.run_failures import FailureMixin
from tests.support.standin.tracking import TrackingMixin

if TYPE_CHECKING:
    from tests.support.standin.truth_steps import TruthSteps

# What an existing cluster's actors see of the driver's environment: nothing (its raylet's own basics).
CLUSTER_ENV = frozenset({"PATH", "HOME", "LANG", "LC_ALL", "USER", "TMPDIR", "PYTHONPATH"})


class StandinRun(TrackingMixin, FailureMixin):
    """Everything between Hydra handing over the config and ``run_ppo`` returning or raising."""

    def __init__(self, knobs: Knobs, chain: DriverChain, state: dict[str, Any],
                 truth: TruthSteps | None = None) -> None:
        self.knobs = knobs
        self.truth = truth
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
        shape = RunShape.from_config(config, knobs, self.truth)
        self.shape = shape
        mode = knobs.mode
        if self.truth is not None:
            # the truth decides: `auto` trains until a step outgrows the device, whose capacity is the truth's
            knobs = dataclasses.replace(knobs, device_memory_gib=self.truth.capacity_gb)
            mode = "ok" if mode == "auto" else mode
        elif mode == "auto":
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
        except Exception as exc:  # noqa: BLE001 - whatever else the actor raises reaches the driver as RayTaskError
            self.finish(exit_code=1)
            error = self._actor_exception(exc)
        finally:
            os.environ.clear()
            os.environ.update(saved_env)
        self._arm(error)
        if self.ray is not None:
            self.ray.shutdown()

    def _outgrown(self, step: int) -> bool:
        """Whether `step`'s peak no longer fits the device: the truth's device peak at the step's lengths
        (told on stderr, as the stand-in's own note), else `auto`'s memory model."""
        shape, k = self.shape, self.k
        if self.truth is None:
            return (self.knobs.mode == "auto"
                    and MemoryModel.build(shape, k).step_need(shape, k, step) > k.device_memory_gib)
        prompt, response = step_lengths(shape, k, step)
        point = self.truth.at(prompt, response)
        if point.oom:
            _emit(sys.stderr, f"[verl-standin] truth of stack {self.truth.stack}: step {step} at prompt {prompt:.1f} / "
                              f"response {response:.1f} tokens needs {point.device_peak_gb:.3f} GiB per device of "
                              f"{point.capacity_gb:.3f}")
        return point.oom

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
        if mode == "unschedulable":          # a real Ray that waits forever (tests/support/standin/ray_placement.py)
            from tests.support.standin.ray_placement import wait_for_storage
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
            # auto or a truth: the lengths grow with the step (lengths.py); the first step whose peak does not fit OOMs
            grown_oom = mode == "ok" and self._outgrown(step)
            if (mode in STEP_MODES and step == k.fail_at_step) or grown_oom:
                error = self.fail_in_step("oom" if grown_oom else mode, at_init=False)
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
