"""Spark session factory: Iceberg runtime + SQL extensions, the configured catalog, 2-core defaults.

Everything that starts a JVM goes through :func:`spark_session` so jars, loopback binding and
the catalog are set in exactly one place.
"""

from __future__ import annotations

import contextlib
import importlib.resources
import logging
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path

from ..config import ConfigError, PandoConfig, ensure_local_dirs, prepare_embedded_catalog
from ..exceptions import EngineError

log = logging.getLogger("pando_iceberg.spark")

ICEBERG_JAR_PACKAGE = "snowpark_connect_deps_iceberg"
ICEBERG_JAR_PREFIX = "iceberg-spark-runtime-3.5_2.12-"


class SparkSetupError(EngineError, RuntimeError):
    """Spark cannot start: the message says which prerequisite is missing and how to get it."""


class SparkSqlError(EngineError, RuntimeError):
    """A Spark/Iceberg error, with its message captured while the JVM was still running."""

    def __init__(self, kind: str, message: str):
        super().__init__(f"{kind}: {message}")
        self.kind = kind


def iceberg_runtime_jar() -> Path:
    """The Iceberg Spark runtime jar shipped by the pinned PyPI package (found, never hard-coded)."""
    try:
        jars = importlib.resources.files(ICEBERG_JAR_PACKAGE) / "jars"
    except ModuleNotFoundError:
        raise SparkSetupError(f"Python package {ICEBERG_JAR_PACKAGE!r} is missing; run scripts/bootstrap.sh "
                              "(it installs snowpark-connect-deps-iceberg==1.0.2)") from None
    found = sorted((p for p in jars.iterdir() if p.name.startswith(ICEBERG_JAR_PREFIX) and p.name.endswith(".jar")),
                   key=lambda p: p.name)
    if not found:
        raise SparkSetupError(f"no {ICEBERG_JAR_PREFIX}*.jar inside {jars}; "
                              "reinstall snowpark-connect-deps-iceberg==1.0.2")
    return Path(str(found[-1]))


def java_executable() -> str:
    """Java 17 for Spark's JVM: $JAVA_HOME/bin/java or `java` on PATH, else a clear error."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        cand = Path(java_home) / "bin" / "java"
        if cand.exists():
            return str(cand)
        raise SparkSetupError(f"JAVA_HOME={java_home!r} has no bin/java; unset it or point it at a Java 17 install "
                              "(Debian: apt-get install openjdk-17-jre-headless)")
    java = shutil.which("java")
    if java is None:
        raise SparkSetupError("Java is missing: Spark needs a Java 17 runtime on PATH or in JAVA_HOME "
                              "(Debian: apt-get install openjdk-17-jre-headless; scripts/bootstrap.sh does this)")
    return java


# Spark's own settings that Pando's configuration also gives (``spark.master``, ``driver_memory``,
# ``shuffle_partitions`` of pando.yaml, ``PANDO_SPARK_MASTER``, ``PANDO_DRIVER_MEMORY``,
# ``PANDO_SHUFFLE_PARTITIONS``, ``--master``): those are fallbacks, used only where Spark's own
# places (spark-defaults.conf, PYSPARK_SUBMIT_ARGS) do not set the key.
SPARK_OWN_KEYS = ("spark.master", "spark.driver.memory", "spark.sql.shuffle.partitions", "spark.default.parallelism")
_SUBMIT_FLAGS = {"--master": "spark.master", "--driver-memory": "spark.driver.memory"}


def spark_defaults_file(env: Mapping[str, str] | None = None) -> Path | None:
    """The spark-defaults.conf spark-submit reads: ``$SPARK_CONF_DIR``, else ``$SPARK_HOME/conf``,
    else the conf directory of the pyspark package (its Spark home when SPARK_HOME is unset)."""
    import pyspark

    env = os.environ if env is None else env
    dirs = [env.get("SPARK_CONF_DIR"), env.get("SPARK_HOME") and str(Path(env["SPARK_HOME"]) / "conf"),
            str(Path(pyspark.__file__).parent / "conf")]
    for d in dirs:
        if d and (Path(d) / "spark-defaults.conf").is_file():
            return Path(d) / "spark-defaults.conf"
    return None


def user_spark_settings(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The Spark settings a user gave in Spark's own places: spark-defaults.conf (Java properties
    syntax: ``key value`` or ``key=value``) and ``PYSPARK_SUBMIT_ARGS`` (``--conf k=v``,
    ``--master``, ``--driver-memory``), the latter winning as in spark-submit."""
    import shlex

    env = os.environ if env is None else env
    out: dict[str, str] = {}
    path = spark_defaults_file(env)
    if path is not None:
        for line in path.read_text().splitlines():
            m = re.match(r"^\s*([^\s=:#!][^\s=:]*)\s*[=:\s]\s*(.*?)\s*$", line)
            if m:
                out[m.group(1)] = m.group(2)
    args = shlex.split(env.get("PYSPARK_SUBMIT_ARGS", ""))
    for i, arg in enumerate(args):
        flag, _, inline = arg.partition("=")
        value = inline if inline else (args[i + 1] if i + 1 < len(args) else "")
        if flag in _SUBMIT_FLAGS:
            out[_SUBMIT_FLAGS[flag]] = value
        elif flag in ("--conf", "-c"):
            key, eq, v = (arg[len(flag) + 1:] if inline else value).partition("=")
            if eq:
                out[key] = v
    return out


