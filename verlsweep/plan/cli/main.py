"""`python -m verlsweep.plan`: the planner's command line.

    python -m verlsweep.plan hardware=a2_64g model=qwen3_8b algorithm=remax      # table (default)
    python -m verlsweep.plan table hardware=a3_64g model=qwen3_32b --util 0.5,0.7 --all
    python -m verlsweep.plan detect --name my_a2                                 # runs npu-smi here
    python -m verlsweep.plan detect --from-npu-smi npu_smi.txt --host-memory-gb 1024 --name my_a2
    python -m verlsweep.plan detect --torch --name my_gpu
    python -m verlsweep.plan refit --tracking-uri sqlite:///mlflow.db --experiment my_study --out cal.yaml
    python -m verlsweep.plan refit --traces --write                # the analytic trainer formula to traces
    python -m verlsweep.plan calibrate hardware=a3_64g --out site.yaml  # the stack's calibration, exported

The table (and calibrate) first calibrate the planner on the completed trials of this software stack in
the tracking store (tracking.uri; verlsweep/plan/fit/stack_calibration.py) unless plan.calibrate=false,
and say so in the header's first line.

Overrides are the sweep's own (Hydra syntax against conf/sweep.yaml), so the table plans exactly what
`python sweep.py <same overrides>` would launch.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

from rich.console import Console

SUBCOMMANDS = ("table", "detect", "refit", "calibrate")


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _table_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m verlsweep.plan [table]", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Predicted HBM per phase and tokens/s over util x TP x offload.",
        epilog="other commands (each with its own --help):\n"
               "  python -m verlsweep.plan detect --name NAME   write conf/hardware/NAME.yaml for this node's devices\n"
               "                                                (--conf-dir DIR: into a config dir of your own)\n"
               "  python -m verlsweep.plan refit --tracking-uri URI --experiment NAME --out cal.yaml\n"
               "                                                fit the planner's constants to measured trials\n"
               "  python -m verlsweep.plan refit --traces [--write | --out cal.yaml]\n"
               "                                                fit the analytic trainer formula to traces\n"
               "  python -m verlsweep.plan calibrate [overrides] --out cal.yaml\n"
               "                                                export this stack's calibration (plan.calibration=)")
    p.add_argument("overrides", nargs="*", help="sweep overrides, e.g. hardware=a2_64g model=qwen3_8b algorithm=remax")
    p.add_argument("--util", type=_floats, default=None, help="gpu_memory_utilization values, comma separated")
    p.add_argument("--tp", type=_ints, default=None, help="rollout TP sizes (default: every valid one)")
    p.add_argument("--all", action="store_true", help="show every row (default: the best 30)")
    p.add_argument("--json", action="store_true", help="print the rows as JSON instead of a table")
    return p


def _override_problems(overrides: list[str]) -> list[str]:
    """The overrides checked as `python sweep.py` checks its command line (verlsweep.command.argv)."""
    from verlsweep import CONF_DIR
    from verlsweep.command import argv as cli_args

    return cli_args.group_typos(overrides, CONF_DIR) or cli_args.key_typos(overrides, CONF_DIR)


def cmd_table(argv: list[str]) -> int:
    from hydra.errors import HydraException

    from verlsweep.command import recipe_config
    from verlsweep.command.argv import recipe_args
    from verlsweep.command.compose import compose_config
    from verlsweep.command.topology import tp_choices
    from verlsweep.common.errors import ConfigError
    from verlsweep.plan.cli.table import DEFAULT_UTILS, grid, render
    from verlsweep.plan.fit import stack_calibration
    from verlsweep.plan.predictor.inputs import from_cfg
    from verlsweep.plan.predictor.trial_spec import NotPlannable
    from verlsweep.plan.predictor.verdict import load_calibration

    args = _table_parser().parse_args(argv)
    overrides, problems = recipe_args(args.overrides)       # recipe=run.sh: the script's own config
    problems = problems or _override_problems(overrides)
    cfg = None
    try:
        cfg = None if problems else compose_config(overrides)
    except HydraException as exc:        # Hydra's message names the override (its grammar, a missing group)
        problems = [str(exc)]
    try:
        if cfg is not None:
            recipe_config.apply(cfg, overrides)
        inp = from_cfg(cfg) if cfg is not None else None
    except (NotPlannable, ConfigError) as exc:
        problems = [str(exc)]
    if problems or cfg is None or inp is None:
        sys.stderr.write("".join(f"verlsweep.plan: {p}\n" for p in problems))
        return 2
    try:
        calibrated = stack_calibration.for_config(cfg)
    except Exception as exc:  # noqa: BLE001 - an unreadable store: plan with the constants as they are
        print(f"planner not calibrated: the tracking store could not be read ({exc})", file=sys.stderr)
        calibrated = None
    cal = calibrated.calibration if calibrated else load_calibration(cfg)
    start = time.perf_counter()
    rows = grid(inp, cal, utils=args.util or DEFAULT_UTILS, tps=args.tp or tp_choices(cfg))
    elapsed = time.perf_counter() - start
    if args.json:
        print(json.dumps([{"util": r.util, "tp": r.tp, "param_offload": r.param_offload,
                           "optimizer_offload": r.optimizer_offload, **r.verdict.to_dict()} for r in rows],
                         indent=1, default=float))
        return 0
    console = Console(width=None if Console().is_terminal else 140)   # pipes/CI logs: no 80-column fold
    if calibrated:
        console.print(calibrated.line(), highlight=False)
    render(inp, rows, console, limit=None if args.all else 30, rollout_error=cal.constants.rollout_band_error)
    console.print(f"{len(rows)} plans in {elapsed * 1e3:.0f} ms")
    return 0


def cmd_detect(argv: list[str]) -> int:
    from verlsweep import CONF_DIR
    from verlsweep.common.names import CONFIG_PATH_ENV
    from verlsweep.plan.cli import detect

    p = argparse.ArgumentParser(prog="python -m verlsweep.plan detect",
                                description="Write conf/hardware/<name>.yaml for this machine's devices.")
    p.add_argument("--name", required=True, help="profile name: use it as hardware=<name>")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--from-npu-smi", type=Path, metavar="FILE", help="recorded `npu-smi info` output")
    src.add_argument("--torch", action="store_true", help="ask torch.npu / torch.cuda instead of npu-smi")
    p.add_argument("--host-memory-gb", type=float,
                   help="host RAM per node (default: this machine's; with --from-npu-smi the recorded node's: "
                        "required unless `free -g` output is recorded beside FILE as free.txt)")
    p.add_argument("--nnodes", type=int, default=1)
    p.add_argument("--cpus", type=int,
                   help="CPUs per node a trial's Ray gets (default: what this process may use; with --from-npu-smi "
                        "not stated, so the node a trial runs on counts its own)")
    for key in ("bf16-tflops", "hbm-bandwidth-gbs", "host-link-gbs"):
        p.add_argument(f"--{key}", type=float, help="needed when the chip is not in KNOWN_CHIPS")
    p.add_argument("--conf-dir", type=Path, default=CONF_DIR, metavar="DIR",
                   help="write DIR/hardware/<name>.yaml (default: the checkout's conf/); a config dir of your own, "
                        f"found through ${CONFIG_PATH_ENV} or hydra.searchpath (docs/config-tree.md)")
    p.add_argument("--force", action="store_true", help="overwrite an existing profile")
    args = p.parse_args(argv)
    overrides = {"bf16_tflops": args.bf16_tflops, "hbm_bandwidth_gbs": args.hbm_bandwidth_gbs,
                 "host_link_gbs": args.host_link_gbs}
    try:
        host, host_note = _host_memory(args, detect)
        if args.torch:
            import torch

            try:
                import torch_npu  # noqa: F401  (registers torch.npu)
            except ImportError:
                pass
            profile = detect.profile_from_torch(torch, name=args.name, host_memory_gb=host, overrides=overrides)
        else:
            text = args.from_npu_smi.read_text() if args.from_npu_smi else detect.run_npu_smi()
            profile = detect.profile_from_devices(detect.parse_npu_smi(text), name=args.name,
                                                  host_memory_gb=host, overrides=overrides)
        perf_notes = [f"{k}: " + ("given on the command line" if v is not None else
                                  f"assumed from verlsweep.plan.cli.detect.KNOWN_CHIPS[{profile.chip!r}]")
                      for k, v in overrides.items()]
        cpus, cpus_note = _cpus(args)
        profile = dataclasses.replace(profile, nnodes=args.nnodes, cpus=cpus,
                                      notes=[*profile.notes, host_note, cpus_note, *perf_notes])
        path = detect.write_profile(profile, args.conf_dir, force=args.force)
    except detect.DetectError as exc:
        print(f"verlsweep.plan detect: {exc}", file=sys.stderr)
        return 2
    own = args.conf_dir.resolve()
    found_by = "" if own == CONF_DIR else f" with {CONFIG_PATH_ENV}={own} (or hydra.searchpath=[file://{own}])"
    print(f"wrote {path}: {profile.devices_per_node} x {profile.chip}, {profile.hbm_total_gb:.1f} GiB "
          f"({profile.idle_reserved_gb:.2f} reserved); use hardware={profile.name}{found_by}")
    return 0


def _cpus(args: argparse.Namespace) -> tuple[int | None, str]:
    """The CPUs a trial's Ray gets on the node the profile describes, and where that came from. A recorded
    npu-smi file describes another machine, whose CPUs this one does not know: unstated (null), the node a
    trial runs on counts its own (verlsweep.plan.predictor.ray_demand.local_cpus)."""
    if args.cpus is not None:
        return args.cpus, f"cpus: {args.cpus} given on the command line"
    if args.from_npu_smi is not None:
        return None, "cpus: not stated (recorded on another node): the node a trial runs on counts its own; --cpus N"
    from verlsweep.plan.predictor import ray_demand

    cpus = int(ray_demand.local_cpus(os.environ)[0])
    return cpus, f"cpus: {cpus} measured on this machine (what this process may use)"


def _host_memory(args: argparse.Namespace, detect) -> tuple[float, str]:
    """Host RAM of the node the profile describes, and where that number came from. A recorded
    npu-smi file describes another machine: this one's RAM would be wrong there."""
    if args.host_memory_gb is not None:
        return args.host_memory_gb, f"host_memory_gb: {args.host_memory_gb:g} given on the command line"
    if args.from_npu_smi is None:
        return detect.host_memory_gb(), "host_memory_gb: measured on this machine (psutil)"
    recorded = detect.recorded_host_memory_gb(args.from_npu_smi)
    if recorded is None:
        raise detect.DetectError(
            f"{args.from_npu_smi} was recorded on another node, whose host RAM it does not show: pass "
            f"--host-memory-gb N (the `Mem:` total of `free -g` there), or record `free -g > "
            f"{args.from_npu_smi.with_name(detect.FREE_FILE)}` beside it")
    gb, path = recorded
    return gb, f"host_memory_gb: {gb:g} from recorded `free -g` output {path.name}"


