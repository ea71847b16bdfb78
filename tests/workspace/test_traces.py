"""Tests for workspace/traces.py: a trace resolved by path, id, prefix or name, its analysis cached
in the workspace and read again only when its files change."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from bottleneck_oracle.config import Settings
from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.workspace.traces import REGISTRY_NAME, known_traces, open_trace
from tests.conftest import REPO

GPT = REPO / "examples" / "gpt_2rank"


@pytest.fixture()
def copy(tmp_path: Path) -> Path:
    out = tmp_path / "gpt_2rank"
    shutil.copytree(GPT, out)
    return out


def test_a_path_is_analysed_once_then_found_by_path_id_prefix_and_name(tmp_path: Path, copy: Path) -> None:
    settings = Settings(home=tmp_path / "ws", workers=1)
    first = open_trace(copy, settings)
    assert not first.cached and first.entry.name == "gpt_2rank" and first.analysis.findings
    for ref in (copy, str(copy), first.entry.trace_id, first.entry.trace_id[:6], "gpt_2rank"):
        again = open_trace(ref, settings)
        assert again.cached and again.entry == first.entry
        assert [f.impact_ms for f in again.analysis.findings] == [f.impact_ms for f in first.analysis.findings]
    assert [e.trace_id for e in known_traces(settings)] == [first.entry.trace_id]


def test_a_changed_file_is_read_again(tmp_path: Path, copy: Path) -> None:
    settings = Settings(home=tmp_path / "ws", workers=1)
    first = open_trace(copy, settings)
    rank0 = next(copy.glob("rank0*"))
    os.utime(rank0, ns=(rank0.stat().st_atime_ns, rank0.stat().st_mtime_ns + 10**9))
    again = open_trace(copy, settings)
    assert not again.cached and again.entry.trace_id == first.entry.trace_id  # same contents, same id
    assert len(known_traces(settings)) == 1


def test_unknown_ambiguous_and_vanished_traces_say_what_is_wrong(tmp_path: Path, copy: Path) -> None:
    settings = Settings(home=tmp_path / "ws", workers=1)
    with pytest.raises(ConfigError, match=r"trace 'nope': not a path, .* \(known: none yet\)"):
        open_trace("nope", settings)
    entry = open_trace(copy, settings).entry
    with pytest.raises(ConfigError, match=rf"known: gpt_2rank \({entry.trace_id}\)"):
        open_trace("nope", settings)
    shutil.rmtree(copy)
    with pytest.raises(ConfigError, match="its files are gone"):
        open_trace("gpt_2rank", settings)


def test_a_broken_registry_is_named_not_silently_replaced(tmp_path: Path, copy: Path) -> None:
    settings = Settings(home=tmp_path / "ws", workers=1)
    open_trace(copy, settings)
    (settings.home / REGISTRY_NAME).write_text("{not json")
    with pytest.raises(ConfigError, match=f"{REGISTRY_NAME}: not a trace registry"):
        open_trace(copy, settings)


def test_a_broken_cache_is_analysed_again(tmp_path: Path, copy: Path) -> None:
    settings = Settings(home=tmp_path / "ws", workers=1)
    entry = open_trace(copy, settings).entry
    (settings.home / "analyses" / f"{entry.trace_id}.pkl").write_bytes(b"truncated")
    again = open_trace(copy, settings)
    assert not again.cached and again.analysis.findings
    assert json.loads((settings.home / REGISTRY_NAME).read_text())["traces"][0]["trace_id"] == entry.trace_id
