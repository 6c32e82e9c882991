"""One prepared trial (verlsweep/prepare.py): a composed config validated and planned once, its pieces typed."""
from __future__ import annotations

import dataclasses

import pytest

from verlsweep import task
from verlsweep.command.compose import build_command, compose_config
from verlsweep.common.errors import ConfigError
from verlsweep.common.names import TRIAL_DIR_ENV
from verlsweep.common.result import NullReporter
from verlsweep.config import Hardware, Limits, Objective
from verlsweep.plan.predictor import verdict as verdict_mod
from verlsweep.prepare import PreparedTrial, prepare
from verlsweep.trial.runners import Clearance, Runner, RunOutput, RunSpec

ESTIMATE = ["hardware=a2_64g", "algorithm=remax", "runner=estimate", "validate.verl=false", "tracking.enabled=false"]
ROLLOUT = "verl.actor_rollout_ref.rollout"
NO_OFFLOAD = ["verl.actor_rollout_ref.actor.fsdp_config.param_offload=false",
              "verl.actor_rollout_ref.actor.fsdp_config.optimizer_offload=false"]


@pytest.fixture
def plans(monkeypatch) -> list[object]:
    """Every call of the planner (plan.predictor.verdict.predict: predict_cfg and all above it go through it)."""
    calls: list[object] = []
    real = verdict_mod.predict

    def counting(inp, cal):
        calls.append(inp)
        return real(inp, cal)

    monkeypatch.setattr(verdict_mod, "predict", counting)
    return calls


def test_prepare_returns_the_typed_pieces_of_the_trial():
    cfg = compose_config([*ESTIMATE, "trial.steps=7", "trial.number=3", "objective.aggregate=median",
                          "objective.extra=[perf/time_per_step]", "hardware.nnodes=2", "runner.noise=0.1",
                          f"{ROLLOUT}.gpu_memory_utilization=0.7", "+env.FOO=1"])
    prepared = prepare(cfg, overrides=[f"{ROLLOUT}.gpu_memory_utilization=0.7", "env.FOO=1", "trial.steps=7"])
    assert isinstance(prepared, PreparedTrial) and isinstance(prepared.runner, Runner)
    with pytest.raises(dataclasses.FrozenInstanceError):
        prepared.dry = True                                   # type: ignore[misc]
    assert prepared.command == build_command(cfg, require_paths=False)
    spec = prepared.spec
    assert isinstance(spec, RunSpec) and spec.command is prepared.command and spec.runner == "estimate"
    assert spec.steps == 7 and spec.trial_number == 3
    assert spec.objective == Objective("perf/throughput", "median", 1, ("perf/time_per_step",))
    assert isinstance(spec.hardware, Hardware)
    assert (spec.hardware.name, spec.hardware.device, spec.hardware.devices_per_node, spec.hardware.nnodes,
            spec.hardware.hbm_usable_gb) == ("a2_64g", "npu", 8, 2, pytest.approx(60.96))
    assert isinstance(spec.limits, Limits)
    assert spec.options["noise"] == 0.1 and spec.options["name"] == "estimate"    # plain values, not a DictConfig
    assert spec.verl["actor_rollout_ref.rollout.gpu_memory_utilization"] == 0.7
    assert spec.knobs == ("actor_rollout_ref.rollout.gpu_memory_utilization",)    # verl keys only
    assert prepared.knobs == {"actor_rollout_ref.rollout.gpu_memory_utilization": 0.7, "env.FOO": 1}
    assert isinstance(spec.clearance, Clearance) and prepared.clearance is spec.clearance
    assert spec.clearance.memory is not None and spec.clearance.memory.feasible and spec.clearance.enforce
    assert prepared.tracking is False and not prepared.runs_here
    assert prepared.monitoring.device == "npu"
    assert prepared.monitoring.visible_devices_env == "ASCEND_RT_VISIBLE_DEVICES"


def test_a_runner_that_needs_files_gets_a_verl_launch_with_its_limits_and_this_machines_cpus():
    cfg = compose_config(["hardware=a2_64g", "validate.verl=false", "runner.timeout=0", "runner.stall_timeout=60"])
    prepared = prepare(cfg, dry=True, overrides=[])
    assert prepared.runner.needs_files and prepared.runner.uses_devices and prepared.runs_here
    assert prepared.spec.limits.timeout is None and prepared.spec.limits.stall_timeout == 60.0
    cpus = prepared.clearance.preflight.cpus
    assert cpus is not None and not prepared.clearance.cpus_stated       # nothing stated: this machine's CPUs


