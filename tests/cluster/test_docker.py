"""docker/: what can be validated without pulling images (see docker/README.md).

* The compose file's structure and wiring, and the driver's configuration through pando's own
  loader (docker/check_compose.py; `docker compose config` too where Docker Compose exists).
* The Dockerfile's build steps (docker/install.sh) run on this host into a scratch venv
  (docker/validate.sh), ending with the install's smoke check.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"
sys.path.insert(0, str(DOCKER))
from check_compose import check  # noqa: E402


def test_compose_file_is_wired_and_its_driver_config_loads():
    assert check(DOCKER / "compose.yaml") == []


def test_compose_check_catches_miswiring(tmp_path):
    doc = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    for mutate, expected in [
        (lambda d: d["services"].pop("minio"), "service 'minio' is missing"),
        (lambda d: d["services"]["spark-worker-2"]["command"].__setitem__(-1, "spark://elsewhere:7077"), "spark-worker-2: does not start a Worker"),
        (lambda d: d["services"]["postgres"]["ports"].__setitem__(0, "5432:5432"), "not bound to 127.0.0.1"),
        (lambda d: d["services"]["pando"]["environment"].__setitem__("PANDO_SPARK_MASTR", "x"), "pando does not read"),
        (lambda d: d["services"]["pando"]["environment"].__setitem__("PANDO_SPARK_MASTER", "spark:/bad"), "configuration rejected"),
        (lambda d: d["services"]["postgres"]["environment"].__setitem__("POSTGRES_DB", "other"), "does not match the postgres service"),
    ]:
        d = copy.deepcopy(doc)
        mutate(d)
        path = DOCKER / f".compose-mutated-{tmp_path.name}.yaml"  # beside the real one: relative build paths hold
        try:
            path.write_text(yaml.safe_dump(d))
            problems = check(path)
        finally:
            path.unlink()
        assert any(expected in p for p in problems), (expected, problems)


@pytest.mark.slow
def test_dockerfile_build_steps_run_on_this_host():
    out = subprocess.run(["bash", str(DOCKER / "validate.sh")], cwd=str(REPO), capture_output=True, text=True,
                         timeout=1200, env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(Path.home()),
                                            "PYTHON": sys.executable})
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "compose: structure ok" in out.stdout
    assert "install: ok, iceberg-spark-runtime-3.5_2.12-" in out.stdout
    assert "docker: build steps ok" in out.stdout
