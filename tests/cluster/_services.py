"""Throwaway servers on 127.0.0.1 for the cluster tests: PostgreSQL, a Spark standalone cluster,
an S3-compatible store (moto). Each is started by the test run, in its own temporary directory,
and torn down by it (stop() is safe to call twice and after a failed start).
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LOOPBACK = "127.0.0.1"


def free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def wait_for_port(port: int, timeout: float, what: str, alive=lambda: True) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if not alive():
            raise RuntimeError(f"{what} exited before listening on {LOOPBACK}:{port}")
        with socket.socket() as s:
            s.settimeout(0.5)
            if s.connect_ex((LOOPBACK, port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"{what} did not listen on {LOOPBACK}:{port} within {timeout:g} s")


# ---- PostgreSQL ---------------------------------------------------------------------------------

def postgres_bindir() -> Path:
    """Debian's server binaries (/usr/lib/postgresql/<major>/bin); scripts/bootstrap.sh installs them."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        raise RuntimeError("PostgreSQL server binaries are missing (/usr/lib/postgresql/*/bin/initdb); "
                           "run scripts/bootstrap.sh (Debian package 'postgresql')")
    return Path(found[-1]).parent


class PostgresServer:
    """A PostgreSQL cluster in a temporary directory, listening on 127.0.0.1:<free port> only.

    initdb refuses to run as root, so as root the server runs as Debian's ``postgres`` user
    (``runuser``). Roles: ``pando`` (superuser, trusted on loopback) and ``pando_pw`` (password
    ``PASSWORD``, scram-sha-256) for the credential path.
    """

    USER = "pando"
    PW_USER = "pando_pw"
    PASSWORD = "s3cret-pw"

    def __init__(self):
        self.root = Path(tempfile.mkdtemp(prefix="pando-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        self.bindir = postgres_bindir()
        self._run_as = None
        if os.geteuid() == 0:
            import pwd

            try:
                pw = pwd.getpwnam("postgres")
            except KeyError:
                raise RuntimeError("running as root but there is no 'postgres' user to run PostgreSQL as "
                                   "(Debian's postgresql package creates it)") from None
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
            self._run_as = "postgres"
        self.started = False

    def _cmd(self, *argv: str) -> list[str]:
        return (["runuser", "-u", self._run_as, "--"] if self._run_as else []) + list(argv)

    def _run(self, *argv: str, timeout: float = 120) -> None:
        out = subprocess.run(self._cmd(*argv), capture_output=True, text=True, timeout=timeout, cwd=str(self.root))
        if out.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[:2])} failed ({out.returncode}): {out.stderr.strip() or out.stdout.strip()}")

    def start(self) -> "PostgresServer":
        b = self.bindir
        self._run(str(b / "initdb"), "-D", str(self.data), "-U", self.USER, "--auth=trust", "-E", "UTF8",
                  "--locale=C", "--no-sync")
        with open(self.data / "postgresql.conf", "a") as f:
            f.write(f"\nlisten_addresses = '{LOOPBACK}'\nport = {self.port}\n"
                    f"unix_socket_directories = '{self.root}'\nfsync = off\nmax_connections = 100\n")
        (self.data / "pg_hba.conf").write_text(
            f"local all all trust\n"
            f"host all {self.PW_USER} {LOOPBACK}/32 scram-sha-256\n"
            f"host all all {LOOPBACK}/32 trust\n")
        self._run(str(b / "pg_ctl"), "-D", str(self.data), "-l", str(self.root / "server.log"), "-w", "-t", "60", "start")
        self.started = True
        self.sql(f"CREATE ROLE {self.PW_USER} LOGIN PASSWORD '{self.PASSWORD}'")
        return self

    def sql(self, statement: str, database: str = "postgres") -> None:
        import psycopg2

        con = psycopg2.connect(host=LOOPBACK, port=self.port, user=self.USER, dbname=database)
        con.autocommit = True
        try:
            with con.cursor() as cur:
                cur.execute(statement)
        finally:
            con.close()

    def create_database(self, name: str, owner: str | None = None) -> str:
        self.sql(f"CREATE DATABASE {name}" + (f" OWNER {owner}" if owner else ""))
        return self.jdbc_uri(name)

    def jdbc_uri(self, database: str) -> str:
        return f"jdbc:postgresql://{LOOPBACK}:{self.port}/{database}"

    def log(self) -> str:
        p = self.root / "server.log"
        return p.read_text(errors="replace") if p.exists() else ""

    def stop(self) -> None:
        if self.started:
            try:
                self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop", timeout=60)
            except Exception:  # noqa: BLE001 - removing the directory below still happens
                pass
            self.started = False
        shutil.rmtree(self.root, ignore_errors=True)


# ---- Spark standalone cluster ------------------------------------------------------------------

def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


class SparkStandalone:
    """A master and N workers, each its own JVM started with ``bin/spark-class`` (what
    ``sbin/spark-daemon.sh`` runs), bound to 127.0.0.1. The processes are ours: stop() ends
    exactly these process groups."""

    def __init__(self, workers: int = 2, cores: int = 1, memory: str = "1g"):
        self.root = Path(tempfile.mkdtemp(prefix="pando-spark-"))
        self.port = free_port()
        self.workers, self.cores, self.memory = workers, cores, memory
        self.procs: list[subprocess.Popen] = []
        self.logs: list[Path] = []

    @property
    def url(self) -> str:
        return f"spark://{LOOPBACK}:{self.port}"

    def _spawn(self, name: str, *argv: str) -> subprocess.Popen:
        log = self.root / f"{name}.log"
        self.logs.append(log)
        env = {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": LOOPBACK,
               "SPARK_LOG_DIR": str(self.root), "SPARK_WORKER_DIR": str(self.root / "work"),
               "SPARK_NO_DAEMONIZE": "1", "PYSPARK_PYTHON": sys.executable}
        with open(log, "ab") as f:
            p = subprocess.Popen([str(spark_home() / "bin" / "spark-class"), *argv], stdout=f, stderr=subprocess.STDOUT,
                                 env=env, start_new_session=True, cwd=str(self.root))
        self.procs.append(p)
        return p

    def start(self, timeout: float = 120) -> "SparkStandalone":
        master = self._spawn("master", "org.apache.spark.deploy.master.Master", "--host", LOOPBACK,
                             "--port", str(self.port), "--webui-port", str(free_port()))
        wait_for_port(self.port, timeout, "Spark master", alive=lambda: master.poll() is None)
        for i in range(self.workers):
            self._spawn(f"worker-{i + 1}", "org.apache.spark.deploy.worker.Worker", "--host", LOOPBACK,
                        "--cores", str(self.cores), "--memory", self.memory, "--webui-port", str(free_port()),
                        "--work-dir", str(self.root / f"work-{i + 1}"), self.url)
        deadline = time.time() + timeout
        while self.registered_workers() < self.workers:
            if time.time() > deadline or any(p.poll() is not None for p in self.procs):
                raise RuntimeError(f"{self.workers} workers did not register with {self.url}; logs in {self.root}")
            time.sleep(0.5)
        return self

    def registered_workers(self) -> int:
        log = self.root / "master.log"
        return log.read_text(errors="replace").count("Registering worker") if log.exists() else 0

    def log_tail(self, lines: int = 40) -> str:
        out = []
        for log in self.logs:
            if log.exists():
                out.append(f"--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-lines:]))
        return "\n".join(out)

    def stop(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        for p in self.procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=20)
        self.procs = []
        shutil.rmtree(self.root, ignore_errors=True)
