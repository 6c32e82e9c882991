"""What finished trials prove about the configs not yet tried, and a sampler that uses it.

rules.py holds the rules (data, one cited source each) and `infer`; sampler.py the Optuna sampler
that never proposes a config proven to fail. May import: common.
"""
