"""The deployment examples of deploy/: parsed and checked against the package, and the compose file's own
``ray start`` commands run here as a two-node cluster that ``oracle analyze`` and ``oracle scan --ray-address``
join."""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO, run_oracle

DEPLOY = REPO / "deploy"
COMPOSE = yaml.safe_load((DEPLOY / "docker-compose.yml").read_text())
KUBERAY = yaml.safe_load((DEPLOY / "kuberay.yaml").read_text())


def _ray_pin() -> str:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    (pin,) = extras["ray"]
    return pin.removeprefix("ray==")


def test_the_image_is_ray_at_the_pinned_version_with_this_package() -> None:
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    base = re.search(r"^FROM rayproject/ray:(\S+)-py(\d+)$", dockerfile, re.M)
    assert base and base.group(1) == _ray_pin() and base.group(2) == "311"
    assert re.search(r"^RUN pip install .*\[ray\]", dockerfile, re.M)
    ignored = (DEPLOY / "Dockerfile.dockerignore").read_text().split()
    assert {".venv", ".oracle", ".git"} <= set(ignored)
    ray = pytest.importorskip("ray")
    assert ray.__version__ == _ray_pin()  # a client and its cluster must run one Ray version


def test_every_compose_node_shares_the_image_the_token_and_the_traces_path() -> None:
    services = COMPOSE["services"]
    assert set(services) == {"ray-head", "ray-worker"}
    head, worker = services["ray-head"], services["ray-worker"]
    assert head["build"]["dockerfile"] == "deploy/Dockerfile"
    assert (DEPLOY / head["build"]["context"] / "deploy" / "Dockerfile").is_file()
    for node in (head, worker):
        assert node["image"] == head["image"]
        assert node["environment"]["RAY_AUTH_MODE"] == "token" and "RAY_AUTH_TOKEN" in node["environment"]
        assert [v.rsplit(":", 2)[1] for v in node["volumes"]] == ["/traces"]
    assert re.search(r"ray start --head --port=6379 .*--block", head["command"])
    assert re.search(r"ray start --address=ray-head:6379 .*--block", worker["command"])
    assert "6379:6379" in head["ports"] and worker["depends_on"] == ["ray-head"]
    assert "oracle analyze /traces --executor ray --ray-address auto" in (DEPLOY / "docker-compose.yml").read_text()


def test_the_kuberay_cluster_runs_the_pinned_ray_with_a_token_and_the_traces_on_every_pod() -> None:
    assert (KUBERAY["apiVersion"], KUBERAY["kind"]) == ("ray.io/v1", "RayCluster")
    spec = KUBERAY["spec"]
    assert spec["rayVersion"] == _ray_pin()
    pods = [spec["headGroupSpec"]["template"]["spec"]] + [g["template"]["spec"] for g in spec["workerGroupSpecs"]]
    images = {c["image"] for pod in pods for c in pod["containers"]}
    assert len(images) == 1 and images.pop().endswith("/bottleneck-oracle-ray:latest")
    for pod in pods:
        (container,) = pod["containers"]
        env = {e["name"]: e for e in container["env"]}
        assert env["RAY_AUTH_MODE"]["value"] == "token" and env["RAY_AUTH_TOKEN"]["valueFrom"]["secretKeyRef"]
        assert [m["mountPath"] for m in container["volumeMounts"]] == ["/traces"]
        assert pod["volumes"][0]["persistentVolumeClaim"]["claimName"] == "oracle-traces"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _node_command(service: str, port: int) -> list[str]:
    """The compose service's ``ray start`` command, for this machine: its port, one CPU, our venv's ray."""
    text = COMPOSE["services"][service]["command"]
    text = re.sub(r"\$\{[A-Z_]+:-(\d+)\}", "1", text).replace("6379", str(port)).replace("ray-head", "127.0.0.1")
    return [str(Path(sys.executable).parent / "ray"), *text.split()[1:]]


@pytest.mark.slow
def test_the_compose_nodes_commands_make_a_cluster_that_oracle_joins_by_address(tmp_path: Path) -> None:
    port = _free_port()
    env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32)}
    nodes = []
    try:
        for service in ("ray-head", "ray-worker"):
            log = open(tmp_path / f"{service}.log", "wb")  # noqa: SIM115 (closed with the process)
            nodes.append(subprocess.Popen(_node_command(service, port), env=env, stdout=log, stderr=log,
                                          start_new_session=True))
            deadline = time.monotonic() + 120
            while "--block" not in (tmp_path / f"{service}.log").read_text() and time.monotonic() < deadline:
                assert nodes[-1].poll() is None, (tmp_path / f"{service}.log").read_text()
                time.sleep(0.5)
        example = REPO / "examples" / "gpt_2rank"
        joined = run_oracle("analyze", example, "--json", "--executor", "ray", "--ray-address", f"127.0.0.1:{port}",
                            env=env)
        assert joined.returncode == 0, joined.stderr
        assert joined.stdout == run_oracle("analyze", example, "--json").stdout
        # a scan on two nodes: each rank's second task sent to the node that read it, the same report
        scans = [json.loads(run_oracle("scan", example, "--json", *where, env=env).stdout) for where in
                 (("--executor", "ray", "--ray-address", f"127.0.0.1:{port}"), ("--executor", "local"))]
        assert [{k: v for k, v in s.items() if k != "seconds"} for s in scans][0] == \
            {k: v for k, v in scans[1].items() if k != "seconds"}
        stranger = run_oracle("analyze", example, "--executor", "ray", "--ray-address", f"127.0.0.1:{port}",
                              env={**env, "RAY_AUTH_TOKEN": secrets.token_hex(32)})
        assert stranger.returncode == 2
        assert f"ray address 127.0.0.1:{port}: the cluster refused this client" in stranger.stderr.splitlines()[-1]
    finally:
        for node in reversed(nodes):
            os.killpg(node.pid, signal.SIGTERM)  # `ray start --block` stops its node's processes on SIGTERM
            node.wait(timeout=60)
