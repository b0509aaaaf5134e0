#!/usr/bin/env bash
# What of docker/ can be validated without pulling images (this machine cannot pull them):
#  1. the compose file: `docker compose config` when Docker Compose exists, else check_compose.py
#     (services, wiring, 127.0.0.1 ports, and the driver's configuration through pando's loader);
#  2. the Dockerfile's build: its COPY lines are mirrored into a scratch build context and its
#     RUN line (docker/install.sh) runs there on this host, into a scratch venv, with the AWS
#     bundle download left out (no Maven here). The install's own smoke check must pass.
# Usage: docker/validate.sh [--compose-only]   (uses .venv/bin/python for check_compose.py)
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(dirname "$HERE")
PY=${PYTHON:-$ROOT/.venv/bin/python}

if docker compose version >/dev/null 2>&1; then
  docker compose -f "$HERE/compose.yaml" config -q && echo "compose: docker compose config ok"
else
  echo "compose: docker compose is not available here; checking the structure with check_compose.py"
fi
"$PY" "$HERE/check_compose.py" "$HERE/compose.yaml"
[ "${1:-}" = "--compose-only" ] && exit 0

SCRATCH=$(mktemp -d /tmp/pando-docker-validate.XXXXXX)
trap 'rm -rf "$SCRATCH"' EXIT
CTX=$SCRATCH/src
mkdir -p "$CTX"
# COPY <src>... <dst> (dst relative to WORKDIR /opt/pando/src): the same files, the same places
# (as Docker does: a file goes into dst/, a directory's contents become dst's contents).
grep -E '^COPY ' "$HERE/Dockerfile" | while read -r _ rest; do
  read -ra parts <<< "$rest"
  dst=${parts[-1]}; unset 'parts[-1]'
  mkdir -p "$CTX/$dst"
  for src in "${parts[@]}"; do
    if [ -d "$ROOT/$src" ]; then cp -r "$ROOT/$src/." "$CTX/$dst/"; else cp "$ROOT/$src" "$CTX/$dst/"; fi
  done
done
find "$CTX" -name __pycache__ -prune -exec rm -rf {} +
run=$(grep -E '^RUN ' "$HERE/Dockerfile")
[ "$(echo "$run" | wc -l)" -eq 1 ] || { echo "docker: expected exactly one RUN line"; exit 1; }
echo "docker: RUN ${run#RUN } (PANDO_PREFIX=$SCRATCH/venv, ICEBERG_AWS_BUNDLE_URL empty: the AWS bundle download is NOT run here)"
cmd=${run#RUN }
cmd=${cmd//\/opt\/pando\/venv/$SCRATCH/venv}
cmd=${cmd//\/opt\/pando\/src/$CTX}
(cd "$CTX" && ICEBERG_AWS_BUNDLE_URL="" bash -c "${cmd//\$ICEBERG_AWS_BUNDLE_URL/}")
echo "docker: build steps ok"
