#!/usr/bin/env bash
# The build steps of docker/Dockerfile, as a script the Dockerfile runs (RUN bash docker/install.sh)
# and docker/validate.sh runs on the host too:
#   1. Debian packages: Java 17, Python venv, the PostgreSQL and SQLite JDBC drivers (only the
#      missing ones are installed; apt is skipped when all are present);
#   2. a virtual environment at $PANDO_PREFIX with the package from $PANDO_SRC (pip install);
#   3. optional: Iceberg's AWS bundle (S3FileIO's AWS SDK, no PyPI package ships it) from
#      $ICEBERG_AWS_BUNDLE_URL into pyspark's jars/ (driver and executors load it from there);
#   4. a smoke check: the `pando` command runs and Spark's launcher and the Iceberg runtime are there.
set -euo pipefail
PANDO_SRC=${PANDO_SRC:-$(cd "$(dirname "$0")/.." && pwd)}
PANDO_PREFIX=${PANDO_PREFIX:-/opt/pando/venv}
ICEBERG_AWS_BUNDLE_URL=${ICEBERG_AWS_BUNDLE_URL:-}

need=()
for pkg in python3 python3-venv openjdk-17-jre-headless libpostgresql-jdbc-java libxerial-sqlite-jdbc-java \
           libxerial-sqlite-jdbc-jni procps; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "install: Debian packages ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}"
  rm -rf /var/lib/apt/lists/*
fi

python3 -m venv "$PANDO_PREFIX"
"$PANDO_PREFIX/bin/python" -m pip install -q --upgrade pip
"$PANDO_PREFIX/bin/python" -m pip install -q "$PANDO_SRC"

SPARK_HOME=$("$PANDO_PREFIX/bin/python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')
if [ -n "$ICEBERG_AWS_BUNDLE_URL" ]; then
  echo "install: $ICEBERG_AWS_BUNDLE_URL -> $SPARK_HOME/jars/"
  "$PANDO_PREFIX/bin/python" -c 'import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])' \
    "$ICEBERG_AWS_BUNDLE_URL" "$SPARK_HOME/jars/$(basename "$ICEBERG_AWS_BUNDLE_URL")"
fi
ln -sf "$SPARK_HOME" "$(dirname "$PANDO_PREFIX")/spark"

"$PANDO_PREFIX/bin/pando" --help >/dev/null
test -x "$SPARK_HOME/bin/spark-class"
"$PANDO_PREFIX/bin/python" -c 'from pando_iceberg.spark.session import iceberg_runtime_jar; print("install: ok,", iceberg_runtime_jar().name)'
