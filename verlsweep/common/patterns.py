"""The failure texts a trial's log is matched against, each with where it comes from.

Every row names its source precisely enough to be checked by a machine (tests/test_patterns.py):

* a row whose text comes from an installed package (verl, ray, torch, hydra, omegaconf, mlflow) names
  the package, the file relative to the package dir (a Python file or a shared library / binary) and
  the literal fragment of that file the text is produced from (a format string keeps its `{...}` /
  `%s` placeholders); the test finds the fragment in the installed file, fills its placeholders into
  `line` and checks the row's regex matches that line, so a message changed by a version bump, or a
  regex edited away from the message, fails a test;
* a row from a package CI cannot install (torch_npu, CANN, vLLM, vLLM-Ascend, CPython's C runtime)
  names the upstream file or issue thread and the version the text was taken from.

`ambiguous` rows are texts healthy runs print too (allocator retry warnings, NPU warnings): they only
colour the outcome of a process that died (verlsweep.trial.classify).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

# Packages CI installs (pyproject's `verl` and `test` extras): their rows are checked against the files.
INSTALLED = ("verl", "ray", "torch", "hydra", "omegaconf", "mlflow")


@dataclass(frozen=True)
class Source:
    package: str                 # an INSTALLED package, or the upstream project (torch_npu, vllm-ascend, ...)
    path: str                    # installed: file relative to the package dir; upstream: repo file or issue
    fragment: str                # the literal text (format string) in that file
    line: str = ""               # a line as printed, built from `fragment` (default: the fragment itself)
    version: str = ""            # upstream sources: the version or commit the text was taken from
    prints: str = ""             # when `fragment` is code (a class, an assignment): the part of it printed

    @property
    def installed(self) -> bool:
        return self.package in INSTALLED

    @property
    def example(self) -> str:
        return self.line or self.fragment

    @property
    def printed(self) -> str:
        return self.prints or self.fragment


@dataclass(frozen=True)
class Pattern:
    outcome: str
    label: str
    regex: re.Pattern[str]
    sources: tuple[Source, ...]
    ambiguous: bool = False

    @property
    def source(self) -> str:
        return "; ".join(f"{s.package} {s.path}{' @' + s.version if s.version else ''}" for s in self.sources)


def _p(outcome: str, label: str, regex: str, *sources: Source, ambiguous: bool = False) -> Pattern:
    return Pattern(outcome, label, re.compile(regex), tuple(sources), ambiguous)


_S = Source
_VLLM_ASCEND = "0.23.0"          # the vLLM / vLLM-Ascend release verl 0.9's Ascend install guide pins
_TORCH_NPU = "2.10.0.post4"      # the torch_npu release of the same guide

# Rows in table order; the order only matters when one line matches two rows (the first one is taken).
PATTERNS: tuple[Pattern, ...] = (
    # --- the command itself was rejected (argv / Hydra override grammar / config keys) ---
    _p("config_error", "hydra override",
       r"Could not override '[^']*'|Could not append to config|Error merging override|Error parsing override|"
       r"Could not delete from config",
       _S("hydra", "_internal/config_loader_impl.py", "Could not override '{override.key_or_group}'.",
          "Could not override 'actor_rollout_ref.rollout.gpu_memory_utilisation'."),
       _S("hydra", "_internal/config_loader_impl.py", "Could not append to config. An item is already at '",
          "Could not append to config. An item is already at 'trainer.logger'."),
       _S("hydra", "_internal/config_loader_impl.py", "Error merging override {override.input_line}",
          "Error merging override trainer.total_epochs=abc"),
       _S("hydra", "core/override_parser/overrides_parser.py", "Error parsing override '{override}'",
          "hydra.errors.OverrideParseException: Error parsing override 'a=[1'"),
       _S("hydra", "_internal/config_loader_impl.py", "Could not delete from config. '{override.key_or_group}'",
          "Could not delete from config. 'trainer.foo' does not exist.")),
    _p("config_error", "config key",
       r"Key '[^']*' is not in struct|ConfigAttributeError|ConfigKeyError|In '[^']*': Could not find '",
       _S("omegaconf", "dictconfig.py", "Key '{key}' is not in struct",
          "Key 'gpu_memory_utilisation' is not in struct"),
       _S("omegaconf", "errors.py", "class ConfigKeyError", "omegaconf.errors.ConfigKeyError: Missing key foo",
          prints="ConfigKeyError"),
       _S("omegaconf", "errors.py", "class ConfigAttributeError",
          "omegaconf.errors.ConfigAttributeError: Missing key foo", prints="ConfigAttributeError"),
       _S("hydra", "_internal/defaults_list.py", "Could not find '{element.get_config_path()}'",
          "In 'ppo_trainer': Could not find 'actor/nope'")),
    # --- no accelerator where verl needs one ---
    _p("no_devices", "verl device check", r"Total available GPUs \d+ is less than total desired GPUs \d+",
       _S("verl", "single_controller/ray/base.py",
          "Total available GPUs {total_available_gpus} is less than total desired GPUs {total_required_gpus}",
          "ValueError: Total available GPUs 0 is less than total desired GPUs 8")),
    _p("no_devices", "npu not visible", r"NPU device is not available or visible",
       _S("verl-project/verl", "docs/ascend_tutorial/faq/faq.rst",
          "torch_npu detected, but NPU device is not available or visible", version="1dda039b")),
    _p("no_devices", "no cuda device", r"No CUDA GPUs are available|Found no NVIDIA driver",
       _S("torch", "lib/libtorch_cpu.so", "No CUDA GPUs are available",
          "RuntimeError: No CUDA GPUs are available"),
       _S("pytorch", "c10/cuda/CUDAFunctions.cpp (CUDA builds only)", "Found no NVIDIA driver on your system.",
          version="v2.13.0")),
    # --- device memory: training allocator, CANN, vLLM startup / KV cache, Ray host memory ---
    _p("oom", "npu out of memory", r"NPU out of memory",
       _S("torch_npu", "Ascend/pytorch torch_npu/csrc/core/npu/NPUCachingAllocator.cpp, as printed in "
          "vllm-project/vllm-ascend#6611", "NPU out of memory. Tried to allocate", version=_TORCH_NPU)),
    _p("oom", "cuda out of memory", r"CUDA out of memory|torch\.OutOfMemoryError",
       _S("torch", "_C/__init__.pyi", "class OutOfMemoryError(RuntimeError)",
          "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.95 GiB", prints="OutOfMemoryError"),
       _S("pytorch", "c10/cuda/CUDACachingAllocator.cpp (CUDA builds only)", "CUDA out of memory. Tried to allocate",
          version="v2.13.0")),
    _p("oom", "cann allocation", r"\bEL0004\b",
       _S("torch_npu", "Ascend/pytorch torch_npu/csrc/core/npu/NPUException.cpp isCannOOM", "EL0004",
          "RuntimeError: EL0004: [PID: 1234] The memory allocation failed.", version=_TORCH_NPU)),
    # allocator retries print this and then succeed: it only explains a process that died
    _p("oom", "allocation failure", r"Failed to allocate",
       _S("torch_npu", "Ascend/pytorch torch_npu/csrc/core/npu/NPUException.cpp isCannOOM", "Failed to allocate",
          version=_TORCH_NPU), ambiguous=True),
    _p("oom", "vllm startup memory", r"Free memory on device .* less than desired GPU memory utilization",
       _S("vllm-ascend", "vllm_ascend/worker/worker.py NPUWorker._init_device",
          "Free memory on device ({F}/{T} GiB) on startup is less than desired GPU memory utilization",
          "ValueError: Free memory on device (36.08/60.96 GiB) on startup is less than desired GPU memory "
          "utilization (0.6, 36.58 GiB).", version=_VLLM_ASCEND)),
    _p("oom", "vllm kv cache", r"No available memory for the cache blocks|"
       r"larger than the maximum number of tokens that can be stored in KV cache|"
       r"KV cache is needed, which is larger than the available KV cache memory",
       _S("vllm", "vllm/v1/core/kv_cache_utils.py _check_enough_kv_cache_memory",
          "No available memory for the cache blocks", version=_VLLM_ASCEND),
       _S("vllm", "vllm/v1/core/kv_cache_utils.py _check_enough_kv_cache_memory",
          "KV cache is needed, which is larger than the available KV cache memory",
          "ValueError: To serve at least one request with the model's max seq len (32768), (4.50 GiB KV cache "
          "is needed, which is larger than the available KV cache memory (2.10 GiB).", version=_VLLM_ASCEND)),
    # Ray 2.60's raylet (NodeManager::CreateOomKillMessageDetails / the per-node worker-failure summary);
    # a summary that counts 0 OOM kills is printed while memory is fine and does not match
    _p("oom", "host memory (ray memory monitor)",
       r"worker\(s\) were killed due to the node running low on memory|"
       r"Memory on the node \(IP: .*\) was .*GB used / .*GB limit|"
       r"(?<![\d.])[1-9]\d* Workers \(tasks / actors\) killed due to memory pressure \(OOM\)",
       _S("ray", "core/src/ray/raylet/raylet", "%d worker(s) were killed due to the node running low on memory. %s",
          "ray.exceptions.OutOfMemoryError: 1 worker(s) were killed due to the node running low on memory. "),
       _S("ray", "core/src/ray/raylet/raylet", "Memory on the node (IP: %s, ID: %s) was %sGB used / %sGB limit (%f)",
          "Memory on the node (IP: 10.0.0.2, ID: 4f2a) was 1961.55GB used / 2015.12GB limit (0.973)"),
       _S("ray", "core/src/ray/raylet/raylet", " Workers (tasks / actors) killed due to memory pressure (OOM), ",
          "(raylet) 2 Workers (tasks / actors) killed due to memory pressure (OOM), 0 Workers crashed due to "
          "other reasons at node (ID: 4f2a, IP: 10.0.0.2) over the last time period.")),
    _p("oom", "out of memory in a ray task", r"RayTaskError\(OutOfMemoryError\)",
       _S("ray", "exceptions.py", 'name = f"RayTaskError({cause_cls.__name__})"',
          "ray.exceptions.RayTaskError(OutOfMemoryError): ray::TaskRunnerV1.run() (pid=14249, ip=10.0.0.2)",
          prints="RayTaskError({cause_cls.__name__})")),
    # --- collectives that never completed ---
    _p("hccl_timeout", "collective watchdog", r"Watchdog caught collective operation timeout|"
       r"HCCL watchdog thread terminated",
       _S("torch_npu", "Ascend/pytorch torch_npu/csrc/distributed/ProcessGroupHCCL.cpp, as printed in "
          "vllm-project/vllm-ascend#382", "Watchdog caught collective operation timeout", version=_TORCH_NPU),
       _S("torch_npu", "Ascend/pytorch torch_npu/csrc/distributed/ProcessGroupHCCL.cpp",
          "HCCL watchdog thread terminated with exception", version=_TORCH_NPU),
       _S("pytorch", "torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp (CUDA builds only)",
          "Watchdog caught collective operation timeout", version="v2.13.0")),
    _p("hccl_timeout", "hccl exec timeout",
       r"\bEI0002\b|Notify register times out|function error: .*error code is 507048",
       _S("CANN", "Ascend/pytorch docs/zh/user_guide/troubleshooting/troubleshooting_cases/HCCL_timeout.md",
          "EI0002", "EI0002: [PID: 99] The wait execution of the Notify register times out.", version=_TORCH_NPU),
       _S("torch_npu", "Ascend/pytorch docs/zh/user_guide/troubleshooting/troubleshooting_cases/HCCL_timeout.md",
          "NPU function error: AclrtSynchronizeDeviceWithTimeout, error code is 507048", version=_TORCH_NPU)),
    # the same code as a warning precedes the watchdog's verdict on the other ranks
    _p("hccl_timeout", "npu timeout warning", r"error code is 507048",
       _S("torch_npu", "Ascend/pytorch docs/zh/user_guide/troubleshooting/troubleshooting_cases/HCCL_timeout.md",
          "Warning: NPU warning, error code is 507048", version=_TORCH_NPU), ambiguous=True),
    _p("hccl_timeout", "hccl connect timeout", r"\bEI0006\b|Getting socket times out|wait socket establish timeout",
       _S("CANN", "vllm-project/vllm-ascend#486", "EI0006: [PID: 14862] Getting socket times out.",
          version=_VLLM_ASCEND),
       _S("CANN", "vllm-project/vllm-ascend#1955", "[LinkEstablish]wait socket establish timeout",
          version=_VLLM_ASCEND)),
    _p("hccl_timeout", "hccl blocking wait", r"timed out in blocking wait \((?:TORCH_)?HCCL_BLOCKING_WAIT",
       _S("torch_npu", "Ascend/pytorch torch_npu/csrc/distributed/ProcessGroupHCCL.cpp",
          "timed out in blocking wait (TORCH_HCCL_BLOCKING_WAIT=1 or HCCL_BLOCKING_WAIT=1)", version=_TORCH_NPU)),
    # --- a process died; the cause is elsewhere or unknown ---
    _p("crash", "ray actor died", r"ActorDiedError|The actor died unexpectedly",
       _S("ray", "exceptions.py", 'BASE_ERROR_MSG = "The actor died unexpectedly before finishing this task."',
          "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
          prints="The actor died unexpectedly before finishing this task."),
       _S("ray", "exceptions.py", "class ActorDiedError(RayActorError)",
          "ray.exceptions.RayTaskError(ActorDiedError): ray::TaskRunnerV1.run() (pid=1, ip=10.0.0.2)",
          prints="ActorDiedError")),
    # not a bare SIGSEGV: Ray's worker-death notice lists it among possible causes of any death
    _p("crash", "segfault", r"Segmentation fault|\*\*\* SIGSEGV received|core dumped|Fatal Python error",
       _S("cpython", "Modules/faulthandler.c / Python/pylifecycle.c", "Fatal Python error: Segmentation fault",
          version="3.11")),
    _p("crash", "graph capture", r"\b207008\b|\bEL0009\b|Stream resources are insufficient",
       _S("vllm-ascend", "docs/source/faqs.md (ACL graph capture failure)",
          "AclmdlRICaptureBegin(capture_stream_, capture_mode), error code is 207008", version=_VLLM_ASCEND)),
)

# vLLM's own checks name their phase in the text: the rows whose match says where an OOM struck
# (verlsweep.trial.classify for a trial's log, verlsweep.report.frontier for a stored excerpt)
OOM_LABEL_PHASES: dict[str, str] = {"vllm startup memory": "vllm_start", "vllm kv cache": "kv_cache"}
_PHASE_ROWS = tuple((p, OOM_LABEL_PHASES[p.label]) for p in PATTERNS if p.label in OOM_LABEL_PHASES)


def text_phase(text: str) -> str | None:
    """The FAILURE_PHASES entry a failure text names without doubt (vLLM's start check, its KV cache
    check), None when it names none."""
    for pattern, phase in _PHASE_ROWS:
        if pattern.regex.search(text):
            return phase
    return None
