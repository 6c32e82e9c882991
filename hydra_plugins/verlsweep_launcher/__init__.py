"""verlsweep's Slurm launcher for Hydra (`hydra/launcher=slurm`, conf/hydra/launcher/slurm.yaml).

slurm_launcher.py: hydra-submitit-launcher's SlurmLauncher with one job per trial where a job the
scheduler killed is that trial's outcome, not an exception that aborts the batch.
"""
