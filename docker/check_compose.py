"""Structural check of docker/compose.yaml and docker/pando.cluster.yaml without Docker.

Run by docker/validate.sh when `docker compose config` is unavailable. Checks: the services and
their wiring (workers → master URL, the driver's catalog URI → the postgres service and its user
and database, the S3 endpoint → the minio service, one shared scratch volume), ports published
on 127.0.0.1 only, and that the driver's environment + config file are accepted by pando's own
configuration loader (load_config), yielding the Spark and pyiceberg settings of that cluster.
Exits non-zero with one line per problem.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
REQUIRED = ("postgres", "minio", "minio-init", "spark-master", "spark-worker-1", "spark-worker-2", "pando")


def _resolve(value: str) -> str:
    """${VAR:-default} → default (the values compose uses when the variable is unset)."""
    return re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", str(value))


def check(compose_path: Path = HERE / "compose.yaml") -> list[str]:
    problems: list[str] = []
    doc = yaml.safe_load(compose_path.read_text())
    services = doc.get("services") or {}
    for name in REQUIRED:
        if name not in services:
            problems.append(f"service {name!r} is missing")
    if problems:
        return problems
    for name, svc in services.items():
        if "image" not in svc and "build" not in svc:
            problems.append(f"{name}: neither image nor build")
        for port in svc.get("ports", []):
            if not str(port).startswith("127.0.0.1:"):
                problems.append(f"{name}: port {port} is not bound to 127.0.0.1")
    build = services["pando"].get("build") or {}
    dockerfile = (compose_path.parent / build.get("context", ".") / build.get("dockerfile", "Dockerfile")).resolve()
    if not dockerfile.exists():
        problems.append(f"pando: build dockerfile {dockerfile} does not exist")

    master_cmd = services["spark-master"]["command"]
    master_url = f"spark://spark-master:{master_cmd[master_cmd.index('--port') + 1]}"
    for w in ("spark-worker-1", "spark-worker-2"):
        cmd = services[w]["command"]
        if cmd[-1] != master_url or "org.apache.spark.deploy.worker.Worker" not in cmd:
            problems.append(f"{w}: does not start a Worker of {master_url}: {cmd}")
        if "scratch:/scratch" not in services[w].get("volumes", []):
            problems.append(f"{w}: the scratch volume (TPC-H files the driver generates) is not mounted")

    env = {k: _resolve(v) for k, v in services["pando"]["environment"].items()}
    if "scratch:/scratch" not in services["pando"].get("volumes", []) or env.get("TMPDIR") != "/scratch":
        problems.append("pando: TMPDIR must be the shared /scratch volume")
    config_file = env.get("PANDO_CONFIG", "")
    local_config = HERE / Path(config_file).name
    if not config_file.startswith("/opt/pando/src/docker/") or not local_config.exists():
        problems.append(f"pando: PANDO_CONFIG {config_file!r} is not a file the image copies from docker/")
        return problems

    sys.path.insert(0, str(HERE.parent))
    from pando_iceberg.config import _ENV, ConfigError, load_config

    unknown = [k for k in env if k.startswith("PANDO_") and k not in _ENV and k not in ("PANDO_CONFIG", "PANDO_HOME")]
    if unknown:
        problems.append(f"pando: environment variables pando does not read: {unknown}")
    try:
        cfg = load_config(config_file=local_config, home="/tmp/pando-compose-check", env={**env, "PANDO_CONFIG": ""})
    except ConfigError as e:
        return problems + [f"pando: configuration rejected: {e}"]
    pg = {k: _resolve(v) for k, v in services["postgres"]["environment"].items()}
    want_uri = f"jdbc:postgresql://postgres:5432/{pg['POSTGRES_DB']}"
    if cfg.jdbc_uri() != want_uri or cfg.catalog.user != pg["POSTGRES_USER"] or cfg.catalog.password != pg["POSTGRES_PASSWORD"]:
        problems.append(f"pando: catalog {cfg.jdbc_uri()} / user {cfg.catalog.user} does not match the postgres service ({want_uri})")
    if cfg.spark.master != master_url:
        problems.append(f"pando: spark.master {cfg.spark.master} is not {master_url}")
    if cfg.s3.endpoint != "http://minio:9000" or not cfg.warehouse_uri.startswith("s3://warehouse/"):
        problems.append(f"pando: warehouse {cfg.warehouse_uri} / endpoint {cfg.s3.endpoint} do not point at MinIO's 'warehouse' bucket")
    conf = cfg.spark_conf()
    if conf.get("spark.sql.catalog.lake.io-impl") != "org.apache.iceberg.aws.s3.S3FileIO":
        problems.append("pando: Spark's catalog does not use S3FileIO")
    if cfg.spark.conf.get("spark.driver.host") != services["pando"].get("hostname", "pando"):
        problems.append("pando: spark.driver.host must be the driver's service hostname")
    props = cfg.pyiceberg_properties()
    if props.get("s3.endpoint") != "http://minio:9000" or props.get("s3.access-key-id") is None and "AWS_ACCESS_KEY_ID" not in env:
        problems.append("pando: pyiceberg has no S3 endpoint / credentials")
    return problems


if __name__ == "__main__":
    found = check(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE / "compose.yaml")
    for p in found:
        print(f"compose: {p}")
    print("compose: structure ok" if not found else f"compose: {len(found)} problem(s)")
    sys.exit(1 if found else 0)
