"""``oracle serve`` as a user runs it: refusals in one line (exit 2), and a real server process that
answers, wants its token, and stops cleanly on Ctrl-C or SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from bottleneck_oracle.cli.serve import is_loopback, read_token
from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.graphdb import stop_server
from tests.conftest import run_oracle


def _one_line_exit_2(out: subprocess.CompletedProcess[str]) -> str:
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), out.stderr
    return lines[0]


@pytest.mark.parametrize("host", ["0.0.0.0", "192.168.1.20", "example.com", "::"])
def test_a_host_other_than_loopback_without_a_token_exits_2(host: str, tmp_path: Path) -> None:
    out = run_oracle("serve", "--host", host, env={**os.environ, "ORACLE_HOME": str(tmp_path)})
    line = _one_line_exit_2(out)
    assert f"--host {host}" in line and "--token-file" in line
    assert not (tmp_path / "falkordb").exists()  # refused before anything started


def test_a_missing_or_empty_token_file_exits_2(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_text("\n  \n")
    for path, why in ((tmp_path / "absent", "no such file"), (empty, "empty")):
        line = _one_line_exit_2(run_oracle("serve", "--token-file", path, env={**os.environ,
                                                                               "ORACLE_HOME": str(tmp_path)}))
        assert str(path) in line and why in line


def test_a_graph_database_that_is_down_exits_2_before_listening(tmp_path: Path) -> None:
    out = run_oracle("serve", "--port", _free_port(), env={**os.environ, "ORACLE_HOME": str(tmp_path),
                                                          "ORACLE_GRAPH_URL": "falkordb://127.0.0.1:1"})
    assert "127.0.0.1:1 is not reachable" in _one_line_exit_2(out)


def test_loopback_hosts_and_the_token_on_the_first_line(tmp_path: Path) -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "10.0.0.1", "oracle.example.com"))
    path = tmp_path / "token"
    path.write_text("  abc123  \nsecond line\n")
    assert read_token(path) == "abc123"
    with pytest.raises(ConfigError):
        read_token(tmp_path)  # a folder


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def serve_home(tmp_path: Path) -> Iterator[Path]:
    home = tmp_path / "home"
    yield home
    stop_server(home)  # the embedded FalkorDB the server started


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM])
def test_a_real_server_answers_wants_its_token_and_stops_cleanly(stop: int, serve_home: Path, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("t0ken-of-the-test\n")
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "bottleneck_oracle", "serve", "--port", str(port),
                             "--token-file", str(token)], env={**os.environ, "ORACLE_HOME": str(serve_home)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, proc.communicate()[1]
            try:
                health = httpx.get(f"{url}/api/health", headers={"Authorization": "Bearer t0ken-of-the-test"})
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the server did not answer in 120 s"
                time.sleep(0.2)
        assert health.status_code == 200 and health.json()["status"] == "ok"
        assert httpx.get(f"{url}/api/health").status_code == 401
        assert httpx.get(f"{url}/api/traces", headers={"Authorization": "Bearer t0ken-of-the-test"}).json() == \
            {"traces": []}
        proc.send_signal(stop)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, stderr
    assert f"http://127.0.0.1:{port}/#token=t0ken-of-the-test" in stderr and "Traceback" not in stderr
    assert stderr.strip().endswith("stopped")
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{url}/api/health")