def cmd_refit_traces(argv: list[str]) -> int:
    from verlsweep.plan.fit import trace_fit
    from verlsweep.plan.predictor import calibration

    p = argparse.ArgumentParser(prog="python -m verlsweep.plan refit --traces",
                                description="Fit the analytic trainer formula's constants to traces of every "
                                            "conf/model group over a grid of passes (verlsweep/plan/fit/trace_fit.py).")
    p.add_argument("--calibration", type=Path, help="start from this file (default: the packaged one)")
    p.add_argument("--groups", default="", help="model groups, comma separated (default: every conf/model group)")
    p.add_argument("--out", type=Path, help="copy the calibration here with the fitted constants")
    p.add_argument("--write", action="store_true", help="write the fitted constants into the calibration itself")
    args = p.parse_args(argv)
    cal = calibration.load(args.calibration)
    start = time.perf_counter()
    samples = trace_fit.trace_grid(cal, [g for g in args.groups.split(",") if g] or None)
    traced_s = time.perf_counter() - start
    fitted = trace_fit.fit_constants(cal, samples)
    print(f"grid: {len(samples)} traces of {len(trace_fit.by_group(samples))} model groups in {traced_s:.0f} s "
          f"({sum(not s.cached for s in samples)} traced, {sum(s.cached for s in samples)} from the cache)")
    for name in trace_fit.FITTED:
        print(f"  {name}: {getattr(cal.constants, name):.4g} -> {getattr(fitted, name):.4g}")
    trace_fit.report(cal, samples, fitted)
    target = args.out or (cal.path if args.write else None)
    if target is not None:
        if args.out:
            assert cal.path is not None      # calibration.load() keeps the file it read
            args.out.write_text(Path(cal.path).read_text())
        note = (f"python -m verlsweep.plan refit --traces, {len(samples)} passes of "
                f"{len(trace_fit.by_group(samples))} model groups (docs/benchmarks.md#planner-accuracy)")
        trace_fit.write_constants(Path(target), fitted, note)
        print(f"wrote {target}")
    return 0


