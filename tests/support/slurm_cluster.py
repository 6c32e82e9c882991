"""A real single-node Slurm 22.05 (Debian's slurm-wlm) with accounting, for the tests.

munged (reused when one already answers), MariaDB, slurmdbd, slurmctld and slurmd are started in
this order, each once the one before answers, on free ports with every file in one temp dir; the
node is this machine (its cores, 80 % of its free memory, select/cons_tres). Stopped by their pid
files, never with `scontrol shutdown` (which also stops slurmdbd behind our back).
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

BINARIES = ("munged", "munge", "unmunge", "mariadbd", "mariadb-install-db", "mariadb", "slurmdbd", "slurmctld",
            "slurmd", "sacctmgr", "sinfo", "sbatch", "srun", "sacct", "squeue", "scancel", "scontrol")
CLUSTER = "verlsweep"
PARTITION = "debug"
KILL_WAIT_S = 5          # SIGTERM -> SIGKILL of a killed job (Slurm's default 30 s only slows the tests)


def missing() -> str | None:
    """Why a real Slurm cannot run here, or None."""
    absent = [b for b in BINARIES if shutil.which(b) is None]
    if absent:
        return (f"Slurm test cluster needs {', '.join(absent)} "
                "(apt-get install -y slurm-wlm munge mariadb-server slurmdbd)")
    if os.geteuid() != 0:
        return "Slurm test cluster runs its daemons as root (SlurmUser=root)"
    return None


def free_port() -> int:
    with closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(what: str, check, timeout: float, interval: float = 0.5) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(interval)
    raise RuntimeError(f"Slurm test cluster: {what} not up within {timeout:.0f} s")


def _ok(argv: list[str], env: dict[str, str] | None = None, input: bytes | None = None) -> bool:
    try:
        return subprocess.run(argv, env=env, input=input, capture_output=True, timeout=20).returncode == 0
    except (subprocess.TimeoutExpired, OSError):
        return False


@dataclass
class SlurmCluster:
    root: Path
    # jobs that may share one core (the partition's OverSubscribe=FORCE:n): benchmarks/parallel_trials_slurm.py
    # runs more one-CPU trial jobs at once than this machine has cores (they sleep)
    oversubscribe: int = 1
    pid_files: list[Path] = field(default_factory=list)
    munged_pid: int | None = None

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """What a client (sbatch, sacct, a sweep process) needs to find this cluster."""
        return {"SLURM_CONF": str(self.conf)}

    def client_env(self) -> dict[str, str]:
        return {**os.environ, **self.env}

    def run(self, *argv: str, timeout: float = 30) -> str:
        done = subprocess.run(list(argv), env=self.client_env(), capture_output=True, text=True, timeout=timeout)
        if done.returncode:
            raise RuntimeError(f"{' '.join(argv)}: {done.stderr.strip()}")
        return done.stdout

    def sacct(self) -> list[dict[str, str]]:
        """Every job of the cluster: JobID, JobName, State, ExitCode."""
        out = self.run("sacct", "-X", "-a", "-n", "-P", "-o", "JobID,JobName,State,ExitCode")
        keys = ("JobID", "JobName", "State", "ExitCode")
        return [dict(zip(keys, line.split("|"))) for line in out.splitlines() if line.strip()]

    # ---- start

    def start(self) -> SlurmCluster:
        (self.root / "log").mkdir(parents=True, exist_ok=True)
        for sub in ("state", "spool"):
            (self.root / sub).mkdir(exist_ok=True)
        self._munged()
        db_port = self._mariadb()
        dbd_port = free_port()
        self._write_conf(dbd_port, db_port)
        self._daemon("slurmdbd", ["slurmdbd"], self.root / "slurmdbd.pid")
        _wait("slurmdbd", lambda: "started" in (self.root / "log" / "slurmdbd.log").read_text(errors="replace")
              if (self.root / "log" / "slurmdbd.log").exists() else False, 60)
        _wait("sacctmgr", lambda: _ok(["sacctmgr", "-i", "add", "cluster", CLUSTER], self.client_env())
              or CLUSTER in self.run("sacctmgr", "-n", "-P", "list", "cluster", "format=Cluster"), 60, 1)
        self._daemon("slurmctld", ["slurmctld"], self.root / "slurmctld.pid")
        _wait("slurmctld", lambda: _ok(["scontrol", "ping"], self.client_env()), 60)
        self._daemon("slurmd", ["slurmd"], self.root / "slurmd.pid")
        _wait("the node idle", lambda: self.run("sinfo", "-h", "-o", "%t").strip() == "idle", 90, 1)
        self._wait_schedulable()
        return self

    def _munged(self) -> None:
        if _ok(["sh", "-c", "munge -n | unmunge"]):
            return          # a running munged (the machine's own) serves us too
        for d in ("/run/munge", "/var/lib/munge", "/var/log/munge"):
            Path(d).mkdir(parents=True, exist_ok=True)
            shutil.chown(d, "munge", "munge")
        subprocess.run(["munged", "--force"], check=True, capture_output=True, timeout=30)
        _wait("munged", lambda: _ok(["sh", "-c", "munge -n | unmunge"]), 20)
        pid = Path("/run/munge/munged.pid")
        self.munged_pid = int(pid.read_text().strip()) if pid.exists() else None

    def _mariadb(self) -> int:
        db = self.root / "db"
        subprocess.run(["mariadb-install-db", "--user=root", f"--datadir={db}",
                        "--auth-root-authentication-method=normal", "--skip-test-db"],
                       check=True, capture_output=True, timeout=180)
        port = free_port()
        sock = self.root / "mysqld.sock"
        pid = self.root / "mysqld.pid"
        self._daemon("mariadbd", ["mariadbd", "--user=root", f"--datadir={db}", f"--socket={sock}",
                                  "--bind-address=127.0.0.1", f"--port={port}", f"--pid-file={pid}",
                                  f"--log-error={self.root / 'log' / 'mariadb.err'}", "--skip-log-bin",
                                  "--innodb-buffer-pool-size=64M"], pid, background=True)
        _wait("MariaDB", lambda: _ok(["mariadb", f"--socket={sock}", "-uroot", "-e", "select 1"]), 120)
        return port

    def _write_conf(self, dbd_port: int, db_port: int) -> None:
        host = socket.gethostname().split(".")[0]
        r = self.root
        mem_mb = int(_free_mb() * 0.8)
        shared = f" OverSubscribe=FORCE:{self.oversubscribe}" if self.oversubscribe > 1 else ""
        self.conf.write_text(f"""\
