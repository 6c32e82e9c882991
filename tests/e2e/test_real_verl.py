"""Drive the real installed verl on a CPU-only box up to its device check.

What this proves (details and timings in tests/support/fixtures/REAL_VERL_NOTES.md): with the tiny
fixtures from tests/support/fixtures/tiny_verl.py, ``python -m verl.trainer.main_ppo`` gets through
Hydra composition, ``validate_config``, ``ray.init``, the TaskRunner, tokenizer, datasets and
(for v1) TransferQueue, and then stops in
``verl/single_controller/ray/base.py::ResourcePoolManager._check_resource_available`` with
``ValueError: Total available GPUs 0 is less than total desired GPUs N``, exit code 1 (Hydra's
``run_and_report``). It also checks that the private Ray it started leaves no process behind.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

VERL_TIMEOUT_S = 180
DEVICE_CHECK = "ValueError: Total available GPUs 0 is less than total desired GPUs 8"

# The command comes from verlsweep's own composition (a test runs the actual
# python -m verl.trainer.main_ppo with the composed argv), scaled down to the fixtures.
_SCALE_DOWN = [
    "verl.data.train_batch_size=8",
    "verl.actor_rollout_ref.actor.ppo_mini_batch_size=8",
    "verl.data.max_prompt_length=256",
    "verl.data.max_response_length=64",
]
# TransferQueue places its SimpleStorage units in a Ray placement group of 1 CPU each (default 8)
# and waits on pg.ready() with no timeout, so with fewer than units + 1 Ray CPUs (the controller
# takes one) the v1 trainer hangs forever on this 2-core box. One unit fits.
_SMALL_BOX_V1 = ["verl.transfer_queue.backend.SimpleStorage.num_data_storage_units=1"]


def composed_overrides(algorithm: str, model_dir: Path, data_dir: Path, extra: list[str] = ()) -> list[str]:
    """verl overrides for `hardware=a2_64g algorithm=<algorithm> model=qwen3_8b` on the fixtures."""
    from verlsweep.command.compose import build_command, compose_config

    cfg = compose_config(["hardware=a2_64g", f"algorithm={algorithm}", "model=qwen3_8b",
                          f"model.path={model_dir}", f"data.dir={data_dir}", *_SCALE_DOWN, *extra])
    return build_command(cfg).overrides


def _private_ray(ray_tmp: Path) -> list[str]:
    # address=local makes ray.init start a new cluster even if RAY_ADDRESS is set or
    # <tmp>/ray/ray_current_cluster names a running one (ray/_private/services.py
    # canonicalize_bootstrap_address); _temp_dir keeps sockets, logs and session files out of /tmp/ray.
    return [
        "+ray_kwargs.ray_init.address=local",
        f"+ray_kwargs.ray_init._temp_dir={ray_tmp}",
        "+ray_kwargs.ray_init.include_dashboard=False",
    ]


def _isolated_env(tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("RAY_ADDRESS", None)
    env.update(
        {
            # Ray otherwise writes ~/.ray/auth_token (token auth is on by default for local clusters).
            "RAY_AUTH_MODE": "disabled",
            "RAY_USAGE_STATS_ENABLED": "0",
            # RLHFDataset reads parquet through `datasets`, which caches under HF_HOME.
            "HF_HOME": str(tmp / "hf_home"),
            "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
        }
    )
    return env


def _session_members(sid: int) -> list[psutil.Process]:
    """Live (non-zombie) processes in session ``sid``.

    Ray workers get their own process group but stay in the driver's session, so the session is
    what covers everything the run started, even after it is re-parented to PID 1.
    """
    members = []
    for proc in psutil.process_iter():
        try:
            if proc.pid != os.getpid() and os.getsid(proc.pid) == sid and proc.status() != psutil.STATUS_ZOMBIE:
                members.append(proc)
        except (psutil.Error, ProcessLookupError, PermissionError):
            continue
    return members


def _kill_session(sid: int) -> None:
    for proc in _session_members(sid):
        try:
            proc.kill()
        except psutil.Error:
            pass


def _run_verl(overrides: list[str], tmp: Path) -> tuple[int, str, list[str]]:
    """Run main_ppo in its own session; return (exit code, output, processes left after 15 s)."""
    # Not under tmp_path: Ray's unix sockets live below _temp_dir/session_<stamp>/sockets/ and a
    # path longer than 107 bytes makes raylet fail, so keep this one short.
    ray_tmp = Path(tempfile.mkdtemp(prefix="rv"))
    cwd = tmp / "run"  # Hydra writes outputs/<date>/<time>/main_ppo.log under the cwd
    cwd.mkdir()
    cmd = [sys.executable, "-m", "verl.trainer.main_ppo", *overrides, *_private_ray(ray_tmp)]
    proc = subprocess.Popen(
        cmd,
        cwd=cwd,
        env=_isolated_env(tmp),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=VERL_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        _kill_session(proc.pid)
        output, _ = proc.communicate()
        output += f"\n[test] killed after {VERL_TIMEOUT_S} s"
    try:
        # After a normal exit only zombies remain for < 1 s; after a kill, workers take ~5 s
        # to notice their raylet is gone.
        deadline = time.monotonic() + 15
        left = _session_members(proc.pid)
        while left and time.monotonic() < deadline:
            time.sleep(0.2)
            left = _session_members(proc.pid)
        leftovers = []
        for p in left:
            try:
                leftovers.append(f"{p.pid} {p.name()}")
            except psutil.Error:
                pass
    finally:
        _kill_session(proc.pid)
        shutil.rmtree(ray_tmp, ignore_errors=True)
    return proc.returncode, output, leftovers


def _assert_reached_device_check(rc: int, output: str, leftovers: list[str]) -> None:
    tail = output[-6000:]
    if "hydra/core/plugins.py" in output:
        pytest.fail(
            "Hydra's plugin scan failed before verl ran: a module under hydra_plugins/ in this "
            "environment does not import under Hydra's scanner\n" + tail
        )
    assert DEVICE_CHECK in output, tail
    assert rc == 1, tail
    assert not leftovers, f"processes left by the run: {leftovers}"


def test_fixtures_load_with_transformers(tiny_model_dir: Path, gsm8k_dir: Path) -> None:
    import pyarrow.parquet as pq
    from transformers import AutoConfig, AutoTokenizer
    from verl.utils.reward_score import default_compute_score

    config = AutoConfig.from_pretrained(tiny_model_dir)
    assert config.model_type == "qwen3"
    assert config.architectures == ["Qwen3ForCausalLM"]
    assert config.num_attention_heads % config.num_key_value_heads == 0

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.pad_token == "<|endoftext|>"
    assert len(tokenizer) <= config.vocab_size
    text = tokenizer.apply_chat_template(
        [{"role": "user", "content": "1 + 1?"}], add_generation_prompt=True, tokenize=False
    )
    assert text.endswith("<|im_start|>assistant\n")

    size = sum(p.stat().st_size for p in tiny_model_dir.iterdir())
    assert size < 1_000_000

    for name, rows in (("train.parquet", 16), ("test.parquet", 8)):
        table = pq.read_table(gsm8k_dir / name)
        assert table.num_rows == rows
        assert table.column_names == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
        first = table.slice(0, 1).to_pylist()[0]
        assert first["data_source"] == "openai/gsm8k"
        assert first["prompt"][0]["role"] == "user"
        # The real runs stop before verl's reward workers start, so score here: the worked answer
        # must earn full marks from verl's own gsm8k scorer (verl/utils/reward_score/gsm8k.py).
        answer = first["extra_info"]["answer"]
        assert default_compute_score(first["data_source"], answer, first["reward_model"]["ground_truth"]) == 1.0


@pytest.mark.slow
@pytest.mark.timeout(VERL_TIMEOUT_S + 60)
def test_real_verl_grpo_v1_reaches_device_check(tiny_model_dir: Path, gsm8k_dir: Path, tmp_path: Path) -> None:
    overrides = composed_overrides("grpo", tiny_model_dir, gsm8k_dir, _SMALL_BOX_V1)
    rc, output, leftovers = _run_verl(overrides, tmp_path)
    _assert_reached_device_check(rc, output, leftovers)
    assert "ray::TaskRunnerV1.run()" in output


@pytest.mark.slow
@pytest.mark.timeout(VERL_TIMEOUT_S + 60)
def test_real_verl_accepts_a_long_run_confirmations_overrides_and_sorted_data_up_to_its_device_check(
        tiny_model_dir: Path, gsm8k_dir: Path, tmp_path: Path) -> None:
    # what the sweep adds to a confirmation trial (verlsweep.study.confirm): ignore_eos, data.shuffle=false
    # and the train file copied longest prompt first, which RLHFDataset then loads
    from verlsweep.study.confirm import longest_first, worst_case_overrides

    ordered = tmp_path / "train_longest_first.parquet"
    assert longest_first(gsm8k_dir / "train.parquet", ordered, "prompt")
    overrides = composed_overrides("grpo", tiny_model_dir, gsm8k_dir, [*_SMALL_BOX_V1, *worst_case_overrides(ordered)])
    assert "actor_rollout_ref.rollout.ignore_eos=True" in overrides and "data.shuffle=False" in overrides
    assert f"data.train_files={ordered}" in overrides
    rc, output, leftovers = _run_verl(overrides, tmp_path)
    _assert_reached_device_check(rc, output, leftovers)
