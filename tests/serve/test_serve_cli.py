"""``pando serve`` as a process: loopback by default, the bearer token, the access log, and a
graceful stop on SIGTERM (exit 0)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_help_names_the_options():
    proc = subprocess.run([sys.executable, "-m", "pando_iceberg.cli", "serve", "--help"], capture_output=True,
                          text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert proc.returncode == 0
    for option in ("--host", "--port", "--token", "--max-request-bytes", "--upstream", "127.0.0.1"):
        assert option in proc.stdout


def _start(args: list[str], env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "pando_iceberg.cli", "serve", "--port", str(port), *args], cwd=ROOT,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    uri = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            requests.get(f"{uri}/v1/config", timeout=5)
            return proc, uri
        except requests.ConnectionError:
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "pando serve did not start"
            time.sleep(0.2)


def test_serve_process_token_access_log_and_graceful_stop(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PANDO_SERVE_TOKEN": "t0ken"}
    proc, uri = _start(["--home", str(tmp_path / "home")], env)
    try:
        assert requests.get(f"{uri}/v1/config", timeout=5).status_code == 401
        auth = {"Authorization": "Bearer t0ken"}
        assert requests.post(f"{uri}/v1/namespaces", json={"namespace": ["cli_ns"]}, headers=auth,
                             timeout=5).status_code == 200
        listed = requests.get(f"{uri}/v1/namespaces", headers=auth, timeout=5).json()["namespaces"]
        assert ["cli_ns"] in listed
        # the proxy mode in front of it: its own token for clients, the upstream's for the upstream
        proxy, proxy_uri = _start(["--upstream", uri, "--token", "pr0xy"],
                                  {**env, "PANDO_SERVE_UPSTREAM_TOKEN": "t0ken"})
        try:
            assert requests.get(f"{proxy_uri}/v1/namespaces", timeout=5).status_code == 401
            config = requests.get(f"{proxy_uri}/v1/config", headers={"Authorization": "Bearer pr0xy"}, timeout=5)
            assert config.json()["defaults"]["scan-planning-mode"] == "server"
            listed = requests.get(f"{proxy_uri}/v1/namespaces", headers={"Authorization": "Bearer pr0xy"},
                                  timeout=5).json()["namespaces"]
            assert ["cli_ns"] in listed
        finally:
            proxy.send_signal(signal.SIGTERM)
            proxy.communicate(timeout=60)
        assert proxy.returncode == 0
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    log = out + err
    assert '"GET /v1/config HTTP/1.1" 401' in log and '"POST /v1/namespaces HTTP/1.1" 200' in log  # the access log
    assert "Shutting down" in log and "Finished server process" in log