def cmd_refit(argv: list[str]) -> int:
    from verlsweep.plan.fit import refit

    if "--traces" in argv:
        return cmd_refit_traces([a for a in argv if a != "--traces"])

    p = argparse.ArgumentParser(prog="python -m verlsweep.plan refit",
                                description="Fit the planner's constants to an MLflow experiment's trials.")
    p.add_argument("--tracking-uri", required=True)
    p.add_argument("--experiment", required=True)
    p.add_argument("--calibration", type=Path, help="start from this file (default: the packaged one)")
    p.add_argument("--out", type=Path, required=True, help="write the refitted calibration here "
                   "(use it with plan.calibration=<path>)")
    p.add_argument("--without-known-points", action="store_true", help="fit the experiment's trials only")
    p.add_argument("--warmup-steps", type=int, default=1)
    args = p.parse_args(argv)
    try:
        cal, got, result = refit.refit(args.tracking_uri, args.experiment, calibration=args.calibration,
                                       with_known_points=not args.without_known_points,
                                       warmup_steps=args.warmup_steps)
    except ValueError as exc:
        print(f"verlsweep.plan refit: {exc}", file=sys.stderr)
        return 2
    for rid, why in got.skipped.items():
        print(f"skipped {rid}: {why}")
    if got.redacted:
        print(f"params stored redacted, their composed values used instead: {', '.join(sorted(got.redacted))}")
    print(f"{len(got.runs)} trials used; worst relative error {result.worst('before'):.1%} -> {result.worst():.1%}")
    for name, (old, new) in result.changed.items():
        print(f"  {name}: {old:.4g} -> {new:.4g}")
    path = refit.write(cal, result, got, args.experiment, args.tracking_uri, args.out)
    print(f"wrote {path}; plan with it: plan.calibration={path}")
    return 0