def build_conf(cfg: PandoConfig, app_name: str = "pando-iceberg", quiet: bool = True) -> dict[str, str]:
    """Every Spark setting of a pando session, as a plain dict (inspectable without a JVM). Of
    :data:`SPARK_OWN_KEYS`, those the user set in Spark's own places (:func:`user_spark_settings`)
    are left to Spark; pando.yaml's ``spark.conf`` wins over everything."""
    jars = [str(iceberg_runtime_jar())]
    for jar in cfg.jdbc_driver_jars():
        if not Path(jar).exists():
            pkg = ("libxerial-sqlite-jdbc-java libxerial-sqlite-jdbc-jni" if "sqlite" in jar
                   else "libpostgresql-jdbc-java")
            raise SparkSetupError(f"JDBC driver {jar} for catalog.uri is missing (Debian: apt-get install {pkg}; "
                                  "scripts/bootstrap.sh does this)")
        jars.append(jar)
    conf = {
        "spark.app.name": app_name,
        "spark.master": cfg.spark.master,
        "spark.jars": ",".join(jars),
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.driver.memory": cfg.spark.driver_memory,
        "spark.sql.shuffle.partitions": str(cfg.spark.shuffle_partitions),
        "spark.default.parallelism": str(cfg.spark.shuffle_partitions),
        "spark.sql.session.timeZone": "UTC",
        # Servers bind to loopback only (STACK.md: network hygiene).
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.ui.enabled": "false" if quiet else "true",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.adaptive.enabled": "true",
        # A long session (notebooks, the CLI's runbooks) keeps finished jobs' shuffle files until
        # the driver's GC runs: at least every 5 minutes, not Spark's 30 (release_shuffle_files).
        "spark.cleaner.periodicGC.interval": "5min",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        # Iceberg writes: keep local parallelism small and files sorted within tasks only when asked.
        "spark.sql.iceberg.handle-timestamp-without-timezone": "true",
    }
    if quiet:
        log4j = Path(__file__).with_name("log4j2.properties")
        conf["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile=file:{log4j}"
        conf["spark.executor.extraJavaOptions"] = f"-Dlog4j2.configurationFile=file:{log4j}"
    for key in set(SPARK_OWN_KEYS) & set(user_spark_settings()):
        del conf[key]
    conf.update(cfg.spark_conf())
    conf.update({k: str(v) for k, v in cfg.spark.conf.items()})
    return conf


def start_spark(cfg: PandoConfig, app_name: str = "pando-iceberg", quiet: bool = True):
    """Start (or return the already running) SparkSession for this configuration."""
    java = java_executable()
    try:
        subprocess.run([java, "-version"], check=True, capture_output=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        raise SparkSetupError(f"Java at {java!r} does not run ({e}); install openjdk-17-jre-headless") from None
    if cfg.embedded:
        prepare_embedded_catalog(cfg)
    elif cfg.local_warehouse is not None:
        ensure_local_dirs(cfg)
    conf = build_conf(cfg, app_name, quiet)

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Executors' Python must be this interpreter (it has pando_iceberg and pyarrow).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    for k, v in conf.items():
        builder = builder.config(k, v)
    spark = builder.getOrCreate()
    if quiet:
        spark.sparkContext.setLogLevel("ERROR")
    return spark


@contextlib.contextmanager
def spark_session(cfg: PandoConfig, app_name: str = "pando-iceberg", quiet: bool = True) -> Iterator[object]:
    """``with spark_session(cfg) as spark:`` — starts Spark and always stops it on exit."""
    spark = start_spark(cfg, app_name, quiet)
    try:
        yield spark
    except Exception as e:
        err = as_spark_sql_error(e)
        if err is None:
            raise
        raise err from None
    finally:
        stop_spark(spark)


def as_spark_sql_error(e: BaseException) -> SparkSqlError | None:
    """A JVM-side error as a SparkSqlError whose text is read NOW, while the JVM still runs
    (str() of a py4j or captured exception asks the JVM; after stop it hangs or fails)."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors.exceptions.captured import CapturedException

    if isinstance(e, Py4JJavaError):
        try:
            java = e.java_exception
            first, kind = f"{java.getClass().getName()}: {java.getMessage()}", "Py4JJavaError"
            cause = java.getCause()
            while cause is not None:
                first += f" (caused by {cause.getClass().getName()}: {cause.getMessage()})"
                cause = cause.getCause()
        except Exception:
            first, kind = "the Spark JVM is no longer reachable", "Py4JJavaError"
        if "NoSuchNamespaceException" in first or "NoSuchTableException" in first:
            kind = "AnalysisException"
    elif isinstance(e, CapturedException):
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        kind = type(e).__name__
    else:
        return None
    if "initialized without view support" in first:
        # Iceberg's JDBC catalog (V0 schema) answers a lookup of a missing table this way.
        kind, first = "AnalysisException", ("a table or view named in the statement does not exist (Iceberg's "
                                            "JDBC catalog has no views; check the table names with `pando tables`)")
    return SparkSqlError(kind, first)


def stop_spark(spark) -> None:
    """Stop the session and the py4j gateway so a later start gets a fresh JVM with new settings."""
    from pyspark import SparkContext

    spark.stop()
    gw = SparkContext._gateway
    if gw is not None:
        try:
            gw.shutdown()
        except Exception:  # the JVM may already be gone
            pass
        SparkContext._gateway = None
        SparkContext._jvm = None


__all__ = ["SPARK_OWN_KEYS", "ConfigError", "SparkSetupError", "SparkSqlError", "build_conf", "drop_shuffles",
           "iceberg_runtime_jar", "java_executable", "release_shuffle_files", "session_conf", "spark_defaults_file",
           "spark_session", "start_spark", "stop_spark", "user_spark_settings"]


def quote_name(name: str) -> str:
    """A dotted table or namespace name with every part quoted by sqlglot (Spark dialect), for
    the few SQL statements that take a name: user-given names are never pasted into SQL."""
    import sqlglot.expressions as exp

    return ".".join(exp.to_identifier(part, quoted=True).sql(dialect="spark") for part in name.split("."))


@contextlib.contextmanager
def session_conf(spark, conf: dict[str, str]) -> Iterator[None]:
    """While the ``with`` body runs, the session has the settings ``conf``; each is restored
    (or unset) afterwards."""
    before = {k: spark.conf.get(k, None) for k in conf}
    try:
        for k, v in conf.items():
            spark.conf.set(k, v)
        yield
    finally:
        for k, v in before.items():
            if v is None:
                spark.conf.unset(k)
            else:
                spark.conf.set(k, v)


def refresh_table(spark, name: str) -> None:
    """``REFRESH TABLE`` with the name quoted: drop Spark's cached metadata of the table (another
    process, or pyiceberg, may have committed since Spark loaded it)."""
    spark.sql(f"REFRESH TABLE {quote_name(name)}")


def release_shuffle_files(spark) -> None:
    """Let Spark delete the shuffle files of the jobs nothing refers to any more. Spark removes a
    job's shuffle files only when the driver's garbage collector collects its shuffle dependency
    (ContextCleaner; by itself every ``spark.cleaner.periodicGC.interval``); with a large heap
    that may not happen for a long time, and a rewrite shuffles the whole table (≈ 5 GB at
    TPC-H SF 10 per rewrite, which filled the disk of a six-layout benchmark). Python's
    references to the finished DataFrames go first, so that py4j releases their JVM objects;
    then the listener bus's queue, whose SQL-execution-end events hold their query's plan (and so
    its shuffles) until a listener has seen them (up to ``LISTENER_DRAIN_MS``). The deletion
    itself happens on Spark's cleaner thread, shortly after."""
    import gc

    gc.collect()
    try:
        spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(LISTENER_DRAIN_MS)
    except Exception:  # a busy bus (py4j's TimeoutException): collect what is free already
        pass
    spark._jvm.java.lang.System.gc()


LISTENER_DRAIN_MS = 10_000


def drop_shuffles(spark, df) -> int:
    """Delete now the shuffle files of the actions that ran on ``df`` (its executed plan's
    shuffles, ``iceberg_jvm.executed_shuffle_ids``), through Spark's own cleaner, waiting until
    the block managers removed them; returns how many shuffles. For a DataFrame whose result is
    already collected and that will not run again: the rewrite's write, a collected query. Unlike
    :func:`release_shuffle_files` it does not depend on the garbage collector finding the plan
    unreferenced (in a full test session a rewrite's shuffle outlived 60 s after it). A clean-up:
    it never raises (a plan it cannot read, e.g. a plugin's own exchange, is logged and left to
    the garbage collector), so it may run in a ``finally`` without hiding the failure."""
    from .iceberg_jvm import executed_shuffle_ids

    try:
        cleaner = spark.sparkContext._jsc.sc().cleaner()
        if not cleaner.isDefined():  # spark.cleaner.referenceTracking=false: Spark never deletes them
            return 0
        ids = executed_shuffle_ids(df)
        for shuffle_id in sorted(ids):
            cleaner.get().doCleanupShuffle(shuffle_id, True)
        return len(ids)
    except Exception as e:  # a clean-up: the shuffles stay for the garbage collector
        log.warning("could not delete the shuffle files of a finished query (left to Spark's cleaner): %s", e)
        return 0
