"""hydra-submitit-launcher's SlurmLauncher, one Slurm job per trial, scheduler kills as outcomes.

hydra_submitit_launcher 1.2.0's `launch` ends with `[j.results()[0] for j in jobs]`: one job that
Slurm cancelled, preempted or timed out raises there and the whole batch is lost. Here every job's
end is read from sacct (through submitit's watcher): TIMEOUT -> outcome `timeout`; PREEMPTED,
CANCELLED, NODE_FAIL -> `preempted` (verlsweep/common/slurm.py), and the trial's MLflow run, found by
its `slurm.job_id` tag, is ended with that outcome and tagged `slurm.state`.

Inside the job, SIGTERM (cancel, preemption) and submitit's pre-time-limit SIGUSR2 become
`TrialKilled` in the task, so the trial's supervisor stops the whole process tree (Ray, verl) and the
task ends its run, instead of submitit's handlers (SIGTERM ignored; SIGUSR2 checkpoints and requeues
the job, which would re-run a trial behind the sweeper's back).
"""
from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, filter_overrides
from omegaconf import OmegaConf

from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf
from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher
from verlsweep.command import resolvers
from verlsweep.common import slurm

log = logging.getLogger(__name__)

# asynchronous trials (verlsweep/study/inflight.py) wait on their jobs from a thread each; submitit's
# watcher is shared by every SlurmJob, so one sacct per poll serves them all
_SACCT_LOCK = threading.Lock()
_last_sacct = [0.0]
UNFINISHED = ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "REQUEUED", "RESIZING", "SUSPENDED", "UNKNOWN")


resolvers.register()    # conf/hydra/launcher/slurm.yaml's ${verlsweep.slurm_*:}


def _trap_scheduler_signals(job_id: str | None) -> None:
    """The first SIGTERM / SIGUSR2 raises TrialKilled in the task; later ones are ignored so the
    supervisor's teardown and the run's end are not interrupted again."""
    def handler(signum: int, frame: Any) -> None:
        for sig in (signal.SIGTERM, signal.SIGUSR2):
            signal.signal(sig, signal.SIG_IGN)
        outcome = "timeout" if signum == signal.SIGUSR2 else "preempted"
        raise slurm.TrialKilled(outcome, f"Slurm sent {signal.Signals(signum).name} to job {job_id}")

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGUSR2, handler)


def _ended(job: Any) -> bool:
    """submitit's Job.done() without the sacct calls it makes on its own schedule: every task wrote its
    result (the folder's mode re-set first, as done() does, to refresh an NFS attribute cache), or the
    last sacct of this launcher's polls says the job ended (submitit/core/core.py, Job.done)."""
    folder = job.paths.folder
    try:
        folder.chmod(folder.stat().st_mode)
    except OSError:
        pass
    if all(job.task(k).paths.result_pickle.exists() for k in range(job.num_tasks)):
        return True
    return bool(job.watcher.is_done(job.job_id, mode="cache"))