ClusterName={CLUSTER}
SlurmctldHost={host}(127.0.0.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
SlurmctldPort={free_port()}
SlurmdPort={free_port()}
StateSaveLocation={r}/state
SlurmdSpoolDir={r}/spool
SlurmctldPidFile={r}/slurmctld.pid
SlurmdPidFile={r}/slurmd.pid
SlurmctldLogFile={r}/log/slurmctld.log
SlurmdLogFile={r}/log/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=127.0.0.1
AccountingStoragePort={dbd_port}
MpiDefault=none
ReturnToService=2
KillWait={KILL_WAIT_S}
SchedulerParameters=sched_interval=2
NodeName={host} NodeAddr=127.0.0.1 CPUs={os.cpu_count()} RealMemory={mem_mb} State=UNKNOWN
PartitionName={PARTITION} Nodes={host} Default=YES MaxTime=INFINITE State=UP{shared}
""")
        dbd = r / "slurmdbd.conf"         # slurmdbd reads the file next to $SLURM_CONF
        dbd.write_text(f"""\
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort={dbd_port}
SlurmUser=root
LogFile={r}/log/slurmdbd.log
PidFile={r}/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort={db_port}
StorageUser=root
StorageLoc=slurm_acct_db
""")
        dbd.chmod(0o600)

    def _daemon(self, name: str, argv: list[str], pid_file: Path, background: bool = False) -> None:
        """Slurm's daemons fork themselves and write their pid file; mariadbd stays in the foreground."""
        self.pid_files.append(pid_file)
        log = (self.root / "log" / f"{name}.out").open("ab")
        if background:
            subprocess.Popen(argv, env=self.client_env(), stdout=log, stderr=log, start_new_session=True)
        else:
            subprocess.run(argv, env=self.client_env(), stdout=log, stderr=log, check=True, timeout=60)
        _wait(f"{name}'s pid file", pid_file.exists, 60, 0.2)

    def _wait_schedulable(self) -> None:
        """Right after slurmd registers, the node can still refuse jobs for a while: submit a trivial
        job until it leaves PENDING."""
        def runs() -> bool:
            job = self.run("sbatch", "--parsable", "-o", "/dev/null", "-J", "warmup", "--mem=10", "--wrap", "true")
            job = job.strip().split(";")[0]
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                state = self.run("squeue", "-h", "-j", job, "-o", "%T").strip()
                if state != "PENDING":
                    return True
                time.sleep(0.5)
            subprocess.run(["scancel", job], env=self.client_env(), capture_output=True)
            return False
        _wait("a schedulable node", runs, 120, 1)

    # ---- stop

    def stop(self) -> None:
        for pid_file in reversed(self.pid_files):
            _kill_pid_file(pid_file)
        if self.munged_pid:
            _kill(self.munged_pid)


def _free_mb() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) // 1024
    raise RuntimeError("no MemAvailable in /proc/meminfo")


def _kill_pid_file(pid_file: Path) -> None:
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return
    _kill(pid)


def _kill(pid: int, timeout: float = 20) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        if _zombie(pid):
            return
        time.sleep(0.1)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return True
