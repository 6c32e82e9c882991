"""verlsweep entry point.

    python sweep.py hardware=a2_64g algorithm=remax model=qwen3_8b dry_run=true
    python sweep.py -m hardware=a2_64g algorithm=remax model=qwen3_8b
"""
import sys
import traceback
from typing import Any

import hydra
from omegaconf import DictConfig

from verlsweep import CONF_DIR, ROOT_CONFIG, task
from verlsweep.command import argv as cli_args
from verlsweep.command import config_store
from verlsweep.common.errors import ConfigError, full_traceback_wanted

config_store.register()


@hydra.main(version_base="1.3", config_path="conf", config_name=ROOT_CONFIG)
def main(cfg: DictConfig) -> Any:
    try:
        return task.run(cfg)
    except ConfigError as exc:
        if task.is_multirun():
            raise  # the sweeper records it as this trial's config_error outcome
        if full_traceback_wanted():
            traceback.print_exc()  # a debugging flag adds the traceback; the exit status stays the same
        task.exit_on_config_error(exc)


def check_argv() -> None:
    """Before Hydra: a setting spelled as before it moved names its new spelling, a misspelt group
    option or key gets a "did you mean", a config file that is not YAML its line, sweeper settings without
    -m and `-mkey=value` say how to write them (exit 2, as other input errors); another sweeper runs
    without our search space. HYDRA_FULL_ERROR=1 changes neither: verl's own
    recipe scripts export it."""
    sys.argv[1:], notes = cli_args.renamed_groups(sys.argv[1:])
    sys.stderr.write("".join(f"verlsweep: {n}\n" for n in notes))
    sys.argv[1:], problems = cli_args.recipe_args(sys.argv[1:])     # recipe=run.sh: runner=script ...
    argv = sys.argv[1:]
    problems += cli_args.joined_multirun(argv) + cli_args.grammar_errors(argv)
    if not problems:
        problems = (cli_args.moved(argv) + cli_args.group_typos(argv, CONF_DIR)
                    + cli_args.sweep_without_multirun(argv))
        conflict = cli_args.sweeper_conflict(argv)
        if conflict:
            problems.append(conflict)
    if not problems:          # composes the config: only once the choices it is composed with are known good
        problems = cli_args.key_typos(argv, CONF_DIR, run_dir=True)
    if problems:
        sys.stderr.write("".join(f"verlsweep: {p}\n" for p in problems))
        raise SystemExit(2)
    sys.argv[1:] = cli_args.for_other_sweeper(argv)


if __name__ == "__main__":
    check_argv()
    main()