def cmd_calibrate(argv: list[str]) -> int:
    """Export the calibration the planner gets from this stack's measured trials, for another site."""
    from verlsweep.command.compose import compose_config
    from verlsweep.plan.fit import calibration_file, stack_calibration
    from verlsweep.plan.predictor.verdict import load_calibration

    p = argparse.ArgumentParser(prog="python -m verlsweep.plan calibrate",
                                description="Calibrate the planner on the completed trials of this software "
                                            "stack in the tracking store (tracking.uri) and write the file.")
    p.add_argument("overrides", nargs="*", help="sweep overrides (tracking.uri=..., plan.calibration=...)")
    p.add_argument("--out", type=Path, required=True, help="write it here (import it with plan.calibration=<path>)")
    args = p.parse_args(argv)
    cfg = compose_config([*args.overrides, "plan.calibrate=true", "tracking.enabled=true"])
    calibrated = stack_calibration.for_config(cfg)
    if calibrated is None:
        print(f"verlsweep.plan calibrate: no tracking store at {cfg.tracking.uri}", file=sys.stderr)
        return 2
    print(calibrated.line())
    if not calibrated.calibrated:
        return 1
    path = calibration_file.write(load_calibration(cfg), calibrated.calibration.constants, args.out,
                                  note=calibrated.line())
    print(f"wrote {path}; plan with it: plan.calibration={path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv.pop(0) if argv and argv[0] in SUBCOMMANDS else "table"
    return {"table": cmd_table, "detect": cmd_detect, "refit": cmd_refit, "calibrate": cmd_calibrate}[command](argv)
