"""`python -m verlsweep.plan`: the table, `detect` (hardware profiles) and `hardware=auto`."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from verlsweep import CONF_DIR
from verlsweep.command import config_store
from verlsweep.command.compose import compose_config
from verlsweep.command.hydra_compose import compose_dir
from verlsweep.plan import from_cfg, predict_cfg, preflight
from verlsweep.plan.cli import detect, main

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "support" / "plan_data"


def plan_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "verlsweep.plan", *args], cwd=cwd or REPO,
                          capture_output=True, text=True, timeout=300)


def compose_copy(conf_dir: Path, *overrides: str):
    """A copy of conf/ composed as sweep.py composes conf/ (verlsweep's structured configs registered)."""
    config_store.register()
    return compose_dir(conf_dir, "sweep", list(overrides))


@pytest.fixture
def conf_copy(tmp_path) -> Path:
    """A private copy of conf/ so written profiles never land in the repo."""
    dst = tmp_path / "conf"
    shutil.copytree(CONF_DIR, dst)
    return dst


def test_the_table_plans_every_util_tp_offload_combination_of_the_composed_trial():
    proc = plan_cli("hardware=a2_64g", "model=qwen3_8b", "algorithm=remax", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    tps = (1, 2, 4, 8)                                  # every TP an 8-device A2 node can run Qwen3-8B at
    assert len(rows) == 7 * len(tps) * 4
    assert {(r["util"], r["tp"], r["param_offload"], r["optimizer_offload"]) for r in rows} == {
        (u, t, p, o) for u in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9) for t in tps for p in (True, False)
        for o in (True, False)}
    statuses = [r["status"] for r in rows]
    # fits first; edge probes (inside the planner's error band, verlsweep.plan.predictor.band) before infeasible
    assert statuses == sorted(statuses, key=("ok", "tight", "edge", "infeasible").index)
    assert {"ok", "infeasible"} <= set(statuses)
    bad = next(r for r in rows
               if (r["util"], r["tp"], r["param_offload"], r["optimizer_offload"]) == (0.9, 2, False, False))
    assert bad["status"] == "infeasible" and bad["binding"] in ("vllm_start", "rollout")


def test_the_table_marks_the_composed_knobs_and_names_binding_constraints():
    proc = plan_cli("hardware=a2_64g", "model=qwen3_8b", "algorithm=remax", "--all")
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "*0.60" in out and "plans in" in out
    for word in ("rollout", "actor", "binding", "tok/s", "infeasible"):
        assert word in out


def test_the_table_refuses_what_it_does_not_model():
    proc = plan_cli("verl.actor_rollout_ref.rollout.name=sglang")
    assert proc.returncode == 2 and "vLLM only" in proc.stderr


def test_detect_writes_a_profile_from_recorded_npu_smi_that_plans_like_the_shipped_one(conf_copy, capsys):
    rc = main(["detect", "--from-npu-smi", str(DATA / "npu_smi_a2_910b3.txt"), "--name", "lab_a2",
               "--host-memory-gb", "1024", "--conf-dir", str(conf_copy)])
    assert rc == 0, capsys.readouterr().err
    written = yaml.safe_load((conf_copy / "hardware" / "lab_a2.yaml").read_text())
    hw = written["hardware"]
    assert written["defaults"] == [{"/device": "npu"}]
    assert hw["devices_per_node"] == 8 and hw["hbm_total_gb"] == 64.0
    assert hw["idle_reserved_gb"] == pytest.approx(3368 / 1024, abs=0.01)     # least-used device
    assert hw["bf16_tflops"] == 313 and hw["host_memory_gb"] == 1024
    ours = compose_copy(conf_copy, "hardware=lab_a2", "algorithm=remax")
    shipped = compose_config(["hardware=a2_64g", "algorithm=remax"])
    assert ours.verl.trainer.n_gpus_per_node == 8 and ours.env.TASK_QUEUE_ENABLE == "1"
    mine, theirs = predict_cfg(ours), predict_cfg(shipped)
    assert mine.feasible and mine.binding == theirs.binding
    assert mine.capacity_gb == pytest.approx(theirs.capacity_gb, abs=0.3)


def test_detect_writes_into_a_config_dir_of_the_users_that_the_config_path_variable_finds(tmp_path, capsys,
                                                                                         monkeypatch):
    own = tmp_path / "site"
    assert main(["detect", "--from-npu-smi", str(DATA / "npu_smi_a2_910b3.txt"), "--name", "lab_a2",
                 "--host-memory-gb", "1024", "--conf-dir", str(own)]) == 0
    assert f"use hardware=lab_a2 with VERLSWEEP_CONFIG_PATH={own}" in capsys.readouterr().out
    assert sorted(p.relative_to(own).as_posix() for p in own.rglob("*.yaml")) == ["hardware/lab_a2.yaml"]
    monkeypatch.setenv("VERLSWEEP_CONFIG_PATH", str(own))
    cfg = compose_config(["hardware=lab_a2"])
    assert cfg.hardware.device == "npu" and from_cfg(cfg).hardware.world == 8


def test_detect_counts_each_a3_chip_as_a_device(conf_copy):
    assert main(["detect", "--from-npu-smi", str(DATA / "npu_smi_a3.txt"), "--name", "lab_a3",
                 "--host-memory-gb", "1536", "--conf-dir", str(conf_copy)]) == 0
    hw = yaml.safe_load((conf_copy / "hardware" / "lab_a3.yaml").read_text())["hardware"]
    assert hw["devices_per_node"] == 16 and hw["bf16_tflops"] == 354
    assert from_cfg(compose_copy(conf_copy, "hardware=lab_a3")).hardware.world == 16


def test_detect_records_the_cpus_a_trials_ray_gets_for_the_cpu_check(conf_copy):
    assert main(["detect", "--from-npu-smi", str(DATA / "npu_smi_a2_910b3.txt"), "--name", "lab_a2",
                 "--host-memory-gb", "1024", "--cpus", "16", "--conf-dir", str(conf_copy)]) == 0
    assert yaml.safe_load((conf_copy / "hardware" / "lab_a2.yaml").read_text())["hardware"]["cpus"] == 16
    verdict = preflight(compose_dir(conf_copy, "sweep", ["hardware=lab_a2"]))
    assert not verdict.feasible and "hardware.cpus=16" in verdict.reason    # 34 asked by verl's v1 trainer


def test_detect_refuses_an_unknown_chip_without_its_numbers(conf_copy, capsys, tmp_path):
    text = (DATA / "npu_smi_a2_910b3.txt").read_text().replace("910B3", "910X9")
    (tmp_path / "smi.txt").write_text(text)
    args = ["detect", "--from-npu-smi", str(tmp_path / "smi.txt"), "--name", "x9", "--host-memory-gb", "512",
            "--conf-dir", str(conf_copy)]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "--bf16-tflops" in err and "--hbm-bandwidth-gbs" in err
    assert main([*args, "--bf16-tflops", "300", "--hbm-bandwidth-gbs", "1200", "--host-link-gbs", "64"]) == 0


def test_detect_never_overwrites_a_profile_unasked(conf_copy, capsys):
    args = ["detect", "--from-npu-smi", str(DATA / "npu_smi_a2_910b3.txt"), "--name", "a2_64g",
            "--host-memory-gb", "1", "--conf-dir", str(conf_copy)]
    assert main(args) == 2 and "--force" in capsys.readouterr().err
    assert main(["detect", "--from-npu-smi", str(DATA / "npu_smi_a2_910b3.txt"), "--name", "auto",
                 "--host-memory-gb", "1", "--conf-dir", str(conf_copy)]) == 2


def test_detect_reads_torchs_view_of_the_devices():
    gib = 1024**3
    npu = SimpleNamespace(is_available=lambda: True, device_count=lambda: 8, get_device_name=lambda i: "910B3",
                          mem_get_info=lambda i: (int(60.5 * gib), int(60.96 * gib)))
    fake_torch = SimpleNamespace(npu=npu, cuda=SimpleNamespace(is_available=lambda: False))
    profile = detect.profile_from_torch(fake_torch, name="t", host_memory_gb=512)
    assert (profile.device, profile.devices_per_node, profile.bf16_tflops) == ("npu", 8, 313)
    assert profile.hbm_usable_gb == pytest.approx(60.96) and profile.idle_reserved_gb == pytest.approx(0.46)
    nothing = SimpleNamespace(npu=None, cuda=SimpleNamespace(is_available=lambda: False))
    with pytest.raises(detect.DetectError, match="--from-npu-smi"):
        detect.profile_from_torch(nothing, name="t", host_memory_gb=1)


def test_hardware_auto_explains_how_to_make_a_profile():
    cfg = compose_config(["hardware=auto"])
    with pytest.raises(Exception, match="python -m verlsweep.plan detect"):
        _ = cfg.hardware.devices_per_node
