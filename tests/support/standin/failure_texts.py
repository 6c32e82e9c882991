"""Failure texts, verbatim from the sources cited in verl_standin.py's docstring (torch_npu, CANN/HCCL, vLLM,
vllm-ascend, Ray), and where each failure surfaces inside the TaskRunner and its workers (frames located in the
installed verl, torch and ray; missing ones dropped)."""
from __future__ import annotations

import os

from tests.support.standin.console import _cann_time
from tests.support.standin.sources import Frame


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