class VerlSweepSlurmLauncher(SlurmLauncher):
    """One Slurm job per trial; every job yields a JobReturn, whatever the scheduler did to it."""

    poll_s: float = 5.0            # sacct while jobs run: one call for all the sweep's jobs per poll
    result_poll_s: float = 0.5     # result files while jobs run: a stat each; a trial's end is seen this soon
    final_state_wait_s: float = 120.0

    # ---- inside the job

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        import submitit

        env = submitit.JobEnvironment()
        if env.global_rank != 0:
            # the other nodes of a multi-node trial only host Ray workers, which rank 0 starts with
            # srun (verlsweep/trial/ray_cluster.py)
            return None
        _trap_scheduler_signals(env.job_id)
        return super().__call__(*args, **kwargs)

    # ---- in the sweep process

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        assert self.config is not None
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        executor = self._executor()
        jobs_args = []
        for i, overrides in enumerate(job_overrides):
            idx = initial_job_idx + i
            log.info("\t#%d : %s", idx, " ".join(filter_overrides(overrides)))
            jobs_args.append((list(overrides), "hydra.sweep.dir", idx, f"job_id_for_{idx}", Singleton.get_state()))
        jobs = executor.map_array(self, *zip(*jobs_args))
        log.info("Slurm jobs %s in %s", ", ".join(j.job_id for j in jobs), sweep_dir)
        self._wait(jobs)
        return [self._job_return(job, list(overrides)) for job, overrides in zip(jobs, job_overrides)]

    def _executor(self) -> Any:
        """submitit's executor with this launcher's parameters, named as submitit's AutoExecutor wants
        them (the shared BaseQueueConf keys plain, the Slurm-only ones with a `slurm_` prefix)."""
        import submitit

        params = dict(self.params)
        folder = params.pop("submitit_folder")
        executor = submitit.AutoExecutor(folder=folder, cluster="slurm",
                                         slurm_max_num_timeout=params.pop("max_num_timeout", 0))
        shared = set(OmegaConf.structured(BaseQueueConf).keys())
        executor.update_parameters(**{k if k in shared else f"slurm_{k}": v for k, v in params.items()})
        return executor

    def _wait(self, jobs: list[Any]) -> None:
        """Until every job has a result file or sacct says it ended (submitit's own wait polls sacct
        as rarely as every 10 minutes for long jobs). The files are looked at every result_poll_s, so
        an asynchronous sweep refills a freed slot within that (with sacct's poll_s it waited 2.5 s on
        average; benchmarks/parallel_trials.py --slurm); sacct stays at one call per poll_s."""
        while not all(_ended(job) for job in jobs):
            time.sleep(self.result_poll_s)
            with _SACCT_LOCK:
                if time.monotonic() - _last_sacct[0] >= self.poll_s * 0.9:
                    jobs[0].watcher.update()
                    _last_sacct[0] = time.monotonic()

    def _final_state(self, job: Any) -> str:
        """sacct's final state (a job that wrote its result may still be RUNNING for a moment)."""
        deadline = time.monotonic() + self.final_state_wait_s
        state = job.state
        while state.split()[0] in UNFINISHED and time.monotonic() < deadline:
            time.sleep(1.0)
            job.watcher.update()
            state = job.state
        return state

    def _job_return(self, job: Any, overrides: list[str]) -> JobReturn:
        try:
            ret: JobReturn | None = job.results()[0]
            error: Exception | None = None
        except Exception as exc:  # noqa: BLE001 - no result: the job died (killed, node lost, python crashed)
            ret, error = None, exc
        state = self._final_state(job)
        outcome = slurm.killed_outcome(state)
        run_id = self._record(job.job_id, state, outcome)
        if outcome is None:
            if ret is None:
                return JobReturn(overrides=overrides, status=JobStatus.FAILED, _return_value=error)
            return ret
        from verlsweep.common.result import TrialResult

        measured = ret.return_value if ret is not None and ret.status == JobStatus.COMPLETED else None
        result = TrialResult(outcome, excerpt=f"Slurm job {job.job_id} ended {state} (sacct)",
                             run_id=run_id or getattr(measured, "run_id", None),
                             steps=getattr(measured, "steps", 0), duration_s=getattr(measured, "duration_s", 0.0),
                             backend=getattr(measured, "backend", "verl"))
        log.warning("Slurm job %s ended %s: trial outcome %s", job.job_id, state, outcome)
        if ret is None:
            return JobReturn(overrides=overrides, status=JobStatus.COMPLETED, _return_value=result,
                             working_dir=None)
        ret.status, ret.return_value = JobStatus.COMPLETED, result
        return ret

    def _record(self, job_id: str, state: str, outcome: str | None) -> str | None:
        """Tag the trial's run with the job's final state; end it with the outcome when Slurm killed it."""
        assert self.config is not None
        if not OmegaConf.select(self.config, "tracking.enabled", default=False):
            return None
        from verlsweep.tracking.mlflow_runs import record_slurm_job
        from verlsweep.tracking.store import tracking_uri

        return record_slurm_job(tracking_uri(self.config), job_id, state, outcome)
