"""A real ``oracle serve`` app under uvicorn on 127.0.0.1 (a free port, in a thread of the test
process), over a workspace of its own whose embedded FalkorDB stops at the end of the session; and
the shipped example uploaded to it the way the page does."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn

from bottleneck_oracle.config import Settings
from bottleneck_oracle.graphdb import stop_server
from bottleneck_oracle.server import create_app
from tests.conftest import DATA, REPO, WILD

GPT = REPO / "examples" / "gpt_2rank"  # real 2-rank gloo capture: rank 1 pauses 150 ms in step 5
QWEN = WILD / "tracelens" / "h100" / "qwen1.5_0.5b_chat" / "trace.json.gz"  # one H100 step, GPU-bound
PAIR = DATA / "diff_pair"
UPLOAD_LIMIT_MB = 8


@contextmanager
def serving(settings: Settings, **options: Any) -> Iterator[str]:
    """``create_app(settings, **options)`` served on 127.0.0.1; yields its base URL, then stops it."""
    server = uvicorn.Server(uvicorn.Config(create_app(settings, **options), host="127.0.0.1", port=0,
                                           log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, name="oracle-serve-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + 120
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the server did not start")
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=60)


@pytest.fixture(scope="session")
def server_settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """The servers' workspace; the FalkorDB server they start in it stops at the end of the session."""
    settings = Settings(home=tmp_path_factory.mktemp("server_home"), workers=2)
    yield settings
    stop_server(settings.home)


@pytest.fixture(scope="session")
def server(server_settings: Settings) -> Iterator[str]:
    """The base URL of a server with no token and an upload limit of 8 MiB."""
    with serving(server_settings, max_upload_mb=UPLOAD_LIMIT_MB) as url:
        yield url


def upload(url: str, folder: Path, name: str | None = None, headers: dict[str, str] | None = None) -> httpx.Response:
    """POSTs the rank files of ``folder`` as the page does (field ``files``, optional ``name``)."""
    files = [("files", (p.name, p.read_bytes(), "application/gzip")) for p in sorted(folder.glob("*.json*"))
             if p.name != "manifest.json"]
    return httpx.post(f"{url}/api/traces", files=files, data={"name": name} if name else None, headers=headers,
                      timeout=600)


@pytest.fixture(scope="session")
def uploaded(server: str) -> dict[str, Any]:
    """gpt_2rank uploaded (read, analysed and ingested by the server): the 201 response's trace."""
    response = upload(server, GPT, name="gpt_2rank")
    assert response.status_code == 201, response.text
    return response.json()["trace"]


@pytest.fixture(scope="session")
def uploaded_gpu(server: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """An H100 trace (one step, its GPU busy most of it) uploaded: the 201 response's trace."""
    folder = tmp_path_factory.mktemp("qwen")
    (folder / "rank0.json.gz").write_bytes(QWEN.read_bytes())  # the trace file alone, not its source notes
    response = upload(server, folder, name="qwen")
    assert response.status_code == 201, response.text
    return response.json()["trace"]


@pytest.fixture(scope="session")
def uploaded_pair(server: str) -> dict[str, dict[str, Any]]:
    """The captured diff pair (``tests/data/diff_pair``: the GPT job without and with a 150 ms data-loading
    stall in every step) uploaded as ``pair_base`` and ``pair_stall``: their 201 responses' traces."""
    out = {}
    for name in ("base", "stall"):
        response = upload(server, PAIR / name, name=f"pair_{name}")
        assert response.status_code == 201, response.text
        out[name] = response.json()["trace"]
    return out
