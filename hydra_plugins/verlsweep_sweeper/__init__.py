"""verlsweep's Optuna 5 sweeper for Hydra (`hydra/sweeper: verlsweep`), kept to what Hydra needs,
laid out as hydra-optuna-sweeper is (hydra_plugins/hydra_optuna_sweeper: config.py, _impl.py, the
registered class):

config.py: the config and its sampler/pruner groups; verlsweep_sweeper.py: the registered Sweeper;
_impl.py: Sweeper.setup/sweep, the search space from Hydra's overrides, each batch handed to Hydra's
launcher. The sweep itself is the library's verlsweep.study (loop.py: ask -> run -> tell -> outputs).
May import anything in verlsweep; nothing in verlsweep imports it (tests/test_layout.py).
"""
