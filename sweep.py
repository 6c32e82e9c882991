"""verlsweep entry point.

    python sweep.py hardware=a2_64g algorithm=remax model=qwen3_8b dry_run=true
    python sweep.py -m hardware=a2_64g algorithm=remax model=qwen3_8b
"""
from typing import Any

import hydra
from omegaconf import DictConfig

from verlsweep import task
from verlsweep.command import config_store
from verlsweep.common.errors import ConfigError

config_store.register()


@hydra.main(version_base="1.3", config_path="conf", config_name="sweep")
def main(cfg: DictConfig) -> Any:
    try:
        return task.run(cfg)
    except ConfigError as exc:
        if task.is_multirun():
            raise  # the sweeper records it as this trial's config_error outcome
        task.exit_on_config_error(exc)


if __name__ == "__main__":
    main()
