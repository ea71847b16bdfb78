"""Tests for truth/manifest.py: one way to read and to refuse a manifest.json."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bottleneck_oracle.errors import TraceFormatError
from bottleneck_oracle.truth.manifest import MANIFEST_NAME, read_manifest


def _steps(data: Any) -> int:
    return int(data["steps"])


def test_reads_the_file_or_the_folder_holding_it(tmp_path: Path) -> None:
    (tmp_path / MANIFEST_NAME).write_text('{"steps": 4}')
    assert read_manifest(tmp_path, _steps, "test") == 4
    assert read_manifest(tmp_path / MANIFEST_NAME, _steps, "test") == 4


@pytest.mark.parametrize("content,reason", [
    (None, "cannot read the manifest (No such file or directory)"),
    ('{"steps": ', "not a test manifest (JSONDecodeError"),
    ('{"rank": 1}', "not a test manifest (KeyError: 'steps')"),
    ('{"steps": "four"}', "not a test manifest (ValueError"),
])
def test_a_bad_manifest_is_one_line_naming_the_file(tmp_path: Path, content: str | None, reason: str) -> None:
    if content is not None:
        (tmp_path / MANIFEST_NAME).write_text(content)
    with pytest.raises(TraceFormatError) as caught:
        read_manifest(tmp_path, _steps, "test")
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / MANIFEST_NAME}: {reason}") and "\n" not in message
