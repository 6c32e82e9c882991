"""How the TaskRunner actor fails or hangs in each failure mode: the worker's error seen through two
``ray.get``s, the lines printed on the way, signals for ``crash``, the replay buffer's poll for ``hang``."""
from __future__ import annotations

import datetime as _dt
import os
import signal
import sys
import time

from tests.support.standin.console import RayLogStream, _emit, _now_ms, ray_prefix
from tests.support.standin.failure_texts import (
    ENGINE_FAILED_MESSAGE,
    KV_CACHE_MESSAGE,
    SITES,
    WORKER_DEATH_DETAIL,
    WORKER_HCCL_TRAIN,
    WORKER_INIT,
    WORKER_OOM_TRAIN,
    WORKER_ROLLOUT,
    _hccl_exec_timeout_ms,
    ei0002_message,
    ei0006_message,
    npu_oom_message,
    vllm_startup_message,
)
from tests.support.standin.knobs import _signal_number
from tests.support.standin.metrics import MemoryModel
from tests.support.standin.ray_actors import RayActor, _address, _hex_id, ray_task_error
from tests.support.standin.sources import Frame, _format_frames


class FailureMixin:
    """StandinRun's failure modes (it provides ``shape``, ``k``, ``runner``, ``rng``, ``ip``, ``verl_log``)."""

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
