"""The ``--executor`` and ``--ray-address`` options of the commands that read traces, and the settings they make."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Optional

import typer

from bottleneck_oracle.config import Settings

__all__ = ["ExecutorOption", "RayAddressOption", "settings_for"]

ExecutorOption = Annotated[Optional[str], typer.Option(
    "--executor", metavar="local|ray", help="Where the per-rank work runs (reading the rank files; ingest "
    "also loads each rank's part): local processes, or Ray tasks (a Ray started here, or the cluster at "
    "--ray-address). Default: $ORACLE_EXECUTOR, else local.")]
RayAddressOption = Annotated[Optional[str], typer.Option(
    "--ray-address", metavar="HOST:PORT", help="The Ray cluster's head node (default: $RAY_ADDRESS, else a Ray "
    "started on this machine with its cores).")]


def settings_for(executor: str | None, ray_address: str | None) -> Settings:
    """The environment's settings, with the flags given on the command line in place of theirs."""
    settings = Settings.from_env()
    return replace(settings, executor=executor or settings.executor, ray_address=ray_address or settings.ray_address)