def test_a_bad_key_fails_before_anything_launches_with_the_key_named(plans, monkeypatch):
    launched = []
    monkeypatch.setattr("verlsweep.trial.runners.estimate.EstimateRunner.run",
                        lambda *a, **k: launched.append(a))
    with pytest.raises(ConfigError) as err:
        prepare(compose_config([*ESTIMATE, f"{ROLLOUT}.gpu_memory_utilization=1.5"]), overrides=[])
    assert f"{ROLLOUT}.gpu_memory_utilization" in str(err.value)
    with pytest.raises(ConfigError, match="runner.name"):
        prepare(compose_config([*ESTIMATE, "runner.name=slurm"]), overrides=[])
    with pytest.raises(ConfigError, match="hardware.cpus"):
        prepare(compose_config([*ESTIMATE, "hardware.cpus=lots"]), overrides=[])
    assert len(plans) == 0 and launched == []      # a CPU count of the wrong type stops at reading; nothing ran


def test_missing_model_paths_fail_a_real_run_but_only_warn_when_dry():
    cfg = compose_config(["hardware=a2_64g", "validate.verl=false", "paths.model_root=/nonexistent"])
    with pytest.raises(ConfigError, match="model.path"):
        prepare(cfg, overrides=[])
    assert prepare(cfg, dry=True, overrides=[]).command.warnings


def test_the_planner_runs_once_per_trial_and_the_estimate_runner_uses_the_prepared_verdict(plans, tmp_path):
    prepared = prepare(compose_config([*ESTIMATE, "trial.steps=3", "runner.noise=0"]), overrides=[])
    assert len(plans) == 1
    out = prepared.runner.run(prepared.spec, NullReporter(), {TRIAL_DIR_ENV: str(tmp_path)})
    assert isinstance(out, RunOutput) and out.result.outcome == "completed" and out.result.steps == 3
    assert len(plans) == 1                                            # not planned again by the runner
    assert out.details.step_log is not None and tmp_path / "plan.json" in out.details.artifacts


def test_the_estimate_runner_measures_the_prepared_verdict_not_its_own(tmp_path):
    """A verdict handed in is the one it reports: a faster prediction gives a higher objective."""
    prepared = prepare(compose_config([*ESTIMATE, "trial.steps=3", "runner.noise=0"]), overrides=[])
    memory = prepared.clearance.memory
    faster = dataclasses.replace(memory, tok_s=memory.tok_s * 2)
    spec = dataclasses.replace(prepared.spec, clearance=dataclasses.replace(
        prepared.clearance, preflight=dataclasses.replace(prepared.clearance.preflight, memory=faster)))
    env = {TRIAL_DIR_ENV: str(tmp_path)}
    base = prepared.runner.run(prepared.spec, NullReporter(), env).result.objective
    assert prepared.runner.run(spec, NullReporter(), env).result.objective == pytest.approx(2 * base)


def test_a_config_outside_the_planner_is_refused_by_runner_estimate_with_the_planners_reason(tmp_path):
    cfg = compose_config([*ESTIMATE, f"{ROLLOUT}.name=sglang"])
    prepared = prepare(cfg, overrides=[], dry=True)          # a dry run shows the command all the same
    assert prepared.clearance.memory is None and "vLLM" in prepared.clearance.unplannable
    with pytest.raises(ConfigError, match="runner.name") as err:
        prepared.runner.run(prepared.spec, NullReporter(), {TRIAL_DIR_ENV: str(tmp_path)})
    assert prepared.clearance.unplannable in str(err.value)
    with pytest.raises(ConfigError, match="the planner models vLLM only"):
        prepare(cfg, overrides=[])        # before a run, a monitor or a study starts


def test_dry_run_and_check_fixed_plan_once(plans, tmp_path, monkeypatch, capsys):
    cfg = compose_config([*ESTIMATE, *NO_OFFLOAD, f"{ROLLOUT}.gpu_memory_utilization=0.95"])
    monkeypatch.setattr(task, "output_dir", lambda: tmp_path)
    task.dry_run(cfg)
    assert len(plans) == 1
    printed = capsys.readouterr().out
    assert "# planner: (hardware=a2_64g, predicted) infeasible" in printed and "(plan.enforce)" in printed
    assert (tmp_path / "command.json").is_file()
    assert task.check_fixed(cfg, ["verl.x"], dry=True) == [] and len(plans) == 2


def test_check_fixed_names_the_problems_every_trial_would_have():
    cfg = compose_config([*ESTIMATE, f"{ROLLOUT}.gpu_memory_utilization=1.5", "verl.data.train_batch_size=0"])
    problems = task.check_fixed(cfg, [f"{ROLLOUT}.gpu_memory_utilization"], dry=False)
    assert [p.key for p in problems] == ["verl.data.train_batch_size"]      # the varied key is the sampler's


def test_the_launch_script_of_a_prepared_trial_keeps_env_roots_and_the_tracking_store():
    cfg = compose_config(["hardware=a2_64g", "validate.verl=false", "tracking.uri=sqlite:////tmp/x.db"])
    prepared = prepare(cfg, dry=True, overrides=[])
    script = prepared.launch_script()
    assert "MODEL_PATH=${MODEL_PATH:-${VERLSWEEP_MODEL_ROOT:-" in script      # the env root, unexpanded
    assert "sqlite:////tmp/x.db" in script and script.rstrip().endswith('"$@"')
