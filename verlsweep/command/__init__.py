"""Compose (docs/architecture.md, stage 6, in prepare): a composed Hydra config becomes the exact argv and env
of one trial.

`compose` builds the Command (argv + env); `overrides` flattens the `verl:` node into verl's override syntax (with
`verl_schema` telling schema keys from dynamic ones); `config_store` registers the config nodes YAML
cannot express; `hydra_compose` wraps Hydra's compose API; `knobs` names what a trial varies. Before a
Command exists it is checked: `rules` (our own rules), `topology` (the TP sizes hardware x model can run),
`paths` (model and data files), `verl_check` (verl 0.9.1's own compose, types, registries, validation).
`launch_script` writes a Command as a node script in verl's recipe layout (best_launch.sh).
`argv` reads `python sweep.py`'s group choices before Hydra does; `suggest` is the "did you mean" of
every misspelt key or option.

May import: verlsweep.common, verlsweep.config (check_resolves, flatten). Never the planner, the trial
process or tracking.
"""
